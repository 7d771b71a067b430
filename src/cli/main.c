/*
 * main.c - the vidfeat command. A client of include/vidfeat.h only. One option table drives
 * getopt_long and --help; each subcommand is one function. Exit status: 0 success, 1 a runtime
 * failure, 2 a usage error. Messages go to stderr as "vidfeat: <what>: <message>".
 */
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>

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
    OPT_DB = 'o',
    OPT_FPS = 300,
    OPT_EVERY,
    OPT_KEYFRAMES,
    OPT_START,
    OPT_DURATION,
    OPT_MAX_FRAMES,
    OPT_FORCE,
    OPT_DTYPE,
    OPT_QUEUE_DEPTH,
    OPT_DECODE_THREADS,
    OPT_STALL_TIMEOUT,
};

typedef struct opt_def {
    const char *name;
    int id;
    const char *arg; /* NULL: a flag */
    const char *help;
} opt_def;

static const opt_def options[] = {
    {"db", OPT_DB, "FILE", "SQLite database to write (default ./vidfeat.db)"},
    {"fps", OPT_FPS, "R", "sample at most R frames per second, by presentation time"},
    {"every", OPT_EVERY, "N", "keep every Nth decoded frame"},
    {"keyframes", OPT_KEYFRAMES, NULL, "only key frames (the others are not decoded)"},
    {"start", OPT_START, "T", "start T seconds into each file"},
    {"duration", OPT_DURATION, "D", "cover D seconds after the start"},
    {"max-frames", OPT_MAX_FRAMES, "N", "at most N frames per file"},
    {"force", OPT_FORCE, NULL, "redo files the database already has"},
    {"dtype", OPT_DTYPE, "f32|f16", "how vectors are stored (default f32)"},
    {"queue-depth", OPT_QUEUE_DEPTH, "N", "batches in flight between stages (default 2)"},
    {"decode-threads", OPT_DECODE_THREADS, "N", "codec threads per file (default automatic)"},
    {"stall-timeout", OPT_STALL_TIMEOUT, "S",
     "give up a file with no frame for S s (60; 0 = never)"},
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

#define MAX_LIST 16

typedef struct cli {
    vf_config cfg;
    int db_set;
    int batches[MAX_LIST]; /* --batch 1,8,32 (bench); batches[0] is cfg.batch_size */
    int n_batches;
    vf_precision precisions[MAX_LIST];
    int n_precisions;
    const char *device;
    int infer_only;
    int runs;
    int images;
    int json;
    int verbosity; /* -1 quiet, 0 default, 1 info, 2 debug */
} cli;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vidfeat [extract] [options] FILE|DIR...\n"
            "       vidfeat COMMAND [options]\n\n"
            "commands:\n"
            "  extract (default)              features of every frame (or sample) into SQLite\n"
            "  info DB                        what a database holds\n"
            "  bench [options] FILE           the pipeline on FILE per --batch/--precision list\n"
            "  bench --infer-only [options]   network throughput on synthetic images\n"
            "  models [options]               known models, where found, input size, layers\n"
            "\nexit status: 0 all done, 1 some inputs failed, 2 usage error\n"
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

/* An integer option in lo..hi; prints the usage message and returns -1 otherwise. */
static int int_option(const char *name, const char *a, int lo, int hi, int *out)
{
    if (parse_int(a, lo, hi, out) == 0)
        return 0;
    fprintf(stderr, "vidfeat: --%s: expected %d..%d, not '%s'\n", name, lo, hi, a);
    return -1;
}

/* A number of seconds or a rate: >= 0 (> 0 with positive), at most max. */
static int number_option(const char *name, const char *a, int positive, double max, double *out)
{
    char *end;
    double v = strtod(a, &end);
    if (*a && !*end && v >= 0 && v <= max && (!positive || v > 0)) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "vidfeat: --%s: expected a %snumber, not '%s'\n", name,
            positive ? "positive " : "", a);
    return -1;
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
        case OPT_PRECISION: {
            /* a comma-separated list (bench compares them; everything else takes one) */
            char item[64];
            const char *q = a;
            int *n = id == OPT_BATCH ? &c->n_batches : &c->n_precisions;
            *n = 0;
            while (*q) {
                size_t len = strcspn(q, ",");
                if (len == 0 || len >= sizeof(item) || *n == MAX_LIST) {
                    fprintf(stderr, "vidfeat: --%s: bad list '%s'\n",
                            id == OPT_BATCH ? "batch" : "precision", a);
                    return EXIT_USAGE;
                }
                memcpy(item, q, len);
                item[len] = '\0';
                if (id == OPT_BATCH && parse_int(item, 1, 4096, &c->batches[*n]) < 0) {
                    fprintf(stderr, "vidfeat: --batch: expected 1..4096, not '%s'\n", item);
                    return EXIT_USAGE;
                }
                if (id == OPT_PRECISION && vf_precision_parse(item, &c->precisions[*n]) < 0) {
                    fprintf(stderr, "vidfeat: --precision: expected f32 or bf16, not '%s'\n", item);
                    return EXIT_USAGE;
                }
                (*n)++;
                q += len + (q[len] == ',');
            }
            if (*n == 0) {
                fprintf(stderr, "vidfeat: --%s: empty\n", id == OPT_BATCH ? "batch" : "precision");
                return EXIT_USAGE;
            }
            if (id == OPT_BATCH)
                c->cfg.batch_size = c->batches[0];
            else
                c->cfg.precision = c->precisions[0];
            break;
        }
        case OPT_THREADS:
            if (int_option("threads", a, 0, 1024, &c->cfg.n_threads) < 0)
                return EXIT_USAGE;
            break;
        case OPT_INPUT_SIZE:
            if (int_option("input-size", a, 1, 8192, &c->cfg.input_size) < 0)
                return EXIT_USAGE;
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
            if (int_option("runs", a, 1, 1000, &c->runs) < 0)
                return EXIT_USAGE;
            break;
        case OPT_IMAGES:
            if (int_option("images", a, 1, 1000000, &c->images) < 0)
                return EXIT_USAGE;
            break;
        case OPT_JSON:
            c->json = 1;
            break;
        case OPT_DB:
            c->cfg.db_path = a;
            c->db_set = 1;
            break;
        case OPT_STALL_TIMEOUT:
            if (number_option("stall-timeout", a, 0, 1e6, &c->cfg.stall_timeout) < 0)
                return EXIT_USAGE;
            break;
        case OPT_FPS:
            if (number_option("fps", a, 1, 1e9, &c->cfg.sample_fps) < 0)
                return EXIT_USAGE;
            break;
        case OPT_START:
            if (number_option("start", a, 0, 1e9, &c->cfg.start) < 0)
                return EXIT_USAGE;
            break;
        case OPT_DURATION:
            if (number_option("duration", a, 0, 1e9, &c->cfg.duration) < 0)
                return EXIT_USAGE;
            break;
        case OPT_EVERY:
            if (int_option("every", a, 1, 1000000, &c->cfg.every) < 0)
                return EXIT_USAGE;
            break;
        case OPT_KEYFRAMES:
            c->cfg.keyframes = 1;
            break;
        case OPT_MAX_FRAMES: {
            int v;
            if (parse_int(a, 1, 2000000000, &v) < 0) {
                fprintf(stderr, "vidfeat: --max-frames: expected a positive count, not '%s'\n", a);
                return EXIT_USAGE;
            }
            c->cfg.max_frames = v;
            break;
        }
        case OPT_FORCE:
            c->cfg.force = 1;
            break;
        case OPT_DTYPE:
            if (strcmp(a, "f32") && strcmp(a, "f16")) {
                fprintf(stderr, "vidfeat: --dtype: expected f32 or f16, not '%s'\n", a);
                return EXIT_USAGE;
            }
            c->cfg.store_f16 = !strcmp(a, "f16");
            break;
        case OPT_QUEUE_DEPTH:
            if (int_option("queue-depth", a, 1, 64, &c->cfg.queue_depth) < 0)
                return EXIT_USAGE;
            break;
        case OPT_DECODE_THREADS:
            if (int_option("decode-threads", a, 0, 64, &c->cfg.decode_threads) < 0)
                return EXIT_USAGE;
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

/* vidfeat bench --infer-only: images/s of the network alone, for c->cfg. */
static int bench_infer(cli *c)
{
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

/* ---- extract ------------------------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

typedef struct path_list {
    char **items;
    int n, cap;
} path_list;

static int add_path(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **items = realloc(l->items, (size_t)cap * sizeof(char *));
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    if (!(l->items[l->n] = strdup(path)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Media files under dir, recursively, in name order; media is recognised by probing. */
static int walk(path_list *l, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "vidfeat: %s: cannot read directory\n", dir);
        return 1;
    }
    path_list here = {0};
    struct dirent *e;
    int failed = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue;
        if (add_path(&here, path) < 0)
            failed = 1;
    }
    closedir(d);
    qsort(here.items, (size_t)here.n, sizeof(char *), cmp_str);
    for (int i = 0; i < here.n; i++) {
        struct stat st;
        if (stat(here.items[i], &st) != 0)
            continue;
        /* Zero-byte files are kept so that they are reported as failed: in an archive they
         * are broken media far more often than anything else. */
        if (S_ISDIR(st.st_mode) && depth < 64)
            failed |= walk(l, here.items[i], depth + 1);
        else if (S_ISREG(st.st_mode) && (st.st_size == 0 || vf_probe_media(here.items[i])))
            failed |= add_path(l, here.items[i]) < 0;
        free(here.items[i]);
    }
    free(here.items);
    return failed;
}

