/*
 * test_session.c - one search session (pipeline/session.h, vidfeat serve's) queried by four
 * threads at once for several seconds while its index file is rebuilt as another kind: every
 * answer equals what the same query gets alone through vf_db_similar (the same frames in the
 * same order, cosines within 1e-6), and the rebuilt index is picked up (the session's searches
 * then say its kind). Labelled threads: ThreadSanitizer runs it.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/clock.h"
#include "pipeline/session.h"
#include "rows_capture.h"
#include "vidfeat.h"

#define MODEL     VF_MODELS_DIR "/tiny_cnn.onnx"
#define CLIP      VF_SAMPLES_DIR "/testsrc_64x48.mp4"
#define ROT       VF_SAMPLES_DIR "/rotated90_64x48.mp4"
#define K         5
#define QUERIES   12
#define THREADS   4
#define RUN_S     7.0 /* longer than the session's look for a changed index (5 s) */
#define REBUILD_S 1.0

typedef struct answer {
    int n;
    char path[K][512];
    int64_t frame[K];
    double sim[K];
} answer;

static void on_hit(void *user, const vf_neighbour *h)
{
    answer *a = user;
    if (a->n < K) {
        snprintf(a->path[a->n], sizeof(a->path[a->n]), "%s", h->path);
        a->frame[a->n] = h->frame_index;
        a->sim[a->n] = h->similarity;
    }
    a->n++;
}

static answer want[QUERIES];
static vfi_session *session;
static double stop_at;
static atomic_int asked;

static vf_similar_query query(int i, vf_similar_stats *st)
{
    return (vf_similar_query){
        .video = i % 2 ? ROT : CLIP, .at = 0.1 * (i / 2), .k = K, .stats = st};
}

static void same(const answer *got, const answer *w, int i)
{
    CHECK_MSG(got->n == w->n, "query %d: %d hits, alone %d", i, got->n, w->n);
    for (int j = 0; j < got->n && j < K; j++) {
        CHECK_MSG(!strcmp(got->path[j], w->path[j]) && got->frame[j] == w->frame[j],
                  "query %d hit %d: %s frame %lld, alone %s frame %lld", i, j, got->path[j],
                  (long long)got->frame[j], w->path[j], (long long)w->frame[j]);
        CHECK_NEAR(got->sim[j], w->sim[j], 1e-6);
    }
}

static void *asker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (vfi_now_s() < stop_at) {
        int i = (int)(rand_r(&seed) % QUERIES);
        vf_similar_stats st;
        vf_similar_query q = query(i, &st);
        answer got = {0};
        vf_err err = {0};
        CHECK_OK(vfi_session_similar(session, &q, 1, on_hit, &got, NULL, &err), err.msg);
        same(&got, &want[i], i);
        atomic_fetch_add(&asked, 1);
    }
    return NULL;
}

int main(void)
{
    char dir[] = "/tmp/vidfeat_test_session_XXXXXX", db[1100];
    CHECK(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/s.db", dir);
    const char *paths[] = {CLIP, ROT};
    capture *c = calloc(1, sizeof(*c));
    CHECK(c);
    vf_config cfg = vf_config_default();
    cfg.model = MODEL;
    cfg.backend = "ref";
    cfg.batch_size = 4;
    cfg.max_frames = 20;
    cfg.db_path = db;
    CHECK_EQ(cap_run(&cfg, paths, 2, c, 0), VF_OK);
    vf_config qcfg = vf_config_default();
    qcfg.model = NULL; /* the database's */
    qcfg.backend = "ref";
    char err[1024];
    vf_index_opts io = {.kind = "flat"};
    vf_index_report rep;
    CHECK_OK(vf_db_index(db, &qcfg, &io, &rep, err, sizeof(err)), err);

    for (int i = 0; i < QUERIES; i++) { /* each alone, a session each */
        vf_similar_stats st;
        vf_similar_query q = query(i, &st);
        CHECK_OK(vf_db_similar(db, &qcfg, &q, on_hit, &want[i], NULL, err, sizeof(err)), err);
        CHECK_MSG(want[i].n == K && !strncmp(st.search, "index", 5), "query %d: %d hits, %s", i,
                  want[i].n, st.search);
    }
    vf_err e = {0};
    CHECK_OK(vfi_session_open(db, &qcfg, 0, NULL, &session, &e), e.msg);
    stop_at = vfi_now_s() + RUN_S;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, asker, (void *)(uintptr_t)(i + 1)) == 0);
    /* meanwhile the index is made again, as another kind, under the same name */
    struct timespec pause = {0, (long)(REBUILD_S * 1e9)};
    nanosleep(&pause, NULL);
    vf_index_opts again = {.kind = "hnsw", .rebuild = 1};
    CHECK_OK(vf_db_index(db, &qcfg, &again, &rep, err, sizeof(err)), err);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    vf_similar_stats st;
    vf_similar_query q = query(3, &st);
    answer got = {0};
    CHECK_OK(vfi_session_similar(session, &q, 1, on_hit, &got, NULL, &e), e.msg);
    same(&got, &want[3], 3);
    CHECK_MSG(strstr(st.search, "HNSW") != NULL, "the rebuilt index is used: %s", st.search);
    printf("%d queries from %d threads in %.0f s, each as alone; the index rebuilt as %s meanwhile "
           "is searched\n",
           atomic_load(&asked), THREADS, RUN_S, st.search);
    vfi_session_free(&session);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(c);
    return 0;
}
