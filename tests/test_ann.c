/*
 * test_ann.c - search/ann.h on real FAISS: 20,000 unit vectors of 64 floats in clusters (as
 * frames of videos are), 100 queries. Flat finds what brute force finds, ids and order; IVF
 * (Flat and PQ) and HNSW find at least 0.9 of the true 10 nearest at a moderate probe, and more
 * with a larger one; removing an id range removes exactly those (HNSW says it cannot); a written
 * index reads back answering the same; garbage and a cut file are refused with a message. An IVF
 * whose lists differ in length reads about nprobe lists' share of its codes. vidfeat's own scan of
 * IVF-PQ lists answers as FAISS's own does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/mem.h"
#include "search/ann.h"

#define N   20000
#define DIM 64
#define NQ  100
#define K   10

static float *data, *queries;
static int64_t truth[NQ][K];

static double gauss(unsigned *seed)
{
    double u = (rand_r(seed) + 1.0) / (RAND_MAX + 2.0), v = (rand_r(seed) + 1.0) / (RAND_MAX + 2.0);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void unit(float *x)
{
    double s = 0;
    for (int j = 0; j < DIM; j++)
        s += (double)x[j] * x[j];
    for (int j = 0; j < DIM; j++)
        x[j] = (float)(x[j] / sqrt(s));
}

/* 200 clusters of 100 vectors, queries near random members */
static void make_data(void)
{
    unsigned seed = 7;
    data = malloc(sizeof(float) * N * DIM);
    queries = malloc(sizeof(float) * NQ * DIM);
    CHECK(data && queries);
    float centre[DIM];
    for (int i = 0; i < N; i++) {
        if (i % 100 == 0)
            for (int j = 0; j < DIM; j++)
                centre[j] = (float)gauss(&seed);
        for (int j = 0; j < DIM; j++)
            data[i * DIM + j] = centre[j] + 0.3f * (float)gauss(&seed);
        unit(data + i * DIM);
    }
    for (int q = 0; q < NQ; q++) {
        int of = rand_r(&seed) % N;
        for (int j = 0; j < DIM; j++)
            queries[q * DIM + j] = data[of * DIM + j] + 0.05f * (float)gauss(&seed);
        unit(queries + q * DIM);
    }
    /* brute force: the K nearest by squared distance (ids are 1000 + i) */
    for (int q = 0; q < NQ; q++) {
        double best[K];
        for (int k = 0; k < K; k++) {
            best[k] = INFINITY;
            truth[q][k] = -1;
        }
        for (int i = 0; i < N; i++) {
            double d = 0;
            for (int j = 0; j < DIM; j++) {
                double e = (double)queries[q * DIM + j] - data[i * DIM + j];
                d += e * e;
            }
            if (d >= best[K - 1])
                continue;
            int at = K - 1;
            while (at > 0 && best[at - 1] > d) {
                best[at] = best[at - 1];
                truth[q][at] = truth[q][at - 1];
                at--;
            }
            best[at] = d;
            truth[q][at] = 1000 + i;
        }
    }
}

static vf_ann *build(const char *description)
{
    vf_ann *a = NULL;
    vf_err err;
    CHECK(vfi_ann_create(description, DIM, &a, &err) == VF_OK);
    if (vfi_ann_needs_training(a))
        CHECK(vfi_ann_train(a, N, data, &err) == VF_OK);
    int64_t *ids = malloc(sizeof(int64_t) * N);
    CHECK(ids);
    for (int i = 0; i < N; i++)
        ids[i] = 1000 + i;
    CHECK(vfi_ann_add(a, N, data, ids, &err) == VF_OK);
    free(ids);
    CHECK(vfi_ann_count(a) == N);
    return a;
}

/* Mean share of the true K nearest found in the K returned. */
static double recall(vf_ann *a, int probe)
{
    int found = 0;
    vf_err err;
    for (int q = 0; q < NQ; q++) {
        int64_t ids[K];
        float dist[K];
        CHECK(vfi_ann_search(a, queries + q * DIM, K, probe, ids, dist, &err) == VF_OK);
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++)
                found += ids[i] == truth[q][j];
    }
    return found / (double)(NQ * K);
}

/* Is one search's answer another's, up to the last bits of a distance (the two sum in other orders)
 * and the order of near-equal distances? */
