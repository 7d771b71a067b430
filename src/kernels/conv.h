/*
 * conv.h - vidfeat's own 2-D convolutions in f32 over channel-blocked pictures, for the CPU
 * backend to run where oneDNN 2.6 is weak (its AVX2 kernels reach about half the FMA peak):
 *
 *   direct     any kernel size, stride, dilation and padding: each output row is a strip of 6
 *              pixels x 16 output channels held in 12 registers, fed by broadcasts of the input
 *              and the packed weights (conv_avx2.c)
 *   winograd   3x3, stride 1, no dilation: F(4x4, 3x3), each 4x4 output tile from a 6x6 input
 *              tile in 36 products instead of 144, the products as one matrix product per
 *              transformed element over every tile of a block (winograd_avx2.c)
 *
 * The pictures are oneDNN's nChw8c (layout.h); the weights are packed once by vfk_conv_pack (the
 * direct kernel's layout, or the Winograd-transformed weights). Each has a plain-C reference of the
 * same arithmetic order in spirit (conv.c), the oracle its tests hold it to, and runs on OpenMP's
 * threads.
 *
 * Which one runs is the caller's choice (the backend times them against oneDNN on the machine);
 * vfk_conv_supported says which may. A kernel needs AVX2 and FMA (VF_ISA_AVX2 or better); the
 * plain-C reference runs anywhere but slowly. Pure functions: any thread.
 */
#ifndef VIDFEAT_KERNELS_CONV_H
#define VIDFEAT_KERNELS_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "core/isa.h"
#include "kernels/layout.h"

typedef enum vfk_algo {
    VFK_DIRECT = 0,
    VFK_WINOGRAD, /* F(4x4, 3x3) */
    VFK_N_ALGOS
} vfk_algo;

/* Can algo run c on this instruction set? 0 with the reason in why (when not NULL). */
int vfk_conv_supported(const vfk_conv *c, vfk_algo algo, const vf_isa *isa, const char **why);

/* Floats of algo's packed weights for c. */
size_t vfk_conv_packed_size(const vfk_conv *c, vfk_algo algo);
/* w [oc][ic][kh][kw] (ONNX's order) packed for algo into packed (vfk_conv_packed_size floats). */
void vfk_conv_pack(const vfk_conv *c, vfk_algo algo, const float *w, float *packed);

/* Floats of scratch memory algo needs for c at n images with `threads` OpenMP threads. */
size_t vfk_conv_scratch_size(const vfk_conv *c, vfk_algo algo, int n, int threads);

/* y = clip(x (*) w + bias) for n images: x [n][ic/8][ih][iw][8], y [n][oc/8][oh][ow][8] (both
 * nChw8c; y's padding channels are written as zeros), packed by vfk_conv_pack for algo, bias
 * [oc] or NULL, scratch of vfk_conv_scratch_size floats (64-byte aligned; with `threads`). On
 * the ISA's kernel (isa), OpenMP's threads splitting the work. */
void vfk_conv_run(const vfk_conv *c, vfk_algo algo, const vf_isa *isa, int n, const float *x,
                  const float *packed, const float *bias, float *scratch, float *y);

/* The same arithmetic in plain C, one image at a time (the oracle of the tests; no scratch). */
void vfk_conv_ref(const vfk_conv *c, vfk_algo algo, int n, const float *x, const float *packed,
                  const float *bias, float *y);

#endif /* VIDFEAT_KERNELS_CONV_H */
