/*
 * mk_avx2.h - the one inner loop of vidfeat's AVX2 convolutions (kernels/direct_avx2.c,
 * kernels/winograd_avx2.c): a 6 x 16 block of outputs in 12 ymm registers, each step
 * broadcasting one input of 6 rows and multiplying it with 16 packed weights (two loads, six
 * broadcasts, twelve FMAs: the FMA units' rate, not the loads', bounds it on every AVX2 CPU).
 *
 * The rows' inputs come in blocks of 8 (VFK_BLOCK) consecutive floats, one block per row and
 * step of 8, each row's next block `step` floats on (0 for a row that reads the zero block:
 * padding, or a row past the end). Only for files compiled for AVX2 and FMA (the including file's
 * functions carry VFK_AVX2).
 */
#ifndef VIDFEAT_KERNELS_MK_AVX2_H
#define VIDFEAT_KERNELS_MK_AVX2_H

#include <immintrin.h>
#include <stddef.h>

#define VFK_AVX2 __attribute__((target("avx2,fma")))
#define VFK_MR   6  /* rows of the block */
#define VFK_NR   16 /* columns: two ymm */

/* The assembly's pieces. One step of the loop: the 16 weights of input K (byte offsets W0, W1)
 * times each row's input K (byte offset P), broadcasts alternating in ymm14 and ymm15. */
/* clang-format off */
#define VFK_ROW(P, REG, BC, A0, A1)                                                                \
    "vbroadcastss " #P "(%%" REG "), %%" BC "\n\t"                                                 \
    "vfmadd231ps %%ymm12, %%" BC ", %%" A0 "\n\t"                                                  \
    "vfmadd231ps %%ymm13, %%" BC ", %%" A1 "\n\t"
#define VFK_STEP(W0, W1, P)                                                                        \
    "vmovaps " #W0 "(%[w]), %%ymm12\n\t"                                                           \
    "vmovaps " #W1 "(%[w]), %%ymm13\n\t"                                                           \
    VFK_ROW(P, "r8", "ymm14", "ymm0", "ymm1")                                                      \
    VFK_ROW(P, "r9", "ymm15", "ymm2", "ymm3")                                                      \
    VFK_ROW(P, "r10", "ymm14", "ymm4", "ymm5")                                                     \
    VFK_ROW(P, "r11", "ymm15", "ymm6", "ymm7")                                                     \
    VFK_ROW(P, "r12", "ymm14", "ymm8", "ymm9")                                                     \
    VFK_ROW(P, "r13", "ymm15", "ymm10", "ymm11")
/* The 12 accumulators (ymm0-11) from acc, 32 bytes apart, and back. */
#define VFK_ACC_LOAD(OFF, R) "vmovups " #OFF "(%[acc]), %%ymm" #R "\n\t"
#define VFK_ACC_STORE(OFF, R) "vmovups %%ymm" #R ", " #OFF "(%[acc])\n\t"
#define VFK_ACC(X)                                                                                 \
    X(0, 0) X(32, 1) X(64, 2) X(96, 3) X(128, 4) X(160, 5)                                         \
    X(192, 6) X(224, 7) X(256, 8) X(288, 9) X(320, 10) X(352, 11)
/* clang-format on */

/* acc += rows x w over nblk blocks of 8: row j's inputs at p[j] (+ k * step[j] floats for block
 * k), w 16 floats per input (nblk * 8 * 16 in all, contiguous, 32-byte aligned).
 *
 * On x86-64 with GCC or clang the loop is assembly over fixed registers (the 12 accumulators in
 * ymm0-11, the weights in ymm12-13, the broadcasts alternating in ymm14-15), so that no compiler
 * folds the weight loads into the FMAs (12 loads where 2 do: GCC's -O2 did, at 60% of the speed)
 * or spills an accumulator (its -O3 did): every step is two loads, six broadcasts and twelve
 * FMAs, the FMA units' rate on every AVX2 CPU. Elsewhere, the same in intrinsics. */
