/*
 * test_kernels.c - vidfeat's own convolutions (kernels/conv.h) against a convolution computed
 * here in double from the unpacked weights: the plain-C references and the AVX2 kernels, direct
 * on every window shape the networks have (1x1, 3x3 with and without padding, strides, 1x7 and
 * 7x1, dilation, 5x5), Winograd on the 3x3 stride-1 ones, with channel counts that fill their
 * blocks and that do not (the layout's padding channels must come out zero), clipped (ReLU) and
 * not, for several images. Prints the largest relative error of each (max |ours - exact| over
 * max |exact|): Winograd's F(4x4, 3x3) rounding is measured here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/isa.h"
#include "kernels/conv.h"

#define DIRECT_TOL 2e-6
#define WINO_TOL   2e-5

typedef struct tcase {
    const char *name;
    int ic, oc, ih, iw, kh, kw, sh, sw, dh, dw, ph, pw, pe_h, pe_w, relu;
} tcase;

static const tcase cases[] = {
    {"1x1", 64, 32, 9, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
    {"1x1 odd channels", 20, 24, 7, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},
    {"3x3 pad 1", 32, 48, 13, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 valid", 24, 40, 15, 15, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0},
    {"3x3 stride 2", 16, 32, 17, 17, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1},
    {"1x7", 16, 16, 17, 17, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3, 1},
    {"7x1", 16, 16, 17, 17, 7, 1, 1, 1, 1, 1, 3, 0, 3, 0, 1},
    {"5x5 pad 2", 8, 8, 10, 10, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0},
    {"3x3 dilation 2", 16, 16, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0},
    {"3x3 one tile", 16, 12, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    {"3x3 wide", 64, 64, 6, 50, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 uneven padding", 16, 16, 9, 9, 3, 3, 1, 1, 1, 1, 0, 1, 1, 0, 0},
};

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* The exact convolution (double), blocked output like the kernels'. */
static void exact(const vfk_conv *c, int n, const float *x, const float *w, const float *bias,
                  double *y)
{
    int icp = vfk_padded(c->ic), ocp = vfk_padded(c->oc);
    for (int img = 0; img < n; img++)
        for (int o = 0; o < ocp; o++)
            for (int oy = 0; oy < c->oh; oy++)
                for (int ox = 0; ox < c->ow; ox++) {
                    double s = o < c->oc ? bias[o] : 0.0;
                    for (int i = 0; o < c->oc && i < c->ic; i++)
                        for (int ky = 0; ky < c->kh; ky++)
                            for (int kx = 0; kx < c->kw; kx++) {
                                int iy = oy * c->sh - c->ph + ky * c->dh;
                                int ix = ox * c->sw - c->pw + kx * c->dw;
                                if (iy < 0 || iy >= c->ih || ix < 0 || ix >= c->iw)
                                    continue;
                                s += (double)
                                         x[((((size_t)img * icp / 8 + i / 8) * c->ih + iy) * c->iw +
                                            ix) *
                                               8 +
                                           i % 8] *
                                     w[(((size_t)o * c->ic + i) * c->kh + ky) * c->kw + kx];
                            }
                    if (o < c->oc)
                        s = s < c->lo ? c->lo : s > c->hi ? c->hi : s;
                    y[((((size_t)img * ocp / 8 + o / 8) * c->oh + oy) * c->ow + ox) * 8 + o % 8] =
                        s;
                }
}

/* max |got - want| / max |want|; every padding channel must be exactly 0. */
static double rel_err(const vfk_conv *c, int n, const float *got, const double *want)
{
    size_t count = (size_t)n * vfk_padded(c->oc) * c->oh * c->ow;
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        int ch =
            (int)((i / ((size_t)c->oh * c->ow * 8)) % (vfk_padded(c->oc) / 8)) * 8 + (int)(i % 8);
        if (ch >= c->oc && got[i] != 0.0f)
            return INFINITY;
        e = fmax(e, fabs(got[i] - want[i]));
        m = fmax(m, fabs(want[i]));
    }
    return m > 0 ? e / m : e;
}

