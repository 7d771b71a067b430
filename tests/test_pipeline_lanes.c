/*
 * test_pipeline_lanes.c - several files decoded at once (vf_config.decoders): each file's vectors,
 * frame numbers, timestamps and outcome are exactly those of decoding one file at a time, its
 * rows reach the hooks and the database together and in order, and a run cancelled with several
 * files in flight leaves none of them marked done, so that the next run completes them all.
 * vf_pipeline_cancel from another thread at any moment (a run's setup and teardown included)
 * ends runs cleanly and races with nothing (TSan runs this test). Committed samples (good, rotated,
 * truncated, audio only, missing) and, where ../shared is present, clips of other codecs and sizes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "db_check.h"
#include "rows_capture.h"
#include "vidfeat.h"

/* Extract paths into c (and db when not NULL) with this many lanes; the hooks stop the run after
 * cancel_after batch views when it is not 0. */
static vf_status run(int decoders, const char *db, const char *const *paths, int n, capture *c,
                     int cancel_after)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = "ref"; /* plain threads only: ThreadSanitizer runs this test */
    cfg.batch_size = 4;
    cfg.max_frames = 24;
    cfg.convert_threads = 2;
    cfg.decoders = decoders;
    cfg.db_path = db;
    return cap_run(&cfg, paths, n, c, cancel_after);
}

typedef struct storm {
    vf_pipeline *p;
    atomic_int done;
} storm;

/* vf_pipeline_cancel at random moments, 0-300 ms apart, until told to stop. */
static void *cancel_storm(void *arg)
{
    storm *st = arg;
    unsigned seed = 7;
    while (!atomic_load(&st->done)) {
        vf_pipeline_cancel(st->p);
        seed = seed * 1103515245u + 12345u;
        struct timespec ts = {0, (long)(((uint64_t)seed * 300000000u) >> 32)};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Runs cancelled at any moment by another thread - while the run sets up, runs, or tears down -
 * end OK or cancelled, and leave the database consistent. */
static void cancel_anytime(const char *db, const char *const *paths, int n)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = "ref";
    cfg.batch_size = 4;
    cfg.max_frames = 8;
    cfg.decoders = 3;
    cfg.force = 1;
    cfg.db_path = db;
    storm st = {NULL, 0};
    CHECK_OK(vf_pipeline_create(&cfg, &st.p), vf_pipeline_errmsg(st.p));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, cancel_storm, &st) == 0);
    int cancelled = 0;
    for (int i = 0; i < 30; i++) {
        vf_status rc = vf_pipeline_run(st.p, paths, n, NULL);
        CHECK_MSG(rc == VF_OK || rc == VF_ERR_CANCELLED, "run %d: %s", i, vf_status_str(rc));
        cancelled += rc == VF_ERR_CANCELLED;
    }
    atomic_store(&st.done, 1);
    pthread_join(th, NULL);
    vf_pipeline_free(&st.p);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions e WHERE frames != (SELECT count(*) "
                           "FROM features f WHERE f.extraction_id = e.id)"),
             0);
    CHECK_MSG(cancelled > 0, "none of 30 runs was cancelled: the storm never hit a run");
    printf("cancelled at random moments: %d of 30 runs cancelled, the database consistent\n",
           cancelled);
}