static int same_answer(const int64_t *ia, const float *da, const int64_t *ib, const float *db,
                       int k)
{
    for (int i = 0; i < k; i++) {
        float tol = 1e-5f * (fabsf(db[i]) > 1.0f ? fabsf(db[i]) : 1.0f);
        if ((ia[i] < 0) != (ib[i] < 0) || (ia[i] >= 0 && fabsf(da[i] - db[i]) > tol))
            return 0;
        if (ia[i] == ib[i])
            continue;
        int found = 0; /* a near tie in another place, or the last places' near tie */
        for (int j = 0; j < k && !found; j++)
            found = ib[j] == ia[i] && fabsf(db[j] - da[i]) <= tol;
        if (!found && fabsf(da[i] - db[k - 1]) > tol)
            return 0;
    }
    return 1;
}

/* vidfeat's own scan of IVF-PQ lists against FAISS's (its oracle): the same nearest, distances
 * and codes read, for one query at a time (the lists shared among threads) and all at once (the
 * queries shared), behind a transform too. */
static void own_scan_is_faiss(void)
{
    static const char *kinds[] = {"IVF64,PQ16", "PCAR32,IVF64,PQ8"};
    enum { KK = 50 };
    vf_err err;
    int64_t *ia = malloc(sizeof(int64_t) * NQ * KK), *ib = malloc(sizeof(int64_t) * NQ * KK);
    float *da = malloc(sizeof(float) * NQ * KK), *db = malloc(sizeof(float) * NQ * KK);
    CHECK(ia && ib && da && db);
    for (size_t kd = 0; kd < sizeof(kinds) / sizeof(kinds[0]); kd++) {
        vf_ann *a = build(kinds[kd]);
        for (int probe = 1; probe <= 64; probe *= 8) {
            for (int q = 0; q < NQ; q++) {
                CHECK(vfi_ann_search_many(a, 1, queries + q * DIM, KK, probe, ia, da, &err) ==
                      VF_OK);
                int64_t own = vfi_ann_codes_read(a);
                CHECK(vfi_ann_search_many_faiss(a, 1, queries + q * DIM, KK, probe, ib, db, &err) ==
                      VF_OK);
                CHECK(own == vfi_ann_codes_read(a) && own > 0);
                CHECK(same_answer(ia, da, ib, db, KK));
            }
            CHECK(vfi_ann_search_many(a, NQ, queries, KK, probe, ia, da, &err) == VF_OK);
            int64_t own = vfi_ann_codes_read(a);
            CHECK(vfi_ann_search_many_faiss(a, NQ, queries, KK, probe, ib, db, &err) == VF_OK);
            CHECK(own == vfi_ann_codes_read(a));
            for (int q = 0; q < NQ; q++)
                CHECK(same_answer(ia + q * KK, da + q * KK, ib + q * KK, db + q * KK, KK));
        }
        vfi_ann_free(&a);
    }
    free(ia);
    free(ib);
    free(da);
    free(db);
    printf("ok IVF-PQ lists scanned by vidfeat: FAISS's nearest %d, distances and codes read "
           "(one query and %d at once; nprobe 1, 8, 64; behind a PCA too)\n",
           KK, NQ);
}

/* Lists of very unequal lengths: an IVF whose 16 lists are 16 clusters (trained on their
 * centres), one given 8,000 vectors, the others 100 each, the crowded one on the far side of the
 * sphere. With nprobe 4 (2,375 codes: 4 lists' share), a query in the crowded cluster reads its
 * own list alone (FAISS by itself reads 3 lists more); one in a small cluster reads its 4 lists.
 * Both answer the true nearest. */
