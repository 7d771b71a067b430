/*
 * cuda_kernels.cu - the GPU backend's own kernels (see cuda_kernels.h): conversions between the
 * host-facing f32 tensors and an f16 network's half tensors, decoded YUV pictures into their
 * slots of the input tensor (yuvconv.h's arithmetic, one thread per slot pixel), and the
 * operators of transformers and text towers that cuDNN and cuBLAS lack (strided copies,
 * broadcasting arithmetic, the elementwise functions of act_math.h, Softmax and LayerNorm by a
 * warp a row, a MatMul's epilogue, ReduceMean, and the token-id operators). Built with
 * --fmad=false, so the device rounds as the host reference does (no fused multiply-adds).
 */
#include "engine/cuda_kernels.h"

#include <cuda_fp16.h>

#include "engine/act_math.h"

namespace
{

const int kThreads = 256;

/* A grid-stride loop: any n with a bounded grid. */
unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 65535 * 8 ? (b ? b : 1) : 65535 * 8);
}

__global__ void f32_to_f16(const float *in, __half *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2half_rn(in[i]);
}

__global__ void f16_to_f32(const __half *in, float *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __half2float(in[i]);
}

/* One thread per slot pixel; the parameters travel by value (constant memory). */
__global__ void yuv_to_slot(vf_yuv_params q, vf_yuv_planes p, float *slot)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= q.size || y >= q.size)
        return;
    float v[3];
    vf_yuv_pixel(&q, &p, x, y, v);
    const size_t plane = (size_t)q.size * q.size, at = (size_t)y * q.size + x;
    slot[at] = v[0];
    slot[plane + at] = v[1];
    slot[2 * plane + at] = v[2];
}

/* ---- the transformers' operators ---- */

/* Activations as floats, whichever type they are stored in. */
__device__ inline float ld(const float *p, int64_t i)
{
    return p[i];
}
__device__ inline float ld(const __half *p, int64_t i)
{
    return __half2float(p[i]);
}
__device__ inline void st(float *p, int64_t i, float v)
{
    p[i] = v;
}
__device__ inline void st(__half *p, int64_t i, float v)
{
    p[i] = __float2half_rn(v);
}

/* The grid-stride loop over n items, 64-bit. */
#define FOR_EACH(i, n)                                                                             \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* Offsets of element k (row-major over dims) through two sets of strides. */
__device__ inline void offsets(int rank, const int64_t *dims, const int64_t *s1, const int64_t *s2,
                               int64_t k, int64_t *o1, int64_t *o2)
{
    int64_t a = 0, b = 0;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t i = k % dims[d];
        k /= dims[d];
        a += i * s1[d];
        b += i * s2[d];
    }
    *o1 = a;
    *o2 = b;
}

int64_t numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    return n;
}

template <typename E> __global__ void copy_k(vfk_strided s, int64_t n, const E *x, E *y)
{
    FOR_EACH(k, n)
    {
        int64_t xo, yo;
        offsets(s.rank, s.dims, s.xst, s.yst, k, &xo, &yo);
        y[s.ybase + yo] = x[s.xbase + xo];
    }
}

template <typename T>
__global__ void binary_k(vfk_broadcast s, int64_t n, int op, const T *a, const T *b, T *y)
{
    FOR_EACH(k, n)
    {
        int64_t ao, bo;
        offsets(s.rank, s.dims, s.ast, s.bst, k, &ao, &bo);
        float u = ld(a, ao), v = ld(b, bo);
        st(y, k,
           op == VF_BIN_ADD   ? u + v
           : op == VF_BIN_SUB ? u - v
           : op == VF_BIN_MUL ? u * v
           : op == VFK_PRELU  ? (u < 0.0f ? u * v : u)
                              : u / v);
    }
}

template <typename T> __global__ void act_k(vf_act a, int64_t n, const T *x, T *y)
{
    FOR_EACH(k, n)
    st(y, k, vf_act_math((int)a.kind, a.alpha, a.beta, ld(x, k)));
}

/* The sum and the maximum over a warp, every lane getting the result. */
__device__ inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

const int kWarpsPerBlock = kThreads / 32;

