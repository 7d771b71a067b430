/*
 * cuda_kernels.cu - the GPU backend's own kernels (see cuda_kernels.h): conversions between the
 * host-facing f32 tensors and an f16 network's half tensors, and decoded YUV pictures into
 * their slots of the input tensor (yuvconv.h's arithmetic, one thread per slot pixel). Built
 * with --fmad=false, so the device rounds as the host reference does (no fused multiply-adds).
 */
#include "engine/cuda_kernels.h"

#include <cuda_fp16.h>

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

} // namespace

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