static void unequal_lists(void)
{
    enum { LISTS = 16, BIG = 8000, SMALL = 100, TOTAL = BIG + (LISTS - 1) * SMALL };
    unsigned seed = 11;
    float centre[LISTS * DIM];
    for (int c = 0; c < LISTS; c++) {
        for (int j = 0; j < DIM; j++)
            centre[c * DIM + j] = (float)gauss(&seed);
        centre[c * DIM] = c ? 6.0f : -6.0f;
        unit(centre + c * DIM);
    }
    float *x = malloc(sizeof(float) * TOTAL * DIM);
    int64_t *ids = malloc(sizeof(int64_t) * TOTAL);
    CHECK(x && ids);
    for (int i = 0; i < TOTAL; i++) {
        int c = i < BIG ? 0 : 1 + (i - BIG) / SMALL;
        for (int j = 0; j < DIM; j++)
            x[i * DIM + j] = centre[c * DIM + j] + 0.02f * (float)gauss(&seed);
        unit(x + i * DIM);
        ids[i] = i;
    }
    vf_ann *a = NULL;
    vf_err err;
    CHECK(vfi_ann_create("IVF16,Flat", DIM, &a, &err) == VF_OK && vfi_ann_codes_read(a) == -1);
    CHECK(vfi_ann_train(a, LISTS, centre, &err) == VF_OK); /* as many points as lists: each one */
    CHECK(vfi_ann_add(a, TOTAL, x, ids, &err) == VF_OK);
    for (int which = 0; which < 2; which++) {
        const float *q = x + (which ? BIG + 5 * SMALL + 7 : 123) * DIM;
        int64_t got[K];
        float dist[K];
        CHECK(vfi_ann_search(a, q, K, 4, got, dist, &err) == VF_OK);
        int64_t read = vfi_ann_codes_read(a);
        for (int k = 0; k < K; k++) { /* the true nearest: no more than k vectors nearer */
            int nearer = 0;
            for (int i = 0; i < TOTAL; i++) {
                double d = 0;
                for (int j = 0; j < DIM; j++) {
                    double e = (double)q[j] - x[i * DIM + j];
                    d += e * e;
                }
                nearer += d < dist[k] - 1e-5;
            }
            CHECK(got[k] >= 0 && nearer <= k);
        }
        printf("unequal lists, a query in the %s cluster: %lld codes read\n",
               which ? "small" : "crowded", (long long)read);
        CHECK(read == (which ? 4 * SMALL : BIG));
    }
    vf_ann *flat = NULL;
    int64_t got[2 * K];
    float dist[2 * K];
    CHECK(vfi_ann_create("Flat", DIM, &flat, &err) == VF_OK);
    CHECK(vfi_ann_add(flat, TOTAL, x, ids, &err) == VF_OK);
    CHECK(vfi_ann_search_many(flat, 2, x, K, 0, got, dist, &err) == VF_OK);
    CHECK(vfi_ann_codes_read(flat) == 2 * TOTAL);
    vfi_ann_free(&flat);
    vfi_ann_free(&a);
    free(x);
    free(ids);
    printf("ok lists of unequal lengths: a query reads about nprobe lists' share of the codes "
           "and finds the nearest\n");
}

enum { SN = 400, SD = 16 };

/* A small index of the given kind (SN vectors of SD floats from the data) as written to a file:
 * *len bytes, the caller frees them. */
static unsigned char *written(const char *kind, size_t *len)
{
    float *x = malloc(sizeof(float) * SN * SD);
    int64_t ids[SN];
    CHECK(x);
    for (int i = 0; i < SN * SD; i++)
        x[i] = data[i];
    for (int i = 0; i < SN; i++)
        ids[i] = 7000 + i;
    vf_ann *a = NULL;
    vf_err err;
    CHECK(vfi_ann_create(kind, SD, &a, &err) == VF_OK);
    if (vfi_ann_needs_training(a))
        CHECK(vfi_ann_train(a, SN, x, &err) == VF_OK);
    CHECK(vfi_ann_add(a, SN, x, ids, &err) == VF_OK);
    char *buf = NULL;
    FILE *w = open_memstream(&buf, len);
    CHECK(w && vfi_ann_write(a, w, &err) == VF_OK && fclose(w) == 0 && *len > 64);
    vfi_ann_free(&a);
    free(x);
    return (unsigned char *)buf;
}

/* Read len bytes as an index: VF_OK (*a holds it) or a refusal with a message. */
static vf_status read_bytes(unsigned char *bytes, size_t len, vf_ann **a, vf_err *err)
{
    FILE *r = fmemopen(bytes, len, "rb");
    CHECK(r);
    vf_status rc = vfi_ann_read(r, a, err);
    fclose(r);
    CHECK(rc == VF_OK ? *a != NULL : *a == NULL && err->msg[0]);
    return rc;
}

/* Index files damaged by a few flipped bytes (an index file is untrusted input): each is refused
 * with a message or loads and answers searches at every probe, never a crash; ids are -1 or
 * held ones. On FAISS's reader alone, a quarter to a half of such HNSW files crashed a search.
 * A flipped size is refused before FAISS allocates what it says (faiss_file.c), so this runs under
 * AddressSanitizer too. */
