/*
 * bench_index.c - what a search index costs and finds at archive scale, on the index layer
 * itself (no database: the vectors are made as they are needed, so ten million of 2048 floats
 * need not be kept anywhere). scripts/bench-index.py runs it and the database-backed commands.
 *
 *   vf_bench_index N DIM [KIND] [CENTRES.npy]
 *
 * N vectors of DIM floats, as frames of videos: 100 a file, each file near one of 1,000 scenes
 * (the rows of CENTRES.npy when given: real features, so the vectors are real ones and
 * synthetic ones around them), every vector a function of its number (made again when needed).
 * The index is the kind vidfeat index chooses (KIND: auto by default), built as it builds one:
 * trained on its sample, vectors added at unit length in batches. Then 200 queries (stored
 * frames, slightly changed), each answered as vidfeat similar does: the index's 100 candidates
 * ranked by exact cosine; recall@10 against brute force over all N. Prints one line of
 * key=value pairs: kind, build_s, train_s, add_per_s, bytes_per_vector, recall10, search_ms p50
 * and p99 (the index's search and the ranking), read (the share of the index's codes a query
 * compared, on average), exact_ms (brute force over the vectors held in memory, one query; only
 * where they fit: N x DIM x 4 bytes under 8 GB).
 *
 * Not a test: numbers are measured, never asserted.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "pipeline/index.h"
#include "search/ann.h"

#define PER_FILE 100
#define SCENES   1000
#define QUERIES  200
#define K        10
#define CHUNK    20000

static int64_t n_vectors;
static int dim;
static float *centres; /* SCENES x dim */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* about a standard normal: a triangular variable from the two halves of one draw, scaled to
 * variance 1 (cheap, and plenty for noise) */
static float noise(uint64_t *s)
{
    uint64_t r = splitmix(s);
    double t = ((double)(r & 0xffffffffu) + (double)(r >> 32)) / 4294967296.0 - 1.0;
    return (float)(t * 2.449489743);
}

/* Vector i: its file's direction (a scene plus the file's own offset) plus the frame's. */
static void make(int64_t i, float *out)
{
    int64_t file = i / PER_FILE;
    uint64_t fs = (uint64_t)file * 7919u + 1, vs = (uint64_t)i * 104729u + 3;
    const float *scene = centres + (size_t)(splitmix(&fs) % SCENES) * (size_t)dim;
    double scale = 0;
    for (int j = 0; j < dim; j++)
        scale += (double)scene[j] * scene[j];
    scale = sqrt(scale / dim); /* noise in the scene's own units */
    for (int j = 0; j < dim; j++)
        out[j] = scene[j] + (float)(0.35 * scale) * noise(&fs) + (float)(0.2 * scale) * noise(&vs);
}

