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

#include "cli.h"

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
    OPT_PLOT,
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
    OPT_HWDEC,
    OPT_CONVERT_THREADS,
    OPT_DECODERS,
    OPT_STALL_TIMEOUT,
    OPT_INT8_SCALES,
    OPT_FRAMES,
    OPT_IMAGE,
    OPT_VIDEO,
    OPT_AT,
    OPT_TOP = 'k',
};

#define DEFAULT_CALIBRATE_FRAMES 256
#define DEFAULT_CALIBRATE_FPS    2.0

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
    {"hwdec", OPT_HWDEC, "none|cuda", "decode on this device where it can (cuda: NVDEC)"},
    {"convert-threads", OPT_CONVERT_THREADS, "N",
     "frames converted at once (default 1 with a CPU network, cores/2 up to 8 with a GPU)"},
    {"decoders", OPT_DECODERS, "N",
     "files decoded at once (default 1 with a CPU network, 4 with a GPU)"},
    {"stall-timeout", OPT_STALL_TIMEOUT, "S",
     "give up a file with no frame for S s (60; 0 = never)"},
    {"model", OPT_MODEL, "NAME|FILE", "model name (see `vidfeat models`) or ONNX file"},
    {"models-dir", OPT_MODELS_DIR, "DIR", "look for manifests and ONNX files here first"},
    {"layer", OPT_LAYER, "NAME", "feature layer (manifest name or any tensor name)"},
    {"device", OPT_DEVICE, "cpu|gpu|auto",
     "where to run the network (default auto; bench also all)"},
    {"backend", OPT_BACKEND, "NAME", "backend by name: auto, dnnl (= cpu), ref, cuda"},
    {"gpu", OPT_GPU, NULL, "same as --device gpu"},
    {"batch", OPT_BATCH, "N", "images per forward pass (default 32)"},
    {"precision", OPT_PRECISION, "f32|bf16|int8|f16|tf32",
     "arithmetic precision (default f32; f16 and tf32 on the GPU)"},
    {"threads", OPT_THREADS, "N", "compute threads (default: all cores)"},
    {"int8-scales", OPT_INT8_SCALES, "FILE",
     "int8 calibration file (default MODEL.onnx.int8 beside the model, else ~/.cache/vidfeat)"},
    {"frames", OPT_FRAMES, "N",
     "int8: frames to calibrate on (calibrate: 256 in all; extract: 32 or a batch)"},
    {"input-size", OPT_INPUT_SIZE, "S", "network input is S x S (plain ONNX files)"},
    {"mean", OPT_MEAN, "R,G,B", "per-channel mean in pixel units 0..255 (plain ONNX files)"},
    {"std", OPT_STD, "R,G,B", "per-channel std in pixel units (plain ONNX files)"},
    {"infer-only", OPT_INFER_ONLY, NULL, "bench: time the network alone on synthetic images"},
    {"runs", OPT_RUNS, "N", "bench: timed runs (default 5; the median is reported)"},
    {"images", OPT_IMAGES, "N", "bench: images per timed run (default max(32, batch))"},
    {"plot", OPT_PLOT, "FILE.svg", "bench: draw frames/s by device, batch and precision"},
    {"image", OPT_IMAGE, "FILE", "similar: frames like this image"},
    {"video", OPT_VIDEO, "FILE", "similar: frames like this video's frame at --at"},
    {"at", OPT_AT, "T", "similar: seconds into --video (default 0)"},
    {"top", OPT_TOP, "N", "similar: how many frames to list (default 10)"},
    {"json", OPT_JSON, NULL, "machine-readable output"},
    {"quiet", OPT_QUIET, NULL, "only errors on stderr"},
    {"verbose", OPT_VERBOSE, NULL, "more detail on stderr (repeat for debug)"},
    {"version", OPT_VERSION, NULL, "print version, backends and library versions"},
    {"help", OPT_HELP, NULL, "this help"},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vidfeat [extract] [options] FILE|DIR...\n"
            "       vidfeat COMMAND [options]\n\n"
            "commands:\n"
            "  extract (default)              features of every frame (or sample) into SQLite\n"
            "  info DB                        what a database holds\n"
            "  similar DB --image F | --video V [--at T] [-k N]  nearest stored frames\n"
            "  bench [options] FILE...        the pipeline on the files per --batch/--precision\n"
            "  bench --infer-only [options]   network throughput on synthetic images\n"
            "  models [options]               known models, where found, input size, layers\n"
            "  calibrate [options] FILE|DIR...  int8 scales from sample frames of these inputs\n"
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
            c->model_set = 1;
            break;
        case OPT_MODELS_DIR:
            c->cfg.models_dir = a;
            break;
        case OPT_LAYER:
            c->cfg.layer = a;
            break;
        case OPT_DEVICE:
            if (strcmp(a, "cpu") && strcmp(a, "gpu") && strcmp(a, "auto") && strcmp(a, "all")) {
                fprintf(stderr, "vidfeat: --device: expected cpu, gpu or auto, not '%s'\n", a);
                return EXIT_USAGE;
            }
            c->all_devices = !strcmp(a, "all");
            c->cfg.backend = c->all_devices ? NULL : a;
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
                    fprintf(
                        stderr,
                        "vidfeat: --precision: expected f32, bf16, int8, f16 or tf32, not '%s'\n",
                        item);
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
        case OPT_INT8_SCALES:
            c->cfg.int8_scales = a;
            break;
        case OPT_FRAMES: {
            int v;
            if (int_option("frames", a, 1, 1000000, &v) < 0)
                return EXIT_USAGE;
            c->cfg.calibration_frames = v;
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
        case OPT_IMAGE:
            c->image = a;
            break;
        case OPT_VIDEO:
            c->video = a;
            break;
        case OPT_AT:
            if (number_option("at", a, 0, 1e9, &c->at) < 0)
                return EXIT_USAGE;
            c->at_set = 1;
            break;
        case OPT_TOP:
            if (int_option("top", a, 1, 100000, &c->top) < 0)
                return EXIT_USAGE;
            break;
        case OPT_PLOT:
            c->plot = a;
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
        case OPT_CONVERT_THREADS:
            if (int_option("convert-threads", a, 1, 64, &c->cfg.convert_threads) < 0)
                return EXIT_USAGE;
            break;
        case OPT_DECODERS:
            if (int_option("decoders", a, 1, 16, &c->cfg.decoders) < 0)
                return EXIT_USAGE;
            break;
        case OPT_HWDEC: /* the library knows FFmpeg's device types and says which exist */
            c->cfg.hwdec = a;
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

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_json_string(const char *s)
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
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/"; /* "dir/" on the line */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s%s%s", dir, sep, e->d_name) >= (int)sizeof(path))
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
const char *cli_jesc(const char *s, char *buf, size_t size)
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
    if (r->c->calibrate && r->frames + done > r->c->cfg.calibration_frames)
        return 1; /* past the frames wanted: the scales are final and saved, stop */
    if (r->tty && r->c->verbosity >= 0) {
        double el = cli_now_s() - r->t0;
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
                    "vidfeat: %s: %lld frames in %.1f s (decode %.0f%s%s, convert %.0f, infer "
                    "%.1f, store %.0f frames/s)\n",
                    res->path, (long long)res->frames, res->seconds, res->decode_fps,
                    res->hwdec && res->hwdec[0] ? " on " : "", res->hwdec ? res->hwdec : "",
                    res->convert_fps, res->infer_fps, res->store_fps);
    }
    r->frames += res->frames;
    if (r->c->json)
        json_append(r,
                    "%s{\"path\":\"%s\",\"status\":\"%s\",\"error\":\"%s\",\"frames\":%lld,"
                    "\"seconds\":%.3f,\"decode_fps\":%.2f,\"convert_fps\":%.2f,"
                    "\"infer_fps\":%.2f,\"store_fps\":%.2f,\"width\":%d,\"height\":%d,"
                    "\"rotation\":%d,\"hwdec\":\"%s\"}",
                    r->json_len ? "," : "", cli_jesc(res->path, e1, sizeof(e1)),
                    res->skipped      ? "skipped"
                    : res->status < 0 ? "failed"
                                      : "done",
                    cli_jesc(res->error ? res->error : "", e2, sizeof(e2)), (long long)res->frames,
                    res->seconds, res->decode_fps, res->convert_fps, res->infer_fps, res->store_fps,
                    res->width, res->height, res->rotation, res->hwdec ? res->hwdec : "");
}