static void damaged_files(void)
{
    enum { TRIES = 300 };
    static const char *const kinds[] = {"Flat", "HNSW8", "IVF4,Flat", "IVF4,SQ8", "PCAR8,IVF4,PQ4"};
    srand(11);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        size_t len = 0;
        unsigned char *buf = written(kinds[k], &len), *bad = malloc(len);
        CHECK(bad);
        int loaded = 0;
        for (int t = 0; t < TRIES; t++) {
            memcpy(bad, buf, len);
            for (int n = 1 + rand() % 4; n > 0; n--)
                bad[(size_t)rand() % len] ^= (unsigned char)(1 + rand() % 255);
            vf_ann *a = NULL;
            vf_err err;
            if (read_bytes(bad, len, &a, &err) != VF_OK)
                continue;
            loaded++;
            float q[SD];
            for (int i = 0; i < SD && vfi_ann_dim(a) == SD; i++)
                q[i] = queries[i];
            for (int probe = 1; probe <= 64 && vfi_ann_dim(a) == SD; probe *= 8) {
                int64_t got[8];
                float dist[8];
                if (vfi_ann_search(a, q, 8, probe, got, dist, &err) == VF_OK)
                    for (int i = 0; i < 8; i++)
                        CHECK(got[i] >= -1);
            }
            vfi_ann_free(&a);
        }
        printf("%s: %d bytes, %d of %d damaged copies loaded and searched, the rest refused\n",
               kinds[k], (int)len, loaded, TRIES);
        free(bad);
        free(buf);
    }
    printf("ok damaged index files: refused with a message or searched, never a crash\n");
}

/* The offset of the first run of n 64-bit values vals in buf (the test fails without one). */
static size_t find_u64s(const unsigned char *buf, size_t len, const uint64_t *vals, size_t n)
{
    for (size_t at = 0; at + n * 8 <= len; at++)
        if (!memcmp(buf + at, vals, n * 8))
            return at;
    CHECK(!"the sizes looked for are in the file");
    return 0;
}

/* Sizes FAISS's reader would act on before anything checked them, each in a file otherwise as
 * written: refused, saying what is wrong. */
