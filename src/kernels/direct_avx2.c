/*
 * direct_avx2.c - the direct convolution on AVX2 and FMA (conv.h): the output pixels, in order,
 * are cut in strips of 6 (a strip may span rows: small pictures waste nothing), each strip times
 * a pair of 8-channel output blocks computed by the 6 x 16
 * inner loop (mk_avx2.h) over every tap of the kernel and every input block, the strip's pixels
 * reading the zero block where a tap falls in the padding. The input channels are taken in
 * chunks whose packed weights stay in the level-1 and -2 caches, the partial sums kept in the
 * output between chunks. OpenMP's threads take (image, group of strips) items, each computing
 * every pair of output blocks of its group while the group's input is in the nearest caches.
 */
#include <math.h>
#include <string.h>

#include "kernels/direct_avx2.h"
#include "kernels/mk_avx2.h"

/* Bytes of packed weights a chunk of input channels may hold (per pair of output blocks). */
#define CHUNK_BYTES (64 << 10)
/* Strips an item of the threads' work takes (the output pixels of a group, in order). */
#define GROUP 8

static const float zero_block[VFK_BLOCK] __attribute__((aligned(32)));

/* The strip of row oy, columns ox0.. (nw of them), pair pr, input blocks [b0, b1): first chunk
 * starts from the bias, the last clips and stores the pair's nb (1 or 2) blocks. */
VFK_AVX2 static void strip(const vfk_conv *c, const float *x, const float *wpair,
                           const float bias16[16], float *ypair, size_t yplane, int p0, int nw,
                           int b0, int b1, int first, int last, int nb, const float mask16[16])
{
    const size_t xplane = (size_t)c->ih * c->iw * VFK_BLOCK;
    const int icp = vfk_padded(c->ic);
    __m256 acc[VFK_MR][2];
    for (int j = 0; j < VFK_MR; j++) {
        float *yp = ypair + ((size_t)p0 + j) * VFK_BLOCK;
        if (first || j >= nw) {
            acc[j][0] = _mm256_loadu_ps(bias16);
            acc[j][1] = _mm256_loadu_ps(bias16 + 8);
        } else {
            acc[j][0] = _mm256_load_ps(yp);
            acc[j][1] = nb > 1 ? _mm256_load_ps(yp + yplane) : _mm256_setzero_ps();
        }
    }
    int oy[VFK_MR], ox[VFK_MR]; /* the strip's pixels, which may span rows */
    for (int j = 0; j < VFK_MR; j++) {
        oy[j] = (p0 + j) / c->ow;
        ox[j] = (p0 + j) % c->ow;
    }
    for (int ky = 0; ky < c->kh; ky++) {
        for (int kx = 0; kx < c->kw; kx++) {
            const float *p[VFK_MR];
            ptrdiff_t step[VFK_MR];
            for (int j = 0; j < VFK_MR; j++) {
                int iy = oy[j] * c->sh - c->ph + ky * c->dh;
                int ix = ox[j] * c->sw - c->pw + kx * c->dw;
                int in = j < nw && iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw;
                p[j] = in ? x + (size_t)b0 * xplane + ((size_t)iy * c->iw + ix) * VFK_BLOCK
                          : zero_block;
                step[j] = in ? (ptrdiff_t)xplane : 0;
            }
            const float *w = wpair + (((size_t)ky * c->kw + kx) * icp + (size_t)b0 * 8) * 16;
            vfk_mk_6x16(acc, p, step, w, b1 - b0);
        }
    }
    const __m256 lo = _mm256_set1_ps(c->lo), hi = _mm256_set1_ps(c->hi);
    const __m256 m0 = _mm256_loadu_ps(mask16), m1 = _mm256_loadu_ps(mask16 + 8);
    for (int j = 0; j < nw; j++) {
        float *yp = ypair + ((size_t)p0 + j) * VFK_BLOCK;
        __m256 a0 = acc[j][0], a1 = acc[j][1];
        if (last) { /* clipped; the padding channels of the last block kept zero */
            a0 = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(a0, lo), hi), m0);
            a1 = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(a1, lo), hi), m1);
        }
        _mm256_store_ps(yp, a0);
        if (nb > 1)
            _mm256_store_ps(yp + yplane, a1);
    }
}

VFK_AVX2 void vfk_direct_avx2(const vfk_conv *c, int n, const float *x, const float *packed,
                              const float *bias, float *y)
{
    const int icp = vfk_padded(c->ic), ocp = vfk_padded(c->oc), pairs = vfk_pairs(c->oc);
    const int iblocks = icp / VFK_BLOCK, oblocks = ocp / VFK_BLOCK;
    const size_t xplane = (size_t)c->ih * c->iw * VFK_BLOCK;
    const size_t yplane = (size_t)c->oh * c->ow * VFK_BLOCK;
    const size_t wpair = (size_t)c->kh * c->kw * icp * 16;
    /* input blocks a chunk: its weights within CHUNK_BYTES (at least one block) */
    int chunk = (int)(CHUNK_BYTES / ((size_t)c->kh * c->kw * 8 * 16 * sizeof(float)));
    chunk = chunk < 1 ? 1 : chunk > iblocks ? iblocks : chunk;
    const int pixels = c->oh * c->ow, strips = (pixels + VFK_MR - 1) / VFK_MR;
    const int groups = (strips + GROUP - 1) / GROUP;
#pragma omp parallel for collapse(2) schedule(static)
    for (int img = 0; img < n; img++) {
        for (int gi = 0; gi < groups; gi++) {
            /* every pair of output blocks for this group of strips, so that the group's input
             * is read from the nearest caches by all but the first */
            const float *xi = x + (size_t)img * iblocks * xplane;
            int s1 = (gi + 1) * GROUP < strips ? (gi + 1) * GROUP : strips;
            for (int pr = 0; pr < pairs; pr++) {
                float bias16[16], mask16[16];
                for (int k = 0; k < 16; k++) {
                    int ch = pr * 16 + k;
                    bias16[k] = bias && ch < c->oc ? bias[ch] : 0.0f;
                    union {
                        float f;
                        unsigned u;
                    } m = {.u = ch < c->oc ? ~0u : 0u};
                    mask16[k] = m.f;
                }
                float *ypair = y + ((size_t)img * oblocks + (size_t)pr * 2) * yplane;
                int nb = oblocks - pr * 2 >= 2 ? 2 : 1;
                for (int b0 = 0; b0 < iblocks; b0 += chunk) {
                    int b1 = b0 + chunk < iblocks ? b0 + chunk : iblocks;
                    for (int st = gi * GROUP; st < s1; st++) {
                        int p0 = st * VFK_MR;
                        int nw = pixels - p0 < VFK_MR ? pixels - p0 : VFK_MR;
                        strip(c, xi, packed + (size_t)pr * wpair, bias16, ypair, yplane, p0, nw, b0,
                              b1, b0 == 0, b1 == iblocks, nb, mask16);
                    }
                }
            }
        }
    }
}
