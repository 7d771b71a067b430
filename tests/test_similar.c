/*
 * test_similar.c - vf_db_similar against a brute-force search over the vectors the run hooks
 * delivered: the same neighbours in the same order with the same cosines (1e-6), best first, the
 * query frame left out when it was read from the database (found by path and by another name of
 * the same file); a query extracted from a file the database lacks equals that file's frame run
 * on its own; float16 databases rank within their rounding; and the refusals: no database, a
 * query that is both or neither, a model of other preprocessing, a layer the database lacks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rows_capture.h"
#include "vidfeat.h"

#define MODEL  VF_MODELS_DIR "/tiny_cnn.onnx"
#define CLIP   VF_SAMPLES_DIR "/testsrc_64x48.mp4"
#define ROT    VF_SAMPLES_DIR "/rotated90_64x48.mp4"
#define OTHER  VF_SAMPLES_DIR "/one_gop_12s.mp4"
#define MAX_K  64
#define N_FILE 2

static vf_config config(const char *db, int f16)
{
    vf_config cfg = vf_config_default();
    cfg.model = MODEL;
    cfg.backend = "ref";
    cfg.batch_size = 4;
    cfg.max_frames = 20;
    cfg.db_path = db;
    cfg.store_f16 = f16;
    return cfg;
}

typedef struct hits {
    int n;
    vf_neighbour h[MAX_K];
    char path[MAX_K][512];
} hits;

static void on_hit(void *user, const vf_neighbour *n)
{
    hits *h = user;
    CHECK(h->n < MAX_K);
    snprintf(h->path[h->n], sizeof(h->path[0]), "%s", n->path);
    h->h[h->n] = *n;
    h->h[h->n].path = h->path[h->n];
    h->n++;
}

static double cosine(const float *a, const float *b)
{
    double d = 0, na = 0, nb = 0;
    for (int i = 0; i < CAP_DIM; i++) {
        d += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return d / sqrt(na * nb);
}

/* What a search should find: every captured row but the skipped one, by cosine to q. */
typedef struct expected {
    int file, row;
    double sim;
} expected;

static int by_sim(const void *a, const void *b)
{
    const expected *x = a, *y = b;
    return x->sim < y->sim ? 1 : x->sim > y->sim ? -1 : 0;
}

static int brute_force(const capture *c, const float *q, int skip_file, int skip_row, expected *out)
{
    int n = 0;
    for (int f = 0; f < N_FILE; f++) {
        for (int r = 0; r < c->f[f].n; r++) {
            if (f != skip_file || r != skip_row)
                out[n++] = (expected){f, r, cosine(q, c->f[f].vec[r])};
        }
    }
    qsort(out, (size_t)n, sizeof(*out), by_sim);
    return n;
}

/* The search's hits are the brute force's first k, in order (up to exact ties). */
static void check_hits(const hits *h, const capture *c, const char *const *paths,
                       const expected *want, int n_want, int k, double tol)
{
    CHECK_EQ(h->n, k < n_want ? k : n_want);
    for (int i = 0; i < h->n; i++) {
        CHECK_MSG(fabs(h->h[i].similarity - want[i].sim) <= tol, "hit %d: cosine %.7f, want %.7f",
                  i, h->h[i].similarity, want[i].sim);
        if (i)
            CHECK(h->h[i].similarity <= h->h[i - 1].similarity);
        int gap = (i && want[i].sim == want[i - 1].sim) ||
                  (i + 1 < n_want && want[i].sim == want[i + 1].sim);
        if (!gap && tol < 1e-5) { /* a unique cosine names its frame */
            CHECK_MSG(!strcmp(h->h[i].path, paths[want[i].file]), "hit %d: %s", i, h->h[i].path);
            CHECK_EQ(h->h[i].frame_index, c->f[want[i].file].index[want[i].row]);
            CHECK_NEAR(h->h[i].t, c->f[want[i].file].t[want[i].row], 1e-9);
        }
    }
}

static vf_status search(const char *db, const vf_config *cfg, const char *image, const char *video,
                        double at, int k, hits *h, vf_neighbour *src, char *err, size_t err_size)
{
    memset(h, 0, sizeof(*h));
    vf_similar_query q = {.image = image, .video = video, .at = at, .k = k};
    return vf_db_similar(db, cfg, &q, on_hit, h, src, err, err_size);
}