static int load_centres(const char *npy)
{
    centres = vfi_mallocarray((size_t)SCENES * (size_t)dim, sizeof(float));
    if (!centres)
        return -1;
    if (!npy) {
        uint64_t s = 42;
        for (size_t i = 0; i < (size_t)SCENES * (size_t)dim; i++)
            centres[i] = noise(&s);
        return 0;
    }
    FILE *f = fopen(npy, "rb");
    char head[256];
    if (!f || fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6))
        return -1;
    unsigned hlen = (unsigned char)head[8] | (unsigned char)head[9] << 8;
    if (hlen >= sizeof(head) || fread(head, 1, hlen, f) != hlen)
        return -1;
    head[hlen] = '\0';
    long rows = 0, cols = 0;
    const char *shape = strstr(head, "'shape': (");
    if (!strstr(head, "'<f4'") || !shape ||
        sscanf(shape, "'shape': (%ld, %ld)", &rows, &cols) != 2 || cols != dim || rows < 1)
        return -1;
    float *real = vfi_mallocarray((size_t)rows * (size_t)dim, sizeof(float));
    if (!real || fread(real, sizeof(float), (size_t)rows * (size_t)dim, f) != (size_t)rows * dim)
        return -1;
    fclose(f);
    for (int s = 0; s < SCENES; s++) /* the real vectors, again and again if there are fewer */
        memcpy(centres + (size_t)s * dim, real + (size_t)(s % rows) * dim, sizeof(float) * dim);
    vfi_free(real);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cosine(const float *a, const float *b)
{
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < dim; j++) {
        ab += (double)a[j] * b[j];
        aa += (double)a[j] * a[j];
        bb += (double)b[j] * b[j];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

/* Keep the K best (highest similarity) ids in best[] / sim[], sorted. */
static void offer(int64_t *best, double *sim, int64_t id, double s)
{
    if (s <= sim[K - 1])
        return;
    int at = K - 1;
    while (at > 0 && sim[at - 1] < s) {
        sim[at] = sim[at - 1];
        best[at] = best[at - 1];
        at--;
    }
    sim[at] = s;
    best[at] = id;
}

static int die(const char *what, const vf_err *err)
{
    fprintf(stderr, "vf_bench_index: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: vf_bench_index N DIM [KIND] [CENTRES.npy]\n");
        return 2;
    }
    vfi_ann_blas_restart(argv); /* OpenBLAS's kernels for this CPU, as the command has them */
    n_vectors = atoll(argv[1]);
    dim = atoi(argv[2]);
    const char *kind = argc > 3 ? argv[3] : "auto";
    if (n_vectors < 1000 || dim < 4 || load_centres(argc > 4 ? argv[4] : NULL) < 0) {
        fprintf(stderr, "vf_bench_index: bad arguments or centres file\n");
        return 2;
    }
    vf_err err;
    char words[160];
    int probe = 0;
    if (vfi_index_choose_kind(kind, n_vectors, dim, 0, words, sizeof(words), &probe, &err) < 0)
        return die("kind", &err);
    vf_ann *ann = NULL;
    if (vfi_ann_create(words, dim, &ann, &err) < 0)
        return die("create", &err);
    float *buf = vfi_mallocarray((size_t)CHUNK * (size_t)dim, sizeof(float));
    int64_t *ids = vfi_mallocarray(CHUNK, sizeof(int64_t));
    if (!buf || !ids)
        return 1;
    double t0 = vfi_now_s(), train_s = 0;
    if (vfi_ann_needs_training(ann)) { /* a sample spread over all the vectors */
        int64_t n_train = vfi_index_train_size(n_vectors, dim);
        float *train = vfi_mallocarray((size_t)n_train * (size_t)dim, sizeof(float));
        if (!train)
            return 1;
        for (int64_t i = 0; i < n_train; i++) {
            make(i * (n_vectors / n_train), train + i * dim);
            vfi_index_unit(train + i * dim, dim, train + i * dim);
        }
        if (vfi_ann_train(ann, n_train, train, &err) < 0)
            return die("train", &err);
        vfi_free(train);
        train_s = vfi_now_s() - t0;
    }
    double gen_s = 0, t1 = vfi_now_s();
    for (int64_t from = 0; from < n_vectors; from += CHUNK) {
        int64_t n = n_vectors - from < CHUNK ? n_vectors - from : CHUNK;
        double g = vfi_now_s();
        for (int64_t i = 0; i < n; i++) {
            make(from + i, buf + i * dim);
            vfi_index_unit(buf + i * dim, dim, buf + i * dim);
            ids[i] = from + i;
        }
        gen_s += vfi_now_s() - g; /* making the vectors is not the index's time */
        if (vfi_ann_add(ann, n, buf, ids, &err) < 0)
            return die("add", &err);
    }
    double add_s = vfi_now_s() - t1 - gen_s;
    double build_s = train_s + add_s;

    char path[] = "/tmp/vf_bench_index_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f || vfi_ann_write(ann, f, &err) < 0)
        return die("write", &err);
    long bytes = ftell(f);
    fclose(f);
    remove(path);

    /* queries: stored frames, changed a little */
    float *queries = vfi_mallocarray((size_t)QUERIES * (size_t)dim, sizeof(float));
    uint64_t qs = 99;
    for (int q = 0; q < QUERIES; q++) {
        make((int64_t)(splitmix(&qs) % (uint64_t)n_vectors), queries + (size_t)q * dim);
        for (int j = 0; j < dim; j++)
            queries[(size_t)q * dim + j] += 0.02f * noise(&qs);
    }
    /* brute force: every vector made again, in chunks, each chunk searched exactly (a Flat
     * index: BLAS) for every query; unit vectors, so distance orders as cosine does */
    int64_t truth[QUERIES][K];
    double tsim[QUERIES][K];
    for (int q = 0; q < QUERIES; q++)
        for (int k = 0; k < K; k++) {
            truth[q][k] = -1;
            tsim[q][k] = -2;
        }
    float *uq = vfi_mallocarray((size_t)QUERIES * (size_t)dim, sizeof(float));
    for (int q = 0; q < QUERIES; q++)
        vfi_index_unit(queries + (size_t)q * dim, dim, uq + (size_t)q * dim);
    int held = (double)n_vectors * dim * 4 < 8e9;
    float *all = held ? vfi_mallocarray((size_t)n_vectors * (size_t)dim, sizeof(float)) : NULL;
    for (int64_t from = 0; from < n_vectors; from += CHUNK) {
        int64_t n = n_vectors - from < CHUNK ? n_vectors - from : CHUNK;
        for (int64_t i = 0; i < n; i++) {
            make(from + i, buf + i * dim);
            if (all)
                memcpy(all + (from + i) * dim, buf + i * dim, sizeof(float) * dim);
            vfi_index_unit(buf + i * dim, dim, buf + i * dim);
            ids[i] = from + i;
        }
        vf_ann *flat = NULL;
        if (vfi_ann_create("Flat", dim, &flat, &err) < 0 ||
            vfi_ann_add(flat, n, buf, ids, &err) < 0)
            return die("brute force", &err);
        /* all the queries at once: one pass over the chunk (a matrix product), not one each */
        static int64_t near[QUERIES * K];
        static float d[QUERIES * K];
        if (vfi_ann_search_many(flat, QUERIES, uq, K, 0, near, d, &err) < 0)
            return die("brute force", &err);
        for (int q = 0; q < QUERIES; q++)
            for (int k = 0; k < K && near[q * K + k] >= 0; k++)
                offer(truth[q], tsim[q], near[q * K + k], 1.0 - d[q * K + k] / 2.0);
        vfi_ann_free(&flat);
    }
    vfi_free(uq);
    double exact_ms = 0;
    if (all) { /* one query's exact scan over the vectors in memory, as vidfeat's scan computes */
        double e0 = vfi_now_s();
        int64_t best[K];
        double sim[K];
        for (int k = 0; k < K; k++) {
            best[k] = -1;
            sim[k] = -2;
        }
        for (int64_t i = 0; i < n_vectors; i++)
            offer(best, sim, i, cosine(queries, all + i * dim));
        exact_ms = (vfi_now_s() - e0) * 1e3;
    }
    vfi_free(all);

    /* the index, as vidfeat similar uses it: its candidates ranked by exact cosine (their
     * vectors, which the database would give back, are made outside the time) */
    int cand = VFI_INDEX_CANDIDATES(K);
    int64_t *got = vfi_mallocarray((size_t)cand, sizeof(int64_t));
    float *dist = vfi_mallocarray((size_t)cand, sizeof(float)), *unit = buf;
    float *cv = vfi_mallocarray((size_t)cand * (size_t)dim, sizeof(float));
    double ms[QUERIES], codes = 0;
    int found = 0;
    for (int q = 0; q < QUERIES; q++) {
        const float *qv = queries + (size_t)q * dim;
        double s0 = vfi_now_s();
        vfi_index_unit(qv, dim, unit);
        if (vfi_ann_search(ann, unit, cand, probe, got, dist, &err) < 0)
            return die("search", &err);
        double searched = vfi_now_s() - s0;
        codes += (double)vfi_ann_codes_read(ann);
        int n = 0;
        while (n < cand && got[n] >= 0) {
            make(got[n], cv + (size_t)n * dim);
            n++;
        }
        double r0 = vfi_now_s();
        int64_t best[K];
        double sim[K];
        for (int k = 0; k < K; k++) {
            best[k] = -1;
            sim[k] = -2;
        }
        for (int c = 0; c < n; c++)
            offer(best, sim, got[c], cosine(qv, cv + (size_t)c * dim));
        ms[q] = (searched + vfi_now_s() - r0) * 1e3;
        for (int a = 0; a < K; a++)
            for (int b = 0; b < K; b++)
                found += best[a] == truth[q][b] && best[a] >= 0;
    }
    vfi_free(cv);
    qsort(ms, QUERIES, sizeof(ms[0]), cmp_double);
    printf("vectors=%lld dim=%d kind=%s probe=%d build_s=%.1f train_s=%.1f add_per_s=%.0f "
           "bytes_per_vector=%.1f recall10=%.4f search_ms_p50=%.2f search_ms_p99=%.2f "
           "read=%.4f exact_ms=%.0f\n",
           (long long)n_vectors, dim, words, probe, build_s, train_s,
           add_s > 0 ? (double)n_vectors / add_s : 0, (double)bytes / (double)n_vectors,
           found / (double)(QUERIES * K), ms[QUERIES / 2], ms[QUERIES * 99 / 100],
           codes / QUERIES / (double)n_vectors, exact_ms);
    vfi_ann_free(&ann);
    vfi_free(buf);
    vfi_free(ids);
    vfi_free(queries);
    vfi_free(got);
    vfi_free(dist);
    vfi_free(centres);
    return 0;
}