typedef struct run_ctx {
    const cli *c;
    vf_pipeline *p;
    int n_files, done, failed, skipped;
    int64_t frames;
    int tty;
    double t0;
    atomic_int finished;
    char *json;
    size_t json_len, json_cap;
} run_ctx;

static void json_append(run_ctx *r, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    if (r->json_len + (size_t)n + 1 > r->json_cap) {
        size_t cap = r->json_cap ? 2 * r->json_cap : 4096;
        while (cap < r->json_len + (size_t)n + 1)
            cap *= 2;
        char *j = realloc(r->json, cap);
        if (!j)
            return;
        r->json = j;
        r->json_cap = cap;
    }
    memcpy(r->json + r->json_len, buf, (size_t)n + 1);
    r->json_len += (size_t)n;
}

/* JSON string escaping into a static-size buffer. */
static const char *jesc(const char *s, char *buf, size_t size)
{
    size_t j = 0;
    for (; *s && j + 7 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            buf[j++] = '\\';
            buf[j++] = (char)ch;
        } else if (ch < 0x20) {
            j += (size_t)snprintf(buf + j, size - j, "\\u%04x", ch);
        } else {
            buf[j++] = (char)ch;
        }
    }
    buf[j] = '\0';
    return buf;
}

static int on_progress(void *user, int file, const char *path, int64_t done, int64_t expected)
{
    run_ctx *r = user;
    if (r->tty && r->c->verbosity >= 0) {
        double el = now_s() - r->t0;
        int64_t total = r->frames + done;
        double fps = el > 0 ? total / el : 0;
        const char *base = strrchr(path, '/');
        fprintf(stderr, "\r\033[K[%d/%d] %s  %lld", file + 1, r->n_files, base ? base + 1 : path,
                (long long)done);
        if (expected > done)
            fprintf(stderr, "/%lld", (long long)expected);
        fprintf(stderr, " frames  %.1f frames/s", fps);
        if (expected > done && fps > 0)
            fprintf(stderr, "  ETA %.0f s", (expected - done) / fps);
        fflush(stderr);
    }
    return interrupted;
}

