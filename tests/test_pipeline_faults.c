/*
 * test_pipeline_faults.c - frames that fail to convert, injected. pipeline.c is compiled into
 * this test with vfi_preproc_frame and vfi_preproc_yuv replaced (so the static library's own
 * pipeline object is never linked), which runs the convert workers' failure path on real clips:
 * failed rows dropped from batches that span files (the kept rows moved by the backend's copy),
 * the event markers after them moved, the per-frame baseline's tokens given back, the file
 * failed with the first error and the rest of its frames kept. Both ways of converting: on the
 * host (the CPU backend) and by the backend (the reference backend converts frames itself, as
 * the GPU's does).
 */
#include <stdatomic.h>

#include "media/preprocess.h"

static int inject; /* this test's switch: fail every frame whose index is 1 mod 3 */
/* frames that came to each: which way the pipeline converts */
static atomic_int host_calls, backend_calls;

static vf_status injected_preproc(vf_preproc *p, const vf_frame *f, int rotation, float *slot,
                                  vf_err *err);
static vf_status injected_yuv(const vf_preproc_opts *o, const vf_frame *f, int rotation,
                              vf_yuv_params *q, vf_yuv_planes *planes, vf_err *err);
#define vfi_preproc_frame injected_preproc
#define vfi_preproc_yuv   injected_yuv
#include "../src/pipeline/pipeline.c"
#undef vfi_preproc_frame
#undef vfi_preproc_yuv

#include "check.h"
#include "db_check.h"

static vf_status injected_preproc(vf_preproc *p, const vf_frame *f, int rotation, float *slot,
                                  vf_err *err)
{
    atomic_fetch_add(&host_calls, 1);
    if (inject && f->index % 3 == 1)
        return vfi_fail(err, VF_ERR_DECODE, "injected failure at frame %lld", (long long)f->index);
    return vfi_preproc_frame(p, f, rotation, slot, err);
}

static vf_status injected_yuv(const vf_preproc_opts *o, const vf_frame *f, int rotation,
                              vf_yuv_params *q, vf_yuv_planes *planes, vf_err *err)
{
    atomic_fetch_add(&backend_calls, 1);
    if (inject && f->index % 3 == 1)
        return vfi_fail(err, VF_ERR_DECODE, "injected failure at frame %lld", (long long)f->index);
    return vfi_preproc_yuv(o, f, rotation, q, planes, err);
}

#define DIM     10
#define MAX_ROW 64

typedef struct rows {
    int n;
    int file[MAX_ROW];
    int64_t index[MAX_ROW];
    float vec[MAX_ROW][DIM];
    vf_status status[2];
    int64_t frames[2];
    char error[2][VF_ERRMSG_SIZE];
} rows;

static int on_batch(void *user, const vf_batch_view *b)
{
    rows *r = user;
    for (int i = 0; i < b->n; i++) {
        CHECK(r->n < MAX_ROW);
        r->file[r->n] = b->file;
        r->index[r->n] = b->frame_index[i];
        memcpy(r->vec[r->n++], b->features + (size_t)i * DIM, sizeof(r->vec[0]));
    }
    return 0;
}

static void on_file(void *user, int file, const vf_file_result *res)
{
    rows *r = user;
    r->status[file] = res->status;
    r->frames[file] = res->frames;
    snprintf(r->error[file], sizeof(r->error[file]), "%s", res->error);
}

static void run(vf_config cfg, rows *r)
{
    static const char *const clips[] = {VF_SAMPLES_DIR "/testsrc_64x48.mp4",
                                        VF_SAMPLES_DIR "/rotated90_64x48.mp4"};
    memset(r, 0, sizeof(*r));
    vf_pipeline *p = NULL;
    CHECK_OK(vf_pipeline_create(&cfg, &p), vf_pipeline_errmsg(p));
    vf_run_hooks hooks = {r, NULL, on_file, on_batch};
    CHECK_EQ(vf_pipeline_run(p, clips, 2, &hooks), VF_OK);
    vf_pipeline_free(&p);
}

static void faults(const char *backend)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = backend;
    cfg.batch_size = 4;
    static rows clean, bad;
    inject = 0;
    atomic_store(&host_calls, 0);
    atomic_store(&backend_calls, 0);
    run(cfg, &clean);
    CHECK_EQ(clean.n, 30);
    int by_backend = !strcmp(backend, "ref");
    CHECK_EQ(atomic_load(&host_calls), by_backend ? 0 : 30);
    CHECK_EQ(atomic_load(&backend_calls), by_backend ? 30 : 0);
    inject = 1;
    char dir[] = "/tmp/vidfeat_test_faults_XXXXXX", db[1100];
    CHECK(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/f.db", dir);
    /* one and three workers; the stages overlapping and taking turns; with a database */
    for (int k = 0; k < 4; k++) {
        vf_config c = cfg;
        c.convert_threads = k % 2 ? 3 : 1;
        c.no_overlap = k == 2;
        c.db_path = k == 3 ? db : NULL;
        run(c, &bad);
        /* 20 frames: 7 fail (1, 4, ..., 19); 10 frames: 3 fail (1, 4, 7) */
        CHECK_EQ(bad.frames[0], 13);
        CHECK_EQ(bad.frames[1], 7);
        CHECK_EQ(bad.n, 20);
        for (int f = 0; f < 2; f++) {
            CHECK_EQ(bad.status[f], VF_ERR_DECODE);
            CHECK_MSG(!strcmp(bad.error[f], "injected failure at frame 1"), "%s", bad.error[f]);
        }
        /* every kept row is the clean run's row of the same file and frame, in order */
        int j = 0;
        for (int i = 0; i < clean.n; i++) {
            if (clean.index[i] % 3 == 1)
                continue;
            CHECK_EQ(bad.file[j], clean.file[i]);
            CHECK_EQ(bad.index[j], clean.index[i]);
            CHECK(!memcmp(bad.vec[j], clean.vec[i], sizeof(bad.vec[0])));
            j++;
        }
        CHECK_EQ(j, bad.n);
    }
    CHECK_EQ(vf_db_int(db,
                       "SELECT count(*) FROM extractions WHERE status = 'failed' AND error LIKE "
                       "'%injected%'"),
             2);
    CHECK_EQ(vf_db_int(db, "SELECT sum(frames) FROM extractions"), 20);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM features"), 20);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    faults("ref"); /* the backend converts the frames */
#ifndef __SANITIZE_THREAD__
    faults("cpu"); /* the host converts them (oneDNN's OpenMP threads: not under TSan) */
#endif
    printf("pipeline faults: failed conversions dropped from their batches, files failed, the "
           "rest kept in place (frames converted by the backend and on the host)\n");
    return 0;
}