int main(void)
{
    char dir[] = "/tmp/vidfeat_test_similar_XXXXXX", db[1100], db16[1100], alias[1100];
    CHECK(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/f32.db", dir);
    snprintf(db16, sizeof(db16), "%s/f16.db", dir);
    snprintf(alias, sizeof(alias), "%s/another_name.mp4", dir);
    CHECK(symlink(CLIP, alias) == 0);
    const char *paths[N_FILE] = {CLIP, ROT};
    capture *c = calloc(1, sizeof(*c)), *c16 = calloc(1, sizeof(*c16));
    CHECK(c && c16);
    vf_config cfg = config(db, 0), cfg16 = config(db16, 1);
    CHECK_EQ(cap_run(&cfg, paths, N_FILE, c, 0), VF_OK);
    CHECK_EQ(cap_run(&cfg16, paths, N_FILE, c16, 0), VF_OK);
    CHECK(c->f[0].n == 20 && c->f[1].n > 0);
    vf_config query_cfg = config(NULL, 0);
    query_cfg.model = NULL; /* the database's */
    hits h;
    vf_neighbour src;
    expected want[2 * CAP_MAX_ROWS];
    char err[512];

    /* a stored frame: the one nearest the time, left out of its own hits */
    CHECK_OK(search(db, &query_cfg, NULL, CLIP, 1.04, 7, &h, &src, err, sizeof(err)), err);
    CHECK(src.stored && src.frame_index == 10 && fabs(src.t - 1.0) < 1e-9);
    int n_want = brute_force(c, c->f[0].vec[10], 0, 10, want);
    check_hits(&h, c, paths, want, n_want, 7, 1e-6);
    printf("video at 1.04 s: frame %lld, best %.6f (%s frame %lld), 7th %.6f\n",
           (long long)src.frame_index, h.h[0].similarity, h.h[0].path,
           (long long)h.h[0].frame_index, h.h[6].similarity);
    /* another name of the same file is the same stored video; more than there is gives all */
    CHECK_OK(search(db, &query_cfg, alias, NULL, 0, MAX_K, &h, &src, err, sizeof(err)), err);
    CHECK(src.stored && src.frame_index == 0);
    n_want = brute_force(c, c->f[0].vec[0], 0, 0, want);
    check_hits(&h, c, paths, want, n_want, MAX_K, 1e-6);
    CHECK_EQ(h.n, c->f[0].n + c->f[1].n - 1);

    /* a file the database lacks: its frame extracted now, the same vector as in a run of its own */
    capture *alone = calloc(1, sizeof(*alone));
    CHECK(alone);
    const char *other_path[] = {OTHER};
    vf_config one = config(NULL, 0);
    one.start = 0.5;
    one.max_frames = 1;
    CHECK_EQ(cap_run(&one, other_path, 1, alone, 0), VF_OK);
    CHECK_EQ(alone->f[0].n, 1);
    query_cfg.model = MODEL;
    CHECK_OK(search(db, &query_cfg, NULL, OTHER, 0.5, 5, &h, &src, err, sizeof(err)), err);
    CHECK(!src.stored && src.frame_index == alone->f[0].index[0]);
    n_want = brute_force(c, alone->f[0].vec[0], -1, -1, want);
    check_hits(&h, c, paths, want, n_want, 5, 1e-6);
    printf("extracted query (a 12 s clip at 0.5 s): best %.6f (%s frame %lld)\n", h.h[0].similarity,
           h.h[0].path, (long long)h.h[0].frame_index);

    /* float16 vectors: the same search within their rounding */
    query_cfg.model = NULL;
    CHECK_OK(search(db16, &query_cfg, NULL, CLIP, 1.0, 7, &h, &src, err, sizeof(err)), err);
    n_want = brute_force(c16, c16->f[0].vec[10], 0, 10, want);
    check_hits(&h, c16, paths, want, n_want, 7, 2e-3);

    /* refusals, each with its reason */
    vf_status rc = search(db, &query_cfg, NULL, CLIP, 0, 5, &h, &src, err, sizeof(err));
    CHECK_EQ(rc, VF_OK);
    char missing[1200];
    snprintf(missing, sizeof(missing), "%s/none.db", dir);
    rc = search(missing, &query_cfg, NULL, CLIP, 0, 5, &h, NULL, err, sizeof(err));
    CHECK(rc == VF_ERR_STORE && strstr(err, "none.db"));
    rc = search(db, &query_cfg, CLIP, CLIP, 0, 5, &h, NULL, err, sizeof(err));
    CHECK_EQ(rc, VF_ERR_INVALID);
    rc = search(db, &query_cfg, NULL, NULL, 0, 5, &h, NULL, err, sizeof(err));
    CHECK_EQ(rc, VF_ERR_INVALID);
    rc = search(db, &query_cfg, NULL, CLIP, -1, 5, &h, NULL, err, sizeof(err));
    CHECK_EQ(rc, VF_ERR_INVALID);
    vf_config other = config(NULL, 0);
    other.mean[0] = other.mean[1] = other.mean[2] = 100.0f;
    other.std[0] = other.std[1] = other.std[2] = 50.0f;
    rc = search(db, &other, NULL, OTHER, 0, 5, &h, NULL, err, sizeof(err));
    CHECK_MSG(rc == VF_ERR_MODEL && strstr(err, "preprocessing"), "%d %s", (int)rc, err);
    printf("refused: %s\n", err);
    vf_config layer = query_cfg;
    layer.layer = "no_such_layer";
    rc = search(db, &layer, NULL, CLIP, 0, 5, &h, NULL, err, sizeof(err));
    CHECK_MSG(rc == VF_ERR_STORE && strstr(err, "no_such_layer"), "%d %s", (int)rc, err);
    rc = search(db, &query_cfg, NULL, OTHER, 0.5, 5, &h, NULL, err, sizeof(err));
    CHECK_MSG(rc < 0 && strstr(err, "tiny_cnn"), "%s", err); /* a plain ONNX file: name it */
    printf("refused: %s\n", err);
    query_cfg.model = MODEL;
    rc = search(db, &query_cfg, NULL, OTHER, 60.0, 5, &h, NULL, err, sizeof(err));
    CHECK_MSG(rc == VF_ERR_DECODE && strstr(err, "no frame"), "%d %s", (int)rc, err);
    printf("refused: %s\n", err);

    unlink(alias);
    unlink(db);
    unlink(db16);
    char side[1200];
    for (int i = 0; i < 2; i++) {
        snprintf(side, sizeof(side), "%s-wal", i ? db16 : db);
        unlink(side);
        snprintf(side, sizeof(side), "%s-shm", i ? db16 : db);
        unlink(side);
    }
    rmdir(dir);
    free(c);
    free(c16);
    free(alone);
    return 0;
}
