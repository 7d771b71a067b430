/*
 * cmd_bench.c - vidfeat bench: throughput per device x precision x batch, measured the way a user
 * runs vidfeat, plus the per-frame baseline that the speed-ups are against.
 *
 * Every configuration runs in a child process, so that its peak resident memory is its own and
 * one configuration's caches and arenas do not help or hurt the next; the child sends one
 * bench_result back through a pipe. Modes:
 *   pipeline    the real pipeline on FILE... (decode -> convert -> infer -> store into a
 *               scratch database), stages overlapped; frames/s end to end (all frames over the
 *               run's wall time, the model already loaded) and per stage (all frames over the
 *               stage's busy time, summed over the files); several files decode at once with
 *               --decoders
 *   per_frame   the same at batch 1 with the stages taking turns (vf_config.no_overlap): what
 *               extracting one frame at a time costs, the baseline of the "vs per-frame" column
 *   infer_only  the network alone on synthetic images: RUNS timed runs, the median reported
 * Results go to stdout as a table or JSON lines, optionally to the runs table of a database
 * (-o) and to an SVG chart (--plot).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/plot.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/isa.h"
#include "core/json.h"

#define MAX_RUNS 1000 /* --runs limit, checked by the option parser */

enum bench_mode { MODE_PIPELINE, MODE_PER_FRAME, MODE_INFER_ONLY };

static const char *const mode_names[] = {"pipeline", "per_frame", "infer_only"};

/* What a child measured: a plain struct, written whole through the pipe. */
typedef struct bench_result {
    vf_status status; /* of creating the pipeline/extractor or running it */
    char error[512];
    char model[64], layer[160], backend[16];
    char device_name[128]; /* the GPU's name; empty for the CPU */
    char hwdec[16];        /* the device that decoded the file ("cuda"); empty for the CPU */
    int feature_dim, threads;
    vf_weights_kind weights;
    vf_precision precision; /* the one run: what --precision auto chose */
    int64_t frames;
    double e2e_fps, decode_fps, convert_fps, infer_fps, store_fps;
    double setup_s, first_call_s;
    int n_runs;
    double run_fps[MAX_RUNS]; /* infer_only: each timed run */
    long peak_kb;             /* the child's own peak resident memory */
} bench_result;

typedef struct bench_row {
    const char *device; /* "cpu" or "gpu" */
    vf_precision precision;
    int batch;
    enum bench_mode mode;
    bench_result r;
    double fps;     /* the headline rate: end to end, or inference for infer_only */
    double speedup; /* fps over the per-frame row of the same device and precision; 0: none */
} bench_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void copy_info(bench_result *r, const vf_model_info *info)
{
    snprintf(r->model, sizeof(r->model), "%s", info->name);
    snprintf(r->layer, sizeof(r->layer), "%s", info->layer);
    snprintf(r->backend, sizeof(r->backend), "%s", info->backend);
    snprintf(r->device_name, sizeof(r->device_name), "%s", info->device ? info->device : "");
    r->feature_dim = info->feature_dim;
    r->weights = info->weights;
    r->precision = info->precision;
}

/* ---- in the child ---------------------------------------------------------------------- */

/* The files' results summed: frames, and each stage's busy seconds (frames over its rate). */
typedef struct bench_sum {
    bench_result *r;
    double busy[4]; /* decode, convert, infer, store */
} bench_sum;

static void on_file_done(void *user, int file, const vf_file_result *fr)
{
    bench_sum *sum = user;
    bench_result *r = sum->r;
    (void)file;
    if (fr->status < 0 && r->status >= 0) { /* the first failure speaks for the run */
        r->status = fr->status;
        snprintf(r->error, sizeof(r->error), "%s", fr->error ? fr->error : "");
    }
    r->frames += fr->frames;
    const double fps[4] = {fr->decode_fps, fr->convert_fps, fr->infer_fps, fr->store_fps};
    for (int i = 0; i < 4; i++)
        sum->busy[i] += fps[i] > 0 ? (double)fr->frames / fps[i] : 0.0;
    if (fr->hwdec && fr->hwdec[0])
        snprintf(r->hwdec, sizeof(r->hwdec), "%s", fr->hwdec);
}

/* The pipeline on the files, storing into a scratch database so that the store stage is
 * measured. */
