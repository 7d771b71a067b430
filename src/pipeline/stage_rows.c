/*
 * stage_rows.c - the convert stage's rows that are not one picture each (stages.h): a clip
 * model's windows of converted frames (window.h) and an audio model's patches of log-mel frames
 * (sound.h), each placed as the next row of a batch; and the sizes and the wait every row
 * shares.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "core/clock.h"
#include "pipeline/stages.h"

size_t vfi_pl_slot_floats(const vf_pipeline *p)
{
    return (size_t)3 * p->info.input_size * p->info.input_size;
}

size_t vfi_pl_row_floats(const vf_pipeline *p)
{
    return vfi_extractor_input_floats(&p->info);
}

int vfi_pl_wait_converted(vf_pipeline *p, batch_item *b)
{
    pthread_mutex_lock(&p->conv_lock);
    while (b->pending > 0 && !atomic_load(&p->cancel))
        pthread_cond_wait(&p->conv_done, &p->conv_lock);
    int done = b->pending == 0;
    pthread_mutex_unlock(&p->conv_lock);
    return done;
}

/* Hand fi to the workers to be converted into its slot of the lane's ring; a frame no window
 * holds goes back to the pool unconverted. 0 when the run is stopping. */
int vfi_pl_window_frame(lane *ln, frame_item *fi, int rotation)
{
    int slot = vfi_windows_add(&ln->win);
    if (slot < 0) {
        vfi_frame_release(&fi->f);
        return vfi_queue_push(ln->q_free_frames, fi) >= 0;
    }
    batch_item *r = &ln->ring;
    fi->b = r;
    fi->slot = slot;
    fi->rotation = rotation;
    r->index[slot] = fi->f.index;
    r->pts[slot] = fi->f.pts;
    r->t[slot] = fi->f.t;
    pthread_mutex_lock(&ln->p->conv_lock);
    r->pending++;
    pthread_mutex_unlock(&ln->p->conv_lock);
    return vfi_queue_push(ln->p->q_jobs, fi) >= 0;
}

/* The window ready after the frames so far (at_end: the file has ended; at most one is ready
 * at a time), once its frames are converted, as the next row of b: the row holds its frames,
 * its index, pts and time its first frame's, its end time its last frame's. A window with a
 * frame that failed to convert is left out, the error kept in *file_err. 0 when the run is
 * stopping. */
int vfi_pl_take_window(lane *ln, batch_item *b, vf_work *work, int at_end, double *busy,
                       vf_err *file_err)
{
    vf_pipeline *p = ln->p;
    batch_item *r = &ln->ring;
    vf_window_span span;
    if (!vfi_windows_next(&ln->win, at_end, &span))
        return 1;
    if (!vfi_pl_wait_converted(p, r))
        return 0;
    int failed = 0;
    for (int k = 0; k < span.count; k++) {
        int slot = vfi_windows_slot(&ln->win, span.first + k);
        if (span.first + k >= ln->ring_accounted) /* the stage's time, each frame once */
            *busy += r->conv_s[slot] / p->n_conv;
        failed |= r->conv_rc[slot] < 0;
    }
    if (span.first + span.count > ln->ring_accounted)
        ln->ring_accounted = span.first + span.count;
    if (failed) {
        if (file_err->code == VF_OK)
            *file_err = r->err; /* the file fails; its other windows still count */
        vfi_err_clear(&r->err);
        return 1;
    }
    vf_backend *be = vfi_extractor_backend(p->ex);
    float *row = (float *)b->images + (size_t)b->n * vfi_pl_row_floats(p);
    size_t plane = vfi_pl_slot_floats(p) / 3;
    if (vfi_backend_input_host(be)) {
        vfi_windows_put(&ln->win, &span, r->images, plane, row);
    } else {
        vf_err err = {VF_OK, ""};
        vfi_windows_put(&ln->win, &span, r->images, plane, ln->window_row);
        if (vfi_backend_copy(be, NULL, row, ln->window_row, vfi_pl_row_floats(p) * sizeof(float), 0,
                             &err) < 0) {
            vfi_pl_stop(p, err.code, err.msg);
            return 0;
        }
    }
    int first = vfi_windows_slot(&ln->win, span.first);
    int last = vfi_windows_slot(&ln->win, span.first + span.count - 1);
    b->index[b->n] = r->index[first];
    b->pts[b->n] = r->pts[first];
    b->t[b->n] = r->t[first];
    b->t_end[b->n] = r->t[last];
    b->work[b->n] = work;
    b->conv_rc[b->n] = VF_OK;
    b->conv_s[b->n] = 0.0;
    b->n++;
    return 1;
}

/* fi's patch into the next row of b (a copy: the decode thread made its values), and fi back to
 * its pool; 0 when the run is stopping. */
int vfi_pl_take_patch(lane *ln, batch_item *b, frame_item *fi)
{
    vf_pipeline *p = ln->p;
    const size_t row = vfi_pl_row_floats(p);
    vf_err err = {VF_OK, ""};
    double t0 = vfi_now_s();
    if (vfi_backend_copy(vfi_extractor_backend(p->ex), NULL, (float *)b->images + b->n * row,
                         fi->patch, row * sizeof(float), 1, &err) < 0) {
        vfi_pl_stop(p, err.code, err.msg);
        return 0;
    }
    b->conv_s[b->n] = vfi_now_s() - t0;
    b->conv_rc[b->n] = VF_OK;
    b->index[b->n] = fi->f.index;
    b->pts[b->n] = fi->f.pts;
    b->t[b->n] = fi->f.t;
    b->t_end[b->n] = fi->t_end;
    b->work[b->n] = fi->hdr.work;
    b->n++;
    return vfi_queue_push(ln->q_free_frames, fi) >= 0;
}
