/*
 * pipeline.c - the extraction pipeline: the only code that knows how the stages are wired, and
 * the decode, convert and infer stages (the store stage is stage_store.c; the run's state and
 * what every stage calls, stages.h and stages.c).
 *
 *     lane 0:  [decode] --q_frames--> [convert] --+
 *     lane 1:  [decode] --q_frames--> [convert] --+--q_batches--> [infer] --q_done--> [store]
 *     ...      decoder_next           workers    |                backend run   SQLite / hooks,
 *              (codec threads)        (q_jobs)   +                              batch -> free pool
 *
 * A lane decodes one file at a time and takes the next file of the list when it is done (one
 * lane by default on the CPU, several for a GPU that one decoder cannot feed); its convert
 * thread fills batches with its own files only, so a file's frames stay together and in order.
 * Stages talk only through bounded queues (queue.c), so memory is fixed by the pools: per lane
 * FRAME_POOL decoded frames plus one per convert worker, and queue_depth + 2 + lanes batch
 * inputs, whatever the video length. A convert thread hands each frame, with its row, to one of
 * n_conv workers (q_jobs, shared by the lanes) that convert in parallel: on the host (yuvconv or
 * libswscale) into a host batch, or by the backend where it converts frames (a GPU: the kernel
 * writes the batch in device memory, from uploaded planes or NVDEC's frame where it is); a batch
 * leaves once its rows are all converted. Besides frames and batches, per-file events travel the
 * same queues in order: BEGIN (stream facts), END (outcome, each stage adding its busy time) and
 * SKIP (already in the database). Batches fill across file boundaries, the events riding in
 * them as ordered markers, so only the last batch of each lane is short; infer and store keep
 * their per-file state per lane.
 * no_overlap (the per-frame baseline, one lane): q_tokens holds batch_size tokens; decode takes
 * one per frame and the store gives them back once the batch is stored, so one batch at a time
 * moves through the stages.
 *
 * Startup: pools and queues are made, files already done are marked (calling thread, which
 * owns the store until the threads start), then the threads start.
 * Normal shutdown: a lane's decode closes its q_frames after the list runs out; its convert
 * thread drains it and sends its last batch; the last lane to finish closes q_jobs and
 * q_batches; infer and store drain theirs and exit; run() joins them all.
 * Failure and cancel: a fatal error (backend, database, a hook asking to stop, or
 * vf_pipeline_cancel) records the first error under a mutex and cancels every queue and the
 * backend (which stops between layers); every stage wakes with VF_ERR_CANCELLED and exits.
 * Frames, batches and events are owned by the pipeline's arrays/lists whatever queue they are
 * in, and freed at the end of run(). The store commits one transaction per batch, so what was
 * written before a cancel stays, and an unfinished file is left 'running' or marked 'failed',
 * never 'done'.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/extractor.h"
#include "media/decode.h"
#include "media/probe.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "media/preprocess.h"
#include "core/queue.h"
#include "pipeline/sound.h"
#include "pipeline/source.h"
#include "store/record.h"
#include "store/store.h"
#include "pipeline/stages.h"

void vf_pipeline_cancel(vf_pipeline *p)
{
    if (p)
        vfi_pl_stop(p, VF_ERR_CANCELLED, "cancelled");
}

/* ---- decode thread ---------------------------------------------------------------------- */

static int push_or_stop(vf_queue *q, void *it)
{
    return vfi_queue_push(q, it) >= 0;
}

/* Decode one file; returns 0 when the pipeline is stopping. */
/* At the end of a regular file: is it still what was opened? A file cut short while being read
 * ends early and would look complete, and one still being written has more to come: both fail
 * (with the frames read so far kept) so that a later run does them again. One removed while
 * being read was read whole through the open descriptor and is done. */
static vf_status check_unchanged(const char *path, const struct stat *opened, vf_err *err)
{
    struct stat now;
    if (stat(path, &now) != 0) {
        vfi_log(VF_LOG_WARNING, "decode", "%s: removed while being read (read to its end)", path);
        return VF_EOF;
    }
    if (now.st_dev != opened->st_dev || now.st_ino != opened->st_ino)
        return VF_EOF; /* replaced by another file: the one opened was read whole */
    if (now.st_size < opened->st_size)
        return vfi_fail(err, VF_ERR_DECODE,
                        "the file shrank while being read (%lld -> %lld bytes): frames are missing",
                        (long long)opened->st_size, (long long)now.st_size);
    if (now.st_size != opened->st_size || now.st_mtim.tv_sec != opened->st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != opened->st_mtim.tv_nsec)
        return vfi_fail(err, VF_ERR_DECODE,
                        "the file changed while being read (%lld -> %lld bytes): run again once "
                        "it is complete",
                        (long long)opened->st_size, (long long)now.st_size);
    return VF_EOF;
}

/* Under --root, what a file may be (docs/archives.md "What vidfeat reads"): its name relative to
 * the root (names from the database are data: an absolute one or one with ".." is refused), and the
 * file the system resolves it to inside the root, unless links may lead out. VF_ERR_DENIED with the
 * line; nothing opened. */