/* Softmax rows (inner == 1): a warp a row, the row read three times (max, sum, write). */
template <typename T> __global__ void softmax_rows_k(int64_t rows, int64_t len, const T *x, T *y)
{
    int lane = threadIdx.x & 31;
    for (int64_t r = blockIdx.x * (int64_t)kWarpsPerBlock + threadIdx.x / 32; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const T *xr = x + r * len;
        T *yr = y + r * len;
        float m = -INFINITY, sum = 0.0f;
        for (int64_t i = lane; i < len; i += 32)
            m = fmaxf(m, ld(xr, i));
        m = warp_max(m);
        for (int64_t i = lane; i < len; i += 32)
            sum += expf(ld(xr, i) - m);
        sum = warp_sum(sum);
        for (int64_t i = lane; i < len; i += 32)
            st(yr, i, expf(ld(xr, i) - m) / sum);
    }
}

/* Softmax along a strided axis: a thread a column. */
template <typename T>
__global__ void softmax_cols_k(int64_t outer, int64_t len, int64_t inner, const T *x, T *y)
{
    FOR_EACH(c, outer * inner)
    {
        int64_t base = (c / inner) * len * inner + c % inner;
        float m = -INFINITY, sum = 0.0f;
        for (int64_t i = 0; i < len; i++)
            m = fmaxf(m, ld(x, base + i * inner));
        for (int64_t i = 0; i < len; i++)
            sum += expf(ld(x, base + i * inner) - m);
        for (int64_t i = 0; i < len; i++)
            st(y, base + i * inner, expf(ld(x, base + i * inner) - m) / sum);
    }
}

/* LayerNorm: a warp a row; the mean, then the variance about it (two passes, as the host). */
template <typename T>
__global__ void layernorm_k(int64_t rows, int64_t len, float eps, const T *x, const T *scale,
                            const T *bias, T *y)
{
    int lane = threadIdx.x & 31;
    for (int64_t r = blockIdx.x * (int64_t)kWarpsPerBlock + threadIdx.x / 32; r < rows;
         r += (int64_t)gridDim.x * kWarpsPerBlock) {
        const T *xr = x + r * len;
        T *yr = y + r * len;
        float mean = 0.0f, var = 0.0f;
        for (int64_t i = lane; i < len; i += 32)
            mean += ld(xr, i);
        mean = warp_sum(mean) / (float)len;
        for (int64_t i = lane; i < len; i += 32) {
            float d = ld(xr, i) - mean;
            var += d * d;
        }
        var = warp_sum(var) / (float)len;
        float inv = 1.0f / sqrtf(var + eps);
        for (int64_t i = lane; i < len; i += 32)
            st(yr, i, (ld(xr, i) - mean) * inv * ld(scale, i) + (bias ? ld(bias, i) : 0.0f));
    }
}

template <typename T>
__global__ void epilogue_k(int64_t rows, int64_t cols, const T *bias, vf_act a, const T *sum, T *y)
{
    FOR_EACH(k, rows * cols)
    {
        float v = ld(y, k) + (bias ? ld(bias, k % cols) : 0.0f);
        v = vf_act_math((int)a.kind, a.alpha, a.beta, v);
        st(y, k, sum ? v + ld(sum, k) : v);
    }
}

template <typename T>
__global__ void reduce_mean_k(vfk_reduce r, int64_t n, int64_t count, const T *x, T *y)
{
    FOR_EACH(k, n)
    {
        int64_t base = 0, unused;
        offsets(r.k_rank, r.kdims, r.kst, r.kst, k, &base, &unused);
        float acc = 0.0f;
        for (int64_t j = 0; j < count; j++) {
            int64_t o;
            offsets(r.r_rank, r.rdims, r.rst, r.rst, j, &o, &unused);
            acc += ld(x, base + o);
        }
        st(y, k, acc / (float)count);
    }
}

template <typename T>
__global__ void lookup_k(const int64_t *ids, int64_t count, const T *table, int64_t rows,
                         int64_t row, T *y, int *bad)
{
    FOR_EACH(k, count * row)
    {
        int64_t i = k / row, id = ids[i] < 0 ? ids[i] + rows : ids[i];
        if (id < 0 || id >= rows) {
            *bad = 1;
            id = 0;
        }
        y[k] = table[id * row + k % row];
    }
}

__device__ inline bool greater(const void *x, int kind, int64_t a, int64_t b)
{
    if (kind == 2)
        return static_cast<const int64_t *>(x)[a] > static_cast<const int64_t *>(x)[b];
    if (kind == 1)
        return ld(static_cast<const __half *>(x), a) > ld(static_cast<const __half *>(x), b);
    return static_cast<const float *>(x)[a] > static_cast<const float *>(x)[b];
}

