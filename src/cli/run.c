/*
 * run.c - a pipeline run as the command line shows it: progress on a terminal, a line per
 * failed file, the summary (or one JSON document), and Ctrl-C / SIGTERM turned into a clean
 * stop that keeps what was written.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/json.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

void cli_catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_interrupted(void)
{
    return interrupted;
}

typedef struct run_ctx {
    const cli *c;
    vf_pipeline *p;
    int n_files, done, failed, skipped;
    int dropped; /* another worker took them over (their lease ran out) */
    int64_t frames;
    int tty;
    double t0;
    atomic_int finished;
    vf_json *files;  /* --json: a document per file */
    int json_failed; /* out of memory while building it */
    /* what a vector is, one and more: "frame", a clip model's "window", an audio model's
     * "patch" */
    const char *unit, *units;
} run_ctx;

/* What a run shows as it goes (--progress; cli.h's PROGRESS_*, auto resolved by then). */
static int shows_bar(const run_ctx *r)
{
    return r->c->progress == PROGRESS_BAR && r->c->verbosity >= 0 && !r->c->json;
}

/* The human lines of finished files and the summary: not with -q, --json (the document has
 * them) or --progress none/json. */
static int shows_lines(const run_ctx *r)
{
    return (r->c->progress == PROGRESS_BAR || r->c->progress == PROGRESS_LINES) &&
           r->c->verbosity >= 0 && !r->c->json;
}

static int on_progress(void *user, int file, const char *path, int64_t done, int64_t expected)
{
    run_ctx *r = user;
    if (r->c->calibrate && r->frames + done > r->c->cfg.calibration_frames)
        return 1; /* past the frames wanted: the scales are final and saved, stop */
    if (r->c->cfg.max_frames > 0 && expected > r->c->cfg.max_frames)
        expected = r->c->cfg.max_frames; /* the file's frames are more than will be taken */
    if (shows_bar(r)) {
        double el = vfi_now_s() - r->t0;
        int64_t total = r->frames + done;
        double fps = el > 0 ? total / el : 0;
        const char *base = strrchr(path, '/');
        if (r->n_files) /* a queue worker does not know how many files it will get */
            cli_printf(r->c->err, "\r\033[K[%d/%d] %s  %lld", file + 1, r->n_files,
                       base ? base + 1 : path, (long long)done);
        else
            cli_printf(r->c->err, "\r\033[K[%d] %s  %lld", file + 1, base ? base + 1 : path,
                       (long long)done);
        if (expected > done)
            cli_printf(r->c->err, "/%lld", (long long)expected);
        cli_printf(r->c->err, " %s  %.1f %s/s", r->units, fps, r->units);
        if (expected > done && fps > 0)
            cli_printf(r->c->err, "  ETA %.0f s", (expected - done) / fps);
        fflush(r->c->err);
    }
    return interrupted;
}

static const char *file_status(const vf_file_result *res)
{
    return res->skipped                  ? "skipped"
           : res->status == VF_ERR_LEASE ? "dropped"
           : res->status < 0             ? "failed"
                                         : "done";
}

/* A finished file as --json and --progress json show it; NULL out of memory. */
static vf_json *file_json(const vf_file_result *res)
{
    vf_json *f = vfi_json_new_object();
    int bad = !f;
    bad |= vfi_json_add_str(f, "path", res->path) < 0;
    bad |= vfi_json_add_str(f, "status", file_status(res)) < 0;
    bad |= vfi_json_add_str(f, "error", res->error ? res->error : "") < 0;
    bad |= vfi_json_add_str(f, "note", res->note ? res->note : "") < 0;
    bad |= vfi_json_add_int(f, "frames", res->frames) < 0;
    bad |= vfi_json_add_real(f, "seconds", res->seconds, 3) < 0;
    bad |= vfi_json_add_real(f, "fps", res->seconds > 0 ? res->frames / res->seconds : 0, 2) < 0;
    bad |= vfi_json_add_real(f, "decode_fps", res->decode_fps, 2) < 0;
    bad |= vfi_json_add_real(f, "convert_fps", res->convert_fps, 2) < 0;
    bad |= vfi_json_add_real(f, "infer_fps", res->infer_fps, 2) < 0;
    bad |= vfi_json_add_real(f, "store_fps", res->store_fps, 2) < 0;
    bad |= vfi_json_add_int(f, "width", res->width) < 0;
    bad |= vfi_json_add_int(f, "height", res->height) < 0;
    bad |= vfi_json_add_int(f, "rotation", res->rotation) < 0;
    bad |= vfi_json_add_str(f, "hwdec", res->hwdec ? res->hwdec : "") < 0;
    if (bad)
        vfi_json_free(&f);
    return f;
}