/* Turns a Ctrl-C (a flag set by the handler) into vf_pipeline_cancel within 50 ms, and again
 * every 50 ms until the run returns: a cancel that lands before vf_pipeline_run has started
 * (the watcher starts first) would otherwise be forgotten by the run's reset. */
static void *watch_signals(void *arg)
{
    run_ctx *r = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    while (!atomic_load(&r->finished)) {
        if (interrupted)
            vf_pipeline_cancel(r->p);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void free_paths(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

/* The inputs named on the command line into *inputs, directories walked for media files.
 * EXIT_OK, or EXIT_FAIL when some could not be listed (the others are there). */
static int collect_inputs(int argc, char **argv, path_list *inputs)
{
    int status = EXIT_OK;
    for (int i = 0; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            int before = inputs->n;
            if (walk(inputs, argv[i], 0))
                status = EXIT_FAIL;
            if (inputs->n == before) {
                fprintf(stderr, "vidfeat: %s: no media files in this directory\n", argv[i]);
                status = EXIT_FAIL;
            }
        } else if (add_path(inputs, argv[i]) < 0) {
            fprintf(stderr, "vidfeat: out of memory\n");
            return EXIT_FAIL;
        }
    }
    return status;
}

/* The pipeline with c->cfg over inputs: a line per failed file (per file on a terminal), the
 * summary, Ctrl-C and SIGTERM turned into a clean stop. status: collect_inputs' result. */
static int run_pipeline(cli *c, const path_list *inputs, int status)
{
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(&c->cfg, &p);
    if (rc < 0) {
        fprintf(stderr, "vidfeat: %s\n", p ? vf_pipeline_errmsg(p) : vf_status_str(rc));
        vf_pipeline_free(&p);
        return rc == VF_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    run_ctx r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.p = p;
    r.n_files = inputs->n;
    r.tty = isatty(STDERR_FILENO);
    r.t0 = cli_now_s();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pthread_t watcher;
    int watching = pthread_create(&watcher, NULL, watch_signals, &r) == 0;
    vf_run_hooks hooks = {&r, on_progress, on_file, NULL};
    rc = vf_pipeline_run(p, (const char *const *)inputs->items, inputs->n, &hooks);
    atomic_store(&r.finished, 1);
    if (watching)
        pthread_join(watcher, NULL);
    double seconds = cli_now_s() - r.t0;
    if (rc == VF_ERR_CANCELLED && c->calibrate && !interrupted) {
        rc = VF_OK; /* stopped by on_progress */
    } else if (rc == VF_ERR_CANCELLED) {
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
    vf_model_info info;
    vf_pipeline_info(p, &info);
    if (c->calibrate && !info.int8_scales) {
        fprintf(stderr, "vidfeat: calibrate: %s\n",
                info.calibration_frames || r.frames ? "the scales could not be saved (see above)"
                                                    : "no frame to calibrate on");
        status = EXIT_FAIL;
    }
    char e1[4096], e2[4096];
    if (c->json) {
        printf("{\"model\":\"%s\",\"layer\":\"%s\",\"dim\":%d,\"backend\":\"%s\","
               "\"precision\":\"%s\",\"batch\":%d,\"db\":\"%s\",\"int8_scales\":\"%s\","
               "\"calibration_frames\":%lld,\"done\":%d,\"failed\":%d,\"skipped\":%d,"
               "\"frames\":%lld,\"seconds\":%.3f,\"status\":\"%s\",\"files\":[%s]}\n",
               info.name, info.layer, info.feature_dim, info.backend,
               vf_precision_str(info.precision), info.batch_size,
               cli_jesc(c->cfg.db_path ? c->cfg.db_path : "", e1, sizeof(e1)),
               cli_jesc(info.int8_scales ? info.int8_scales : "", e2, sizeof(e2)),
               (long long)info.calibration_frames, r.done, r.failed, r.skipped, (long long)r.frames,
               seconds,
               rc == VF_ERR_CANCELLED ? "interrupted"
               : rc < 0               ? "error"
                                      : "ok",
               r.json ? r.json : "");
    } else if (c->calibrate && info.int8_scales && c->verbosity >= 0) {
        fprintf(stderr,
                "vidfeat: int8 scales of %s (%s) calibrated on %lld frames of %d file%s -> %s\n",
                info.name, info.layer, (long long)info.calibration_frames, r.done,
                r.done == 1 ? "" : "s", info.int8_scales);
    } else if (!c->calibrate && c->verbosity >= 0 && r.tty) {
        fprintf(stderr, "vidfeat: %d done, %d failed, %d skipped; %lld frames in %.1f s -> %s\n",
                r.done, r.failed, r.skipped, (long long)r.frames, seconds, c->cfg.db_path);
    }
    free(r.json);
    vf_pipeline_free(&p);
    return status;
}

static int check_single_values(const cli *c)
{
    if (c->n_batches > 1 || c->n_precisions > 1) {
        fprintf(stderr, "vidfeat: lists of --batch or --precision are for bench\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int cmd_extract(cli *c, int argc, char **argv)
{
    if (check_single_values(c))
        return EXIT_USAGE;
    if (argc < 1) {
        fprintf(stderr, "vidfeat: no input files (try --help)\n");
        return EXIT_USAGE;
    }
    if (!c->db_set)
        c->cfg.db_path = "vidfeat.db";
    path_list inputs = {0};
    int status = collect_inputs(argc, argv, &inputs);
    status = run_pipeline(c, &inputs, status);
    free_paths(&inputs);
    return status;
}

/* vidfeat calibrate: int8 scales from sample frames of the inputs (--frames in all, spread
 * over the files, --fps 2 unless sampling is given), written to the calibration file. */
static int cmd_calibrate(cli *c, int argc, char **argv)
{
    if (check_single_values(c))
        return EXIT_USAGE;
    if (c->n_precisions && c->cfg.precision != VF_PRECISION_INT8) {
        fprintf(stderr, "vidfeat: calibrate: the scales are for --precision int8\n");
        return EXIT_USAGE;
    }
    if (c->db_set) {
        fprintf(stderr, "vidfeat: calibrate writes no database (-o); the scales go to "
                        "--int8-scales FILE or beside the model\n");
        return EXIT_USAGE;
    }
    if (argc < 1) {
        fprintf(stderr, "vidfeat: calibrate: no input files (sample videos or images)\n");
        return EXIT_USAGE;
    }
    c->calibrate = 1;
    c->cfg.precision = VF_PRECISION_INT8;
    c->cfg.recalibrate = 1;
    c->cfg.db_path = NULL;
    if (!c->cfg.calibration_frames)
        c->cfg.calibration_frames = DEFAULT_CALIBRATE_FRAMES;
    if (c->cfg.sample_fps == 0 && c->cfg.every <= 1 && !c->cfg.keyframes)
        c->cfg.sample_fps = DEFAULT_CALIBRATE_FPS;
    path_list inputs = {0};
    int status = collect_inputs(argc, argv, &inputs);
    if (!c->cfg.max_frames && inputs.n > 0) /* an even share of the frames from every file */
        c->cfg.max_frames = (c->cfg.calibration_frames + inputs.n - 1) / inputs.n;
    status = run_pipeline(c, &inputs, status);
    free_paths(&inputs);
    return status;
}

static void print_line(void *user, const char *text)
{
    (void)user;
    printf("%s\n", text);
}

/* Does the database named on the command line exist? Says so on stderr when not (the library
 * would only say it cannot open it). */
static int db_exists(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 1;
    fprintf(stderr, "vidfeat: %s: no such database\n", path);
    return 0;
}

static int cmd_info(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "vidfeat: info: expected one database file\n");
        return EXIT_USAGE;
    }
    char err[1024] = "";
    if (!db_exists(argv[0]))
        return EXIT_FAIL;
    if (vf_db_describe(argv[0], print_line, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "vidfeat: %s\n", err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* ---- similar ------------------------------------------------------------------------------ */

typedef struct similar_out {
    int json, rank;
} similar_out;

static void print_neighbour(void *user, const vf_neighbour *n)
{
    similar_out *o = user;
    o->rank++;
    if (o->json) {
        printf("%s\n    {\"rank\": %d, \"similarity\": %.6f, \"t\": %.6f, \"frame_index\": %lld, "
               "\"pts\": %lld, \"path\": ",
               o->rank > 1 ? "," : "", o->rank, n->similarity, n->t, (long long)n->frame_index,
               (long long)n->pts);
        cli_json_string(n->path);
        printf("}");
    } else {
        printf("%4d  %10.6f  %10.3f  %7lld  %s\n", o->rank, n->similarity, n->t,
               (long long)n->frame_index, n->path);
    }
}

static int cmd_similar(cli *c, int argc, char **argv)
{
    const char *query = c->image ? c->image : c->video;
    if (argc != 1 || !c->image == !c->video || (c->image && c->at_set) || !query[0]) {
        fprintf(stderr, "vidfeat: similar: expected one database and --image FILE or --video FILE "
                        "[--at T]\n");
        return EXIT_USAGE;
    }
    if (!db_exists(argv[0]))
        return EXIT_FAIL;
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    vf_similar_query q = {.image = c->image, .video = c->video, .at = c->at, .k = c->top};
    similar_out out = {.json = c->json};
    vf_neighbour src;
    char err[1024] = "";
    if (c->json)
        printf("{\"neighbours\": [");
    vf_status rc = vf_db_similar(argv[0], &cfg, &q, print_neighbour, &out, &src, err, sizeof(err));
    if (rc < 0) {
        if (c->json)
            printf("]}\n");
        fprintf(stderr, "vidfeat: %s\n", err);
        return EXIT_FAIL;
    }
    if (c->json) {
        printf("%s],\n \"query\": {\"stored\": %s, \"t\": %.6f, \"frame_index\": %lld, \"path\": ",
               out.rank ? "\n" : "", src.stored ? "true" : "false", src.t,
               (long long)src.frame_index);
        cli_json_string(src.path);
        printf("}}\n");
    } else if (!out.rank) {
        printf("no other frames in %s\n", argv[0]);
    }
    if (!c->json && c->verbosity >= 0)
        fprintf(stderr, "vidfeat: query: %s, frame %lld at %.3f s (%s)\n", src.path,
                (long long)src.frame_index, src.t,
                src.stored ? "its vector in the database" : "extracted now");
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
            cli_json_string(e->name);
            printf(",\"input_size\":%d,\"layers\":", e->input_size);
            cli_json_string(e->layers);
            printf(",\"file\":");
            cli_json_string(e->file);
            printf(",\"found\":");
            if (e->found)
                cli_json_string(e->found);
            else
                printf("null");
            printf(",\"manifest\":");
            cli_json_string(e->manifest);
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
    static const char *const commands[] = {"extract", "bench",     "models",
                                           "info",    "calibrate", "similar"};
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
    if (strcmp(cmd, "bench") && (c.all_devices || c.plot || c.infer_only)) {
        fprintf(stderr, "vidfeat: %s is for bench\n",
                c.all_devices ? "--device all"
                : c.plot      ? "--plot"
                              : "--infer-only");
        return EXIT_USAGE;
    }
    if (strcmp(cmd, "calibrate") && c.cfg.calibration_frames &&
        c.cfg.precision != VF_PRECISION_INT8) {
        fprintf(stderr, "vidfeat: --frames is for calibrate and --precision int8\n");
        return EXIT_USAGE;
    }
    if (strcmp(cmd, "similar") && (c.image || c.video || c.at_set || c.top)) {
        fprintf(stderr, "vidfeat: --image, --video, --at and --top are for similar\n");
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "extract"))
        return cmd_extract(&c, n_args, args);
    if (!strcmp(cmd, "calibrate"))
        return cmd_calibrate(&c, n_args, args);
    if (!strcmp(cmd, "info"))
        return cmd_info(n_args, args);
    if (!strcmp(cmd, "similar"))
        return cmd_similar(&c, n_args, args);
    if (!strcmp(cmd, "bench"))
        return cli_bench(&c, n_args, args);
    if (n_args > 0) {
        fprintf(stderr, "vidfeat: %s: unexpected argument '%s'\n", cmd, args[0]);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "models"))
        return cmd_models(&c);
    return EXIT_USAGE;
}