VFK_AVX2 static inline __attribute__((always_inline)) void
vfk_mk_6x16(__m256 acc[VFK_MR][2], const float *const p_in[VFK_MR], const ptrdiff_t step[VFK_MR],
            const float *w, int nblk)
{
#if defined(__x86_64__) && defined(__GNUC__)
    ptrdiff_t bytes[VFK_MR]; /* the rows' steps in bytes */
    for (int j = 0; j < VFK_MR; j++)
        bytes[j] = step[j] * (ptrdiff_t)sizeof(float);
    /* clang-format off */
    __asm__ volatile(VFK_ACC(VFK_ACC_LOAD)
                     "movq 0(%[p]), %%r8\n\t"
                     "movq 8(%[p]), %%r9\n\t"
                     "movq 16(%[p]), %%r10\n\t"
                     "movq 24(%[p]), %%r11\n\t"
                     "movq 32(%[p]), %%r12\n\t"
                     "movq 40(%[p]), %%r13\n\t"
                     "testl %[n], %[n]\n\t"
                     "jle 2f\n"
                     "1:\n\t"
                     VFK_STEP(0, 32, 0)
                     VFK_STEP(64, 96, 4)
                     VFK_STEP(128, 160, 8)
                     VFK_STEP(192, 224, 12)
                     VFK_STEP(256, 288, 16)
                     VFK_STEP(320, 352, 20)
                     VFK_STEP(384, 416, 24)
                     VFK_STEP(448, 480, 28)
                     "addq $512, %[w]\n\t"
                     "addq 0(%[s]), %%r8\n\t"
                     "addq 8(%[s]), %%r9\n\t"
                     "addq 16(%[s]), %%r10\n\t"
                     "addq 24(%[s]), %%r11\n\t"
                     "addq 32(%[s]), %%r12\n\t"
                     "addq 40(%[s]), %%r13\n\t"
                     "decl %[n]\n\t"
                     "jnz 1b\n"
                     "2:\n\t"
                     VFK_ACC(VFK_ACC_STORE)
                     : [w] "+r"(w), [n] "+r"(nblk)
                     : [acc] "r"(acc), [p] "r"(p_in), [s] "r"(bytes)
                     : "r8", "r9", "r10", "r11", "r12", "r13", "xmm0", "xmm1", "xmm2", "xmm3",
                       "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
                       "xmm13", "xmm14", "xmm15", "cc", "memory");
    /* clang-format on */
#else
    const float *p0 = p_in[0], *p1 = p_in[1], *p2 = p_in[2], *p3 = p_in[3], *p4 = p_in[4],
                *p5 = p_in[5];
    __m256 c00 = acc[0][0], c01 = acc[0][1], c10 = acc[1][0], c11 = acc[1][1], c20 = acc[2][0],
           c21 = acc[2][1], c30 = acc[3][0], c31 = acc[3][1], c40 = acc[4][0], c41 = acc[4][1],
           c50 = acc[5][0], c51 = acc[5][1];
    for (int k = 0; k < nblk; k++) {
        for (int i = 0; i < 8; i++) {
            __m256 w0 = _mm256_load_ps(w), w1 = _mm256_load_ps(w + 8);
            __m256 a;
            a = _mm256_broadcast_ss(p0 + i);
            c00 = _mm256_fmadd_ps(a, w0, c00);
            c01 = _mm256_fmadd_ps(a, w1, c01);
            a = _mm256_broadcast_ss(p1 + i);
            c10 = _mm256_fmadd_ps(a, w0, c10);
            c11 = _mm256_fmadd_ps(a, w1, c11);
            a = _mm256_broadcast_ss(p2 + i);
            c20 = _mm256_fmadd_ps(a, w0, c20);
            c21 = _mm256_fmadd_ps(a, w1, c21);
            a = _mm256_broadcast_ss(p3 + i);
            c30 = _mm256_fmadd_ps(a, w0, c30);
            c31 = _mm256_fmadd_ps(a, w1, c31);
            a = _mm256_broadcast_ss(p4 + i);
            c40 = _mm256_fmadd_ps(a, w0, c40);
            c41 = _mm256_fmadd_ps(a, w1, c41);
            a = _mm256_broadcast_ss(p5 + i);
            c50 = _mm256_fmadd_ps(a, w0, c50);
            c51 = _mm256_fmadd_ps(a, w1, c51);
            w += 16;
        }
        p0 += step[0];
        p1 += step[1];
        p2 += step[2];
        p3 += step[3];
        p4 += step[4];
        p5 += step[5];
    }
    acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11, acc[2][0] = c20;
    acc[2][1] = c21, acc[3][0] = c30, acc[3][1] = c31, acc[4][0] = c40, acc[4][1] = c41;
    acc[5][0] = c50, acc[5][1] = c51;
#endif
}

#endif /* VIDFEAT_KERNELS_MK_AVX2_H */