static void on_file(void *user, int file, const vf_file_result *res)
{
    run_ctx *r = user;
    (void)file;
    char e1[4096], e2[1024];
    if (r->tty && r->c->verbosity >= 0)
        fprintf(stderr, "\r\033[K");
    if (res->skipped) {
        r->skipped++;
        if (r->tty && r->c->verbosity > 0)
            fprintf(stderr, "vidfeat: %s: already done, skipped\n", res->path);
    } else if (res->status < 0) {
        r->failed++;
        fprintf(stderr, "vidfeat: %s: %s\n", res->path, res->error);
    } else {
        r->done++;
        if (r->tty && r->c->verbosity >= 0)
            fprintf(stderr,
                    "vidfeat: %s: %lld frames in %.1f s (decode %.0f, convert %.0f, infer %.1f, "
                    "store %.0f frames/s)\n",
                    res->path, (long long)res->frames, res->seconds, res->decode_fps,
                    res->convert_fps, res->infer_fps, res->store_fps);
    }
    r->frames += res->frames;
    if (r->c->json)
        json_append(r,
                    "%s{\"path\":\"%s\",\"status\":\"%s\",\"error\":\"%s\",\"frames\":%lld,"
                    "\"seconds\":%.3f,\"decode_fps\":%.2f,\"convert_fps\":%.2f,"
                    "\"infer_fps\":%.2f,\"store_fps\":%.2f,\"width\":%d,\"height\":%d,"
                    "\"rotation\":%d}",
                    r->json_len ? "," : "", jesc(res->path, e1, sizeof(e1)),
                    res->skipped      ? "skipped"
                    : res->status < 0 ? "failed"
                                      : "done",
                    jesc(res->error ? res->error : "", e2, sizeof(e2)), (long long)res->frames,
                    res->seconds, res->decode_fps, res->convert_fps, res->infer_fps, res->store_fps,
                    res->width, res->height, res->rotation);
}

