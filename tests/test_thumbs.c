/*
 * test_thumbs.c - the page's thumbnail cache (serve/thumbs.h) on the committed sample clips: a
 * frame asked for by many requests at once is decoded once and every request gets the same
 * JPEG; a kept picture is answered without decoding, a failure too (with its message); a cache
 * too small to keep anything still answers; the least recently used picture is the one dropped.
 */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "core/mem.h"
#include "serve/thumbs.h"

#define ONE_GOP   VF_SAMPLES_DIR "/one_gop_12s.mp4" /* a frame late in it decodes all before it */
#define SMALL     VF_SAMPLES_DIR "/testsrc_64x48.mp4"
#define N_AT_ONCE 8

typedef struct asker {
    vfs_thumbs *c;
    pthread_barrier_t *go;
    uint8_t *jpeg;
    size_t len;
    vf_status rc;
} asker;

static void *ask(void *p)
{
    asker *a = p;
    vf_err err = {0};
    pthread_barrier_wait(a->go);
    a->rc = vfs_thumbs_get(a->c, ONE_GOP, 11.0, &a->jpeg, &a->len, &err);
    return NULL;
}

static vfs_thumbs_counts counts(vfs_thumbs *c)
{
    vfs_thumbs_counts n;
    vfs_thumbs_count(c, &n);
    return n;
}

static int64_t made(vfs_thumbs *c)
{
    return counts(c).made;
}

/* The archive the pictures are read from: the samples' directory. */
static vf_archive samples;

/* A picture of SMALL at t, checked to be a JPEG, freed; returns its size. */
static size_t get(vfs_thumbs *c, double t)
{
    uint8_t *jpeg = NULL;
    size_t len = 0;
    vf_err err = {0};
    CHECK_OK(vfs_thumbs_get(c, SMALL, t, &jpeg, &len, &err), err.msg);
    CHECK(len > 4 && jpeg[0] == 0xff && jpeg[1] == 0xd8);
    vfi_free(jpeg);
    return len;
}

static void many_at_once(void)
{
    vfs_thumbs *c = NULL;
    vf_err err = {0};
    CHECK_OK(vfs_thumbs_create(64 << 20, &samples, &c, &err), err.msg);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N_AT_ONCE);
    asker a[N_AT_ONCE];
    pthread_t th[N_AT_ONCE];
    for (int i = 0; i < N_AT_ONCE; i++) {
        a[i] = (asker){.c = c, .go = &go};
        CHECK_EQ(pthread_create(&th[i], NULL, ask, &a[i]), 0);
    }
    for (int i = 0; i < N_AT_ONCE; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    vfs_thumbs_counts n = counts(c);
    CHECK_EQ(n.made, 1);
    CHECK_EQ(n.served, N_AT_ONCE);
    CHECK_EQ(n.kept, 1);
    for (int i = 0; i < N_AT_ONCE; i++) {
        CHECK_EQ(a[i].rc, VF_OK);
        CHECK(a[i].len == a[0].len && !memcmp(a[i].jpeg, a[0].jpeg, a[0].len));
    }
    for (int i = 0; i < N_AT_ONCE; i++)
        vfi_free(a[i].jpeg);
    vfs_thumbs_free(&c);
}

static void kept_and_failed(void)
{
    vfs_thumbs *c = NULL;
    vf_err err = {0};
    CHECK_OK(vfs_thumbs_create(64 << 20, &samples, &c, &err), err.msg);
    get(c, 0.5);
    get(c, 1.0);
    get(c, 0.5);
    CHECK_EQ(made(c), 2);
    get(c, 0.5004); /* the same millisecond */
    CHECK_EQ(made(c), 2);

    const char *bad = VF_SAMPLES_DIR "/README.md";
    uint8_t *jpeg = NULL;
    size_t len = 0;
    for (int i = 0; i < 2; i++) {
        vf_err e = {0};
        CHECK(vfs_thumbs_get(c, bad, 1.0, &jpeg, &len, &e) < 0);
        CHECK(!jpeg && !len);
        CHECK_MSG(strstr(e.msg, "README.md") != NULL, "%s", e.msg);
    }
    CHECK_EQ(made(c), 3);
    CHECK_EQ(counts(c).kept, 3); /* the failure is kept too */
    /* a file outside the archive is refused when opened, and that is not kept: it may be a
     * link swapped in for a moment */
    vf_err out = {0};
    CHECK_EQ(vfs_thumbs_get(c, VF_SAMPLES_DIR "/../README.md", 1.0, &jpeg, &len, &out),
             VF_ERR_DENIED);
    CHECK_MSG(strstr(out.msg, "outside the archive") != NULL, "%s", out.msg);
    CHECK_EQ(counts(c).kept, 3);
    vfs_thumbs_free(&c);

    CHECK_OK(vfs_thumbs_create(1, &samples, &c, &err), err.msg); /* keeps nothing */
    get(c, 0.5);
    get(c, 0.5);
    CHECK_EQ(made(c), 2);
    CHECK_EQ(counts(c).kept, 0);
    vfs_thumbs_free(&c);
}

/* A bound that holds two pictures and not three drops the least recently used one. */
static void least_recent_dropped(void)
{
    vfs_thumbs *c = NULL;
    vf_err err = {0};
    CHECK_OK(vfs_thumbs_create(64 << 20, &samples, &c, &err), err.msg);
    int64_t cost[3];
    for (int i = 0; i < 3; i++) {
        int64_t before = counts(c).bytes;
        get(c, 0.2 + 0.4 * i);
        cost[i] = counts(c).bytes - before;
        CHECK(cost[i] > 0);
    }
    vfs_thumbs_free(&c);
    CHECK_OK(vfs_thumbs_create(cost[0] + cost[1] + cost[2] / 2, &samples, &c, &err), err.msg);
    get(c, 0.2); /* A */
    get(c, 0.6); /* B */
    get(c, 0.2); /* A used again: B is the least recent */
    get(c, 1.0); /* C: B dropped */
    CHECK_EQ(made(c), 3);
    CHECK_EQ(counts(c).kept, 2);
    get(c, 0.2);
    CHECK_EQ(made(c), 3);
    get(c, 0.6);
    CHECK_EQ(made(c), 4);
    vfs_thumbs_free(&c);
}

int main(void)
{
    vf_err err = {0};
    CHECK_OK(vfi_archive_init(&samples, VF_SAMPLES_DIR, 0, &err), err.msg);
    many_at_once();
    kept_and_failed();
    least_recent_dropped();
    vfi_archive_clear(&samples);
    puts("test_thumbs: ok");
    return 0;
}
