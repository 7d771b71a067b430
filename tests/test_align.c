/*
 * test_align.c - search/align.h on films made of vectors: a "film" is a unit vector for every
 * time, shots of 3 s each moving slowly (as a pan does), so frames of one shot look alike and a
 * shifted line finds similar frames too. A copy is the film's vectors at other times with noise
 * (re-encoding). Checked: a copy inserted at an offset and sampled at another frame rate is one
 * segment with the right times (within 0.5 s) and speed 1; a copy sped up 4% (PAL) has speed
 * 1.04; a clip shown twice is two segments; sound patches reused at an offset that is no multiple
 * of the patch, pairs of them just below the threshold, are one span whose ends are within a
 * patch of the truth; unrelated films, frames marked flat, and a copy shorter than the minimum
 * duration give none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "search/align.h"

#define DIM     64
#define SHOT_S  3.0
#define N_SHOTS 40
#define MAX_N   4096

typedef struct film {
    float base[N_SHOTS][DIM], drift[N_SHOTS][DIM];
} film;

/* a file: frames at times, each a film's moment (or none: other material) */
typedef struct file {
    int64_t n;
    double t[MAX_N];
    float vec[MAX_N * DIM];
    unsigned char flat[MAX_N];
} file;

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

static void make_film(film *f, unsigned seed)
{
    for (int s = 0; s < N_SHOTS; s++)
        for (int j = 0; j < DIM; j++) {
            f->base[s][j] = (float)gauss(&seed);
            f->drift[s][j] = (float)gauss(&seed);
        }
}

/* the film at time x, with noise of the given size (0: none) */
static void moment(const film *f, double x, double noise, unsigned *seed, float *out)
{
    int s = (int)(x / SHOT_S) % N_SHOTS;
    double into = fmod(x, SHOT_S);
    for (int j = 0; j < DIM; j++)
        out[j] = f->base[s][j] + (float)(0.3 * into) * f->drift[s][j];
    unit(out);
    if (noise > 0) {
        float e[DIM];
        for (int j = 0; j < DIM; j++)
            e[j] = (float)gauss(seed);
        unit(e);
        for (int j = 0; j < DIM; j++)
            out[j] += (float)noise * e[j];
        unit(out);
    }
}

/* append to fl the frames of `seconds` at `fps` from file time `at`, showing film f from `from`
 * at `speed` (f's seconds per file second) */
static void append(file *fl, const film *f, double at, double seconds, double fps, double from,
                   double speed, double noise, unsigned *seed)
{
    for (double x = 0; x < seconds - 1e-9 && fl->n < MAX_N; x += 1.0 / fps) {
        fl->t[fl->n] = at + x;
        moment(f, from + speed * x, noise, seed, fl->vec + fl->n * DIM);
        fl->flat[fl->n++] = 0;
    }
}

/* every pair of frames with a cosine of at least `bound`: what a search would propose */
static int64_t candidates(const file *a, const file *b, double bound, vfi_align_hit *h, int64_t max)
{
    int64_t n = 0;
    for (int64_t i = 0; i < a->n; i++)
        for (int64_t j = 0; j < b->n && n < max; j++) {
            double s = 0;
            for (int k = 0; k < DIM; k++)
                s += (double)a->vec[i * DIM + k] * b->vec[j * DIM + k];
            if (s >= bound)
                h[n++] = (vfi_align_hit){i, j, (float)s};
        }
    return n;
}

static vfi_align_hit hits[1 << 20];

static int align(const file *a, const file *b, double min_duration, vfi_segment *seg)
{
    vfi_align_opts o = {DIM, 0.8, min_duration};
    vfi_align_file fa = {a->n, a->t, a->vec, a->flat}, fb = {b->n, b->t, b->vec, b->flat};
    int64_t n = candidates(a, b, 0.65, hits, (int64_t)(sizeof(hits) / sizeof(hits[0])));
    int n_seg = -1;
    vf_err err = {0};
    CHECK_OK(vfi_align(&fa, &fb, hits, n, &o, seg, 16, &n_seg, &err), err.msg);
    for (int i = 0; i < n_seg; i++)
        printf("  a %.2f-%.2f  b %.2f-%.2f  score %.3f speed %.3f frames %lld\n", seg[i].a_start,
               seg[i].a_end, seg[i].b_start, seg[i].b_end, seg[i].score, seg[i].speed,
               (long long)seg[i].frames);
    return n_seg;
}

static file a, b;