/* Turns a Ctrl-C (a flag set by the handler) into vf_pipeline_cancel within 50 ms. */
static void *watch_signals(void *arg)
{
    run_ctx *r = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    while (!atomic_load(&r->finished)) {
        if (interrupted) {
            vf_pipeline_cancel(r->p);
            break;
        }
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int cmd_extract(cli *c, int argc, char **argv)
{
    if (c->n_batches > 1 || c->n_precisions > 1) {
        fprintf(stderr, "vidfeat: lists of --batch or --precision are for bench\n");
        return EXIT_USAGE;
    }
    if (argc < 1) {
        fprintf(stderr, "vidfeat: no input files (try --help)\n");
        return EXIT_USAGE;
    }
    if (!c->db_set)
        c->cfg.db_path = "vidfeat.db";
    path_list inputs = {0};
    int status = EXIT_OK;
    for (int i = 0; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            int before = inputs.n;
            if (walk(&inputs, argv[i], 0))
                status = EXIT_FAIL;
            if (inputs.n == before) {
                fprintf(stderr, "vidfeat: %s: no media files in this directory\n", argv[i]);
                status = EXIT_FAIL;
            }
        } else if (add_path(&inputs, argv[i]) < 0) {
            fprintf(stderr, "vidfeat: out of memory\n");
            return EXIT_FAIL;
        }
    }
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(&c->cfg, &p);
    if (rc < 0) {
        fprintf(stderr, "vidfeat: %s\n", p ? vf_pipeline_errmsg(p) : vf_status_str(rc));
        vf_pipeline_free(&p);
        for (int i = 0; i < inputs.n; i++)
            free(inputs.items[i]);
        free(inputs.items);
        return rc == VF_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    run_ctx r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.p = p;
    r.n_files = inputs.n;
    r.tty = isatty(STDERR_FILENO);
    r.t0 = now_s();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pthread_t watcher;
    int watching = pthread_create(&watcher, NULL, watch_signals, &r) == 0;
    vf_run_hooks hooks = {&r, on_progress, on_file, NULL};
    rc = vf_pipeline_run(p, (const char *const *)inputs.items, inputs.n, &hooks);
    atomic_store(&r.finished, 1);
    if (watching)
        pthread_join(watcher, NULL);
    double seconds = now_s() - r.t0;
    if (rc == VF_ERR_CANCELLED) {
        if (r.tty)
            fprintf(stderr, "\r\033[K");
        fprintf(stderr, "vidfeat: interrupted: %d files done, vectors written so far are kept\n",
                r.done);
        status = EXIT_FAIL;
    } else if (rc < 0) {
        fprintf(stderr, "vidfeat: %s\n", vf_pipeline_errmsg(p));
        status = EXIT_FAIL;
    }
    if (r.failed)
        status = EXIT_FAIL;
    if (c->json) {
        vf_model_info info;
        vf_pipeline_info(p, &info);
        printf(
            "{\"model\":\"%s\",\"layer\":\"%s\",\"dim\":%d,\"backend\":\"%s\","
            "\"precision\":\"%s\",\"batch\":%d,\"db\":\"%s\",\"done\":%d,\"failed\":%d,"
            "\"skipped\":%d,\"frames\":%lld,\"seconds\":%.3f,\"status\":\"%s\",\"files\":[%s]}\n",
            info.name, info.layer, info.feature_dim, info.backend, vf_precision_str(info.precision),
            info.batch_size, c->cfg.db_path, r.done, r.failed, r.skipped, (long long)r.frames,
            seconds,
            rc == VF_ERR_CANCELLED ? "interrupted"
            : rc < 0               ? "error"
                                   : "ok",
            r.json ? r.json : "");
    } else if (c->verbosity >= 0 && r.tty) {
        fprintf(stderr, "vidfeat: %d done, %d failed, %d skipped; %lld frames in %.1f s -> %s\n",
                r.done, r.failed, r.skipped, (long long)r.frames, seconds, c->cfg.db_path);
    }
    free(r.json);
    vf_pipeline_free(&p);
    for (int i = 0; i < inputs.n; i++)
        free(inputs.items[i]);
    free(inputs.items);
    return status;
}

/* ---- bench FILE: the real pipeline, one child process per configuration ---------------- */

typedef struct bench_result {
    int ok;
    int64_t frames;
    double seconds, decode_fps, convert_fps, infer_fps, store_fps;
    long peak_kb; /* the child's own peak resident memory */
    char error[512];
} bench_result;

static void bench_file_done(void *user, int file, const vf_file_result *r)
{
    bench_result *b = user;
    (void)file;
    b->ok = r->status >= 0;
    b->frames = r->frames;
    b->seconds = r->seconds;
    b->decode_fps = r->decode_fps;
    b->convert_fps = r->convert_fps;
    b->infer_fps = r->infer_fps;
    b->store_fps = r->store_fps;
    snprintf(b->error, sizeof(b->error), "%s", r->error ? r->error : "");
}

/* Run the pipeline on path in a child process (so that its peak memory is its own). */
static int bench_one(const cli *c, const char *path, bench_result *out, long *peak_kb)
{
    int fd[2];
    memset(out, 0, sizeof(*out));
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        bench_result r;
        memset(&r, 0, sizeof(r));
        /* Store into a scratch database, so that the store stage is measured too. */
        const char *dir = getenv("TMPDIR");
        char db[4096];
        snprintf(db, sizeof(db), "%s/vidfeat-bench-XXXXXX", dir && *dir ? dir : "/tmp");
        int tfd = mkstemp(db);
        if (tfd >= 0)
            close(tfd);
        vf_config cfg = c->cfg;
        cfg.db_path = tfd >= 0 ? db : NULL;
        cfg.force = 1;
        vf_pipeline *p = NULL;
        if (vf_pipeline_create(&cfg, &p) < 0) {
            snprintf(r.error, sizeof(r.error), "%s", vf_pipeline_errmsg(p));
        } else {
            vf_run_hooks hooks = {&r, NULL, bench_file_done, NULL};
            const char *paths[1] = {path};
            if (vf_pipeline_run(p, paths, 1, &hooks) < 0)
                snprintf(r.error, sizeof(r.error), "%s", vf_pipeline_errmsg(p));
        }
        vf_pipeline_free(&p);
        if (tfd >= 0) {
            char side[4200];
            unlink(db);
            snprintf(side, sizeof(side), "%s-wal", db);
            unlink(side);
            snprintf(side, sizeof(side), "%s-shm", db);
            unlink(side);
        }
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            r.peak_kb = ru.ru_maxrss;
        ssize_t w = write(fd[1], &r, sizeof(r));
        _exit(w == (ssize_t)sizeof(r) ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof(*out));
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    *peak_kb = out->peak_kb;
    if (got != (ssize_t)sizeof(*out)) {
        snprintf(out->error, sizeof(out->error), "the benchmark process died");
        return -1;
    }
    return 0;
}

static void cpu_name(char *buf, size_t size)
{
    snprintf(buf, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + strspn(v + 1, " \t");
                v[strcspn(v, "\n")] = '\0';
                snprintf(buf, size, "%s", v);
            }
            break;
        }
    }
    if (f)
        fclose(f);
}

