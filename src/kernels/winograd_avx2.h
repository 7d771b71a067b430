/*
 * winograd_avx2.h - F(4x4, 3x3) on AVX2 and FMA (winograd_avx2.c), for conv.c's dispatch.
 */
#ifndef VIDFEAT_KERNELS_WINOGRAD_AVX2_H
#define VIDFEAT_KERNELS_WINOGRAD_AVX2_H

#include "kernels/layout.h"

/* conv.h's vfk_conv_run for VFK_WINOGRAD on a CPU with AVX2 and FMA; scratch as layout.h says. */
void vfk_winograd_avx2(const vfk_conv *c, int n, const float *x, const float *packed,
                       const float *bias, float *scratch, float *y);

#endif /* VIDFEAT_KERNELS_WINOGRAD_AVX2_H */