static void child_pipeline(const vf_config *base, const char *const *paths, int n_paths,
                           bench_result *r)
{
    const char *dir = getenv("TMPDIR");
    char db[4096];
    snprintf(db, sizeof(db), "%s/vidfeat-bench-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(db);
    if (fd >= 0)
        close(fd);
    vf_config cfg = *base;
    cfg.db_path = fd >= 0 ? db : NULL;
    cfg.force = 1;
    vf_pipeline *p = NULL;
    double t0 = vfi_now_s();
    r->status = vf_pipeline_create(&cfg, &p);
    r->setup_s = vfi_now_s() - t0;
    if (r->status < 0) {
        snprintf(r->error, sizeof(r->error), "%s",
                 p ? vf_pipeline_errmsg(p) : vf_status_str(r->status));
    } else {
        vf_model_info info;
        vf_pipeline_info(p, &info);
        copy_info(r, &info);
        bench_sum sum = {r, {0}};
        vf_run_hooks hooks = {&sum, NULL, on_file_done, NULL};
        t0 = vfi_now_s();
        vf_status rc = vf_pipeline_run(p, paths, n_paths, &hooks);
        double wall = vfi_now_s() - t0;
        if (rc < 0) {
            r->status = rc;
            snprintf(r->error, sizeof(r->error), "%s", vf_pipeline_errmsg(p));
        }
        double *rates[4] = {&r->decode_fps, &r->convert_fps, &r->infer_fps, &r->store_fps};
        for (int i = 0; i < 4; i++)
            *rates[i] = sum.busy[i] > 0 ? (double)r->frames / sum.busy[i] : 0.0;
        r->e2e_fps = wall > 0 ? (double)r->frames / wall : 0.0;
    }
    vf_pipeline_free(&p);
    if (fd >= 0) {
        static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
            char side[4200];
            snprintf(side, sizeof(side), "%s%s", db, suffixes[i]);
            unlink(side);
        }
    }
}

/* The network alone: whole batches of seeded pseudo-random images, like the peer harnesses;
 * one untimed warm-up run, then n_runs timed runs of `images` images each. */
static void child_infer(const vf_config *cfg, int images, int n_runs, bench_result *r)
{
    double t0 = vfi_now_s();
    vf_extractor *ex = NULL;
    float *in = NULL, *out = NULL;
    r->status = vf_extractor_create(cfg, &ex);
    r->setup_s = vfi_now_s() - t0;
    if (r->status < 0) {
        snprintf(r->error, sizeof(r->error), "%s",
                 ex ? vf_extractor_errmsg(ex) : vf_status_str(r->status));
        goto done;
    }
    vf_model_info info;
    vf_extractor_info(ex, &info);
    copy_info(r, &info);
    int n = info.batch_size;
    int per_run = images ? images : (n > 32 ? n : 32);
    int calls = (per_run + n - 1) / n;
    /* a clip model's input is a window of info.frames pictures, an audio model's a patch */
    size_t in_count = info.audio_frames ? (size_t)n * info.audio_frames * info.audio_bands
                                        : (size_t)n * 3 * (info.frames > 0 ? info.frames : 1) *
                                              info.input_size * info.input_size;
    in = malloc(in_count * sizeof(float));
    out = malloc((size_t)n * info.feature_dim * sizeof(float));
    if (!in || !out) {
        r->status = VF_ERR_NOMEM;
        snprintf(r->error, sizeof(r->error), "out of memory");
        goto done;
    }
    uint32_t seed = 12345;
    for (size_t i = 0; i < in_count; i++) {
        seed = seed * 1103515245u + 12345u;
        in[i] = (float)(seed / 4294967296.0 * 2.0 - 1.0);
    }
    vf_status rc = VF_OK;
    t0 = vfi_now_s();
    rc = vf_extractor_infer(ex, in, n, out);
    r->first_call_s = vfi_now_s() - t0;
    for (int k = 1; k < calls && rc >= 0; k++)
        rc = vf_extractor_infer(ex, in, n, out);
    for (int run = 0; run < n_runs && rc >= 0; run++) {
        t0 = vfi_now_s();
        for (int k = 0; k < calls && rc >= 0; k++)
            rc = vf_extractor_infer(ex, in, n, out);
        r->run_fps[run] = (double)calls * n / (vfi_now_s() - t0);
    }
    if (rc < 0) {
        r->status = rc;
        snprintf(r->error, sizeof(r->error), "%s", vf_extractor_errmsg(ex));
        goto done;
    }
    r->n_runs = n_runs;
    r->frames = (int64_t)calls * n;
    double sorted[MAX_RUNS];
    memcpy(sorted, r->run_fps, (size_t)n_runs * sizeof(double));
    qsort(sorted, (size_t)n_runs, sizeof(double), cmp_double);
    r->infer_fps = sorted[n_runs / 2];
done:
    free(in);
    free(out);
    vf_extractor_free(&ex);
}

