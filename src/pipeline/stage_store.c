/*
 * stage_store.c - a pipeline run's store thread: each file's extraction begun, its batches'
 * rows written (fenced by its lease), its end recorded and reported, a file that failed or was
 * refused ended without losing what was written.
 */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "pipeline/stages.h"
#include "store/record.h"

typedef struct file_state {
    vf_work *work;  /* the file, from its BEGIN to its END; NULL between files */
    int64_t ext_id; /* 0: nothing recorded yet */
    int lost;       /* its lease went to another worker: nothing more is written for it */
    char lost_msg[VF_ERRMSG_SIZE];
    int64_t frames;
    double store_s;
    vf_video_meta meta;
} file_state;

static void report(vf_pipeline *p, const event_item *e, const file_state *fs, int skipped)
{
    if (!p->hooks || !p->hooks->file_done)
        return;
    vf_file_result r;
    memset(&r, 0, sizeof(r));
    const vf_work *w = e->hdr.work;
    r.path = w->path;
    r.status = skipped ? VF_OK : e->status;
    r.skipped = skipped;
    r.error = skipped || e->status >= 0 ? "" : e->error;
    r.note = skipped || e->status < 0 ? "" : e->note;
    if (skipped && w->fail) { /* failed where it was claimed (or could not be named) */
        r.status = VF_ERR_IO;
        r.skipped = 0;
        r.error = w->fail;
    }
    r.frames = fs->frames;
    r.seconds = skipped ? 0.0 : vfi_now_s() - e->t_open;
    double n = (double)fs->frames;
    r.decode_fps = e->decode_s > 0 ? (e->decoded ? e->decoded : n) / e->decode_s : 0;
    r.convert_fps = e->convert_s > 0 ? n / e->convert_s : 0;
    r.infer_fps = e->infer_s > 0 ? n / e->infer_s : 0;
    r.store_fps = p->store && fs->store_s > 0 ? n / fs->store_s : 0; /* 0: nothing stored */
    r.width = e->meta.width;
    r.height = e->meta.height;
    r.rotation = e->meta.rotation;
    r.codec = e->meta.codec;
    r.hwdec = e->meta.hwdec;
    p->hooks->file_done(p->hooks->user, e->hdr.work->index, &r);
}

/* The lease that fences a file's writes, or NULL when it was not claimed. */
static const vf_store_lease *fence_of(const vf_work *w)
{
    return w->lease.id ? &w->lease : NULL;
}

static vf_status store_begin(vf_pipeline *p, const event_item *e, file_state *fs, vf_err *err)
{
    if (!p->store)
        return VF_OK;
    const vf_video_meta *m = &e->meta;
    vf_store_video v = {vfi_record_name(&e->hdr.work->id),
                        e->size,
                        e->mtime,
                        e->content_hash,
                        m->duration,
                        m->width,
                        m->height,
                        m->rotation,
                        m->codec,
                        m->frame_rate};
    vf_store_run run = {p->info.backend, vf_precision_str(p->info.precision), p->info.batch_size};
    return vfi_store_begin(p->store, &v, p->model_id, p->sampling, &run, fence_of(e->hdr.work),
                           &fs->ext_id, err);
}

/* The file's lease went to another worker (err says so): nothing more is written for it. */
static void lose_file(file_state *fs, const vf_err *err)
{
    fs->lost = 1;
    snprintf(fs->lost_msg, sizeof(fs->lost_msg), "%s", err->msg);
}

/* Store rows [from, to) of b, which all belong to the file in fs; 1 to stop the run. */
static int store_rows(vf_pipeline *p, batch_item *b, int from, int to, file_state *fs)
{
    if (to <= from || fs->lost)
        return 0;
    vf_err err = {VF_OK, ""};
    int dim = p->info.feature_dim;
    vf_work *w = b->work[from];
    double t0 = vfi_now_s();
    vf_status rc = VF_OK;
    if (p->store)
        rc = vfi_store_batch(p->store, fs->ext_id, fence_of(w), to - from, dim, p->cfg.store_f16,
                             b->index + from, b->pts + from, b->t + from,
                             b->t_end ? b->t_end + from : NULL, b->features + (size_t)from * dim,
                             &err);
    fs->store_s += vfi_now_s() - t0;
    if (rc == VF_ERR_LEASE) { /* another worker has the file now: drop it, go on */
        lose_file(fs, &err);
        return 0;
    }
    if (rc < 0) {
        vfi_pl_stop(p, rc, err.msg);
        return 1;
    }
    fs->frames += to - from;
    int halt = 0;
    if (p->hooks && p->hooks->batch) {
        vf_batch_view v = {w->index,
                           w->path,
                           to - from,
                           dim,
                           b->features + (size_t)from * dim,
                           b->index + from,
                           b->pts + from,
                           b->t + from,
                           b->t_end ? b->t_end + from : NULL};
        halt = p->hooks->batch(p->hooks->user, &v);
    }
    if (!halt && p->hooks && p->hooks->progress) {
        double rate = p->cfg.sample_fps > 0 && fs->meta.frame_rate > p->cfg.sample_fps
                          ? p->cfg.sample_fps
                          : fs->meta.frame_rate;
        int every = p->cfg.every > 1 ? p->cfg.every : 1;
        double frames = fs->meta.duration * rate / every; /* both as the file claims */
        if (p->info.frames)                               /* a clip model's vectors are windows */
            frames = frames / p->window_stride;
        int64_t expect = frames > 0 && frames < 0x1p62 ? (int64_t)frames : 0;
        halt = p->hooks->progress(p->hooks->user, w->index, w->path, fs->frames, expect);
    }
    if (halt)
        vfi_pl_stop(p, VF_ERR_CANCELLED, "cancelled");
    return halt;
}

