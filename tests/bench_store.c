/*
 * bench_store.c - how much leased work one database serves: N worker processes, each with its
 * own connection, against one store (scripts/bench-workers.py starts a PostgreSQL for it).
 *
 *   vf_bench_store URI claims N ITEMS       ITEMS files queued; each worker claims, begins and
 *                                           finishes one at a time until none is left: claims/s
 *                                           and the latency of a claim (p50, p99, max)
 *   vf_bench_store URI vectors N SECONDS    each worker claims a file and writes batches of 32
 *                                           vectors of 2048 floats for SECONDS: vectors stored/s
 *
 * Prints one line of key=value pairs. Not a test: numbers are measured, never asserted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/owner.h"
#include "store/store.h"

#define DIM   2048
#define BATCH 32

static int die(const char *what, const vf_err *err)
{
    fprintf(stderr, "vf_bench_store: %s: %s\n", what, err->msg);
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One worker: its model row and its work, over the queue. */
typedef struct worker {
    vf_store *s;
    vf_store_work w;
    char owner[VF_OWNER_SIZE];
} worker;

static int worker_open(const char *uri, worker *wk, vf_err *err)
{
    if (vfi_store_open(uri, VF_STORE_WRITE, &wk->s, err) < 0)
        return -1;
    vf_store_model m = {"bench", "0", "pool", DIM, 0, "bench", NULL, NULL};
    int64_t model = 0;
    if (vfi_store_model(wk->s, &m, &model, err) < 0)
        return -1;
    vfi_owner_self(wk->owner, sizeof(wk->owner));
    wk->w = (vf_store_work){model, "all", "f32", wk->owner, 60.0, 3, 0, -1.0};
    return vfi_store_offer(wk->s, &wk->w, NULL, 0, NULL, err) < 0 ? -1 : 0;
}

/* Claim, begin and finish files until none is left; each claim's seconds to fd. */
static int claim_loop(const char *uri, int fd)
{
    vf_err err = {VF_OK, ""};
    worker wk = {0};
    if (worker_open(uri, &wk, &err) < 0)
        return die("opening", &err);
    vf_store_run run = {"cpu", "f32", BATCH};
    for (;;) {
        vf_store_claim c;
        double t0 = vfi_now_s();
        if (vfi_store_claim(wk.s, &wk.w, &c, &err) < 0)
            return die("claiming", &err);
        double dt = vfi_now_s() - t0;
        if (c.kind == VF_CLAIM_NONE)
            break;
        if (c.kind == VF_CLAIM_WAIT) {
            nanosleep(&(struct timespec){0, 10000000L}, NULL);
            continue;
        }
        if (write(fd, &dt, sizeof(dt)) != sizeof(dt))
            return 1;
        vf_store_video v = {c.name, 1, 1.0, "fnv64:0", 1.0, 64, 48, 0, "h264", 25.0};
        int64_t ext = 0;
        if (vfi_store_begin(wk.s, &v, wk.w.model_id, "all", &run, &c.lease, &ext, &err) < 0 ||
            vfi_store_finish(wk.s, ext, &c.lease, &(vf_store_end){.end = VF_END_DONE}, &err) < 0)
            return die("finishing", &err);
        vfi_free(c.name);
    }
    vfi_store_close(&wk.s);
    return 0;
}

