/*
 * test_pipeline.c - the extraction pipeline end to end through the public API on the committed
 * sample clips with the tiny model: outcomes per file (done, truncated, audio only, missing),
 * rows in the database, resume and --force, cancel keeps what was written and marks nothing
 * done, and the vectors equal the engine run on the same frames decoded and scaled by the ffmpeg
 * CLI (the pipeline adds no error; rotation included).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "db_check.h"
#include "vidfeat.h"

#define S           VF_SAMPLES_DIR
#define SIZE        32
#define SWSCALE_TOL 6e-3 /* our frames against the ffmpeg CLI's: see main */
#define LEFT_SITED  "in_h_chr_pos=0:in_v_chr_pos=128" /* in 1/256 luma samples */
#define DIM         10
#define MAX_VEC     64

typedef struct capture {
    int n;
    float vec[MAX_VEC][DIM];
    double t[MAX_VEC];
    int files_done, files_failed, files_skipped;
    int cancel_after; /* batches; 0 = never */
    const char *db;   /* set: after each batch, the running extraction's count is its rows */
    int batches;
    vf_status status[8];
    int64_t frames[8];
} capture;

static int on_batch(void *user, const vf_batch_view *b)
{
    capture *c = user;
    CHECK_EQ(b->dim, DIM);
    for (int i = 0; i < b->n && c->n < MAX_VEC; i++) {
        memcpy(c->vec[c->n], b->features + (size_t)i * DIM, sizeof(c->vec[0]));
        c->t[c->n++] = b->t[i];
    }
    c->batches++;
    if (c->db) { /* the batch is committed: an interrupted run would show this */
        CHECK_EQ(vf_db_int(c->db, "SELECT count(*) FROM extractions WHERE status = 'running'"), 1);
        CHECK_EQ(vf_db_int(c->db, "SELECT frames FROM extractions WHERE status = 'running'"),
                 vf_db_int(c->db, "SELECT count(*) FROM features f JOIN extractions e ON e.id = "
                                  "f.extraction_id WHERE e.status = 'running'"));
    }
    return c->cancel_after && c->batches >= c->cancel_after;
}

static void on_file(void *user, int file, const vf_file_result *r)
{
    capture *c = user;
    CHECK(file >= 0 && file < 8);
    c->status[file] = r->status;
    c->frames[file] = r->frames;
    if (r->skipped)
        c->files_skipped++;
    else if (r->status < 0)
        c->files_failed++;
    else
        c->files_done++;
}

static vf_config config(const char *db)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = "ref"; /* plain threads only: ThreadSanitizer runs this test */
    cfg.batch_size = 4;
    cfg.db_path = db;
    return cfg;
}

static vf_status run(vf_config cfg, const char *const *paths, int n, capture *c)
{
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(&cfg, &p);
    CHECK_OK(rc, vf_pipeline_errmsg(p));
    vf_run_hooks hooks = {c, NULL, on_file, on_batch};
    rc = vf_pipeline_run(p, paths, n, &hooks);
    vf_pipeline_free(&p);
    return rc;
}

/* The ffmpeg CLI's decode + scale of a clip (autorotated), normalised as the tiny model's
 * plain-ONNX defaults say (mean 0, std 1 in pixel units), planar RGB. libswscale is told where
 * the chroma samples sit (the samples say left, H.264's default), which it does not read. */
static int ffmpeg_frames(const char *clip, const char *chroma, float *out, int max)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "ffmpeg -v error -i '%s' -vf scale=%d:%d:flags=bilinear+accurate_rnd:%s,"
             "format=gbrpf32le -f rawvideo -",
             clip, SIZE, SIZE, chroma);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    const size_t plane = SIZE * SIZE;
    float *buf = malloc(3 * plane * sizeof(float));
    int n = 0;
    while (n < max && fread(buf, sizeof(float), 3 * plane, f) == 3 * plane) {
        float *dst = out + (size_t)n * 3 * plane;
        memcpy(dst, buf + 2 * plane, plane * sizeof(float));         /* R */
        memcpy(dst + plane, buf, plane * sizeof(float));             /* G */
        memcpy(dst + 2 * plane, buf + plane, plane * sizeof(float)); /* B */
        for (size_t i = 0; i < 3 * plane; i++)
            dst[i] *= 255.0f;
        n++;
    }
    free(buf);
    return pclose(f) == 0 ? n : -1;
}