int main(void)
{
    static film source, other, third;
    make_film(&source, 1);
    make_film(&other, 2);
    make_film(&third, 3);
    unsigned seed = 11;
    vfi_segment seg[16];

    /* the source, 30 s at 5 frames/s */
    a.n = 0;
    append(&a, &source, 0, 30, 5, 0, 1, 0, &seed);

    printf("a copy of 10-20 s at 8 s into other material, 12 frames/s, re-encoded:\n");
    b.n = 0;
    append(&b, &other, 0, 8, 12, 0, 1, 0, &seed);
    append(&b, &source, 8, 10, 12, 10, 1, 0.2, &seed);
    append(&b, &other, 18, 8, 12, 30, 1, 0, &seed);
    CHECK(align(&a, &b, 2, seg) == 1);
    CHECK_NEAR(seg[0].a_start, 10, 0.5);
    CHECK_NEAR(seg[0].a_end, 20, 0.5);
    CHECK_NEAR(seg[0].b_start, 8, 0.5);
    CHECK_NEAR(seg[0].b_end, 18, 0.5);
    CHECK_NEAR(seg[0].speed, 1, 0.01);
    CHECK(seg[0].score > 0.9 && seg[0].frames >= 40);

    printf("the same copy sped up 4%% (25 frames/s shown at 24):\n");
    b.n = 0;
    append(&b, &other, 0, 5, 10, 0, 1, 0, &seed);
    append(&b, &source, 5, 12, 10, 6, 1.04, 0.2, &seed);
    CHECK(align(&a, &b, 2, seg) == 1);
    CHECK_NEAR(seg[0].speed, 1 / 1.04, 0.012);
    CHECK_NEAR(seg[0].a_start, 6, 0.5);
    CHECK_NEAR(seg[0].b_start, 5, 0.5);
    CHECK_NEAR(seg[0].a_end, 6 + 12 * 1.04, 0.6);

    printf("a clip shown twice:\n");
    b.n = 0;
    append(&b, &source, 0, 6, 10, 3, 1, 0.2, &seed);
    append(&b, &other, 6, 10, 10, 0, 1, 0, &seed);
    append(&b, &source, 16, 6, 10, 3, 1, 0.2, &seed);
    CHECK(align(&a, &b, 2, seg) == 2);
    CHECK_NEAR(seg[0].a_start, 3, 0.5);
    CHECK_NEAR(seg[1].a_start, 3, 0.5);
    CHECK(fabs(seg[0].b_start - seg[1].b_start) > 15);

    printf("sound: 22 s of 0.96 s patches reused 7.3 s in (no multiple of the patch), re-encoded,"
           " a patch or two in places just below the threshold:\n");
    {
        static file pa, pb;
        pa.n = pb.n = 0;
        append(&pa, &source, 0, 40, 1 / 0.96, 0, 1, 0, &seed); /* patches at 0, 0.96, ... */
        append(&pb, &other, 0, 7.3, 1 / 0.96, 0, 1, 0, &seed);
        int64_t first = pb.n;
        append(&pb, &source, 7.3, 22, 1 / 0.96, 10, 1, 0.2, &seed); /* source's 10-32 s */
        int64_t last = pb.n;
        append(&pb, &other, 29.3, 6, 1 / 0.96, 20, 1, 0, &seed);
        /* patches that straddle a change in the sound look less alike: runs of two and three
         * of them pushed just below the threshold (a cosine of about 0.75 with their
         * counterpart), 3 patches of full likeness between */
        for (int64_t k = first + 3, run = 2; k + run < last - 2; k += run + 3, run = 5 - run)
            for (int64_t q = k; q < k + run; q++) {
                float *v = pb.vec + q * DIM, e[DIM];
                for (int j = 0; j < DIM; j++)
                    e[j] = (float)gauss(&seed);
                unit(e);
                for (int j = 0; j < DIM; j++)
                    v[j] += 0.85f * e[j];
                unit(v);
            }
        CHECK_MSG(align(&pa, &pb, 2, seg) == 1, "the reused sound in pieces, not one span");
        CHECK_NEAR(seg[0].a_start, 10, 0.96);
        CHECK_NEAR(seg[0].a_end, 32 - 0.96, 0.96);
        CHECK_NEAR(seg[0].b_start, 7.3, 0.96);
        CHECK_NEAR(seg[0].b_end, 29.3 - 0.96, 0.96);
        CHECK_NEAR(seg[0].speed, 1, 0.01);
    }

    printf("a copy of 10-20 s with half a second dropped at 15 s (12 frames/s):\n");
    b.n = 0;
    append(&b, &other, 0, 6, 12, 0, 1, 0, &seed);
    append(&b, &source, 6, 5, 12, 10, 1, 0.2, &seed);      /* source 10-15 */
    append(&b, &source, 11, 4.5, 12, 15.5, 1, 0.2, &seed); /* source 15.5-20 */
    append(&b, &other, 15.5, 6, 12, 20, 1, 0, &seed);
    CHECK_MSG(align(&a, &b, 2, seg) == 1, "the copy with a cut in two pieces, not one span");
    CHECK_NEAR(seg[0].a_start, 10, 0.5);
    CHECK_NEAR(seg[0].a_end, 20, 0.5);
    CHECK_NEAR(seg[0].b_start, 6, 0.5);
    CHECK_NEAR(seg[0].b_end, 15.5, 0.5);

    printf("unrelated films:\n");
    b.n = 0;
    append(&b, &other, 0, 30, 10, 0, 1, 0, &seed);
    append(&b, &third, 30, 30, 10, 0, 1, 0, &seed);
    CHECK(align(&a, &b, 2, seg) == 0);

    printf("the copy's frames marked flat (they show nothing):\n");
    b.n = 0;
    append(&b, &source, 0, 10, 10, 10, 1, 0.2, &seed);
    memset(b.flat, 1, (size_t)b.n);
    CHECK(align(&a, &b, 2, seg) == 0);

    printf("a copy of 1.5 s, 2 s asked for, then 1 s asked for:\n");
    b.n = 0;
    append(&b, &other, 0, 5, 10, 0, 1, 0, &seed);
    append(&b, &source, 5, 1.5, 10, 21, 1, 0.2, &seed);
    append(&b, &other, 6.5, 5, 10, 20, 1, 0, &seed);
    CHECK(align(&a, &b, 2, seg) == 0);
    CHECK(align(&a, &b, 1, seg) == 1);
    CHECK_NEAR(seg[0].a_start, 21, 0.5);

    printf("no candidates, no frames:\n");
    file empty = {0};
    vfi_align_opts o = {DIM, 0.8, 2};
    vfi_align_file fa = {a.n, a.t, a.vec, NULL}, fe = {0, empty.t, empty.vec, NULL};
    int n_seg = -1;
    vf_err err = {0};
    CHECK_OK(vfi_align(&fa, &fe, hits, 0, &o, seg, 16, &n_seg, &err), err.msg);
    CHECK(n_seg == 0);
    printf("test_align: ok\n");
    return 0;
}
