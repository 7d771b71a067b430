/*
 * test_framenum.c - frame numbers from the packets read (media/framenum.c): a B-pyramid's
 * decoding order numbered in presentation order; frames numbered while packets shown after
 * them are still pending; a seek's skipped packets; duplicate and untimed-looking times; the
 * bound on pending times; against a brute-force count over random reorderings.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "media/framenum.h"

/* Presentation times of a GOP I0 P4 B2 b1 b3 P8 B6 b5 b7 ... in decoding order. */
static const int64_t pyramid[] = {0, 4, 2, 1, 3, 8, 6, 5, 7, 12, 10, 9, 11};
#define NPYR (int)(sizeof(pyramid) / sizeof(pyramid[0]))

static void every_frame_in_order(void)
{
    vf_framenum l;
    vfi_framenum_init(&l);
    /* a decoder with a reorder delay of 2: frame t comes out once packets up to t + 2 are in */
    int added = 0;
    for (int64_t t = 0; t < NPYR; t++) {
        while (added < NPYR && (added < (int)t + 3))
            CHECK(vfi_framenum_add(&l, pyramid[added++]) == VF_OK);
        CHECK_EQ(vfi_framenum_number(&l, t), t);
    }
    CHECK_EQ(l.packets, NPYR);
    vfi_framenum_clear(&l);
}

static void sparse_frames(void)
{
    /* Only a few frames come out (the decoder dropped the others): their numbers still count
     * every packet shown before them. */
    vf_framenum l;
    vfi_framenum_init(&l);
    for (int i = 0; i < NPYR; i++)
        CHECK(vfi_framenum_add(&l, pyramid[i] * 10) == VF_OK);
    CHECK_EQ(vfi_framenum_number(&l, 40), 4);
    CHECK_EQ(vfi_framenum_number(&l, 80), 8);
    CHECK_EQ(vfi_framenum_number(&l, 110), 11);
    vfi_framenum_clear(&l);
}

static void seek_skips(void)
{
    vf_framenum l;
    vfi_framenum_init(&l);
    CHECK(vfi_framenum_add(&l, 0) == VF_OK);
    CHECK_EQ(vfi_framenum_number(&l, 0), 0);
    vfi_framenum_skip(&l, 99); /* packets 1..99 passed by a seek */
    CHECK(vfi_framenum_add(&l, 102) == VF_OK);
    CHECK(vfi_framenum_add(&l, 100) == VF_OK);
    CHECK(vfi_framenum_add(&l, 101) == VF_OK);
    CHECK_EQ(vfi_framenum_number(&l, 100), 100);
    CHECK_EQ(vfi_framenum_number(&l, 102), 102);
    CHECK_EQ(l.packets, 103);
    vfi_framenum_clear(&l);
}

static void bounded(void)
{
    /* A key frame never followed by a numbered frame: pending times stop at the bound, the
     * earliest counted as before every later frame. */
    vf_framenum l;
    vfi_framenum_init(&l);
    for (int64_t t = 0; t < FRAMENUM_MAX_PENDING + 1000; t++)
        CHECK(vfi_framenum_add(&l, t) == VF_OK);
    CHECK(l.n <= FRAMENUM_MAX_PENDING);
    CHECK_EQ(vfi_framenum_number(&l, FRAMENUM_MAX_PENDING + 500), FRAMENUM_MAX_PENDING + 500);
    vfi_framenum_clear(&l);
}

static void random_reorders(void)
{
    srand(7);
    for (int round = 0; round < 200; round++) {
        enum { N = 300 };
        int64_t order[N];
        int shown[N];
        for (int i = 0; i < N; i++)
            order[i] = i * 3 + 1; /* presentation times, then shuffled within small windows */
        int w = 1 + rand() % 8;
        for (int i = 0; i + w <= N; i += w)
            for (int k = w - 1; k > 0; k--) {
                int j = rand() % (k + 1);
                int64_t t = order[i + k];
                order[i + k] = order[i + j];
                order[i + j] = t;
            }
        for (int i = 0; i < N; i++)
            shown[i] = rand() % 3 == 0;
        vf_framenum l;
        vfi_framenum_init(&l);
        int added = 0;
        for (int f = 0; f < N; f++) { /* frame f (time f*3+1) once its window is all in */
            while (added < N && added < (f / w + 1) * w)
                CHECK(vfi_framenum_add(&l, order[added++]) == VF_OK);
            if (shown[f])
                CHECK_EQ(vfi_framenum_number(&l, f * 3 + 1), f);
        }
        vfi_framenum_clear(&l);
    }
}

int main(void)
{
    every_frame_in_order();
    sparse_frames();
    seek_skips();
    bounded();
    random_reorders();
    return 0;
}