static int cmd_bench(cli *c, int argc, char **argv)
{
    int nb = c->n_batches ? c->n_batches : 1, np = c->n_precisions ? c->n_precisions : 1;
    if (!c->n_batches)
        c->batches[0] = c->cfg.batch_size;
    if (!c->n_precisions)
        c->precisions[0] = c->cfg.precision;
    if (c->infer_only ? argc != 0 : argc != 1) {
        fprintf(stderr, "vidfeat: bench: %s\n",
                c->infer_only ? "--infer-only takes no file" : "expected one video file");
        return EXIT_USAGE;
    }
    int status = EXIT_OK;
    char cpu[256];
    cpu_name(cpu, sizeof(cpu));
    if (!c->infer_only && !c->json)
        printf("%s, %s threads; %s\n%-6s %-5s %5s %10s %8s %8s %8s %8s %8s %9s\n", cpu,
               c->cfg.n_threads ? "set" : "all", argv[0], "device", "prec", "batch", "end-to-end",
               "decode", "convert", "infer", "store", "peak MB", "vs batch1");
    for (int pi = 0; pi < np; pi++) {
        double base = 0.0; /* end-to-end frames/s at batch 1, for the speed-up */
        for (int bi = 0; bi < nb; bi++) {
            c->cfg.batch_size = c->batches[bi];
            c->cfg.precision = c->precisions[pi];
            if (c->infer_only) {
                status |= bench_infer(c);
                continue;
            }
            bench_result r;
            long peak = 0;
            if (bench_one(c, argv[0], &r, &peak) < 0 || !r.ok) {
                fprintf(stderr, "vidfeat: bench: %s: %s\n", argv[0],
                        r.error[0] ? r.error : "failed");
                status = EXIT_FAIL;
                continue;
            }
            double e2e = r.seconds > 0 ? r.frames / r.seconds : 0.0;
            if (c->batches[bi] == 1)
                base = e2e;
            const char *dev = c->cfg.backend && !strcmp(c->cfg.backend, "gpu") ? "gpu" : "cpu";
            if (c->json) {
                char e1[512];
                printf("{\"device\":\"%s\",\"device_name\":\"%s\",\"precision\":\"%s\",\"batch\":"
                       "%d,\"threads\":%d,\"frames\":%lld,\"end_to_end_fps\":%.3f,"
                       "\"decode_fps\":%.3f,\"convert_fps\":%.3f,\"infer_fps\":%.3f,"
                       "\"store_fps\":%.3f,\"peak_rss_mb\":%.1f,\"speedup_vs_batch1\":%.3f}\n",
                       dev, jesc(cpu, e1, sizeof(e1)), vf_precision_str(c->cfg.precision),
                       c->cfg.batch_size, c->cfg.n_threads, (long long)r.frames, e2e, r.decode_fps,
                       r.convert_fps, r.infer_fps, r.store_fps, peak / 1024.0,
                       base > 0 ? e2e / base : 0.0);
            } else {
                char speed[32] = "-";
                if (base > 0)
                    snprintf(speed, sizeof(speed), "%.2fx", e2e / base);
                printf("%-6s %-5s %5d %10.2f %8.1f %8.1f %8.2f %8.0f %9.0f %9s\n", dev,
                       vf_precision_str(c->cfg.precision), c->cfg.batch_size, e2e, r.decode_fps,
                       r.convert_fps, r.infer_fps, r.store_fps, peak / 1024.0, speed);
            }
            fflush(stdout);
        }
    }
    return status;
}

