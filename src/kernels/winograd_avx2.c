/*
 * winograd_avx2.c - F(4x4, 3x3) on AVX2 and FMA (conv.h). Each 4x4 output tile comes from a 6x6
 * input tile: V = B' d B per input channel, then for each of the 36 transformed elements the
 * products M = U V summed over the input channels (U = G g G', packed once by vfk_conv_pack),
 * then Y = A' M A per output channel. nChw8c makes each pixel's 8 channels one ymm, so the
 * transforms run 8 channels at once; the 36 products of a block of TB tiles are 36 matrix
 * products (TB x icp by icp x ocp), each by the 6 x 16 inner loop of the direct kernel
 * (mk_avx2.h). A block's three phases are split among OpenMP's threads, which share its V and M
 * (layout.h's scratch): each U streams through the caches once a block.
 *
 * The points are 0, +-1, +-2 and infinity (Lavin and Gray's F(4x4, 3x3)); test_kernels measures
 * the rounding against the direct convolution.
 */
#include <string.h>

#include "kernels/winograd_avx2.h"
#include "kernels/mk_avx2.h"

static const float zero_block[VFK_BLOCK] __attribute__((aligned(32)));

/* B' d over the 6 rows of d (each a ymm, k apart), into t (6 apart): the input transform's
 * first pass; the second runs it on t's columns. */
#define BT_PASS(d, k, t, m)                                                                        \
    do {                                                                                           \
        const __m256 f4 = _mm256_set1_ps(4.0f), f5 = _mm256_set1_ps(5.0f),                         \
                     f2 = _mm256_set1_ps(2.0f);                                                    \
        __m256 d0 = d[0], d1 = d[k], d2 = d[2 * k], d3 = d[3 * k], d4 = d[4 * k], d5 = d[5 * k];   \
        t[0] = _mm256_fmadd_ps(f4, d0, _mm256_fnmadd_ps(f5, d2, d4));                              \
        __m256 a = _mm256_fnmadd_ps(f4, d1, d3), b = _mm256_fnmadd_ps(f4, d2, d4);                 \
        t[m] = _mm256_add_ps(a, b);                                                                \
        t[2 * m] = _mm256_sub_ps(b, a);                                                            \
        a = _mm256_mul_ps(f2, _mm256_sub_ps(d3, d1));                                              \
        b = _mm256_sub_ps(d4, d2);                                                                 \
        t[3 * m] = _mm256_add_ps(b, a);                                                            \
        t[4 * m] = _mm256_sub_ps(b, a);                                                            \
        t[5 * m] = _mm256_fmadd_ps(f4, d1, _mm256_fnmadd_ps(f5, d3, d5));                          \
    } while (0)

/* A' m over 6 rows of m (k apart) into 4 rows of t (q apart). */
#define AT_PASS(m, k, t, q)                                                                        \
    do {                                                                                           \
        const __m256 f2 = _mm256_set1_ps(2.0f), f4 = _mm256_set1_ps(4.0f),                         \
                     f8 = _mm256_set1_ps(8.0f);                                                    \
        __m256 s12 = _mm256_add_ps(m[k], m[2 * k]), d12 = _mm256_sub_ps(m[k], m[2 * k]);           \
        __m256 s34 = _mm256_add_ps(m[3 * k], m[4 * k]), d34 = _mm256_sub_ps(m[3 * k], m[4 * k]);   \
        t[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);                                       \
        t[q] = _mm256_fmadd_ps(f2, d34, d12);                                                      \
        t[2 * q] = _mm256_fmadd_ps(f4, s34, s12);                                                  \
        t[3 * q] = _mm256_add_ps(_mm256_fmadd_ps(f8, d34, d12), m[5 * k]);                         \
    } while (0)

typedef struct geom {
    int ty, tx;    /* tiles down and across an image */
    int per_image; /* ty * tx */
    size_t xplane; /* floats of an input block plane */
    size_t yplane; /* of an output block plane */
    int iblocks, oblocks, pairs, icp, tb;
} geom;

/* Tile t (of all the images') as its image and top-left output pixel. */
static inline void tile_at(const geom *g, int t, int *img, int *oy, int *ox)
{
    *img = t / g->per_image;
    int r = t % g->per_image;
    *oy = r / g->tx * 4;
    *ox = r % g->tx * 4;
}

/* V[.][row][block cb] of tile t: B' d B of its 6x6 input (zeros outside the picture). */
VFK_AVX2 static void input_tile(const vfk_conv *c, const geom *g, const float *x, int t, int cb,
                                float *v, int row)
{
    int img, oy, ox;
    tile_at(g, t, &img, &oy, &ox);
    const float *xb = x + ((size_t)img * g->iblocks + cb) * g->xplane;
    __m256 d[36], u[36];
    for (int r = 0; r < 6; r++) {
        int iy = oy - c->ph + r;
        for (int q = 0; q < 6; q++) {
            int ix = ox - c->pw + q;
            d[r * 6 + q] = iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw
                               ? _mm256_load_ps(xb + ((size_t)iy * c->iw + ix) * VFK_BLOCK)
                               : _mm256_setzero_ps();
        }
    }
    for (int q = 0; q < 6; q++) /* down each column: u[i][q] */
        BT_PASS((d + q), 6, (u + q), 6);
    for (int i = 0; i < 6; i++) { /* along each row: element (i, j) */
        __m256 w[6];
        BT_PASS((u + i * 6), 1, w, 1);
        for (int j = 0; j < 6; j++)
            _mm256_store_ps(v + ((size_t)(i * 6 + j) * g->tb + row) * g->icp + cb * VFK_BLOCK,
                            w[j]);
    }
}