/* ---- in the parent --------------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t size)
{
    char *p = buf;
    while (size) {
        ssize_t got = read(fd, p, size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        size -= (size_t)got;
    }
    return 0;
}

/* A later configuration's log: what the first said of the model's weights is not said again. */
static void log_but_model(void *user, int level, const char *tag, const char *msg)
{
    if (strcmp(tag, "model") != 0)
        cli_log(user, level, tag, msg);
}

/* Run one configuration in a child process (not the first: quiet about the model's weights);
 * 0, or -1 when the child died (r->error says). */
static int measure(const cli *c, const vf_config *cfg, enum bench_mode mode, int later,
                   const char *const *paths, int n_paths, bench_result *r)
{
    int fd[2];
    memset(r, 0, sizeof(*r));
    if (pipe(fd) != 0) {
        snprintf(r->error, sizeof(r->error), "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        snprintf(r->error, sizeof(r->error), "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        if (later)
            vf_set_log_callback(log_but_model, NULL, cli_log_level(c));
        bench_result *mine = calloc(1, sizeof(*mine));
        if (!mine)
            _exit(1);
        mine->threads = cfg->n_threads;
        if (mode == MODE_INFER_ONLY)
            child_infer(cfg, c->images, c->runs, mine);
        else
            child_pipeline(cfg, paths, n_paths, mine);
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            mine->peak_kb = ru.ru_maxrss;
        const char *p = (const char *)mine;
        size_t left = sizeof(*mine);
        while (left) {
            ssize_t w = write(fd[1], p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1);
            p += w;
            left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    int ok = read_full(fd[0], r, sizeof(*r));
    close(fd[0]);
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    if (ok < 0) {
        memset(r, 0, sizeof(*r));
        if (WIFSIGNALED(wstatus))
            snprintf(r->error, sizeof(r->error), "the benchmark process died (signal %d)",
                     WTERMSIG(wstatus));
        else
            snprintf(r->error, sizeof(r->error), "the benchmark process died");
        r->status = VF_ERR_INTERNAL;
        return -1;
    }
    return 0;
}

/* The CPU's model name, core count and the vector instructions in use (core/isa.h: capped by
 * VIDFEAT_ISA or ONEDNN_MAX_CPU_ISA, said so). */
static void cpu_name(char *buf, size_t size)
{
    char model[256] = "CPU", line[4096];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof(line), f)) {
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v += 1 + strspn(v + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        if (!strncmp(line, "model name", 10)) {
            snprintf(model, sizeof(model), "%s", v);
            break;
        }
    }
    if (f)
        fclose(f);
    vf_isa isa;
    vf_err err = {VF_OK, ""};
    char desc[96] = "?";
    if (vfi_isa_get(&isa, &err) == VF_OK)
        vfi_isa_describe(&isa, desc, sizeof(desc));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, size, "%.120s (%ld CPU%s, %.60s%s%.24s)", model, cores, cores == 1 ? "" : "s",
             desc, err.code == VF_OK && isa.cap ? ", capped by " : "",
             err.code == VF_OK && isa.cap ? isa.cap : "");
}

/* What a row ran on, by name: the GPU's, or the CPU's. */
static const char *row_device_name(const bench_row *row, const char *cpu)
{
    return row->r.device_name[0] ? row->r.device_name : cpu;
}

static void print_header(const cli *c, const char *cpu, const char *path, const bench_row *first)
{
    const bench_result *r = &first->r;
    int odd = r->weights == VF_WEIGHTS_RANDOM || r->weights == VF_WEIGHTS_OTHER;
    vf_cpu_budget cpus;
    vfi_cpu_budget(&cpus);
    char threads[200];
    if (c->cfg.n_threads)
        snprintf(threads, sizeof(threads), "%d (--threads)", c->cfg.n_threads);
    else
        snprintf(threads, sizeof(threads), "%d (%s)", cpus.cpus, cpus.limit);
    printf("vidfeat bench: %s (layer %s, %d-d%s%s); cpu: %s; threads: %s\n", r->model, r->layer,
           r->feature_dim, odd ? ", " : "", odd ? vf_weights_str(r->weights) : "", cpu, threads);
    if (path)
        printf("input: %s (%lld frames)%s%s\n", path, (long long)r->frames,
               r->hwdec[0] ? ", decoded on " : "", r->hwdec);
    else
        printf("input: synthetic images\n");
    printf("%-6s %-5s %5s %-10s %10s %8s %8s %8s %8s %8s %12s\n", "device", "prec", "batch", "mode",
           "end-to-end", "decode", "convert", "infer", "store", "peak MB", "vs per-frame");
}

static void fmt_rate(char *buf, size_t size, double v, int decimals)
{
    if (v > 0)
        snprintf(buf, size, "%.*f", decimals, v);
    else
        snprintf(buf, size, "-");
}

/* One configuration's result as a JSON line on stdout; -1 when it could not be made. */
static int print_json_row(const char *cpu, const bench_row *row)
{
    const bench_result *r = &row->r;
    vf_json *o = vfi_json_new_object();
    int bad = vfi_json_add_str(o, "device", row->device) < 0;
    bad |= vfi_json_add_str(o, "device_name", row_device_name(row, cpu)) < 0;
    bad |= vfi_json_add_str(o, "backend", r->backend) < 0;
    bad |= vfi_json_add_str(o, "model", r->model) < 0;
    bad |= vfi_json_add_str(o, "layer", r->layer) < 0;
    bad |= vfi_json_add_str(o, "precision", vf_precision_str(row->precision)) < 0;
    bad |= vfi_json_add_int(o, "batch", row->batch) < 0;
    bad |= vfi_json_add_int(o, "threads", r->threads) < 0;
    bad |= vfi_json_add_str(o, "mode", mode_names[row->mode]) < 0;
    bad |= vfi_json_add_int(o, "frames", r->frames) < 0;
    bad |= vfi_json_add_real(o, "end_to_end_fps", r->e2e_fps, 3) < 0;
    bad |= vfi_json_add_real(o, "decode_fps", r->decode_fps, 3) < 0;
    bad |= vfi_json_add_real(o, "convert_fps", r->convert_fps, 3) < 0;
    bad |= vfi_json_add_real(o, "infer_fps", r->infer_fps, 3) < 0;
    bad |= vfi_json_add_real(o, "store_fps", r->store_fps, 3) < 0;
    bad |= vfi_json_add_real(o, "peak_rss_mb", r->peak_kb / 1024.0, 1) < 0;
    bad |= vfi_json_add_real(o, "speedup_vs_per_frame", row->speedup, 3) < 0;
    bad |= vfi_json_add_real(o, "setup_s", r->setup_s, 3) < 0;
    if (row->mode != MODE_INFER_ONLY) {
        bad |= vfi_json_add_str(o, "hwdec", r->hwdec) < 0;
    } else {
        vf_json *all = vfi_json_new_array();
        double lo = r->run_fps[0], hi = r->run_fps[0];
        bad |= vfi_json_add_int(o, "runs", r->n_runs) < 0;
        bad |= vfi_json_add(o, "all_fps", all) < 0;
        for (int i = 0; i < r->n_runs; i++) {
            bad |= vfi_json_push_real(all, r->run_fps[i], 3) < 0;
            lo = fmin(lo, r->run_fps[i]);
            hi = fmax(hi, r->run_fps[i]);
        }
        bad |= vfi_json_add_real(o, "infer_fps_min", lo, 3) < 0;
        bad |= vfi_json_add_real(o, "infer_fps_max", hi, 3) < 0;
        bad |= vfi_json_add_real(o, "first_call_s", r->first_call_s, 3) < 0;
    }
    if (!bad)
        bad = vfi_json_write(stdout, o, 0) < 0;
    vfi_json_free(&o);
    return bad ? -1 : 0;
}

static void print_row(const cli *c, const char *cpu, const bench_row *row)
{
    const bench_result *r = &row->r;
    double peak_mb = r->peak_kb / 1024.0;
    if (c->json) {
        if (print_json_row(cpu, row) < 0)
            fprintf(stderr, "vidfeat: bench: a JSON line could not be written\n");
    } else {
        char e2e[16], dec[16], conv[16], inf[16], st[16], speed[16] = "-";
        fmt_rate(e2e, sizeof(e2e), r->e2e_fps, 2);
        fmt_rate(dec, sizeof(dec), r->decode_fps, 1);
        fmt_rate(conv, sizeof(conv), r->convert_fps, 1);
        fmt_rate(inf, sizeof(inf), r->infer_fps, 2);
        fmt_rate(st, sizeof(st), r->store_fps, 0);
        if (row->speedup > 0)
            snprintf(speed, sizeof(speed), "%.2fx", row->speedup);
        printf("%-6s %-5s %5d %-10s %10s %8s %8s %8s %8s %8.0f %12s\n", row->device,
               vf_precision_str(row->precision), row->batch, mode_names[row->mode], e2e, dec, conv,
               inf, st, peak_mb, speed);
    }
    fflush(stdout);
}

static void record(const cli *c, const char *cpu, const char *path, const bench_row *row)
{
    const bench_result *r = &row->r;
    vf_bench_record rec = {row->device,
                           row_device_name(row, cpu),
                           r->backend,
                           r->model,
                           r->layer,
                           vf_precision_str(row->precision),
                           mode_names[row->mode],
                           row->mode == MODE_INFER_ONLY ? NULL : path,
                           row->batch,
                           r->threads,
                           r->frames,
                           r->e2e_fps,
                           r->decode_fps,
                           r->convert_fps,
                           r->infer_fps,
                           r->store_fps,
                           r->peak_kb / 1024.0};
    char why[512];
    if (vf_db_add_bench(c->cfg.db_path, &rec, why, sizeof(why)) < 0)
        fprintf(stderr, "vidfeat: bench: not recorded: %s\n", why);
}

static int write_plot(const cli *c, const char *cpu, const char *path, const bench_row *rows,
                      int n_rows)
{
    plot_bar *bars = calloc((size_t)n_rows, sizeof(*bars));
    char(*series)[64] = calloc((size_t)n_rows, sizeof(*series));
    char(*group)[32] = calloc((size_t)n_rows, sizeof(*group));
    if (!bars || !series || !group) {
        free(bars);
        free(series);
        free(group);
        fprintf(stderr, "vidfeat: bench: --plot: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < n_rows; i++) {
        snprintf(series[i], sizeof(series[i]), "%s %s", rows[i].device,
                 vf_precision_str(rows[i].precision));
        if (rows[i].mode == MODE_PER_FRAME)
            snprintf(group[i], sizeof(group[i]), "per-frame");
        else
            snprintf(group[i], sizeof(group[i]), "batch %d", rows[i].batch);
        bars[i].series = series[i];
        bars[i].group = group[i];
        bars[i].value = rows[i].fps;
    }
    char title[512], subtitle[1024]; /* the CPU, the GPU and the input named in full */
    const char *base = path ? strrchr(path, '/') : NULL;
    snprintf(title, sizeof(title), "vidfeat %s: %s (%s)",
             c->infer_only ? "inference only" : "end to end", rows[0].r.model, rows[0].r.layer);
    const char *gpu = NULL;
    for (int i = 0; i < n_rows && !gpu; i++)
        gpu = rows[i].r.device_name[0] ? rows[i].r.device_name : NULL;
    snprintf(subtitle, sizeof(subtitle), "%s%s%s%s%s", cpu, gpu ? " + " : "", gpu ? gpu : "",
             path ? ", " : "", path ? (base ? base + 1 : path) : "");
    char err[256];
    int rc = plot_svg(c->plot, title, subtitle, "frames/s", bars, n_rows, err, sizeof(err));
    free(bars);
    free(series);
    free(group);
    if (rc < 0) {
        fprintf(stderr, "vidfeat: bench: %s\n", err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

int cmd_bench(cli *c, int argc, char **argv)
{
    if (c->infer_only ? argc != 0 : argc < 1) {
        fprintf(stderr, "vidfeat: bench: %s\n",
                c->infer_only ? "--infer-only takes no file" : "expected a video file");
        return EXIT_USAGE;
    }
    /* the input as the table, the runs table and the chart name it */
    char label[512] = "";
    if (argc > 1)
        snprintf(label, sizeof(label), "%.400s and %d more file%s", argv[0], argc - 1,
                 argc == 2 ? "" : "s");
    else if (argc == 1)
        snprintf(label, sizeof(label), "%.400s", argv[0]);
    const char *path = c->infer_only ? NULL : label;
    /* int8: each configuration calibrates on its own first frames (synthetic ones with
     * --infer-only) unless a file is named; a benchmark writes no calibration file */
    if (!c->cfg.int8_scales)
        c->cfg.int8_scales = "";
    int nb = c->n_batches ? c->n_batches : 1, np = c->n_precisions ? c->n_precisions : 1;
    if (!c->n_batches)
        c->batches[0] = c->cfg.batch_size;
    if (!c->n_precisions)
        c->precisions[0] = c->cfg.precision;
    const char *all[] = {"cpu", "gpu"};
    const char *one[] = {c->cfg.backend};
    const char *const *devices = c->all_devices ? all : one;
    int n_devices = c->all_devices ? 2 : 1;

    /* per device and precision: the per-frame baseline (pipeline mode), then each batch */
    int per_combo = nb + !c->infer_only;
    bench_row *rows = calloc((size_t)(n_devices * np * per_combo), sizeof(*rows));
    if (!rows) {
        fprintf(stderr, "vidfeat: bench: out of memory\n");
        return EXIT_FAIL;
    }
    char cpu[256];
    cpu_name(cpu, sizeof(cpu));
    int n_rows = 0, failed = 0, header = 0, gpu_named = 0;
    for (int d = 0; d < n_devices; d++) {
        int device_ok = 1;
        for (int pi = 0; pi < np && device_ok; pi++) {
            double base = 0.0;
            for (int k = 0; k < per_combo; k++) {
                int per_frame = !c->infer_only && k == 0;
                bench_row *row = &rows[n_rows];
                vf_config cfg = c->cfg;
                cfg.backend = devices[d];
                cfg.precision = c->precisions[pi];
                cfg.batch_size = per_frame ? 1 : c->batches[k - !c->infer_only];
                cfg.no_overlap = per_frame;
                row->precision = cfg.precision;
                row->batch = cfg.batch_size;
                row->mode = c->infer_only ? MODE_INFER_ONLY
                            : per_frame   ? MODE_PER_FRAME
                                          : MODE_PIPELINE;
                measure(c, &cfg, row->mode, n_rows > 0, (const char *const *)argv, argc, &row->r);
                bench_result *r = &row->r;
                if (r->status >= 0)
                    row->precision = r->precision; /* auto's choice */
                if (r->status < 0) {
                    int unavailable =
                        r->status == VF_ERR_NOT_BUILT || r->status == VF_ERR_NO_DEVICE;
                    fprintf(stderr, "vidfeat: bench: %s%s%s%s%s\n", devices[d] ? devices[d] : "",
                            devices[d] ? ": " : "", path ? path : "", path ? ": " : "",
                            r->error[0] ? r->error : vf_status_str(r->status));
                    if (unavailable) {
                        device_ok = 0;
                        failed |= !c->all_devices;
                        break;
                    }
                    if (r->status == VF_ERR_UNSUPPORTED && k == 0) {
                        /* a precision this device lacks (bf16 on the GPU, f16 on the CPU) */
                        failed |= !c->all_devices;
                        break;
                    }
                    failed = 1;
                    continue;
                }
                row->device = !strcmp(r->backend, "cuda") ? "gpu" : "cpu";
                row->fps = c->infer_only ? r->infer_fps : r->e2e_fps;
                if (per_frame || (c->infer_only && row->batch == 1 && base == 0.0))
                    base = row->fps;
                row->speedup = base > 0 ? row->fps / base : 0.0;
                if (!c->json && !header++)
                    print_header(c, cpu, path, row);
                if (!c->json && r->device_name[0] && !gpu_named++)
                    printf("gpu: %s\n", r->device_name);
                print_row(c, cpu, row);
                if (c->db_set)
                    record(c, cpu, path, row);
                n_rows++;
            }
        }
    }
    if (c->plot && n_rows > 0 && write_plot(c, cpu, path, rows, n_rows) != EXIT_OK)
        failed = 1;
    free(rows);
    if (n_rows == 0) /* no device, precision or model could be run */
        return EXIT_START;
    return failed ? EXIT_FAIL : EXIT_OK;
}
