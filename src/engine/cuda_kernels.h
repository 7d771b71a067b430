/*
 * cuda_kernels.h - the few CUDA kernels vidfeat needs that cuDNN and cuBLAS lack, behind
 * plain C launchers (cuda_kernels.cu is the only CUDA C++ in the project). Each launcher queues
 * its kernel on `stream` and returns the launch status; nothing here allocates.
 *
 * The transformers' and text towers' operators run here on dense row-major tensors, as the
 * reference backend's loops define them (backend_ref.c, ids_ops.c): shapes are the graph's at
 * the batch being run, passed by value. `half` says the activations are IEEE halves (an f16
 * network) instead of floats; the arithmetic is in float either way, the elementwise functions
 * the host's own (act_math.h). Counts and offsets are in elements.
 */
#ifndef VIDFEAT_CUDA_KERNELS_H
#define VIDFEAT_CUDA_KERNELS_H

#include <stddef.h>

#include <cuda_runtime.h>

#include <stdint.h>

#include "engine/graph.h"
#include "media/yuvconv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = half(in[i]), round to nearest even; n elements in device memory. */
cudaError_t vfk_f32_to_f16(const float *in, void *out, size_t n, cudaStream_t stream);

/* out[i] = float(in[i]); n elements in device memory. */
cudaError_t vfk_f16_to_f32(const void *in, float *out, size_t n, cudaStream_t stream);

/* The picture in planes (device memory) into slot (device memory, 3 x q->size^2 floats), as
 * vfi_yuv_convert_ref computes it on the host. */
cudaError_t vfk_yuv_to_slot(const vf_yuv_params *q, const vf_yuv_planes *planes, float *slot,
                            cudaStream_t stream);

/* A strided copy over `rank` dims: for every index idx (row-major over dims),
 * y[ybase + sum idx[i] yst[i]] = x[xbase + sum idx[i] xst[i]] (a stride may be 0: broadcast).
 * Transpose, Slice, Expand, a Gather's rows and a Concat's parts are all one. */
typedef struct vfk_strided {
    int rank;
    int64_t dims[VF_MAX_DIMS], xst[VF_MAX_DIMS], yst[VF_MAX_DIMS];
    int64_t xbase, ybase;
} vfk_strided;

/* The copy of elements of `es` bytes (2, 4 or 8: halves, floats, int64 ids). */
cudaError_t vfk_copy(const vfk_strided *s, size_t es, const void *x, void *y, cudaStream_t stream);

/* y (dense over dims) = a op b, a read through strides ast, b through bst (numpy
 * broadcasting: stride 0 where an operand has 1 or nothing); op a vf_binary_kind, or VFK_PRELU
 * (a where a >= 0, else a * b). */
enum { VFK_PRELU = 16 };
typedef struct vfk_broadcast {
    int rank;
    int64_t dims[VF_MAX_DIMS], ast[VF_MAX_DIMS], bst[VF_MAX_DIMS];
} vfk_broadcast;
cudaError_t vfk_binary(const vfk_broadcast *s, int op, int half, const void *a, const void *b,
                       void *y, cudaStream_t stream);

/* y[i] = act(x[i]) for n elements (x == y allowed). */
cudaError_t vfk_act(vf_act act, int half, const void *x, void *y, size_t n, cudaStream_t stream);

/* Softmax of x [outer, len, inner] along len into y. */
cudaError_t vfk_softmax(int64_t outer, int64_t len, int64_t inner, int half, const void *x, void *y,
                        cudaStream_t stream);

/* Each of `rows` rows of len: (x - mean) / sqrt(var + eps) * scale + bias (bias may be NULL;
 * scale and bias: len elements in the activation type). */
cudaError_t vfk_layernorm(int64_t rows, int64_t len, float eps, int half, const void *x,
                          const void *scale, const void *bias, void *y, cudaStream_t stream);

/* A MatMul's remainder after its product (y [rows, cols], in place): y = act(y + bias[col]) +
 * sum (bias: cols elements or NULL; sum: y's shape or NULL). */
cudaError_t vfk_epilogue(int64_t rows, int64_t cols, const void *bias, vf_act act, const void *sum,
                         int half, void *y, cudaStream_t stream);

/* A mean over some dims: the output dense over kept dims `kdims` (k_rank of them, read through
 * the input strides kst), each the mean of the r_rank reduced dims rdims (input strides rst). */
typedef struct vfk_reduce {
    int k_rank, r_rank;
    int64_t kdims[VF_MAX_DIMS], kst[VF_MAX_DIMS], rdims[VF_MAX_DIMS], rst[VF_MAX_DIMS];
} vfk_reduce;
cudaError_t vfk_reduce_mean(const vfk_reduce *r, int half, const void *x, void *y,
                            cudaStream_t stream);

/* LOOKUP: y[i] = table[ids[i]] (rows of `row` elements out of `rows`; a negative id counts from
 * the end). An id still out of range reads row 0 and sets *bad to 1 (device memory). */
cudaError_t vfk_lookup(const int64_t *ids, int64_t count, const void *table, int64_t rows,
                       int64_t row, int half, void *y, int *bad, cudaStream_t stream);

/* ARGMAX of x [outer, len, inner] along len (the first of equal largest) into y [outer, inner];
 * x_kind: 0 float, 1 half, 2 int64. */
cudaError_t vfk_argmax(const void *x, int x_kind, int64_t outer, int64_t len, int64_t inner,
                       int64_t *y, cudaStream_t stream);

/* TAKE: from each of n images' part of x ([outer, len, inner] each) the entry k[i] along len
 * into y ([outer, inner] each); k[i] out of range reads entry 0 and sets *bad to 1. */
cudaError_t vfk_take(const void *x, const int64_t *k, int64_t n, int64_t outer, int64_t len,
                     int64_t inner, size_t es, void *y, int *bad, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* VIDFEAT_CUDA_KERNELS_H */