/* Y of tile t, output block ob, from M: A' M A + bias, clipped, where it falls in the picture. */
VFK_AVX2 static void output_tile(const vfk_conv *c, const geom *g, const float *m, int t, int row,
                                 int ob, const float *bias8, const float *mask8, float *y)
{
    int img, oy, ox;
    tile_at(g, t, &img, &oy, &ox);
    __m256 e[36], s[24];
    const int pr = ob / 2, half = ob % 2;
    for (int k = 0; k < 36; k++)
        e[k] = _mm256_load_ps(m + (((size_t)k * g->pairs + pr) * g->tb + row) * 16 + half * 8);
    for (int q = 0; q < 6; q++) /* down each column: s[i][q], 4 rows */
        AT_PASS((e + q), 6, (s + q), 6);
    const __m256 b = _mm256_loadu_ps(bias8), lo = _mm256_set1_ps(c->lo), hi = _mm256_set1_ps(c->hi),
                 mk = _mm256_loadu_ps(mask8);
    float *yb = y + ((size_t)img * g->oblocks + ob) * g->yplane;
    for (int i = 0; i < 4 && oy + i < c->oh; i++) {
        __m256 r[4];
        AT_PASS((s + i * 6), 1, r, 1);
        for (int j = 0; j < 4 && ox + j < c->ow; j++) {
            __m256 o = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r[j], b), lo), hi);
            _mm256_store_ps(yb + ((size_t)(oy + i) * c->ow + ox + j) * VFK_BLOCK,
                            _mm256_and_ps(o, mk));
        }
    }
}

/* M[k][pr][rows r0..r0+5] = V[k][rows] U[k][pr] over every input channel. */
VFK_AVX2 static void product(const geom *g, const float *v, const float *u, float *m, int k, int pr,
                             int r0, int nt)
{
    const float *p[VFK_MR];
    ptrdiff_t step[VFK_MR];
    __m256 acc[VFK_MR][2];
    for (int j = 0; j < VFK_MR; j++) {
        int live = r0 + j < nt;
        p[j] = live ? v + ((size_t)k * g->tb + r0 + j) * g->icp : zero_block;
        step[j] = live ? VFK_BLOCK : 0;
        acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    }
    vfk_mk_6x16(acc, p, step, u + ((size_t)k * g->pairs + pr) * g->icp * 16, g->iblocks);
    float *mp = m + (((size_t)k * g->pairs + pr) * g->tb + r0) * 16;
    for (int j = 0; j < VFK_MR && r0 + j < nt; j++) {
        _mm256_store_ps(mp + j * 16, acc[j][0]);
        _mm256_store_ps(mp + j * 16 + 8, acc[j][1]);
    }
}

VFK_AVX2 void vfk_winograd_avx2(const vfk_conv *c, int n, const float *x, const float *packed,
                                const float *bias, float *scratch, float *y)
{
    geom g;
    g.ty = (c->oh + 3) / 4;
    g.tx = (c->ow + 3) / 4;
    g.per_image = g.ty * g.tx;
    g.xplane = (size_t)c->ih * c->iw * VFK_BLOCK;
    g.yplane = (size_t)c->oh * c->ow * VFK_BLOCK;
    g.icp = vfk_padded(c->ic);
    g.iblocks = g.icp / VFK_BLOCK;
    g.oblocks = vfk_padded(c->oc) / VFK_BLOCK;
    g.pairs = vfk_pairs(c->oc);
    g.tb = vfk_wino_tiles(c);
    float *v = scratch, *m = scratch + (size_t)36 * g.tb * g.icp;
    const int tiles = n * g.per_image;
#pragma omp parallel
    for (int t0 = 0; t0 < tiles; t0 += g.tb) {
        int nt = tiles - t0 < g.tb ? tiles - t0 : g.tb;
#pragma omp for collapse(2) schedule(static)
        for (int r = 0; r < nt; r++)
            for (int cb = 0; cb < g.iblocks; cb++)
                input_tile(c, &g, x, t0 + r, cb, v, r);
        int strips = (nt + VFK_MR - 1) / VFK_MR;
#pragma omp for collapse(3) schedule(static)
        for (int k = 0; k < 36; k++)
            for (int pr = 0; pr < g.pairs; pr++)
                for (int s = 0; s < strips; s++)
                    product(&g, v, packed, m, k, pr, s * VFK_MR, nt);
#pragma omp for collapse(2) schedule(static)
        for (int r = 0; r < nt; r++) {
            for (int ob = 0; ob < g.oblocks; ob++) {
                float bias8[8], mask8[8];
                for (int q = 0; q < 8; q++) {
                    int ch = ob * 8 + q;
                    bias8[q] = bias && ch < c->oc ? bias[ch] : 0.0f;
                    union {
                        float f;
                        unsigned u;
                    } mm = {.u = ch < c->oc ? ~0u : 0u};
                    mask8[q] = mm.f;
                }
                output_tile(c, &g, m, t0 + r, r, ob, bias8, mask8, y);
            }
        }
    }
}
