/*
 * direct_avx2.h - the direct convolution on AVX2 and FMA (direct_avx2.c), for conv.c's dispatch.
 */
#ifndef VIDFEAT_KERNELS_DIRECT_AVX2_H
#define VIDFEAT_KERNELS_DIRECT_AVX2_H

#include "kernels/layout.h"

/* conv.h's vfk_conv_run for VFK_DIRECT on a CPU with AVX2 and FMA. */
void vfk_direct_avx2(const vfk_conv *c, int n, const float *x, const float *packed,
                     const float *bias, float *y);

#endif /* VIDFEAT_KERNELS_DIRECT_AVX2_H */