__global__ void argmax_k(const void *x, int kind, int64_t outer, int64_t len, int64_t inner,
                         int64_t *y)
{
    FOR_EACH(c, outer * inner)
    {
        int64_t at = (c / inner) * len * inner + c % inner, best = 0;
        for (int64_t k = 1; k < len; k++) {
            if (greater(x, kind, at + k * inner, at + best * inner))
                best = k;
        }
        y[c] = best;
    }
}

template <typename E>
__global__ void take_k(const E *x, const int64_t *k, int64_t n, int64_t outer, int64_t len,
                       int64_t inner, E *y, int *bad)
{
    FOR_EACH(e, n * outer * inner)
    {
        int64_t i = e / (outer * inner), o = e / inner % outer, j = e % inner, ki = k[i];
        if (ki < 0 || ki >= len) {
            *bad = 1;
            ki = 0;
        }
        y[e] = x[((i * outer + o) * len + ki) * inner + j];
    }
}

/* Blocks for n items a thread, or for n rows a warp. */
unsigned blocks_for64(int64_t n)
{
    return blocks_for(n > 0 ? (size_t)n : 0);
}
unsigned blocks_for_rows(int64_t rows)
{
    return blocks_for64((rows + kWarpsPerBlock - 1) / kWarpsPerBlock * kThreads);
}

} // namespace