/* Write batches of vectors into one claimed file for `seconds`; the count to fd. */
static int vector_loop(const char *uri, double seconds, int fd)
{
    vf_err err = {VF_OK, ""};
    worker wk = {0};
    if (worker_open(uri, &wk, &err) < 0)
        return die("opening", &err);
    vf_store_claim c;
    if (vfi_store_claim(wk.s, &wk.w, &c, &err) < 0 || c.kind != VF_CLAIM_OK)
        return die("claiming", &err);
    vf_store_video v = {c.name, 1, 1.0, "fnv64:0", 1.0, 64, 48, 0, "h264", 25.0};
    vf_store_run run = {"cpu", "f32", BATCH};
    int64_t ext = 0;
    if (vfi_store_begin(wk.s, &v, wk.w.model_id, "all", &run, &c.lease, &ext, &err) < 0)
        return die("beginning", &err);
    float *vecs = vfi_mallocarray((size_t)BATCH * DIM, sizeof(float));
    int64_t idx[BATCH], pts[BATCH];
    double t[BATCH];
    if (!vecs)
        return 1;
    srand((unsigned)getpid());
    for (size_t i = 0; i < (size_t)BATCH * DIM; i++)
        vecs[i] = (float)rand() / (float)RAND_MAX;
    double t0 = vfi_now_s();
    double stored = 0;
    for (int64_t frame = 0; vfi_now_s() - t0 < seconds;) {
        for (int i = 0; i < BATCH; i++, frame++) {
            idx[i] = frame;
            pts[i] = frame * 512;
            t[i] = frame / 25.0;
        }
        if (vfi_store_batch(wk.s, ext, &c.lease, BATCH, DIM, 0, idx, pts, t, NULL, vecs, &err) < 0)
            return die("writing", &err);
        stored += BATCH;
    }
    double rate[2] = {stored, vfi_now_s() - t0};
    if (write(fd, rate, sizeof(rate)) != sizeof(rate))
        return 1;
    vfi_free(vecs);
    vfi_free(c.name);
    vfi_store_close(&wk.s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: vf_bench_store URI claims|vectors WORKERS ITEMS|SECONDS\n");
        return 2;
    }
    const char *uri = argv[1], *mode = argv[2];
    int n = atoi(argv[3]);
    double amount = atof(argv[4]);
    int claims = !strcmp(mode, "claims");
    if (n < 1 || n > 1024 || !(amount > 0)) {
        fprintf(stderr, "vf_bench_store: bad arguments\n");
        return 2;
    }
    vf_err err = {VF_OK, ""};
    vf_store *s = NULL;
    if (vfi_store_open(uri, VF_STORE_WRITE, &s, &err) < 0)
        return die("opening", &err);
    int items = claims ? (int)amount : n; /* one file per vector writer */
    char **names = vfi_calloc((size_t)items, sizeof(char *));
    for (int i = 0; names && i < items; i++) {
        names[i] = vfi_malloc(48);
        if (names[i])
            snprintf(names[i], 48, "archive/%s/clip%07d.mp4", mode, i);
    }
    if (vfi_store_enqueue(s, (const char *const *)names, items, &err) < 0)
        return die("queueing", &err);
    for (int i = 0; i < items; i++)
        vfi_free(names[i]);
    vfi_free(names);
    vfi_store_close(&s);

    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    double t0 = vfi_now_s();
    for (int k = 0; k < n; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            _exit(claims ? claim_loop(uri, fds[1]) : vector_loop(uri, amount, fds[1]));
        }
    }
    close(fds[1]);
    double *lat = NULL, rec[2];
    int n_lat = 0, cap = 0;
    double vectors = 0, busiest = 0;
    ssize_t got;
    while ((got = read(fds[0], rec, claims ? sizeof(double) : 2 * sizeof(double))) > 0) {
        if (claims) {
            double *grown = vfi_grow(lat, &cap, n_lat + 1, sizeof(double));
            if (!grown)
                return 1;
            lat = grown;
            lat[n_lat++] = rec[0];
        } else {
            vectors += rec[0];
            busiest = rec[1] > busiest ? rec[1] : busiest;
        }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    double wall = vfi_now_s() - t0;
    if (claims) {
        qsort(lat, (size_t)n_lat, sizeof(double), cmp_double);
        printf("workers=%d claims=%d seconds=%.2f claims_per_s=%.0f p50_ms=%.2f p99_ms=%.2f "
               "max_ms=%.2f\n",
               n, n_lat, wall, n_lat / wall, n_lat ? 1e3 * lat[n_lat / 2] : 0,
               n_lat ? 1e3 * lat[(int)(n_lat * 0.99)] : 0, n_lat ? 1e3 * lat[n_lat - 1] : 0);
    } else {
        printf("workers=%d dim=%d vectors=%.0f seconds=%.2f vectors_per_s=%.0f\n", n, DIM, vectors,
               busiest, vectors / busiest);
    }
    vfi_free(lat);
    return failed;
}