int main(void)
{
    vf_isa isa;
    vf_err err = {0};
    CHECK_OK(vfi_isa_get(&isa, &err), err.msg);
    int fast = isa.level >= VF_ISA_AVX2;
    double worst_wino = 0.0;
    const int n = 3;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const tcase *t = &cases[k];
        vfk_conv c = {.ic = t->ic,
                      .oc = t->oc,
                      .ih = t->ih,
                      .iw = t->iw,
                      .kh = t->kh,
                      .kw = t->kw,
                      .sh = t->sh,
                      .sw = t->sw,
                      .dh = t->dh,
                      .dw = t->dw,
                      .ph = t->ph,
                      .pw = t->pw,
                      .lo = t->relu ? 0.0f : -INFINITY,
                      .hi = INFINITY};
        c.oh = (c.ih + t->ph + t->pe_h - (c.kh - 1) * c.dh - 1) / c.sh + 1;
        c.ow = (c.iw + t->pw + t->pe_w - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        size_t xs = (size_t)n * vfk_padded(c.ic) * c.ih * c.iw;
        size_t ys = (size_t)n * vfk_padded(c.oc) * c.oh * c.ow;
        size_t ws = (size_t)c.oc * c.ic * c.kh * c.kw;
        float *x = aligned_alloc(64, (xs * 4 + 63) / 64 * 64);
        float *y = aligned_alloc(64, (ys * 4 + 63) / 64 * 64);
        float *w = malloc(ws * 4), *bias = malloc((size_t)c.oc * 4);
        double *want = malloc(ys * sizeof(double));
        CHECK(x && y && w && bias && want);
        unsigned seed = 7u + (unsigned)k;
        for (size_t i = 0; i < xs; i++) { /* the padding channels stay zero, as oneDNN's */
            int ch =
                (int)((i / ((size_t)c.ih * c.iw * 8)) % (vfk_padded(c.ic) / 8)) * 8 + (int)(i % 8);
            x[i] = ch < c.ic ? frand(&seed) : 0.0f;
        }
        for (size_t i = 0; i < ws; i++)
            w[i] = frand(&seed);
        for (int i = 0; i < c.oc; i++)
            bias[i] = 0.1f * frand(&seed);
        exact(&c, n, x, w, bias, want);
        for (int algo = 0; algo < VFK_N_ALGOS; algo++) {
            const char *why = NULL;
            vf_isa any = isa;
            any.level = VF_ISA_AVX2; /* whether the shape is taken, whatever this CPU has */
            if (!vfk_conv_supported(&c, (vfk_algo)algo, &any, &why)) {
                CHECK_MSG(why && algo == VFK_WINOGRAD, "%s: direct refused: %s", t->name,
                          why ? why : "?");
                continue;
            }
            float *packed = aligned_alloc(64, (vfk_conv_packed_size(&c, algo) * 4 + 63) / 64 * 64);
            size_t ss = vfk_conv_scratch_size(&c, algo, n, 2);
            float *scratch = ss ? aligned_alloc(64, (ss * 4 + 63) / 64 * 64) : NULL;
            CHECK(packed && (!ss || scratch));
            vfk_conv_pack(&c, algo, w, packed);
            memset(y, 0x7f, ys * 4); /* every output (padding channels too) must be written */
            vfk_conv_ref(&c, algo, n, x, packed, bias, y);
            double e_ref = rel_err(&c, n, y, want), e_fast = -1.0;
            if (fast) {
                memset(y, 0x7f, ys * 4);
                vfk_conv_run(&c, algo, &isa, n, x, packed, bias, scratch, y);
                e_fast = rel_err(&c, n, y, want);
            }
            double tol = algo == VFK_WINOGRAD ? WINO_TOL : DIRECT_TOL;
            printf("%-20s %-8s reference %.2e, AVX2 %s%.2e\n", t->name,
                   algo == VFK_WINOGRAD ? "winograd" : "direct", e_ref, fast ? "" : "(not here) ",
                   e_fast);
            CHECK_MSG(e_ref <= tol, "%s: the reference's error %.3g", t->name, e_ref);
            CHECK_MSG(!fast || e_fast <= tol, "%s: the AVX2 kernel's error %.3g", t->name, e_fast);
            if (algo == VFK_WINOGRAD)
                worst_wino = fmax(worst_wino, fmax(e_ref, e_fast));
            free(packed);
            free(scratch);
        }
        free(x);
        free(y);
        free(w);
        free(bias);
        free(want);
    }
    printf("Winograd F(4x4, 3x3): largest relative error %.2e (bound %.0e)\n", worst_wino,
           WINO_TOL);
    if (!fast)
        SKIP("the AVX2 kernels: this CPU (or VIDFEAT_ISA) has no AVX2 and FMA; the references "
             "passed");
    return 0;
}