static void on_file(void *user, int file, const vf_file_result *res)
{
    run_ctx *r = user;
    (void)file;
    if (shows_bar(r))
        cli_printf(r->c->err, "\r\033[K");
    if (res->skipped) {
        r->skipped++;
        if (shows_lines(r))
            cli_printf(r->c->err, "vidfeat: %s: skipped: already done\n", res->path);
    } else if (res->status == VF_ERR_LEASE) { /* not a failure: another worker has it */
        r->dropped++;
        cli_printf(r->c->err, "vidfeat: %s: dropped: %s\n", res->path, res->error);
    } else if (res->status < 0) {
        r->failed++;
        cli_printf(r->c->err, "vidfeat: %s: %s\n", res->path, res->error);
    } else {
        r->done++;
        if (shows_lines(r))
            cli_printf(r->c->err,
                       "vidfeat: %s: done: %lld %s in %.1f s, %.1f %s/s (decode %.0f%s%s, "
                       "convert %.0f, infer %.1f, store %.0f)\n",
                       res->path, (long long)res->frames, res->frames == 1 ? r->unit : r->units,
                       res->seconds, res->seconds > 0 ? res->frames / res->seconds : 0.0, r->units,
                       res->decode_fps, res->hwdec && res->hwdec[0] ? " on " : "",
                       res->hwdec ? res->hwdec : "", res->convert_fps, res->infer_fps,
                       res->store_fps);
        if (res->note && res->note[0] && r->c->verbosity >= 0)
            cli_printf(r->c->err, "vidfeat: %s: warning: %s\n", res->path, res->note);
    }
    if (res->status != VF_ERR_LEASE) /* a dropped file's rows are the new holder's to replace */
        r->frames += res->frames;
    if (r->c->progress == PROGRESS_JSON) {
        vf_json *f = file_json(res);
        if (!f || vfi_json_write(r->c->out, f, 0) < 0 || fflush(r->c->out) != 0)
            r->json_failed = 1;
        vfi_json_free(&f);
    }
    if (r->c->json && r->files) {
        vf_json *f = file_json(res);
        if (!f || vfi_json_push(r->files, f) < 0)
            r->json_failed = 1;
    }
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

int cli_run_pipeline(cli *c, const path_list *inputs, int status)
{
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(&c->cfg, &p);
    if (rc < 0) {
        cli_printf(c->err, "vidfeat: %s\n", p ? vf_pipeline_errmsg(p) : vf_status_str(rc));
        vf_pipeline_free(&p);
        return rc == VF_ERR_INVALID ? EXIT_USAGE : EXIT_START;
    }
    run_ctx r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.p = p;
    r.n_files = inputs->n;
    r.tty = c->err == stderr && isatty(STDERR_FILENO);
    if (c->progress == PROGRESS_AUTO || (c->progress == PROGRESS_BAR && !r.tty))
        c->progress = r.tty ? PROGRESS_BAR : PROGRESS_LINES;
    r.t0 = vfi_now_s();
    vf_model_info about;
    vf_pipeline_info(p, &about);
    if (c->audio_run && !about.audio_frames) {
        cli_printf(c->err, "vidfeat: %s takes pictures, not sound: give it with --model\n",
                   about.name);
        vf_pipeline_free(&p);
        return EXIT_USAGE;
    }
    r.unit = about.audio_frames ? "patch" : about.frames ? "window" : "frame";
    r.units = about.audio_frames ? "patches" : about.frames ? "windows" : "frames";
    if (c->json && !(r.files = vfi_json_new_array()))
        r.json_failed = 1;
    cli_catch_interrupts();
    pthread_t watcher;
    int watching = pthread_create(&watcher, NULL, watch_signals, &r) == 0;
    vf_run_hooks hooks = {&r, on_progress, on_file, NULL};
    rc = c->queue ? vf_pipeline_run_queue(p, &hooks)
                  : vf_pipeline_run(p, (const char *const *)inputs->items, inputs->n, &hooks);
    atomic_store(&r.finished, 1);
    if (watching)
        pthread_join(watcher, NULL);
    double seconds = vfi_now_s() - r.t0;
    if (rc == VF_ERR_CANCELLED && c->calibrate && !interrupted) {
        rc = VF_OK; /* stopped by on_progress */
    } else if (rc == VF_ERR_CANCELLED) {
        if (r.tty)
            cli_printf(c->err, "\r\033[K");
        cli_printf(c->err,
                   "vidfeat: interrupted: %d file%s done, vectors written so far are kept\n",
                   r.done, cli_s(r.done));
        status = EXIT_INTERRUPTED;
    } else if (rc < 0) {
        cli_printf(c->err, "vidfeat: %s\n", vf_pipeline_errmsg(p));
        status = EXIT_FAIL;
    }
    if (r.failed && status != EXIT_INTERRUPTED)
        status = EXIT_FAIL;
    vf_model_info info;
    vf_pipeline_info(p, &info);
    char db[1024]; /* the database as it may be shown: no password */
    vf_db_display(c->cfg.db_path, db, sizeof(db)); /* "" without one (calibrate) */
    if (c->calibrate && !info.int8_scales) {
        cli_printf(c->err, "vidfeat: calibrate: %s\n",
                   info.calibration_frames || r.frames ? "the scales could not be saved (see above)"
                                                       : "no frame to calibrate on");
        status = EXIT_FAIL;
    }
    if (c->json) {
        vf_json *s = vfi_json_new_object();
        int bad = r.json_failed;
        bad |= vfi_json_add_str(s, "model", info.name) < 0;
        bad |= vfi_json_add_str(s, "layer", info.layer) < 0;
        bad |= vfi_json_add_int(s, "dim", info.feature_dim) < 0;
        bad |= vfi_json_add_str(s, "backend", info.backend) < 0;
        bad |= vfi_json_add_str(s, "precision", vf_precision_str(info.precision)) < 0;
        bad |= vfi_json_add_int(s, "batch", info.batch_size) < 0;
        bad |= vfi_json_add_str(s, "db", db) < 0;
        bad |= vfi_json_add_str(s, "int8_scales", info.int8_scales ? info.int8_scales : "") < 0;
        bad |= vfi_json_add_int(s, "calibration_frames", info.calibration_frames) < 0;
        bad |= vfi_json_add_int(s, "done", r.done) < 0;
        bad |= vfi_json_add_int(s, "failed", r.failed) < 0;
        bad |= vfi_json_add_int(s, "skipped", r.skipped) < 0;
        bad |= vfi_json_add_int(s, "dropped", r.dropped) < 0;
        bad |= vfi_json_add_int(s, "frames", r.frames) < 0;
        bad |= vfi_json_add_real(s, "seconds", seconds, 3) < 0;
        bad |= vfi_json_add_str(s, "status",
                                rc == VF_ERR_CANCELLED ? "interrupted"
                                : rc < 0               ? "error"
                                                       : "ok") < 0;
        bad |= vfi_json_add(s, "files", r.files) < 0;
        r.files = NULL; /* the summary has it */
        if (bad || vfi_json_write(c->out, s, 0) < 0) {
            cli_printf(c->err, "vidfeat: the --json summary could not be %s\n",
                       bad ? "made (out of memory)" : "written");
            status = EXIT_FAIL;
        }
        vfi_json_free(&s);
    } else if (c->calibrate && info.int8_scales && c->verbosity >= 0) {
        cli_printf(
            c->err,
            "vidfeat: int8 scales of %s (%s) calibrated on %lld frame%s of %d file%s -> %s\n",
            info.name, info.layer, (long long)info.calibration_frames,
            cli_s(info.calibration_frames), r.done, cli_s(r.done), info.int8_scales);
    } else if (!c->calibrate && shows_lines(&r) && rc != VF_ERR_CANCELLED) {
        cli_printf(c->err, "vidfeat: %d done, %d failed, %d skipped; %lld %s in %.1f s -> %s\n",
                   r.done, r.failed, r.skipped, (long long)r.frames,
                   r.frames == 1 ? r.unit : r.units, seconds, db);
    }
    vfi_json_free(&r.files);
    vf_pipeline_free(&p);
    return status;
}

int cli_single_values(const cli *c)
{
    if (c->n_batches > 1 || c->n_precisions > 1) {
        cli_printf(stderr, "vidfeat: lists of --batch or --precision are for bench\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}