/* chroma: where the chroma samples sit in the picture ffmpeg scales, which is rotated */
static void same_as_ffmpeg(const char *clip, const char *chroma, const capture *c, double tol)
{
    static float images[MAX_VEC * 3 * SIZE * SIZE];
    static float ref[MAX_VEC * DIM];
    int n = ffmpeg_frames(clip, chroma, images, MAX_VEC);
    CHECK_MSG(n >= 0, "the ffmpeg CLI could not decode %s (is ffmpeg installed?)", clip);
    CHECK_EQ(n, c->n);
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = "ref";
    cfg.batch_size = 4;
    vf_extractor *ex = NULL;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    CHECK_OK(vf_extractor_infer(ex, images, n, ref), vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = vf_rel_err(c->vec[i], ref + (size_t)i * DIM, DIM);
        worst = e > worst ? e : worst;
    }
    CHECK_MSG(worst <= tol, "%s: pipeline vs ffmpeg-decoded frames: relative error %.3g", clip,
              worst);
    printf("  %s: %d frames, max relative error vs ffmpeg CLI frames %.2e\n", clip, n, worst);
}

int main(void)
{
    char dir[] = "/tmp/vidfeat_test_pipeline_XXXXXX";
    CHECK(mkdtemp(dir));
    char db[1024];
    snprintf(db, sizeof(db), "%s/t.db", dir);
    const char *inputs[] = {S "/testsrc_64x48.mp4", S "/truncated.mp4", S "/audio_only.m4a",
                            "/nonexistent/clip.mp4", S "/rotated90_64x48.mp4"};

    capture c;
    memset(&c, 0, sizeof(c));
    CHECK_EQ(run(config(db), inputs, 5, &c), VF_OK);
    CHECK_EQ(c.files_done, 3); /* truncated: done, the 5 frames before the cut */
    CHECK_EQ(c.files_failed, 2);
    CHECK_EQ(c.frames[0], 20);
    CHECK_EQ(c.frames[1], 5);
    CHECK_EQ(c.status[2], VF_ERR_DECODE);
    CHECK_EQ(c.status[3], VF_ERR_IO);
    CHECK_EQ(c.frames[4], 10);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions WHERE status='done'"), 3);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions WHERE status='failed'"), 2);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM features f JOIN extractions e ON e.id = "
                           "f.extraction_id WHERE e.status='done'"),
             35);
    /* the cut-short file's note is its done row's error column */
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions e JOIN videos v ON v.id = "
                           "e.video_id WHERE v.path LIKE '%truncated.mp4' AND e.status = 'done' "
                           "AND e.error = 'partial: 5 of 20 frames the index promises'"),
             1);
    CHECK_EQ(vf_db_int(db, "SELECT frames FROM extractions e JOIN videos v ON v.id = e.video_id "
                           "WHERE v.path LIKE '%testsrc_64x48.mp4'"),
             20);
    CHECK_EQ(vf_db_int(db, "SELECT length(vec) FROM features LIMIT 1"), DIM * 4);
    CHECK_EQ(vf_db_int(db, "PRAGMA user_version"), 10);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM frames WHERE path LIKE '%testsrc_64x48.mp4'"), 20);

    /* Rerun: done files are skipped, failed ones are tried again. */
    memset(&c, 0, sizeof(c));
    CHECK_EQ(run(config(db), inputs, 5, &c), VF_OK);
    CHECK_EQ(c.files_skipped, 3);
    CHECK_EQ(c.files_failed, 2);

    /* The vectors are the engine's on ffmpeg's frames: nothing added by the pipeline. Not to
     * 1e-4: libswscale's float output is about 8 bits exact (limited-range white comes out
     * 0.4% dark; preprocess.c), up to 1.4 levels from our conversion here, 3.1e-3 in the
     * vectors; a geometric slip (chroma a quarter sample off, a wrong turn) gives 5e-2. */
    memset(&c, 0, sizeof(c));
    vf_config cfg = config(NULL);
    CHECK_EQ(run(cfg, inputs, 1, &c), VF_OK);
    CHECK_EQ(c.n, 20);
    for (int i = 0; i < c.n; i++)
        CHECK_NEAR(c.t[i], 0.1 * i, 1e-9);
    same_as_ffmpeg(inputs[0], LEFT_SITED, &c, SWSCALE_TOL);

    /* no_overlap (bench's per-frame baseline): the stages take turns, with the same vectors and
     * outcomes; failing and truncated files must hand the decoder its turn back. */
    for (int bs = 1; bs <= 4; bs += 3) {
        static capture serial;
        memset(&serial, 0, sizeof(serial));
        vf_config sc = config(NULL);
        sc.no_overlap = 1;
        sc.batch_size = bs;
        CHECK_EQ(run(sc, inputs, 5, &serial), VF_OK);
        CHECK_EQ(serial.files_done, 3);
        CHECK_EQ(serial.files_failed, 2);
        CHECK_EQ(serial.frames[0], 20);
        CHECK_EQ(serial.frames[4], 10);
        for (int i = 0; i < 20; i++)
            CHECK(vf_rel_err(serial.vec[i], c.vec[i], DIM) <= 1e-6);
    }

    /* Several convert workers (frames converted in any order, batches spanning files, failing
     * files between them, the rotated clip last): the same outcomes, and the vectors and
     * timestamps bit for bit those of one worker. */
    for (int workers = 2; workers <= 5; workers += 3) {
        static capture par;
        memset(&par, 0, sizeof(par));
        vf_config pc = config(NULL);
        pc.convert_threads = workers;
        pc.no_overlap = workers == 5; /* and with the stages taking turns */
        CHECK_EQ(run(pc, inputs, 5, &par), VF_OK);
        CHECK_EQ(par.files_done, 3);
        CHECK_EQ(par.files_failed, 2);
        CHECK_EQ(par.frames[0], 20);
        CHECK_EQ(par.frames[4], 10);
        CHECK_EQ(par.n, c.n + 10 + par.frames[1]);
        CHECK(!memcmp(par.vec, c.vec, sizeof(c.vec[0]) * 20));
        CHECK(!memcmp(par.t, c.t, sizeof(c.t[0]) * 20));
    }
    memset(&c, 0, sizeof(c));
    CHECK_EQ(run(cfg, inputs + 4, 1, &c), VF_OK);
    /* ffmpeg rotates before scaling, we after: this clip turns a quarter counter-clockwise, so
     * its left-sited chroma sits at the bottom of the picture ffmpeg scales */
    same_as_ffmpeg(inputs[4], "in_h_chr_pos=128:in_v_chr_pos=256", &c, SWSCALE_TOL);

    /* --force redoes; cancelling after one batch keeps that batch and marks nothing done. */
    vf_config forced = config(db);
    forced.force = 1;
    memset(&c, 0, sizeof(c));
    c.cancel_after = 1;
    c.db = db;
    CHECK_EQ(run(forced, inputs, 1, &c), VF_ERR_CANCELLED);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions e JOIN videos v ON v.id = e.video_id "
                           "WHERE v.path LIKE '%testsrc_64x48.mp4' AND e.status = 'done'"),
             0);
    long long kept = vf_db_int(db, "SELECT count(*) FROM features f JOIN extractions e ON e.id = "
                                   "f.extraction_id JOIN videos v ON v.id = e.video_id WHERE "
                                   "v.path LIKE '%testsrc_64x48.mp4'");
    CHECK(kept >= 4 && kept < 20);
    memset(&c, 0, sizeof(c));
    CHECK_EQ(run(config(db), inputs, 1, &c), VF_OK); /* not done: redone in full */
    CHECK_EQ(c.files_done, 1);
    CHECK_EQ(vf_db_int(db, "SELECT frames FROM extractions e JOIN videos v ON v.id = e.video_id "
                           "WHERE v.path LIKE '%testsrc_64x48.mp4' AND e.status = 'done'"),
             20);

    /* float16 storage */
    char db16[1100];
    snprintf(db16, sizeof(db16), "%s/f16.db", dir);
    vf_config half = config(db16);
    half.store_f16 = 1;
    memset(&c, 0, sizeof(c));
    CHECK_EQ(run(half, inputs, 1, &c), VF_OK);
    CHECK_EQ(vf_db_int(db16, "SELECT length(vec) FROM features LIMIT 1"), DIM * 2);

    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("pipeline: outcomes, database rows, resume, force, cancel and f16 as expected\n");
    return 0;
}
