/*
 * dwconv.h - a depthwise convolution over clips, channels last: the oneDNN backend's host step
 * for MViT's pooling convolutions (one filter per channel over T, H and W), which oneDNN 2.6
 * runs 30x below what the arithmetic needs. Pure function: any thread.
 */
#ifndef VIDFEAT_DWCONV_H
#define VIDFEAT_DWCONV_H

#include <stdint.h>

#include "engine/graph.h"

/* y [n, To, Ho, Wo, C] = act(x [n, T, H, W, C] (*) w + bias), channel c by w's filter c alone:
 * in_dims {T, H, W}, out_dims {To, Ho, Wo}; window cw (kernel, stride, dilation, padding of the
 * three axes, cw->act); w [KT, KH, KW, C] (the taps of a channel C apart); bias [C] or NULL.
 * The images are split among OpenMP's threads. */
void vfi_dwconv3d_nlc(const vf_conv_window *cw, int64_t n, int64_t channels,
                      const int64_t in_dims[3], const int64_t out_dims[3], const float *x,
                      const float *w, const float *bias, float *y);

#endif /* VIDFEAT_DWCONV_H */
