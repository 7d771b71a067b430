/*
 * rows_capture.h - for pipeline tests: every file's rows (frame numbers, timestamps, vectors) and
 * outcome as the run hooks deliver them, checking on the way that a file's rows never come after
 * its outcome, and a run of the pipeline into such a capture.
 */
#ifndef VIDFEAT_ROWS_CAPTURE_H
#define VIDFEAT_ROWS_CAPTURE_H

#include <string.h>

#include "check.h"
#include "vidfeat.h"

#define CAP_DIM       10 /* the tiny model's vectors */
#define CAP_MAX_FILES 12
#define CAP_MAX_ROWS  64 /* per file */

typedef struct file_rows {
    int n;
    int64_t index[CAP_MAX_ROWS];
    double t[CAP_MAX_ROWS];
    float vec[CAP_MAX_ROWS][CAP_DIM];
    int reported;
    vf_status status;
    int64_t frames;
    char hwdec[16];
} file_rows;

typedef struct capture {
    file_rows f[CAP_MAX_FILES];
    int last_file;    /* the file of the previous batch view */
    int switches;     /* batch views whose file differs from the previous one's */
    int cancel_after; /* batch views; 0 = never */
    int views;
} capture;

static inline int cap_on_batch(void *user, const vf_batch_view *b)
{
    capture *c = user;
    CHECK(b->file >= 0 && b->file < CAP_MAX_FILES && b->dim == CAP_DIM);
    file_rows *f = &c->f[b->file];
    CHECK_MSG(!f->reported, "rows of file %d after its outcome", b->file);
    for (int i = 0; i < b->n; i++) {
        CHECK(f->n < CAP_MAX_ROWS);
        f->index[f->n] = b->frame_index[i];
        f->t[f->n] = b->t[i];
        memcpy(f->vec[f->n++], b->features + (size_t)i * CAP_DIM, sizeof(f->vec[0]));
    }
    c->switches += b->file != c->last_file;
    c->last_file = b->file;
    return c->cancel_after && ++c->views >= c->cancel_after;
}

static inline void cap_on_file(void *user, int file, const vf_file_result *r)
{
    capture *c = user;
    CHECK(file >= 0 && file < CAP_MAX_FILES);
    file_rows *f = &c->f[file];
    CHECK_MSG(!f->reported, "file %d reported twice", file);
    f->reported = 1;
    f->status = r->skipped ? VF_OK : r->status;
    f->frames = r->frames;
    snprintf(f->hwdec, sizeof(f->hwdec), "%s", r->hwdec ? r->hwdec : "");
}

/* Run cfg on paths into c; the hooks stop the run after cancel_after batch views when it is not
 * 0. The pipeline must open (the test fails otherwise). */
static inline vf_status cap_run(const vf_config *cfg, const char *const *paths, int n, capture *c,
                                int cancel_after)
{
    memset(c, 0, sizeof(*c));
    c->last_file = -1;
    c->cancel_after = cancel_after;
    vf_pipeline *p = NULL;
    CHECK_OK(vf_pipeline_create(cfg, &p), vf_pipeline_errmsg(p));
    vf_run_hooks hooks = {c, NULL, cap_on_file, cap_on_batch};
    vf_status rc = vf_pipeline_run(p, paths, n, &hooks);
    vf_pipeline_free(&p);
    return rc;
}

#endif /* VIDFEAT_ROWS_CAPTURE_H */
