/*
 * act_math.h - the graph's elementwise functions (vf_act: an operator's own, or fused into a
 * convolution, a fully connected layer or a MatMul) and their value on one float: the one
 * definition that the host (graph.h's vfi_act_apply, for the reference backend and the folds)
 * and the GPU's kernels (cuda_kernels.cu) both compile, so the device computes what the oracle
 * computes.
 */
#ifndef VIDFEAT_ACT_MATH_H
#define VIDFEAT_ACT_MATH_H

#ifndef __CUDACC__
#include <math.h>
#endif

#ifndef VF_HD
#ifdef __CUDACC__
#define VF_HD __host__ __device__ static inline
#else
#define VF_HD static inline
#endif
#endif

typedef enum vf_act_kind {
    VF_ACT_NONE = 0,
    VF_ACT_RELU, /* alpha: negative slope (LeakyRelu), 0 for Relu */
    VF_ACT_CLIP, /* clamp to [alpha, beta] (Relu6: 0, 6) */
    VF_ACT_SIGMOID,
    VF_ACT_HARD_SIGMOID, /* max(0, min(1, alpha x + beta)) */
    VF_ACT_HARD_SWISH,   /* x * max(0, min(1, x / 6 + 1/2)) */
    VF_ACT_TANH,
    VF_ACT_ERF,  /* from here on: functions cuDNN has not (the GPU runs them on its kernel) */
    VF_ACT_GELU, /* x * (1 + erf(x / sqrt 2)) / 2 */
    VF_ACT_SQRT,
    VF_ACT_RECIPROCAL, /* 1 / x */
    VF_ACT_POW,        /* x ^ alpha */
    VF_ACT_EXP,
    VF_ACT_LINEAR, /* alpha x + beta (Neg) */
} vf_act_kind;

typedef struct vf_act {
    vf_act_kind kind;
    float alpha, beta;
} vf_act;

VF_HD float vf_clamp01(float y)
{
    return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}

/* act(x); kind, alpha and beta as vf_act has them (passed apart so a kernel takes them by
 * value). An unknown kind is the identity. */
VF_HD float vf_act_math(int kind, float alpha, float beta, float x)
{
    switch (kind) {
    case VF_ACT_RELU:
        return x > 0.0f ? x : x * alpha;
    case VF_ACT_CLIP:
        return x < alpha ? alpha : (x > beta ? beta : x);
    case VF_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case VF_ACT_HARD_SIGMOID:
        return vf_clamp01(alpha * x + beta);
    case VF_ACT_HARD_SWISH:
        return x * vf_clamp01(x / 6.0f + 0.5f);
    case VF_ACT_TANH:
        return tanhf(x);
    case VF_ACT_ERF:
        return erff(x);
    case VF_ACT_GELU:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case VF_ACT_SQRT:
        return sqrtf(x);
    case VF_ACT_RECIPROCAL:
        return 1.0f / x;
    case VF_ACT_POW:
        return alpha == 2.0f ? x * x : powf(x, alpha);
    case VF_ACT_EXP:
        return expf(x);
    case VF_ACT_LINEAR:
        return alpha * x + beta;
    default:
        return x;
    }
}

#endif /* VIDFEAT_ACT_MATH_H */