extern "C" cudaError_t vfk_copy(const vfk_strided *s, size_t es, const void *x, void *y,
                                cudaStream_t stream)
{
    int64_t n = numel(s->rank, s->dims);
    if (n == 0)
        return cudaSuccess;
    unsigned g = blocks_for64(n);
    if (es == 2)
        copy_k<<<g, kThreads, 0, stream>>>(*s, n, static_cast<const uint16_t *>(x),
                                           static_cast<uint16_t *>(y));
    else if (es == 8)
        copy_k<<<g, kThreads, 0, stream>>>(*s, n, static_cast<const uint64_t *>(x),
                                           static_cast<uint64_t *>(y));
    else
        copy_k<<<g, kThreads, 0, stream>>>(*s, n, static_cast<const uint32_t *>(x),
                                           static_cast<uint32_t *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_binary(const vfk_broadcast *s, int op, int half, const void *a,
                                  const void *b, void *y, cudaStream_t stream)
{
    int64_t n = numel(s->rank, s->dims);
    if (n == 0)
        return cudaSuccess;
    unsigned g = blocks_for64(n);
    if (half)
        binary_k<<<g, kThreads, 0, stream>>>(*s, n, op, static_cast<const __half *>(a),
                                             static_cast<const __half *>(b),
                                             static_cast<__half *>(y));
    else
        binary_k<<<g, kThreads, 0, stream>>>(*s, n, op, static_cast<const float *>(a),
                                             static_cast<const float *>(b),
                                             static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_act(vf_act act, int half, const void *x, void *y, size_t n,
                               cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    if (half)
        act_k<<<blocks_for(n), kThreads, 0, stream>>>(
            act, (int64_t)n, static_cast<const __half *>(x), static_cast<__half *>(y));
    else
        act_k<<<blocks_for(n), kThreads, 0, stream>>>(
            act, (int64_t)n, static_cast<const float *>(x), static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_softmax(int64_t outer, int64_t len, int64_t inner, int half,
                                   const void *x, void *y, cudaStream_t stream)
{
    if (outer * len * inner == 0)
        return cudaSuccess;
    if (inner == 1 && half)
        softmax_rows_k<<<blocks_for_rows(outer), kThreads, 0, stream>>>(
            outer, len, static_cast<const __half *>(x), static_cast<__half *>(y));
    else if (inner == 1)
        softmax_rows_k<<<blocks_for_rows(outer), kThreads, 0, stream>>>(
            outer, len, static_cast<const float *>(x), static_cast<float *>(y));
    else if (half)
        softmax_cols_k<<<blocks_for64(outer * inner), kThreads, 0, stream>>>(
            outer, len, inner, static_cast<const __half *>(x), static_cast<__half *>(y));
    else
        softmax_cols_k<<<blocks_for64(outer * inner), kThreads, 0, stream>>>(
            outer, len, inner, static_cast<const float *>(x), static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_layernorm(int64_t rows, int64_t len, float eps, int half, const void *x,
                                     const void *scale, const void *bias, void *y,
                                     cudaStream_t stream)
{
    if (rows * len == 0)
        return cudaSuccess;
    if (half)
        layernorm_k<<<blocks_for_rows(rows), kThreads, 0, stream>>>(
            rows, len, eps, static_cast<const __half *>(x), static_cast<const __half *>(scale),
            static_cast<const __half *>(bias), static_cast<__half *>(y));
    else
        layernorm_k<<<blocks_for_rows(rows), kThreads, 0, stream>>>(
            rows, len, eps, static_cast<const float *>(x), static_cast<const float *>(scale),
            static_cast<const float *>(bias), static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_epilogue(int64_t rows, int64_t cols, const void *bias, vf_act act,
                                    const void *sum, int half, void *y, cudaStream_t stream)
{
    if (rows * cols == 0)
        return cudaSuccess;
    unsigned g = blocks_for64(rows * cols);
    if (half)
        epilogue_k<<<g, kThreads, 0, stream>>>(rows, cols, static_cast<const __half *>(bias), act,
                                               static_cast<const __half *>(sum),
                                               static_cast<__half *>(y));
    else
        epilogue_k<<<g, kThreads, 0, stream>>>(rows, cols, static_cast<const float *>(bias), act,
                                               static_cast<const float *>(sum),
                                               static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_reduce_mean(const vfk_reduce *r, int half, const void *x, void *y,
                                       cudaStream_t stream)
{
    int64_t n = numel(r->k_rank, r->kdims), count = numel(r->r_rank, r->rdims);
    if (n == 0 || count == 0)
        return cudaSuccess;
    if (half)
        reduce_mean_k<<<blocks_for64(n), kThreads, 0, stream>>>(
            *r, n, count, static_cast<const __half *>(x), static_cast<__half *>(y));
    else
        reduce_mean_k<<<blocks_for64(n), kThreads, 0, stream>>>(
            *r, n, count, static_cast<const float *>(x), static_cast<float *>(y));
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_lookup(const int64_t *ids, int64_t count, const void *table,
                                  int64_t rows, int64_t row, int half, void *y, int *bad,
                                  cudaStream_t stream)
{
    if (count * row == 0)
        return cudaSuccess;
    unsigned g = blocks_for64(count * row);
    if (half)
        lookup_k<<<g, kThreads, 0, stream>>>(ids, count, static_cast<const __half *>(table), rows,
                                             row, static_cast<__half *>(y), bad);
    else
        lookup_k<<<g, kThreads, 0, stream>>>(ids, count, static_cast<const float *>(table), rows,
                                             row, static_cast<float *>(y), bad);
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_argmax(const void *x, int x_kind, int64_t outer, int64_t len,
                                  int64_t inner, int64_t *y, cudaStream_t stream)
{
    if (outer * inner == 0)
        return cudaSuccess;
    argmax_k<<<blocks_for64(outer * inner), kThreads, 0, stream>>>(x, x_kind, outer, len, inner, y);
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_take(const void *x, const int64_t *k, int64_t n, int64_t outer,
                                int64_t len, int64_t inner, size_t es, void *y, int *bad,
                                cudaStream_t stream)
{
    int64_t total = n * outer * inner;
    if (total == 0)
        return cudaSuccess;
    unsigned g = blocks_for64(total);
    if (es == 2)
        take_k<<<g, kThreads, 0, stream>>>(static_cast<const uint16_t *>(x), k, n, outer, len,
                                           inner, static_cast<uint16_t *>(y), bad);
    else
        take_k<<<g, kThreads, 0, stream>>>(static_cast<const uint32_t *>(x), k, n, outer, len,
                                           inner, static_cast<uint32_t *>(y), bad);
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_yuv_to_slot(const vf_yuv_params *q, const vf_yuv_planes *planes,
                                       float *slot, cudaStream_t stream)
{
    dim3 block(32, 8), grid((q->size + 31) / 32, (q->size + 7) / 8);
    yuv_to_slot<<<grid, block, 0, stream>>>(*q, *planes, slot);
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_f32_to_f16(const float *in, void *out, size_t n, cudaStream_t stream)
{
    f32_to_f16<<<blocks_for(n), kThreads, 0, stream>>>(in, static_cast<__half *>(out), n);
    return cudaGetLastError();
}

extern "C" cudaError_t vfk_f16_to_f32(const void *in, float *out, size_t n, cudaStream_t stream)
{
    f16_to_f32<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __half *>(in), out, n);
    return cudaGetLastError();
}