/* The status of path's extraction in db ("none" without one) and its frames. */
static const char *extraction(const char *db, const char *path, int64_t *frames)
{
    static char status[16];
    sqlite3 *h;
    sqlite3_stmt *st;
    CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(h,
                             "SELECT e.status, e.frames FROM extractions e JOIN videos v ON "
                             "v.id = e.video_id WHERE v.path = ?1",
                             -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    snprintf(status, sizeof(status), "none");
    *frames = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(status, sizeof(status), "%s", (const char *)sqlite3_column_text(st, 0));
        *frames = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return status;
}

/* path's stored rows in db are exactly want's rows: the same frame numbers and times, and the
 * vectors bit for bit (the hooks' count alone would not show a row written wrong). */
static void same_stored_rows(const char *db, const char *path, const file_rows *want)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(h,
                             "SELECT f.frame_index, f.t, f.vec FROM features f JOIN extractions e "
                             "ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id WHERE "
                             "v.path = ?1 ORDER BY f.frame_index",
                             -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    int k = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        CHECK_MSG(k < want->n, "%s: more stored rows than the one-lane run's %d", path, want->n);
        CHECK_EQ(sqlite3_column_int64(st, 0), want->index[k]);
        CHECK_MSG(sqlite3_column_double(st, 1) == want->t[k], "%s row %d: t", path, k);
        CHECK_EQ(sqlite3_column_bytes(st, 2), (int)sizeof(want->vec[k]));
        CHECK_MSG(!memcmp(sqlite3_column_blob(st, 2), want->vec[k], sizeof(want->vec[k])),
                  "%s row %d: the stored vector differs from the one-lane run's", path, k);
        k++;
    }
    CHECK_MSG(k == want->n, "%s: %d stored rows, the one-lane run %d", path, k, want->n);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/* File i of a run with several lanes is file i of the one-lane run, bit for bit. */
static void same_files(const capture *one, const capture *many, int n)
{
    for (int i = 0; i < n; i++) {
        const file_rows *a = &one->f[i], *b = &many->f[i];
        CHECK_MSG(b->reported, "file %d has no outcome", i);
        CHECK_EQ(b->status, a->status);
        CHECK_EQ(b->frames, a->frames);
        CHECK_EQ(b->n, a->n);
        for (int k = 0; k < a->n; k++) {
            CHECK_EQ(b->index[k], a->index[k]);
            CHECK(b->t[k] == a->t[k]);
            CHECK_MSG(!memcmp(b->vec[k], a->vec[k], sizeof(a->vec[k])), "file %d row %d", i, k);
        }
    }
}

int main(void)
{
    const char *candidates[] = {
        VF_SAMPLES_DIR "/testsrc_64x48.mp4",
        VF_SAMPLES_DIR "/truncated.mp4",
        VF_SAMPLES_DIR "/rotated90_64x48.mp4",
        VF_SAMPLES_DIR "/audio_only.m4a",
        VF_SAMPLES_DIR "/one_gop_12s.mp4",
        "/nonexistent/vidfeat_lanes.mp4",
        VF_SHARED_DIR "/videos/hevc_640x360_aac.mp4",
        VF_SHARED_DIR "/videos/vp9_480p_bigbuckbunny_1s.webm",
        VF_SHARED_DIR "/videos/av1_320x180.ivf",
        VF_SHARED_DIR "/videos/phone_rotated180_ipad2.mov",
    };
    const char *paths[CAP_MAX_FILES];
    int n = 0;
    for (size_t i = 0; i < sizeof(candidates) / sizeof(*candidates); i++) {
        if (i < 6 || access(candidates[i], R_OK) == 0)
            paths[n++] = candidates[i];
    }
    static capture one, many;
    CHECK_EQ(run(1, NULL, paths, n, &one, 0), VF_OK);
    CHECK_EQ(one.f[0].status, VF_OK);
    CHECK(one.f[1].status == VF_OK && one.f[1].n == 5); /* truncated: done up to the cut */
    CHECK(one.f[3].status < 0 && one.f[5].status < 0);

    char dir[] = "/tmp/vidfeat_test_lanes_XXXXXX", db[1100];
    CHECK(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/l.db", dir);
    const int lanes[] = {2, 4, 16};
    for (size_t k = 0; k < sizeof(lanes) / sizeof(*lanes); k++) {
        CHECK_EQ(run(lanes[k], k == 1 ? db : NULL, paths, n, &many, 0), VF_OK);
        same_files(&one, &many, n);
        printf("%d lanes: %d files as with one; batch views switched file %d times (one lane: "
               "%d)\n",
               lanes[k], n, many.switches, one.switches);
    }
    /* the database: one extraction per file, each with its own rows */
    int good = 0;
    for (int i = 0; i < n; i++)
        good += one.f[i].status == VF_OK;
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions WHERE status = 'done'"), good);
    for (int i = 0; i < n; i++)
        if (one.f[i].status == VF_OK)
            same_stored_rows(db, paths[i], &one.f[i]);
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions e WHERE frames != (SELECT count(*) "
                           "FROM features f WHERE f.extraction_id = e.id)"),
             0);

    /* cancelled with several files in flight: nothing half-done is marked done; the next run
     * finishes every file, each then with exactly the one-lane rows */
    snprintf(db, sizeof(db), "%s/c.db", dir);
    CHECK_EQ(run(4, db, paths, n, &many, 3), VF_ERR_CANCELLED);
    int done_before = 0, partial = 0;
    for (int i = 0; i < n; i++) {
        int64_t frames;
        const char *status = extraction(db, paths[i], &frames);
        if (!strcmp(status, "done")) {
            CHECK_EQ(frames, one.f[i].frames);
            done_before++;
        }
        partial += strcmp(status, "done") && many.f[i].n > 0;
    }
    CHECK_MSG(partial > 0, "the cancel left no file with rows written and not done");
    CHECK_EQ(run(4, db, paths, n, &many, 0), VF_OK);
    for (int i = 0; i < n; i++) {
        int64_t frames;
        const char *status = extraction(db, paths[i], &frames);
        CHECK_MSG(!strcmp(status, one.f[i].status == VF_OK ? "done" : "failed"), "%s: %s", paths[i],
                  status);
        if (one.f[i].status == VF_OK)
            CHECK_EQ(frames, one.f[i].frames);
        if (many.f[i].n) /* done again: the same rows */
            CHECK_EQ(many.f[i].n, one.f[i].n);
        if (one.f[i].status == VF_OK) /* and in the database, bit for bit */
            same_stored_rows(db, paths[i], &one.f[i]);
    }
    CHECK_EQ(vf_db_int(db, "SELECT count(*) FROM extractions e WHERE frames != (SELECT count(*) "
                           "FROM features f WHERE f.extraction_id = e.id)"),
             0);
    printf("cancelled with 4 lanes: %d of %d files done before, all after the rerun\n", done_before,
           n);
    snprintf(db, sizeof(db), "%s/s.db", dir);
    cancel_anytime(db, paths, n);

    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("pipeline lanes: several files at once give each file's one-at-a-time rows\n");
    return 0;
}