static void print_line(void *user, const char *text)
{
    (void)user;
    printf("%s\n", text);
}

static int cmd_info(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "vidfeat: info: expected one database file\n");
        return EXIT_USAGE;
    }
    char err[1024] = "";
    struct stat st;
    if (stat(argv[0], &st) != 0) {
        fprintf(stderr, "vidfeat: %s: no such database\n", argv[0]);
        return EXIT_FAIL;
    }
    if (vf_db_describe(argv[0], print_line, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "vidfeat: %s\n", err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
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
            if (e->found)
                printf("%-22s %4d  %-28s %s\n", e->name, e->input_size, e->layers, e->found);
            else
                printf("%-22s %4d  %-28s (not found: scripts/fetch-models.sh %s)\n", e->name,
                       e->input_size, e->layers, e->name);
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
    /* The first word is a command, or an input of the default "extract" command. */
    static const char *const commands[] = {"extract", "bench", "models", "info"};
    const char *cmd = "extract";
    int shift = 0;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (!strcmp(argv[1], commands[i])) {
            cmd = commands[i];
            shift = 1;
        }
    }
    int rc = parse_options(argc - shift, argv + shift, &c);
    if (rc)
        return rc;
    int level = c.verbosity < 0    ? VF_LOG_ERROR
                : c.verbosity == 0 ? VF_LOG_WARNING
                : c.verbosity == 1 ? VF_LOG_INFO
                                   : VF_LOG_DEBUG;
    vf_set_log_callback(log_to_stderr, NULL, level);
    int n_args = argc - shift - optind;
    char **args = argv + shift + optind;
    if (!strcmp(cmd, "extract"))
        return cmd_extract(&c, n_args, args);
    if (!strcmp(cmd, "info"))
        return cmd_info(n_args, args);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(&c, n_args, args);
    if (n_args > 0) {
        fprintf(stderr, "vidfeat: %s: unexpected argument '%s'\n", cmd, args[0]);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "models"))
        return cmd_models(&c);
    return EXIT_USAGE;
}