static vf_status check_root(const vf_pipeline *p, const vf_work *w, vf_err *err)
{
    if (!p->root)
        return VF_OK;
    const char *name = w->id.name; /* as recorded; NULL in a run without a database */
    if (name && (name[0] == '/' || vfi_path_has_dotdot(name)))
        return vfi_fail(err, VF_ERR_DENIED, "names a file outside --root %s (%s): not read",
                        p->root, name[0] == '/' ? "an absolute name" : "a '..' in it");
    int inside = vfi_archive_holds(&p->archive, w->path, NULL);
    if (inside < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (!inside)
        return vfi_fail(err, VF_ERR_DENIED,
                        "leads outside --root %s through a symbolic link: not read "
                        "(--follow-links-outside allows it)",
                        p->root);
    return VF_OK;
}

/* A file's input: its video decoder, or an audio model's patches of its sound. */
typedef struct input {
    vf_decoder *dec;
    vf_patches *snd;
    int64_t kept;    /* patches handed out */
    double limit_s;  /* the time it may run (max_duration); 0: no bound */
    int limit_given; /* limit_s is the config's, not the default by size */
} input;

#define DEFAULT_DURATION_S (3600.0) /* an hour, and an hour a megabyte of the file */

/* How long the file at path may run: the config's bound, else the default one by its size. */
static double duration_limit(const vf_pipeline *p, const char *path)
{
    if (p->cfg.max_duration != 0.0)
        return p->cfg.max_duration > 0.0 ? p->cfg.max_duration : 0.0;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0.0; /* its size unknown (a stream, a device): no bound of its own */
    return DEFAULT_DURATION_S * (1.0 + (double)st.st_size / 1e6);
}

static vf_status open_input(vf_pipeline *p, const char *path, input *in, vf_err *err)
{
    in->limit_s = duration_limit(p, path);
    in->limit_given = p->cfg.max_duration > 0.0;
    if (p->audio) {
        vf_audio_opts o = {.stall_timeout = p->cfg.stall_timeout,
                           .cancel = &p->cancel,
                           .archive = p->root ? &p->archive : NULL,
                           .max_streams = p->cfg.max_streams};
        return vfi_patches_open(path, p->audio, o, &in->snd, err);
    }
    vf_sampling s = {p->cfg.sample_fps, p->cfg.every,    p->cfg.keyframes,
                     p->cfg.start,      p->cfg.duration, p->cfg.max_frames};
    vf_decode_opts dopts = {p->cfg.decode_threads,
                            p->cfg.stall_timeout,
                            &p->cancel,
                            p->hw,
                            p->keep_on_device,
                            p->root ? &p->archive : NULL,
                            p->cfg.max_pixels,
                            p->cfg.max_streams,
                            p->cfg.shots ? &p->shot_opts : NULL};
    return vfi_decoder_open(path, &s, &dopts, &in->dec, err);
}

/* What the file's record says of its stream: the video's, or its sound's (no picture). */
static vf_video_meta input_meta(const input *in)
{
    if (in->dec)
        return *vfi_decoder_meta(in->dec);
    const vf_audio_meta *a = vfi_patches_meta(in->snd);
    vf_video_meta m = {
        .stream_index = a->stream_index, .duration = a->duration, .start_time = a->origin};
    snprintf(m.codec, sizeof(m.codec), "%s", a->codec);
    return m;
}

/* A frame or patch at t (seconds into the file) past the file's bound fails it. */
static vf_status within_limit(const input *in, double t, vf_err *err)
{
    if (in->limit_s <= 0.0 || !(t > in->limit_s))
        return VF_OK;
    int h = (int)(in->limit_s / 3600.0), m = (int)(in->limit_s / 60.0) % 60;
    return vfi_fail(err, VF_ERR_DECODE,
                    "runs past %d:%02d:%02.0f of picture or sound, %s: not read further "
                    "(--max-duration sets the bound)",
                    h, m, in->limit_s - 3600.0 * h - 60.0 * m,
                    in->limit_given ? "the bound given"
                                    : "more than its size allows (an hour, and an hour a "
                                      "megabyte of the file)");
}

/* The next frame (or patch) of the file into fi: VF_OK, VF_EOF, or a failure. */
static vf_status next_input(vf_pipeline *p, input *in, frame_item *fi, vf_err *err)
{
    if (in->dec) {
        vf_status rc = vfi_decoder_next(in->dec, &fi->f, err);
        return rc == VF_OK ? within_limit(in, fi->f.t, err) : rc;
    }
    vf_patch where;
    vf_status rc;
    do /* --start: the patches that start at or after it */
        rc = vfi_patches_next(in->snd, fi->patch, &where, err);
    while (rc == VF_OK && where.t < p->cfg.start);
    if (rc == VF_OK && p->cfg.duration > 0 && where.t >= p->cfg.start + p->cfg.duration)
        rc = VF_EOF;
    if (rc == VF_OK && p->cfg.max_frames > 0 && in->kept >= p->cfg.max_frames)
        rc = VF_EOF;
    if (rc == VF_OK)
        rc = within_limit(in, where.t, err);
    if (rc == VF_OK) {
        in->kept++;
        fi->f.index = where.index;
        fi->f.pts = where.pts;
        fi->f.t = where.t;
        fi->t_end = where.t_end;
    }
    return rc;
}

/* A file decoded to its end: its shots (--shots) into its END, owned there. VF_EOF, or
 * VF_ERR_NOMEM. */
static vf_status take_shots(vf_decoder *dec, event_item *end, vf_err *err)
{
    const vf_shot *shots;
    int n;
    vf_status rc = vfi_decoder_shots(dec, &shots, &n, err);
    if (rc < 0 || n == 0)
        return rc < 0 ? rc : VF_EOF;
    if (!(end->shots = vfi_mallocarray((size_t)n, sizeof(*shots))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    memcpy(end->shots, shots, (size_t)n * sizeof(*shots));
    end->n_shots = n;
    return VF_EOF;
}

/* After the input's end (status: how it ended): what END reports of it (what was decoded; a
 * note on what it lacked), and the input closed. */
static void close_input(input *in, vf_status status, event_item *end)
{
    if (in->dec) {
        int64_t errors;
        vfi_decoder_counts(in->dec, &end->decoded, &errors);
        memcpy(end->meta.hwdec, vfi_decoder_meta(in->dec)->hwdec, sizeof(end->meta.hwdec));
        if (status == VF_EOF)
            snprintf(end->note, sizeof(end->note), "%s", vfi_decoder_note(in->dec));
    } else if (in->snd) {
        end->decoded = in->kept;
        int64_t errors = vfi_patches_errors(in->snd);
        if (status == VF_EOF && !in->kept)
            snprintf(end->note, sizeof(end->note), "its sound (%.2f s) is shorter than a patch",
                     vfi_patches_seconds(in->snd));
        else if (status == VF_EOF && errors)
            snprintf(end->note, sizeof(end->note), "%lld corrupt audio packets skipped",
                     (long long)errors);
    }
    vfi_decoder_free(&in->dec);
    vfi_patches_free(&in->snd);
}

static int decode_file(lane *ln, vf_work *w)
{
    vf_pipeline *p = ln->p;
    const char *path = w->path;
    event_item *end = vfi_pl_new_event(p, ITEM_END, w);
    if (!end) {
        vfi_pl_stop(p, VF_ERR_NOMEM, "out of memory");
        return 0;
    }
    struct stat st;
    memset(&st, 0, sizeof(st));
    end->t_open = vfi_now_s();
    input in = {.dec = NULL};
    vf_err err = {VF_OK, ""};
    vf_status rc;
    if ((rc = check_root(p, w, &err)) < 0)
        ; /* never opened */
    else if (stat(path, &st) != 0)
        rc = vfi_fail(&err, VF_ERR_IO, "%s", strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = vfi_fail(&err, VF_ERR_IO, "is a directory");
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
        rc = vfi_fail(&err, VF_ERR_DENIED, "is a %s, not a file or a pipe: not read",
                      S_ISSOCK(st.st_mode) ? "socket" : "device");
    else if (S_ISREG(st.st_mode) && st.st_size == 0) /* pipes and devices have no size */
        rc = vfi_fail(&err, VF_ERR_DECODE, "empty file");
    else
        rc = open_input(p, path, &in, &err);
    end->size = st.st_size;
    end->mtime = vfi_record_mtime(&st);
    if (rc >= 0) {
        event_item *begin = vfi_pl_new_event(p, ITEM_BEGIN, w);
        if (!begin) {
            close_input(&in, VF_ERR_NOMEM, end);
            vfi_pl_stop(p, VF_ERR_NOMEM, "out of memory");
            return 0;
        }
        begin->meta = input_meta(&in);
        begin->size = end->size;
        begin->mtime = end->mtime;
        begin->t_open = end->t_open;
        if (S_ISREG(st.st_mode)) /* a pipe's bytes belong to the decoder: never read them */
            vfi_record_content_hash(path, end->size, begin->content_hash);
        end->meta = begin->meta;
        if (begin->meta.n_video_streams > 1)
            vfi_log(VF_LOG_INFO, "decode", "%s: %d video streams, using #%d", path,
                    begin->meta.n_video_streams, begin->meta.stream_index);
        if (!push_or_stop(ln->q_frames, begin)) {
            close_input(&in, VF_ERR_CANCELLED, end);
            return 0;
        }
        for (;;) {
            void *slot;
            if (vfi_queue_pop(ln->q_free_frames, &slot) < 0) {
                close_input(&in, VF_ERR_CANCELLED, end);
                return 0;
            }
            frame_item *fi = slot;
            if (p->q_tokens && vfi_queue_pop(p->q_tokens, &slot) < 0) {
                close_input(&in, VF_ERR_CANCELLED, end);
                return 0;
            }
            double t0 = vfi_now_s();
            rc = next_input(p, &in, fi, &err);
            end->decode_s += vfi_now_s() - t0;
            if (rc != VF_OK) {
                vfi_frame_release(&fi->f);
                vfi_queue_push(ln->q_free_frames, fi); /* cannot block: it came from there */
                vfi_pl_give_tokens(p, 1);
                break;
            }
            fi->hdr.work = w;
            if (!push_or_stop(ln->q_frames, fi)) {
                close_input(&in, VF_ERR_CANCELLED, end);
                return 0;
            }
        }
        if (rc == VF_EOF && S_ISREG(st.st_mode))
            rc = check_unchanged(path, &st, &err);
        if (rc == VF_EOF && in.dec && p->cfg.shots)
            rc = take_shots(in.dec, end, &err);
        close_input(&in, rc, end);
    }
    end->status = rc == VF_EOF ? VF_OK : rc;
    if (rc < 0)
        snprintf(end->error, sizeof(end->error), "%s", err.msg);
    return push_or_stop(ln->q_frames, end);
}

/* A new event of kind for w onto the lane's queue; 0 when the run is stopping. */
static int push_event(lane *ln, enum item_kind kind, vf_work *w)
{
    event_item *e = vfi_pl_new_event(ln->p, kind, w);
    if (!e) {
        vfi_pl_stop(ln->p, VF_ERR_NOMEM, "out of memory");
        return 0;
    }
    return push_or_stop(ln->q_frames, e);
}

static void *decode_thread(void *arg)
{
    lane *ln = arg;
    vf_pipeline *p = ln->p;
    vfi_pl_lower_priority();
    int flushed = 0; /* a flush was sent since the last item */
    while (!atomic_load(&p->cancel)) {
        vf_work *w;
        vf_err err = {VF_OK, ""};
        vf_status rc = p->source->ops->next(p->source, &w, &err);
        if (rc == VF_EOF)
            break;
        if (rc == VF_SOURCE_WAIT) { /* nothing yet: let this lane's batch go, ask again soon */
            if (!flushed && !push_event(ln, ITEM_FLUSH, NULL))
                break;
            flushed = 1;
            for (int i = 0; i < 5 && !atomic_load(&p->cancel); i++)
                nanosleep(&(struct timespec){0, 50000000L}, NULL);
            continue;
        }
        flushed = 0;
        if (rc < 0) {
            vfi_pl_stop(p, rc, err.msg);
            break;
        }
        if (w->skip || w->fail) {
            if (!push_event(ln, ITEM_SKIP, w))
                break;
            continue;
        }
        if (!decode_file(ln, w))
            break;
    }
    vfi_queue_close(ln->q_frames);
    return NULL;
}

/* ---- convert thread and its workers ----------------------------------------------------- */

/* The batch being filled, taken from the free pool when needed; NULL when stopping. */
static batch_item *current_batch(lane *ln, batch_item **b)
{
    if (!*b) {
        void *bs;
        if (vfi_queue_pop(ln->p->q_free_batches, &bs) < 0)
            return NULL;
        *b = bs;
        (*b)->hdr.kind = ITEM_BATCH;
        (*b)->lane = ln->id;
        (*b)->n = 0;
        (*b)->n_marks = 0;
        (*b)->settled = 0;
        (*b)->pending = 0;
        vfi_err_clear(&(*b)->err);
    }
    return *b;
}

typedef struct convert_worker {
    vf_pipeline *p;
    vf_preproc *pre;
    vf_converter *cv;
    float *scratch;
} convert_worker;

/* Convert fi's frame into its row of the batch input: by the backend where it converts frames
 * (a GPU: the picture uploaded, or read where the hardware decoder left it), else on the host,
 * straight into the row when the input is host memory and through the worker's scratch slot
 * when it is not. */
static vf_status convert_frame(vf_pipeline *p, convert_worker *w, frame_item *fi, vf_err *err)
{
    vf_backend *be = vfi_extractor_backend(p->ex);
    const size_t slot = vfi_pl_slot_floats(p);
    float *row = (float *)fi->b->images + (size_t)fi->slot * slot;
    vf_status rc;
    if (be->ops->convert && !fi->b->host) {
        vf_yuv_params q;
        vf_yuv_planes planes;
        rc = vfi_preproc_yuv(&p->po, &fi->f, fi->rotation, &q, &planes, err);
        if (rc >= 0)
            rc = be->ops->convert(be, w->cv, &q, &planes, vfi_frame_on_device(&fi->f), row, err);
        if (rc != VF_ERR_UNSUPPORTED)
            return rc;
        vfi_err_clear(err); /* planes the backend cannot read: the host converts them */
    }
    rc = vfi_frame_download(&fi->f, err);
    if (rc < 0)
        return rc;
    if (fi->b->host || vfi_backend_input_host(be))
        return vfi_preproc_frame(w->pre, &fi->f, fi->rotation, row, err);
    rc = vfi_preproc_frame(w->pre, &fi->f, fi->rotation, w->scratch, err);
    if (rc >= 0)
        rc = vfi_backend_copy(be, w->cv, row, w->scratch, slot * sizeof(float), 1, err);
    return rc;
}

/* A worker converts whole frames into their rows, so the result never depends on how many
 * workers there are (swscale's own slice threads change the last bits with the slice count). */
static void *convert_worker_thread(void *arg)
{
    convert_worker *w = arg;
    vf_pipeline *p = w->p;
    vfi_pl_lower_priority();
    for (;;) {
        void *it;
        if (vfi_queue_pop(p->q_jobs, &it) != VF_OK)
            return NULL; /* closed and drained (VF_EOF), or stopping */
        frame_item *fi = it;
        batch_item *b = fi->b;
        vf_err e = {VF_OK, ""};
        double t0 = vfi_now_s();
        vf_status rc = convert_frame(p, w, fi, &e);
        double dt = vfi_now_s() - t0;
        vfi_frame_release(&fi->f);
        pthread_mutex_lock(&p->conv_lock);
        b->conv_s[fi->slot] = dt;
        b->conv_rc[fi->slot] = rc < 0 ? rc : VF_OK;
        if (rc < 0 && b->err.code == VF_OK)
            b->err = e;
        if (--b->pending == 0)
            pthread_cond_broadcast(&p->conv_done);
        pthread_mutex_unlock(&p->conv_lock);
        if (vfi_queue_push(fi->lane->q_free_frames, fi) < 0)
            return NULL;
    }
}

/* After wait_converted: account the rows converted since the last settle (all of the current
 * file: every END settles) to *busy, and drop the ones that failed - their rows, their
 * per-frame-baseline tokens - keeping the first error in *file_err. 0 when the rows could not
 * be moved (the run is then stopping). */
static int settle(vf_pipeline *p, batch_item *b, double *busy, vf_err *file_err)
{
    const size_t slot = vfi_pl_row_floats(p);
    vf_backend *be = vfi_extractor_backend(p->ex);
    int dropped = 0;
    for (int i = b->settled; i < b->n; i++) {
        *busy += b->conv_s[i] / p->n_conv; /* the stage's time: the workers run side by side */
        dropped += b->conv_rc[i] < 0;
    }
    if (dropped) {
        if (file_err->code == VF_OK)
            *file_err = b->err; /* the rest of the file's frames still count; END says failed */
        vfi_err_clear(&b->err);
        /* No event marker needs moving: an END settles before its marker is placed, and BEGIN
         * and SKIP markers come after an END (or open the run), so every marker sits at or
         * before `settled` and only rows after it are dropped. */
        int w = b->settled;
        for (int i = b->settled; i < b->n; i++) {
            if (b->conv_rc[i] < 0)
                continue;
            if (w != i) {
                float *rows = b->images;
                vf_err err = {VF_OK, ""};
                if (vfi_backend_copy(be, NULL, rows + (size_t)w * slot, rows + (size_t)i * slot,
                                     slot * sizeof(float), 0, &err) < 0) {
                    vfi_pl_stop(p, err.code, err.msg);
                    return 0;
                }
                b->index[w] = b->index[i];
                b->pts[w] = b->pts[i];
                b->t[w] = b->t[i];
                if (b->t_end)
                    b->t_end[w] = b->t_end[i];
                b->work[w] = b->work[i];
            }
            w++;
        }
        b->n = w;
        vfi_pl_give_tokens(p, dropped);
    }
    b->settled = b->n;
    return 1;
}

/* Batches are filled across file boundaries, so an archive of short clips still runs full
 * batches; per-file events ride inside them as markers, in order. Frames are handed to the
 * workers with their row, so they convert in parallel and in any order; a batch goes on once
 * its rows are all converted (settled), and so does a file's END (its error and busy time). */
static void *convert_thread(void *arg)
{
    lane *ln = arg;
    vf_pipeline *p = ln->p;
    vfi_pl_lower_priority();
    batch_item *b = NULL;
    int rotation = 0;
    double busy = 0.0;
    vf_err conv_err = {VF_OK, ""};
    for (;;) {
        void *it;
        vf_status rc = vfi_queue_pop(ln->q_frames, &it);
        if (rc == VF_EOF)
            break;
        if (rc < 0)
            return NULL;
        item *h = it;
        if (h->kind == ITEM_FLUSH) {
            vfi_pl_free_event(p, it);
            if (b && (!vfi_pl_wait_converted(p, b) || !settle(p, b, &busy, &conv_err)))
                return NULL;
            if (b && (b->n || b->n_marks)) {
                if (vfi_queue_push(p->q_batches, b) < 0)
                    return NULL;
                b = NULL;
            }
            continue;
        }
        if (!current_batch(ln, &b)) {
            if (h->kind == ITEM_FRAME)
                vfi_frame_release(&((frame_item *)it)->f);
            return NULL;
        }
        if (h->kind == ITEM_FRAME && p->info.frames) {
            if (!vfi_pl_window_frame(ln, it, rotation) ||
                !vfi_pl_take_window(ln, b, h->work, 0, &busy, &conv_err))
                return NULL;
        } else if (h->kind == ITEM_FRAME && p->audio) {
            if (!vfi_pl_take_patch(ln, b, it))
                return NULL;
        } else if (h->kind == ITEM_FRAME) {
            frame_item *fi = it;
            fi->b = b;
            fi->slot = b->n;
            fi->rotation = rotation;
            b->index[b->n] = fi->f.index;
            b->pts[b->n] = fi->f.pts;
            b->t[b->n] = fi->f.t;
            b->work[b->n] = h->work;
            b->n++;
            pthread_mutex_lock(&p->conv_lock);
            b->pending++;
            pthread_mutex_unlock(&p->conv_lock);
            if (vfi_queue_push(p->q_jobs, fi) < 0)
                return NULL;
        } else {
            event_item *e = it;
            if (h->kind == ITEM_BEGIN) {
                rotation = e->meta.rotation;
                busy = 0.0;
                vfi_err_clear(&conv_err);
                vfi_windows_begin(&ln->win);
                ln->ring_accounted = 0;
            } else if (h->kind == ITEM_END) {
                /* a clip model: the file's last window, then no frame of it left converting */
                if (p->info.frames && (!vfi_pl_take_window(ln, b, h->work, 1, &busy, &conv_err) ||
                                       !vfi_pl_wait_converted(p, &ln->ring)))
                    return NULL;
                if (!vfi_pl_wait_converted(p, b) || !settle(p, b, &busy, &conv_err))
                    return NULL;
                e->convert_s = busy;
                if (conv_err.code < 0 && e->status >= 0) {
                    e->status = conv_err.code;
                    snprintf(e->error, sizeof(e->error), "%s", conv_err.msg);
                }
            }
            b->marks[b->n_marks].pos = b->n;
            b->marks[b->n_marks++].event = e;
        }
        if (b->n == p->info.batch_size || b->n_marks == MAX_MARKS) {
            if (!vfi_pl_wait_converted(p, b) || !settle(p, b, &busy, &conv_err))
                return NULL;
            if (b->n == p->info.batch_size || b->n_marks == MAX_MARKS) { /* none dropped */
                if (vfi_queue_push(p->q_batches, b) < 0)
                    return NULL;
                b = NULL;
            }
        }
    }
    if (b && (!vfi_pl_wait_converted(p, b) || !settle(p, b, &busy, &conv_err)))
        return NULL;
    if (b && (b->n || b->n_marks)) {
        if (vfi_queue_push(p->q_batches, b) < 0)
            return NULL;
    } else if (b) {
        vfi_queue_push(p->q_free_batches, b);
    }
    if (atomic_fetch_sub(&p->live_lanes, 1) == 1) { /* the last lane: no more jobs or batches */
        vfi_queue_close(p->q_jobs);
        vfi_queue_close(p->q_batches);
    }
    return NULL;
}

/* ---- infer thread ----------------------------------------------------------------------- */

static void *infer_thread(void *arg)
{
    vf_pipeline *p = arg;
    vf_backend *be = vfi_extractor_backend(p->ex);
    double busy[MAX_LANES] = {0}; /* per lane: of the file whose END comes next */
    for (;;) {
        void *it;
        vf_status rc = vfi_queue_pop(p->q_batches, &it);
        if (rc == VF_EOF)
            break;
        if (rc < 0)
            return NULL;
        batch_item *b = it;
        double dt = 0.0;
        if (b->n > 0) {
            double t0 = vfi_now_s();
            rc = vfi_extractor_run_input(p->ex, b->images, b->features, b->n);
            dt = vfi_now_s() - t0;
            if (rc < 0) {
                if (rc != VF_ERR_CANCELLED)
                    vfi_pl_stop(p, rc, be->err.msg);
                return NULL;
            }
        }
        /* Share the batch's time among its files by rows, for the per-file rates. */
        int row = 0;
        double *lane_busy = &busy[b->lane];
        for (int m = 0; m <= b->n_marks; m++) {
            int until = m < b->n_marks ? b->marks[m].pos : b->n;
            *lane_busy += b->n ? dt * (until - row) / b->n : 0.0;
            row = until;
            if (m == b->n_marks)
                break;
            event_item *e = b->marks[m].event;
            if (e->hdr.kind == ITEM_BEGIN)
                *lane_busy = 0.0;
            else if (e->hdr.kind == ITEM_END)
                e->infer_s = *lane_busy;
        }
        if (vfi_queue_push(p->q_done, it) < 0)
            return NULL;
    }
    vfi_queue_close(p->q_done);
    return NULL;
}

/* ---- setup and teardown ----------------------------------------------------------------- */

static void free_run(vf_pipeline *p)
{
    /* detached under the lock first, so that a concurrent vfi_pl_stop() finds them or nothing */
    pthread_mutex_lock(&p->lock);
    lane *lanes = p->lanes;
    int n_lanes = p->n_lanes;
    vf_queue *qs[] = {p->q_batches, p->q_done, p->q_free_batches, p->q_tokens, p->q_jobs};
    p->lanes = NULL;
    p->n_lanes = 0;
    p->q_batches = p->q_done = p->q_free_batches = p->q_tokens = p->q_jobs = NULL;
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; lanes && k < n_lanes; k++) {
        lane *ln = &lanes[k];
        vfi_queue_free(&ln->q_frames);
        vfi_queue_free(&ln->q_free_frames);
        for (int i = 0; ln->frames && i < ln->n_frames; i++) {
            vfi_frame_destroy(&ln->frames[i].f);
            vfi_free(ln->frames[i].patch);
        }
        vfi_free(ln->frames);
        vfi_free(ln->ring.images);
        vfi_free(ln->ring.index);
        vfi_free(ln->ring.pts);
        vfi_free(ln->ring.t);
        vfi_free(ln->ring.conv_rc);
        vfi_free(ln->ring.conv_s);
        vfi_free(ln->window_row);
    }
    vfi_free(lanes);
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
        vfi_queue_free(&qs[i]);
    if (p->batches) {
        for (int i = 0; i < p->n_batches; i++) {
            batch_item *b = &p->batches[i];
            vfi_backend_input_free(vfi_extractor_backend(p->ex), b->images);
            vfi_backend_host_free(vfi_extractor_backend(p->ex), b->features);
            vfi_free(b->index);
            vfi_free(b->pts);
            vfi_free(b->t);
            vfi_free(b->t_end);
            vfi_free(b->work);
            vfi_free(b->conv_rc);
            vfi_free(b->conv_s);
        }
        vfi_free(p->batches);
        p->batches = NULL;
    }
    while (p->events)
        vfi_pl_free_event(p, p->events);
}

/* A lane's frame pool: FRAME_POOL decoded ahead, and one more in flight per worker. */
static int lane_frames(const vf_pipeline *p)
{
    return FRAME_POOL + p->n_conv;
}

/* A clip model's lane: the ring its frames wait in for their windows (host memory, one picture
 * per frame of a window), and a window's row laid out on the host when the batch input is not
 * host memory. */
static vf_status make_ring(vf_pipeline *p, lane *ln)
{
    size_t n = (size_t)p->info.frames;
    batch_item *r = &ln->ring;
    r->hdr.kind = ITEM_BATCH;
    r->host = 1;
    r->lane = ln->id;
    r->images = vfi_aligned_alloc(VF_TENSOR_ALIGN, n * vfi_pl_slot_floats(p) * sizeof(float));
    r->index = vfi_mallocarray(n, sizeof(int64_t));
    r->pts = vfi_mallocarray(n, sizeof(int64_t));
    r->t = vfi_mallocarray(n, sizeof(double));
    r->conv_rc = vfi_mallocarray(n, sizeof(vf_status));
    r->conv_s = vfi_mallocarray(n, sizeof(double));
    if (!r->images || !r->index || !r->pts || !r->t || !r->conv_rc || !r->conv_s)
        return VF_ERR_NOMEM;
    if (!vfi_backend_input_host(vfi_extractor_backend(p->ex)) &&
        !(ln->window_row =
              vfi_aligned_alloc(VF_TENSOR_ALIGN, vfi_pl_row_floats(p) * sizeof(float))))
        return VF_ERR_NOMEM;
    ln->win.frames = p->info.frames;
    ln->win.stride = p->window_stride;
    return VF_OK;
}

/* The run's pools and queues; called with p->lock held (see vfi_pl_stop). */
static vf_status make_run(vf_pipeline *p)
{
    int depth = p->cfg.queue_depth > 0 ? p->cfg.queue_depth : DEFAULT_QUEUE_DEPTH;
    int bs = p->info.batch_size, dim = p->info.feature_dim;
    size_t slot = vfi_pl_row_floats(p);
    /* one lane per file at most; the per-frame baseline takes one frame at a time */
    int files = p->source->size_hint;
    p->n_lanes = p->cfg.no_overlap                      ? 1
                 : files < 0 || p->lanes_wanted < files ? p->lanes_wanted
                                                        : files;
    p->n_lanes = p->n_lanes < 1 ? 1 : p->n_lanes;
    atomic_store(&p->live_lanes, p->n_lanes);
    /* events ride the same queues: leave room for them beside the items */
    size_t cap_batches = (size_t)depth + 8;
    /* one being filled per lane, one in inference, one being stored */
    p->n_batches = depth + 2 + p->n_lanes;
    p->lanes = vfi_calloc((size_t)p->n_lanes, sizeof(lane));
    p->batches = vfi_calloc((size_t)p->n_batches, sizeof(batch_item));
    if (!p->lanes || !p->batches ||
        vfi_queue_create((size_t)(lane_frames(p) * p->n_lanes), &p->q_jobs) < 0 ||
        vfi_queue_create(cap_batches, &p->q_batches) < 0 ||
        vfi_queue_create(cap_batches, &p->q_done) < 0 ||
        vfi_queue_create((size_t)p->n_batches, &p->q_free_batches) < 0)
        return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
    for (int k = 0; k < p->n_lanes; k++) {
        lane *ln = &p->lanes[k];
        ln->p = p;
        ln->id = k;
        ln->n_frames = lane_frames(p);
        ln->frames = vfi_calloc((size_t)ln->n_frames, sizeof(frame_item));
        if (!ln->frames || vfi_queue_create((size_t)ln->n_frames + 4, &ln->q_frames) < 0 ||
            vfi_queue_create((size_t)ln->n_frames, &ln->q_free_frames) < 0)
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
        for (int i = 0; i < ln->n_frames; i++) {
            if (vfi_frame_init(&ln->frames[i].f) < 0)
                return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
            ln->frames[i].hdr.kind = ITEM_FRAME;
            ln->frames[i].lane = ln;
            if (p->audio && !(ln->frames[i].patch = vfi_mallocarray(slot, sizeof(float))))
                return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
            vfi_queue_push(ln->q_free_frames, &ln->frames[i]);
        }
        if (p->info.frames && make_ring(p, ln) < 0)
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory for a window's frames");
    }
    for (int i = 0; i < p->n_batches; i++) {
        batch_item *b = &p->batches[i];
        /* the backend's kind of memory: a GPU's own, or pinned for faster copies; zeroed, for
         * the padding of a short batch is fed to the network too */
        vf_backend *be = vfi_extractor_backend(p->ex);
        b->images = vfi_backend_input_alloc(be, (size_t)bs * slot * sizeof(float));
        b->features = vfi_backend_host_alloc(be, (size_t)bs * dim * sizeof(float));
        b->index = vfi_mallocarray((size_t)bs, sizeof(int64_t));
        b->pts = vfi_mallocarray((size_t)bs, sizeof(int64_t));
        b->t = vfi_mallocarray((size_t)bs, sizeof(double));
        if ((p->info.frames || p->audio) &&
            !(b->t_end = vfi_mallocarray((size_t)bs, sizeof(double))))
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory for batch buffers");
        b->work = vfi_mallocarray((size_t)bs, sizeof(*b->work));
        b->conv_rc = vfi_mallocarray((size_t)bs, sizeof(vf_status));
        b->conv_s = vfi_mallocarray((size_t)bs, sizeof(double));
        if (!b->images || !b->features || !b->index || !b->pts || !b->t || !b->work ||
            !b->conv_rc || !b->conv_s)
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory for batch buffers");
        vfi_queue_push(p->q_free_batches, b);
    }
    if (p->cfg.no_overlap) {
        if (vfi_queue_create((size_t)bs, &p->q_tokens) < 0)
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
        vfi_pl_give_tokens(p, bs);
    }
    return VF_OK;
}

/* Run the stages over the files src hands out (see the top of this file). The run's state was
 * reset by the caller (a cancel since then stops it). */
static vf_status run_source(vf_pipeline *p, vf_source *src, const vf_run_hooks *hooks)
{
    p->source = src;
    p->hooks = hooks;
    pthread_mutex_lock(&p->lock);
    vf_status rc = make_run(p);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        free_run(p);
        return rc;
    }
    /* decode and convert per lane, infer, store, the convert workers */
    pthread_t th[2 * MAX_LANES + 2 + MAX_CONVERT_THREADS];
    convert_worker workers[MAX_CONVERT_THREADS];
    const int lanes = 2 * p->n_lanes, total = lanes + 2 + p->n_conv;
    int started = 0;
    for (; started < total; started++) {
        void *(*fn)(void *);
        void *arg = p;
        if (started < lanes) {
            fn = started % 2 ? convert_thread : decode_thread;
            arg = &p->lanes[started / 2];
        } else if (started < lanes + 2) {
            fn = started == lanes ? infer_thread : vfi_pl_store_thread;
        } else {
            int w = started - lanes - 2;
            workers[w] = (convert_worker){p, p->pre[w], p->cv[w], p->scratch[w]};
            fn = convert_worker_thread;
            arg = &workers[w];
        }
        if (pthread_create(&th[started], NULL, fn, arg) != 0) {
            vfi_pl_stop(p, VF_ERR_INTERNAL, "cannot start a pipeline thread");
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    vfi_extractor_end_run(p->ex);
    pthread_mutex_lock(&p->lock);
    rc = p->stop_reason;
    pthread_mutex_unlock(&p->lock);
    free_run(p);
    p->source = NULL;
    return rc;
}

/* Reset the run's state (a cancel from now on stops the run). */
static void start_run(vf_pipeline *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop_reason = VF_OK;
    vfi_err_clear(&p->err);
    atomic_store(&p->cancel, 0);
    pthread_mutex_unlock(&p->lock);
}

/* Run src, just made with status made (its failure, or a cancel that came meanwhile, ends the
 * run at once), and free it. */
static vf_status run_made_source(vf_pipeline *p, vf_status made, vf_source *src,
                                 const vf_run_hooks *hooks)
{
    if (made >= 0 && atomic_load(&p->cancel))
        made = VF_ERR_CANCELLED;
    if (made >= 0)
        made = run_source(p, src, hooks);
    vfi_source_free(&src);
    return made;
}

/* Run the files of a lease source (paths NULL: the queue). */
static vf_status run_leased(vf_pipeline *p, const char *const *paths, int n,
                            const vf_run_hooks *hooks)
{
    vf_lease_opts o = {
        p->db_path, p->model_id,    p->sampling,         vf_precision_str(p->info.precision),
        p->root,    p->cfg.lease_s, p->cfg.max_attempts, p->cfg.force,
        &p->cancel};
    vf_source *src = NULL;
    vf_status rc = vfi_lease_source_create(&o, paths, n, &src, &p->err);
    return run_made_source(p, rc, src, hooks);
}

vf_status vf_pipeline_run(vf_pipeline *p, const char *const *paths, int n_paths,
                          const vf_run_hooks *hooks)
{
    if (!p || (!paths && n_paths) || n_paths < 0)
        return VF_ERR_INVALID;
    start_run(p);
    if (p->store) /* claimed one by one: other workers may share the files */
        return run_leased(p, paths ? paths : (const char *const[]){NULL}, n_paths, hooks);
    vf_source *src = NULL;
    vf_status rc = vfi_list_source_create(paths, n_paths, &src, &p->err);
    return run_made_source(p, rc, src, hooks);
}

vf_status vf_pipeline_run_queue(vf_pipeline *p, const vf_run_hooks *hooks)
{
    if (!p)
        return VF_ERR_INVALID;
    start_run(p);
    if (!p->store)
        return vfi_fail(&p->err, VF_ERR_INVALID, "working through a queue needs a database");
    return run_leased(p, NULL, 0, hooks);
}

/* ---- create / free ---------------------------------------------------------------------- */

vf_status vf_pipeline_create(const vf_config *cfg, vf_pipeline **out)
{
    if (!out)
        return VF_ERR_INVALID;
    *out = NULL;
    if (!cfg)
        return VF_ERR_INVALID;
    vf_pipeline *p = vfi_calloc(1, sizeof(*p));
    if (!p)
        return VF_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->conv_lock, NULL);
    pthread_cond_init(&p->conv_done, NULL);
    *out = p;
    p->cfg = *cfg;
    if (cfg->sample_fps < 0 || cfg->every < 0 || cfg->start < 0 || cfg->duration < 0 ||
        cfg->max_frames < 0 || cfg->queue_depth < 0 || cfg->queue_depth > 64 ||
        cfg->decode_threads < 0 || cfg->decode_threads > 64 || cfg->convert_threads < 0 ||
        cfg->convert_threads > MAX_CONVERT_THREADS || cfg->decoders < 0 ||
        cfg->decoders > MAX_LANES || !(cfg->stall_timeout >= 0) || cfg->max_pixels < 0 ||
        cfg->max_streams < 0 || !isfinite(cfg->sample_fps) || !isfinite(cfg->start) ||
        !isfinite(cfg->duration) || !isfinite(cfg->max_duration))
        return vfi_fail(&p->err, VF_ERR_INVALID, "invalid sampling or queue settings");
    if (cfg->db_path && !(p->db_path = vfi_strdup(cfg->db_path)))
        return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
    p->cfg.db_path = p->db_path;
    if (cfg->root && !(p->root = vfi_record_root(cfg->root)))
        return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
    p->cfg.root = p->root;
    if (p->root && vfi_archive_init(&p->archive, p->root, cfg->follow_links_outside, &p->err) < 0)
        return p->err.code;
    if (!(cfg->lease_s >= 1.0 && cfg->lease_s <= 86400.0) || cfg->max_attempts < 1)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "the lease must be 1 to 86400 seconds and max attempts at least 1");
    p->cfg.model = p->cfg.models_dir = p->cfg.layer = p->cfg.backend = NULL; /* not kept */
    p->cfg.hwdec = p->cfg.int8_scales = NULL;
    if (cfg->hwdec && cfg->hwdec[0] && strcmp(cfg->hwdec, "none")) {
        vf_status rc = vfi_hwdev_open(cfg->hwdec, &p->hw, &p->err);
        if (rc < 0)
            return rc;
    }

    vf_status rc = vf_extractor_create(cfg, &p->ex);
    if (rc < 0) {
        vfi_fail(&p->err, rc, "%s", p->ex ? vf_extractor_errmsg(p->ex) : "out of memory");
        return rc;
    }
    vf_extractor_info(p->ex, &p->info);
    p->audio = vfi_extractor_audio(p->ex);
    vfi_extractor_backend(p->ex)->cancel = &p->cancel;
    rc = p->audio ? vfi_pl_check_sound(p, cfg) : vfi_pl_check_window(p, cfg);
    if (rc >= 0)
        rc = vfi_pl_check_shots(p, cfg);
    if (rc < 0)
        return rc;
    vfi_record_sampling(cfg, p->info.frames, p->audio, p->sampling, sizeof(p->sampling));
    vf_preproc_opts *po = &p->po;
    po->size = p->info.input_size;
    po->resize = p->info.resize;
    po->resize_short = p->info.resize_short;
    po->resize_to[0] = p->info.resize_to[0];
    po->resize_to[1] = p->info.resize_to[1];
    po->order = p->info.channel_order;
    memcpy(po->mean, p->info.mean, sizeof(po->mean));
    memcpy(po->std, p->info.std, sizeof(po->std));
    p->n_conv = cfg->convert_threads;
    if (p->n_conv == 0) {
        /* on the CPU the network needs the cores; a GPU network waits for frames instead (half
         * the CPUs this process may use convert them) */
        vf_cpu_budget cpus;
        vfi_cpu_budget(&cpus);
        p->n_conv = p->info.device ? cpus.cpus / 2 : 1;
        p->n_conv = p->n_conv < 1 ? 1 : p->n_conv > 8 ? 8 : p->n_conv;
    }
    p->lanes_wanted = cfg->decoders ? cfg->decoders : p->info.device ? GPU_LANES : 1;
    p->pre = vfi_calloc((size_t)p->n_conv, sizeof(*p->pre));
    p->cv = vfi_calloc((size_t)p->n_conv, sizeof(*p->cv));
    p->scratch = vfi_calloc((size_t)p->n_conv, sizeof(*p->scratch));
    if (!p->pre || !p->cv || !p->scratch)
        return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
    vf_backend *be = vfi_extractor_backend(p->ex);
    for (int i = 0; !p->audio && i < p->n_conv; i++) { /* patches need no conversion */
        rc = vfi_preproc_create(po, &p->pre[i], &p->err);
        if (rc >= 0 && be->ops->convert)
            rc = be->ops->converter_new(be, &p->cv[i], &p->err);
        if (rc < 0)
            return rc;
        if (!vfi_backend_input_host(be) &&
            !(p->scratch[i] =
                  vfi_aligned_alloc(VF_TENSOR_ALIGN, vfi_pl_slot_floats(p) * sizeof(float))))
            return vfi_fail(&p->err, VF_ERR_NOMEM, "out of memory");
    }
    /* NVDEC's frames are converted where they are when the backend can read them there */
    p->keep_on_device = p->hw && be->ops->convert && !vfi_backend_input_host(be);
    if ((rc = vfi_pl_check_batch_memory(p)) < 0)
        return rc;
    if (p->db_path) {
        rc = vfi_store_open(p->db_path, VF_STORE_WRITE, &p->store, &p->err);
        if (rc < 0)
            return rc;
        char sha[65], text_sha[65], prep[256];
        vf_store_model m;
        rc = vfi_record_model(&p->info, p->audio, p->cfg.store_f16, &m, sha, prep, sizeof(prep),
                              &p->err);
        if (rc >= 0)
            rc = vfi_record_text_tower(&p->info, &m, text_sha, &p->err);
        if (rc < 0)
            return rc;
        rc = vfi_store_model(p->store, &m, &p->model_id, &p->err);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

const vf_audio_spec *vfi_pl_audio(const vf_pipeline *p)
{
    return p->audio;
}

vf_status vf_pipeline_info(const vf_pipeline *p, vf_model_info *info)
{
    if (!p || !info || !p->ex)
        return VF_ERR_INVALID;
    return vf_extractor_info(p->ex, info); /* the calibration's fields change while running */
}

const char *vf_pipeline_errmsg(const vf_pipeline *p)
{
    return p ? p->err.msg : "out of memory";
}

void vf_pipeline_free(vf_pipeline **pp)
{
    vf_pipeline *p = pp ? *pp : NULL;
    if (!p)
        return;
    vfi_store_close(&p->store);
    vf_backend *be = p->ex ? vfi_extractor_backend(p->ex) : NULL;
    for (int i = 0; i < p->n_conv; i++) {
        if (p->pre)
            vfi_preproc_free(&p->pre[i]);
        if (p->cv && p->cv[i])
            be->ops->converter_free(be, p->cv[i]);
        if (p->scratch)
            vfi_free(p->scratch[i]);
    }
    vfi_free(p->pre);
    vfi_free(p->cv);
    vfi_free(p->scratch);
    vf_extractor_free(&p->ex);
    vfi_hwdev_free(&p->hw);
    vfi_free(p->db_path);
    vfi_free(p->root);
    vfi_archive_clear(&p->archive);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->conv_lock);
    pthread_cond_destroy(&p->conv_done);
    vfi_free(p);
    *pp = NULL;
}

int vf_probe_media(const char *path)
{
    return path && vfi_decode_probe(path, NULL) == VF_PROBE_VIDEO;
}

vf_status vf_parse_time(const char *text, double *seconds)
{
    return seconds ? vfi_parse_time(text, seconds) : VF_ERR_INVALID;
}
