/*
 * dwconv.c - a depthwise convolution over clips, channels last (dwconv.h).
 *
 * Each output position's row of C channels starts at the bias and gains one tap at a time: a
 * tap is C products of contiguous inputs and contiguous weights, which the compiler vectorises
 * (omp simd). Taps outside the input (padding) are skipped, the zeros they would add.
 */
#include "engine/dwconv.h"

/* omp simd asks for vectorisation; a build that cannot vectorise (clang's fuzzing builds
 * instrument every loop) computes the same sums without it, and says so only as a warning */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* One output row: taps in (t, h, w) order, as the reference backend sums them. */
static void out_row(const vf_conv_window *cw, int64_t channels, const int64_t in[3],
                    const int64_t pos[3], const float *x, const float *w, const float *bias,
                    float *y)
{
    const vf_axes *ax = &cw->ax;
#pragma omp simd
    for (int64_t c = 0; c < channels; c++)
        y[c] = bias ? bias[c] : 0.0f;
    for (int64_t kt = 0; kt < ax->kernel[0]; kt++) {
        int64_t ti = pos[0] * ax->stride[0] - ax->pad_begin[0] + kt * ax->dilation[0];
        if (ti < 0 || ti >= in[0])
            continue;
        for (int64_t kh = 0; kh < ax->kernel[1]; kh++) {
            int64_t hi = pos[1] * ax->stride[1] - ax->pad_begin[1] + kh * ax->dilation[1];
            if (hi < 0 || hi >= in[1])
                continue;
            for (int64_t kw = 0; kw < ax->kernel[2]; kw++) {
                int64_t wi = pos[2] * ax->stride[2] - ax->pad_begin[2] + kw * ax->dilation[2];
                if (wi < 0 || wi >= in[2])
                    continue;
                const float *xr = x + ((ti * in[1] + hi) * in[2] + wi) * channels;
                const float *wr = w + ((kt * ax->kernel[1] + kh) * ax->kernel[2] + kw) * channels;
#pragma omp simd
                for (int64_t c = 0; c < channels; c++)
                    y[c] += xr[c] * wr[c];
            }
        }
    }
    if (cw->act.kind != VF_ACT_NONE) {
        for (int64_t c = 0; c < channels; c++)
            y[c] = vfi_act_apply(&cw->act, y[c]);
    }
}

void vfi_dwconv3d_nlc(const vf_conv_window *cw, int64_t n, int64_t channels,
                      const int64_t in_dims[3], const int64_t out_dims[3], const float *x,
                      const float *w, const float *bias, float *y)
{
    int64_t in_size = in_dims[0] * in_dims[1] * in_dims[2] * channels;
    int64_t rows = out_dims[0] * out_dims[1] * out_dims[2];
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        for (int64_t r = 0; r < rows; r++) {
            int64_t pos[3] = {r / (out_dims[1] * out_dims[2]), r / out_dims[2] % out_dims[1],
                              r % out_dims[2]};
            out_row(cw, channels, in_dims, pos, x + i * in_size, w, bias,
                    y + (i * rows + r) * channels);
        }
    }
}
