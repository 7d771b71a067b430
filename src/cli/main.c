/*
 * main.c - the vidfeat command. A client of include/vidfeat.h only. One option table drives
 * getopt_long and --help; each subcommand is one function. Exit status: 0 success, 1 a runtime
 * failure, 2 a usage error. Messages go to stderr as "vidfeat: <what>: <message>".
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vidfeat.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

enum opt_id {
    OPT_MODEL = 'm',
    OPT_HELP = 'h',
    OPT_QUIET = 'q',
    OPT_VERBOSE = 'v',
    OPT_MODELS_DIR = 256,
    OPT_LAYER,
    OPT_DEVICE,
    OPT_BACKEND,
    OPT_GPU,
    OPT_BATCH,
    OPT_PRECISION,
    OPT_THREADS,
    OPT_INPUT_SIZE,
    OPT_MEAN,
    OPT_STD,
    OPT_INFER_ONLY,
    OPT_RUNS,
    OPT_IMAGES,
    OPT_JSON,
    OPT_VERSION,
};

typedef struct opt_def {
    const char *name;
    int id;
    const char *arg; /* NULL: a flag */
    const char *help;
} opt_def;

static const opt_def options[] = {
    {"model", OPT_MODEL, "NAME|FILE", "model name (see `vidfeat models`) or ONNX file"},
    {"models-dir", OPT_MODELS_DIR, "DIR", "look for manifests and ONNX files here first"},
    {"layer", OPT_LAYER, "NAME", "feature layer (manifest name or any tensor name)"},
    {"device", OPT_DEVICE, "cpu|gpu|auto", "where to run the network (default auto)"},
    {"backend", OPT_BACKEND, "NAME", "backend by name: auto, dnnl (= cpu), ref, cuda"},
    {"gpu", OPT_GPU, NULL, "same as --device gpu"},
    {"batch", OPT_BATCH, "N", "images per forward pass (default 32)"},
    {"precision", OPT_PRECISION, "f32|bf16", "arithmetic precision (default f32)"},
    {"threads", OPT_THREADS, "N", "compute threads (default: all cores)"},
    {"input-size", OPT_INPUT_SIZE, "S", "network input is S x S (plain ONNX files)"},
    {"mean", OPT_MEAN, "R,G,B", "per-channel mean in pixel units 0..255 (plain ONNX files)"},
    {"std", OPT_STD, "R,G,B", "per-channel std in pixel units (plain ONNX files)"},
    {"infer-only", OPT_INFER_ONLY, NULL, "bench: time the network alone on synthetic images"},
    {"runs", OPT_RUNS, "N", "bench: timed runs (default 5; the median is reported)"},
    {"images", OPT_IMAGES, "N", "bench: images per timed run (default max(32, batch))"},
    {"json", OPT_JSON, NULL, "machine-readable output"},
    {"quiet", OPT_QUIET, NULL, "only errors on stderr"},
    {"verbose", OPT_VERBOSE, NULL, "more detail on stderr (repeat for debug)"},
    {"version", OPT_VERSION, NULL, "print version, backends and library versions"},
    {"help", OPT_HELP, NULL, "this help"},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

typedef struct cli {
    vf_config cfg;
    const char *device;
    int infer_only;
    int runs;
    int images;
    int json;
    int verbosity; /* -1 quiet, 0 default, 1 info, 2 debug */
} cli;

static void usage(FILE *f)
{
    fprintf(f, "usage: vidfeat COMMAND [options]\n\n"
               "commands:\n"
               "  bench --infer-only [options]   network throughput on synthetic images\n"
               "  models [options]               known models, where found, input size, layers\n"
               "\noptions:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char left[48];
        const opt_def *o = &options[i];
        if (o->id < 256)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->id, o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        fprintf(f, "  %-34s %s\n", left, o->help);
    }
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_triple(const char *s, float *out)
{
    char *end;
    for (int i = 0; i < 3; i++) {
        out[i] = strtof(s, &end);
        if (end == s || (i < 2 && *end != ',') || (i == 2 && *end))
            return -1;
        s = end + 1;
    }
    return 0;
}

static void log_to_stderr(void *user, int level, const char *tag, const char *msg)
{
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "vidfeat: %s[%s]: %s\n", level >= 0 && level <= 3 ? names[level] : "?", tag,
            msg);
}

/* Parse argv after the subcommand. Returns 0, or EXIT_USAGE after printing why. */
static int parse_options(int argc, char **argv, cli *c)
{
    struct option longopts[N_OPTIONS + 1];
    char shortopts[64];
    size_t ns = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        longopts[i].name = options[i].name;
        longopts[i].has_arg = options[i].arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = options[i].id;
        if (options[i].id < 256) {
            shortopts[ns++] = (char)options[i].id;
            if (options[i].arg)
                shortopts[ns++] = ':';
        }
    }
    shortopts[ns] = '\0';
    memset(&longopts[N_OPTIONS], 0, sizeof(longopts[0]));

    int id;
    optind = 1;
    while ((id = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const char *a = optarg;
        switch (id) {
        case OPT_MODEL:
            c->cfg.model = a;
            break;
        case OPT_MODELS_DIR:
            c->cfg.models_dir = a;
            break;
        case OPT_LAYER:
            c->cfg.layer = a;
            break;
        case OPT_DEVICE:
            if (strcmp(a, "cpu") && strcmp(a, "gpu") && strcmp(a, "auto")) {
                fprintf(stderr, "vidfeat: --device: expected cpu, gpu or auto, not '%s'\n", a);
                return EXIT_USAGE;
            }
            c->cfg.backend = a;
            break;
        case OPT_BACKEND:
            c->cfg.backend = a;
            break;
        case OPT_GPU:
            c->cfg.backend = "gpu";
            break;
        case OPT_BATCH:
            if (parse_int(a, 1, 4096, &c->cfg.batch_size) < 0) {
                fprintf(stderr, "vidfeat: --batch: expected 1..4096, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_PRECISION:
            if (vf_precision_parse(a, &c->cfg.precision) < 0) {
                fprintf(stderr, "vidfeat: --precision: expected f32 or bf16, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_THREADS:
            if (parse_int(a, 0, 1024, &c->cfg.n_threads) < 0) {
                fprintf(stderr, "vidfeat: --threads: expected 0..1024, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_INPUT_SIZE:
            if (parse_int(a, 1, 8192, &c->cfg.input_size) < 0) {
                fprintf(stderr, "vidfeat: --input-size: expected 1..8192, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_MEAN:
        case OPT_STD:
            if (parse_triple(a, id == OPT_MEAN ? c->cfg.mean : c->cfg.std) < 0) {
                fprintf(stderr, "vidfeat: --%s: expected three numbers R,G,B, not '%s'\n",
                        id == OPT_MEAN ? "mean" : "std", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_INFER_ONLY:
            c->infer_only = 1;
            break;
        case OPT_RUNS:
            if (parse_int(a, 1, 1000, &c->runs) < 0) {
                fprintf(stderr, "vidfeat: --runs: expected 1..1000, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_IMAGES:
            if (parse_int(a, 1, 1000000, &c->images) < 0) {
                fprintf(stderr, "vidfeat: --images: expected 1..1000000, not '%s'\n", a);
                return EXIT_USAGE;
            }
            break;
        case OPT_JSON:
            c->json = 1;
            break;
        case OPT_QUIET:
            c->verbosity = -1;
            break;
        case OPT_VERBOSE:
            c->verbosity++;
            break;
        case OPT_VERSION: {
            char info[1024];
            printf("vidfeat %s\n%s", vf_version(), vf_build_info(info, sizeof(info)));
            exit(EXIT_OK);
        }
        case OPT_HELP:
            usage(stdout);
            exit(EXIT_OK);
        default:
            fprintf(stderr, "vidfeat: try --help\n");
            return EXIT_USAGE;
        }
    }
    if (c->cfg.std[0] == 0.0f && (c->cfg.mean[0] || c->cfg.mean[1] || c->cfg.mean[2])) {
        fprintf(stderr, "vidfeat: --mean needs --std as well\n");
        return EXIT_USAGE;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* vidfeat bench --infer-only: images/s of the network alone. */
static int cmd_bench(cli *c)
{
    if (!c->infer_only) {
        fprintf(stderr, "vidfeat: bench: only --infer-only is available in this version\n");
        return EXIT_USAGE;
    }
    double t0 = now_s();
    vf_extractor *ex = NULL;
    vf_status rc = vf_extractor_create(&c->cfg, &ex);
    if (rc < 0) {
        fprintf(stderr, "vidfeat: %s\n", ex ? vf_extractor_errmsg(ex) : vf_status_str(rc));
        vf_extractor_free(&ex);
        return EXIT_FAIL;
    }
    double setup = now_s() - t0;
    vf_model_info info;
    vf_extractor_info(ex, &info);
    int per_run = c->images ? c->images : (info.batch_size > 32 ? info.batch_size : 32);
    /* whole batches per run, like the peer harnesses */
    int calls = (per_run + info.batch_size - 1) / info.batch_size;
    int n = info.batch_size;
    size_t in_count = (size_t)n * 3 * info.input_size * info.input_size;
    float *images = malloc(in_count * sizeof(float));
    float *features = malloc((size_t)n * info.feature_dim * sizeof(float));
    double *ips = malloc((size_t)c->runs * sizeof(double));
    int status = EXIT_OK;
    if (!images || !features || !ips) {
        fprintf(stderr, "vidfeat: bench: out of memory\n");
        status = EXIT_FAIL;
        goto done;
    }
    uint32_t seed = 12345;
    for (size_t i = 0; i < in_count; i++) {
        seed = seed * 1103515245u + 12345u;
        images[i] = (float)(seed / 4294967296.0 * 2.0 - 1.0);
    }
    t0 = now_s();
    rc = vf_extractor_infer(ex, images, n, features);
    double first = now_s() - t0;
    for (int k = 1; k < calls && rc >= 0; k++)
        rc = vf_extractor_infer(ex, images, n, features);
    for (int r = 0; r < c->runs && rc >= 0; r++) {
        t0 = now_s();
        for (int k = 0; k < calls && rc >= 0; k++)
            rc = vf_extractor_infer(ex, images, n, features);
        ips[r] = (double)calls * n / (now_s() - t0);
    }
    if (rc < 0) {
        fprintf(stderr, "vidfeat: bench: %s\n", vf_extractor_errmsg(ex));
        status = EXIT_FAIL;
        goto done;
    }
    double sorted[1000];
    memcpy(sorted, ips, (size_t)c->runs * sizeof(double));
    qsort(sorted, (size_t)c->runs, sizeof(double), cmp_double);
    double median = sorted[c->runs / 2];
    if (c->json) {
        printf("{\"model\":");
        json_string(info.name);
        printf(",\"layer\":");
        json_string(info.layer);
        printf(",\"feature_dim\":%d,\"device\":\"cpu\",\"backend\":", info.feature_dim);
        json_string(info.backend);
        printf(",\"precision\":\"%s\",\"batch\":%d,\"threads\":%d,\"images_per_run\":%d,"
               "\"runs\":%d,\"infer_fps\":%.3f,\"infer_fps_min\":%.3f,\"infer_fps_max\":%.3f,"
               "\"all_fps\":[",
               vf_precision_str(info.precision), info.batch_size, c->cfg.n_threads, calls * n,
               c->runs, median, sorted[0], sorted[c->runs - 1]);
        for (int r = 0; r < c->runs; r++)
            printf("%s%.3f", r ? "," : "", ips[r]);
        printf("],\"setup_s\":%.3f,\"first_call_s\":%.3f}\n", setup, first);
    } else {
        printf("model      %s (%s, layer %s, %d-d%s)\n", info.name, info.path, info.layer,
               info.feature_dim, info.pooled ? ", global-average-pooled" : "");
        printf("backend    %s, %s, batch %d, threads %s\n", info.backend,
               vf_precision_str(info.precision), info.batch_size,
               c->cfg.n_threads ? "as set" : "all cores");
        printf("setup      %.2f s, first batch %.2f s\n", setup, first);
        printf("inference  %.2f images/s (median of %d runs of %d images; min %.2f, max %.2f)\n",
               median, c->runs, calls * n, sorted[0], sorted[c->runs - 1]);
    }
done:
    free(images);
    free(features);
    free(ips);
    vf_extractor_free(&ex);
    return status;
}

static int cmd_models(cli *c)
{
    vf_model_list *list = NULL;
    vf_status rc = vf_model_list_create(c->cfg.models_dir, &list);
    if (rc < 0) {
        fprintf(stderr, "vidfeat: models: %s\n", vf_status_str(rc));
        return EXIT_FAIL;
    }
    size_t n = vf_model_list_count(list);
    if (c->json)
        printf("[");
    for (size_t i = 0; i < n; i++) {
        const vf_model_entry *e = vf_model_list_get(list, i);
        if (c->json) {
            printf("%s{\"name\":", i ? "," : "");
            json_string(e->name);
            printf(",\"input_size\":%d,\"layers\":", e->input_size);
            json_string(e->layers);
            printf(",\"file\":");
            json_string(e->file);
            printf(",\"found\":");
            if (e->found)
                json_string(e->found);
            else
                printf("null");
            printf(",\"manifest\":");
            json_string(e->manifest);
            printf("}");
        } else {
            printf("%-22s %4d  %-28s %s\n", e->name, e->input_size, e->layers,
                   e->found ? e->found : "(not found: scripts/fetch-models.sh NAME)");
        }
    }
    if (c->json)
        printf("]\n");
    vf_model_list_free(&list);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    cli c;
    memset(&c, 0, sizeof(c));
    c.cfg = vf_config_default();
    c.runs = 5;
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (cmd[0] == '-') {
        /* options only: --version / --help */
        int rc = parse_options(argc, argv, &c);
        if (rc)
            return rc;
        usage(stderr);
        return EXIT_USAGE;
    }
    int rc = parse_options(argc - 1, argv + 1, &c);
    if (rc)
        return rc;
    int level = c.verbosity < 0    ? VF_LOG_ERROR
                : c.verbosity == 0 ? VF_LOG_WARNING
                : c.verbosity == 1 ? VF_LOG_INFO
                                   : VF_LOG_DEBUG;
    vf_set_log_callback(log_to_stderr, NULL, level);
    if (optind < argc - 1) {
        fprintf(stderr, "vidfeat: %s: unexpected argument '%s'\n", cmd, argv[optind + 1]);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "bench"))
        return cmd_bench(&c);
    if (!strcmp(cmd, "models"))
        return cmd_models(&c);
    fprintf(stderr, "vidfeat: unknown command '%s' (commands: bench, models; try --help)\n", cmd);
    return EXIT_USAGE;
}
