/*
 * conv.c - vidfeat's convolutions (conv.h): which may run, their weights packed, their scratch,
 * the dispatch to the AVX2 kernels (direct_avx2.c, winograd_avx2.c), and the plain-C references
 * the tests hold them to.
 */
#include "kernels/conv.h"

#include <math.h>
#include <string.h>

#include "kernels/direct_avx2.h"
#include "kernels/winograd_avx2.h"

/* Lavin and Gray's F(4x4, 3x3): U = G g G', V = B' d B, Y = A' (U . V) A. */
static const double G[6][3] = {{1.0 / 4, 0, 0},
                               {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                               {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                               {1.0 / 24, 1.0 / 12, 1.0 / 6},
                               {1.0 / 24, -1.0 / 12, 1.0 / 6},
                               {0, 0, 1}};
static const float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const float AT[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

int vfk_conv_supported(const vfk_conv *c, vfk_algo algo, const vf_isa *isa, const char **why)
{
    const char *no = NULL;
    if (isa->level < VF_ISA_AVX2)
        no = "vidfeat's convolutions need AVX2 and FMA";
    else if (c->ic < VFK_BLOCK)
        no = "fewer than 8 input channels (the image's own convolution)";
    else if (c->kh < 1 || c->kw < 1 || c->sh < 1 || c->sw < 1 || c->dh < 1 || c->dw < 1)
        no = "a window vidfeat's convolutions do not take";
    else if (algo == VFK_WINOGRAD &&
             (c->kh != 3 || c->kw != 3 || c->sh != 1 || c->sw != 1 || c->dh != 1 || c->dw != 1))
        no = "Winograd F(4x4, 3x3) takes 3x3 windows of stride 1 only";
    if (why)
        *why = no;
    return no == NULL;
}

size_t vfk_conv_packed_size(const vfk_conv *c, vfk_algo algo)
{
    size_t per = (size_t)vfk_pairs(c->oc) * 16 * vfk_padded(c->ic);
    return algo == VFK_WINOGRAD ? 36 * per : per * c->kh * c->kw;
}

void vfk_conv_pack(const vfk_conv *c, vfk_algo algo, const float *w, float *packed)
{
    const int icp = vfk_padded(c->ic), pairs = vfk_pairs(c->oc);
    memset(packed, 0, vfk_conv_packed_size(c, algo) * sizeof(float));
    for (int o = 0; o < c->oc; o++) {
        for (int i = 0; i < c->ic; i++) {
            const float *g = w + ((size_t)o * c->ic + i) * c->kh * c->kw;
            if (algo == VFK_DIRECT) {
                for (int t = 0; t < c->kh * c->kw; t++)
                    packed[(((size_t)(o / 16) * c->kh * c->kw + t) * icp + i) * 16 + o % 16] = g[t];
                continue;
            }
            double gg[6][3]; /* G g, then (G g) G' */
            for (int r = 0; r < 6; r++)
                for (int q = 0; q < 3; q++)
                    gg[r][q] = G[r][0] * g[q] + G[r][1] * g[3 + q] + G[r][2] * g[6 + q];
            for (int r = 0; r < 6; r++)
                for (int s = 0; s < 6; s++)
                    packed[(((size_t)(r * 6 + s) * pairs + o / 16) * icp + i) * 16 + o % 16] =
                        (float)(gg[r][0] * G[s][0] + gg[r][1] * G[s][1] + gg[r][2] * G[s][2]);
        }
    }
}

size_t vfk_conv_scratch_size(const vfk_conv *c, vfk_algo algo, int n, int threads)
{
    (void)n, (void)threads; /* a Winograd block's V and M are shared by the threads */
    if (algo != VFK_WINOGRAD)
        return 0;
    return (size_t)36 * vfk_wino_tiles(c) * (vfk_padded(c->ic) + (size_t)vfk_pairs(c->oc) * 16);
}

void vfk_conv_run(const vfk_conv *c, vfk_algo algo, const vf_isa *isa, int n, const float *x,
                  const float *packed, const float *bias, float *scratch, float *y)
{
    if (!vfk_conv_supported(c, algo, isa, NULL)) {
        vfk_conv_ref(c, algo, n, x, packed, bias, y);
        return;
    }
    if (algo == VFK_WINOGRAD)
        vfk_winograd_avx2(c, n, x, packed, bias, scratch, y);
    else
        vfk_direct_avx2(c, n, x, packed, bias, y);
}

/* ---- the references --------------------------------------------------------------------- */

static float clip(const vfk_conv *c, float v)
{
    return v < c->lo ? c->lo : v > c->hi ? c->hi : v;
}

/* Element (ch, y, x) of a picture of c channels in blocks, or 0 outside it. */
static float at(const float *p, int h, int w, int ch, int y, int x)
{
    if (y < 0 || y >= h || x < 0 || x >= w)
        return 0.0f;
    return p[(((size_t)(ch / VFK_BLOCK) * h + y) * w + x) * VFK_BLOCK + ch % VFK_BLOCK];
}

static void direct_ref(const vfk_conv *c, const float *x, const float *packed, const float *bias,
                       float *y)
{
    const int icp = vfk_padded(c->ic);
    for (int o = 0; o < vfk_padded(c->oc); o++)
        for (int oy = 0; oy < c->oh; oy++)
            for (int ox = 0; ox < c->ow; ox++) {
                float s = bias && o < c->oc ? bias[o] : 0.0f;
                for (int t = 0; t < c->kh * c->kw; t++)
                    for (int i = 0; i < c->ic; i++)
                        s += at(x, c->ih, c->iw, i, oy * c->sh - c->ph + t / c->kw * c->dh,
                                ox * c->sw - c->pw + t % c->kw * c->dw) *
                             packed[(((size_t)(o / 16) * c->kh * c->kw + t) * icp + i) * 16 +
                                    o % 16];
                y[(((size_t)(o / VFK_BLOCK) * c->oh + oy) * c->ow + ox) * VFK_BLOCK +
                  o % VFK_BLOCK] = o < c->oc ? clip(c, s) : 0.0f;
            }
}

static void winograd_ref(const vfk_conv *c, const float *x, const float *packed, const float *bias,
                         float *y)
{
    const int icp = vfk_padded(c->ic), pairs = vfk_pairs(c->oc);
    for (int ty = 0; ty < c->oh; ty += 4)
        for (int tx = 0; tx < c->ow; tx += 4)
            for (int o = 0; o < vfk_padded(c->oc); o++) {
                float m[36] = {0};
                for (int i = 0; i < c->ic; i++) {
                    float d[6][6], u[6][6];
                    for (int r = 0; r < 6; r++)
                        for (int q = 0; q < 6; q++)
                            d[r][q] = at(x, c->ih, c->iw, i, ty - c->ph + r, tx - c->pw + q);
                    for (int r = 0; r < 6; r++) /* B' d */
                        for (int q = 0; q < 6; q++) {
                            u[r][q] = 0;
                            for (int k = 0; k < 6; k++)
                                u[r][q] += BT[r][k] * d[k][q];
                        }
                    for (int r = 0; r < 6; r++) /* (B' d) B, times U */
                        for (int q = 0; q < 6; q++) {
                            float v = 0;
                            for (int k = 0; k < 6; k++)
                                v += u[r][k] * BT[q][k];
                            m[r * 6 + q] +=
                                v * packed[(((size_t)(r * 6 + q) * pairs + o / 16) * icp + i) * 16 +
                                           o % 16];
                        }
                }
                float am[4][6];
                for (int r = 0; r < 4; r++)
                    for (int q = 0; q < 6; q++) {
                        am[r][q] = 0;
                        for (int k = 0; k < 6; k++)
                            am[r][q] += AT[r][k] * m[k * 6 + q];
                    }
                for (int r = 0; r < 4 && ty + r < c->oh; r++)
                    for (int q = 0; q < 4 && tx + q < c->ow; q++) {
                        float s = bias && o < c->oc ? bias[o] : 0.0f;
                        for (int k = 0; k < 6; k++)
                            s += am[r][k] * AT[q][k];
                        y[(((size_t)(o / VFK_BLOCK) * c->oh + ty + r) * c->ow + tx + q) *
                              VFK_BLOCK +
                          o % VFK_BLOCK] = o < c->oc ? clip(c, s) : 0.0f;
                    }
            }
}

void vfk_conv_ref(const vfk_conv *c, vfk_algo algo, int n, const float *x, const float *packed,
                  const float *bias, float *y)
{
    size_t xs = (size_t)vfk_padded(c->ic) * c->ih * c->iw,
           ys = (size_t)vfk_padded(c->oc) * c->oh * c->ow;
    for (int img = 0; img < n; img++) {
        if (algo == VFK_WINOGRAD)
            winograd_ref(c, x + img * xs, packed, bias, y + img * ys);
        else
            direct_ref(c, x + img * xs, packed, bias, y + img * ys);
    }
}