/* A file whose lease went to another worker (fs->lost): told as dropped, nothing more recorded
 * (the new holder replaces what was written). */
static vf_status drop_file(vf_pipeline *p, event_item *e, file_state *fs, vf_err *err)
{
    e->status = VF_ERR_LEASE;
    snprintf(e->error, sizeof(e->error), "%s", fs->lost_msg);
    report(p, e, fs, 0);
    return p->source->ops->failed(p->source, e->hdr.work, VF_ERR_LEASE, e->error, err);
}

/* Handle one per-file event; 1 to stop the run. */
static int store_event(vf_pipeline *p, event_item *e, file_state *fs)
{
    vf_err err = {VF_OK, ""};
    vf_status rc = VF_OK;
    if (e->hdr.kind == ITEM_BEGIN) {
        memset(fs, 0, sizeof(*fs));
        fs->work = e->hdr.work;
        fs->meta = e->meta;
        rc = store_begin(p, e, fs, &err);
    } else if (e->hdr.kind == ITEM_END) {
        if (p->store && fs->ext_id == 0 && !fs->lost) /* failed before it could start */
            rc = store_begin(p, e, fs, &err);
        double fps[4] = {e->decode_s > 0 ? e->decoded / e->decode_s : 0,
                         e->convert_s > 0 ? fs->frames / e->convert_s : 0,
                         e->infer_s > 0 ? fs->frames / e->infer_s : 0,
                         fs->store_s > 0 ? fs->frames / fs->store_s : 0};
        vf_store_end how = {.end = e->status >= 0               ? VF_END_DONE
                                   : e->status == VF_ERR_DENIED ? VF_END_REFUSED
                                                                : VF_END_FAILED,
                            .error = e->status >= 0 ? e->note : e->error,
                            .stage_fps = fps,
                            .shots = e->shots,
                            .n_shots = e->n_shots};
        if (rc >= 0 && p->store && !fs->lost)
            rc = vfi_store_finish(p->store, fs->ext_id, fence_of(e->hdr.work), &how, &err);
        if (rc == VF_ERR_LEASE) {
            lose_file(fs, &err);
            rc = VF_OK;
        }
        vf_source *src = p->source;
        if (rc >= 0 && fs->lost) {
            rc = drop_file(p, e, fs, &err);
        } else if (rc >= 0) {
            report(p, e, fs, 0);
            rc = e->status >= 0 ? src->ops->done(src, e->hdr.work, &err)
                                : src->ops->failed(src, e->hdr.work, e->status, e->error, &err);
        }
        memset(fs, 0, sizeof(*fs));
    } else if (e->hdr.kind == ITEM_SKIP) {
        report(p, e, fs, 1);
    }
    if (rc == VF_ERR_LEASE && e->hdr.kind == ITEM_BEGIN) { /* taken over before it began */
        lose_file(fs, &err);
        rc = VF_OK;
    }
    vfi_pl_free_event(p, e);
    if (rc < 0) {
        vfi_pl_stop(p, rc, err.msg);
        return 1;
    }
    return 0;
}

void *vfi_pl_store_thread(void *arg)
{
    vf_pipeline *p = arg;
    vfi_pl_lower_priority();
    file_state lanes[MAX_LANES]; /* the file each lane is in */
    memset(lanes, 0, sizeof(lanes));
    int halt = 0;
    while (!halt) {
        void *it;
        vf_status rc = vfi_queue_pop(p->q_done, &it);
        if (rc != VF_OK) /* VF_EOF (finished) or cancelled */
            break;
        batch_item *b = it;
        file_state *fs = &lanes[b->lane];
        int row = 0;
        for (int m = 0; m < b->n_marks && !halt; m++) {
            halt = store_rows(p, b, row, b->marks[m].pos, fs);
            row = b->marks[m].pos;
            if (!halt)
                halt = store_event(p, b->marks[m].event, fs);
        }
        if (!halt)
            halt = store_rows(p, b, row, b->n, fs);
        vfi_pl_give_tokens(p, b->n);
        if (!halt && vfi_queue_push(p->q_free_batches, b) < 0)
            break;
    }
    /* Stopped in the middle of files: they stay unfinished, with what was written. */
    for (int i = 0; i < p->n_lanes && atomic_load(&p->cancel); i++) {
        if (!lanes[i].work)
            continue;
        vf_err ignore;
        pthread_mutex_lock(&p->lock);
        char why[VF_ERRMSG_SIZE];
        snprintf(why, sizeof(why), "%s", p->err.msg);
        pthread_mutex_unlock(&p->lock);
        /* unfenced: the extraction is marked failed, and the lease given back by the source */
        if (p->store && lanes[i].ext_id && !lanes[i].lost)
            vfi_store_finish(p->store, lanes[i].ext_id, NULL,
                             &(vf_store_end){.end = VF_END_FAILED, .error = why}, &ignore);
        p->source->ops->failed(p->source, lanes[i].work, VF_ERR_CANCELLED, why, &ignore);
    }
    return NULL;
}