static void hostile_sizes(void)
{
    static const struct {
        const char *kind, *what;
        uint64_t find[3]; /* sizes as written, n of them in a row ... */
        size_t n, at;     /* ... and where, in bytes from them, the one changed lies */
        uint64_t to;      /* its new value */
        const char *said; /* in the refusal */
    } cases[] = {
        /* FAISS divides the dimension by the pieces: SIGFPE */
        {"PCAR8,IVF4,PQ4", "a product quantizer of no pieces", {8, 4, 8}, 3, 8, 0, "codebooks"},
        /* it sizes the codebooks from the dimension before reading them: 4 GB */
        {"PCAR8,IVF4,PQ4", "codebooks of 2^22 dimensions", {8, 4, 8}, 3, 0, 1u << 22, "codebooks"},
        {"PCAR8,IVF4,PQ4", "2^40-bit codewords", {8, 4, 8}, 3, 16, 40, "codebooks"},
        /* a vector's count, allocated before its bytes are read: 256 GB */
        {"Flat", "a flat index of 2^36 floats", {SN * SD}, 1, 0, (uint64_t)1 << 36, "longer"},
        /* every list's length, allocated before any is read: after the lists' count and code
         * size, "full" and the number of lengths, the first list's */
        {"IVF4,Flat", "a list of 2^40 vectors", {4, SD * 4}, 2, 28, (uint64_t)1 << 40, "lists"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t len = 0;
        unsigned char *buf = written(cases[c].kind, &len);
        size_t at = find_u64s(buf, len, cases[c].find, cases[c].n) + cases[c].at;
        CHECK(at + 8 <= len);
        memcpy(buf + at, &cases[c].to, 8);
        vf_ann *a = NULL;
        vf_err err;
        CHECK(read_bytes(buf, len, &a, &err) == VF_ERR_INVALID);
        printf("%s: %s\n", cases[c].what, err.msg);
        CHECK(strstr(err.msg, "not an index vidfeat made") && strstr(err.msg, cases[c].said));
        free(buf);
    }
    printf("ok sizes FAISS would divide by or allocate before checking: refused first\n");
}

int main(void)
{
    make_data();
    own_scan_is_faiss();
    damaged_files();
    hostile_sizes();
    vf_err err;

    vf_ann *flat = build("Flat");
    CHECK(vfi_ann_probe_name(flat) == NULL);
    for (int q = 0; q < NQ; q++) {
        int64_t ids[K];
        float dist[K];
        CHECK(vfi_ann_search(flat, queries + q * DIM, K, 0, ids, dist, &err) == VF_OK);
        CHECK(memcmp(ids, truth[q], sizeof(ids)) == 0);
    }
    printf("ok Flat: the brute-force nearest, in order\n");

    static const struct {
        const char *description, *probe_name;
        int probe_low, probe_high;
        double low, high;
    } kinds[] = {
        {"IVF64,Flat", "nprobe", 8, 64, 0.90, 0.999},
        {"IVF64,PQ16", "nprobe", 8, 64, 0.45, 0.45},
        {"HNSW32", "efSearch", 32, 256, 0.90, 0.99},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        vf_ann *a = build(kinds[i].description);
        CHECK(!strcmp(vfi_ann_probe_name(a), kinds[i].probe_name));
        double lo = recall(a, kinds[i].probe_low), hi = recall(a, kinds[i].probe_high);
        printf("%s: recall@%d %.3f (%s %d), %.3f (%d)\n", kinds[i].description, K, lo,
               kinds[i].probe_name, kinds[i].probe_low, hi, kinds[i].probe_high);
        CHECK(lo >= kinds[i].low && hi >= kinds[i].high && hi >= lo);
        vfi_ann_free(&a);
    }
    printf("ok IVF-Flat, IVF-PQ and HNSW find the nearest, more with a larger probe\n");

    /* remove ids [1000, 1100): the first cluster */
    vf_ann *ivf = build("IVF64,Flat");
    int64_t removed = 0;
    CHECK(vfi_ann_remove_range(ivf, 1000, 1100, &removed, &err) == VF_OK && removed == 100);
    CHECK(vfi_ann_count(ivf) == N - 100);
    CHECK(vfi_ann_remove_range(flat, 1000, 1100, &removed, &err) == VF_OK && removed == 100);
    for (int q = 0; q < NQ; q++) {
        int64_t ids[K];
        float dist[K];
        CHECK(vfi_ann_search(flat, queries + q * DIM, K, 0, ids, dist, &err) == VF_OK);
        for (int i = 0; i < K; i++)
            CHECK(ids[i] < 1000 || ids[i] >= 1100);
    }
    vf_ann *hnsw = build("HNSW16");
    CHECK(vfi_ann_remove_range(hnsw, 1000, 1100, &removed, &err) == VF_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "HNSW"));
    vfi_ann_free(&hnsw);
    printf("ok removing a range removes exactly it; HNSW says it cannot\n");

    /* written and read back: the same answers; garbage and a cut file refused */
    char path[] = "/tmp/vidfeat_ann_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w+b");
    CHECK(f && vfi_ann_write(ivf, f, &err) == VF_OK);
    long size = ftell(f);
    rewind(f);
    vf_ann *back = NULL;
    CHECK(vfi_ann_read(f, &back, &err) == VF_OK && vfi_ann_count(back) == N - 100);
    for (int q = 0; q < NQ; q++) {
        int64_t a_ids[K], b_ids[K];
        float a_d[K], b_d[K];
        CHECK(vfi_ann_search(ivf, queries + q * DIM, K, 16, a_ids, a_d, &err) == VF_OK);
        CHECK(vfi_ann_search(back, queries + q * DIM, K, 16, b_ids, b_d, &err) == VF_OK);
        CHECK(memcmp(a_ids, b_ids, sizeof(a_ids)) == 0 && memcmp(a_d, b_d, sizeof(a_d)) == 0);
    }
    vfi_ann_free(&back);
    CHECK(ftruncate(fd, size / 2) == 0);
    rewind(f);
    CHECK(vfi_ann_read(f, &back, &err) == VF_ERR_INVALID && back == NULL && err.msg[0]);
    printf("cut file: %s\n", err.msg);
    rewind(f);
    CHECK(ftruncate(fd, 0) == 0 && fwrite("not an index at all", 1, 19, f) == 19);
    rewind(f);
    CHECK(vfi_ann_read(f, &back, &err) == VF_ERR_INVALID && back == NULL);
    printf("garbage: %s\n", err.msg);
    fclose(f);
    unlink(path);
    CHECK(vfi_ann_create("NoSuchKind42", DIM, &back, &err) == VF_ERR_INVALID && back == NULL);
    printf("ok written and read back, the same answers; garbage, a cut file and a bad kind "
           "refused\n");

    unequal_lists();

    vfi_ann_free(&ivf);
    vfi_ann_free(&flat);
    free(data);
    free(queries);
    return 0;
}
