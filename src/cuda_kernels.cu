/*
 * cuda_kernels.cu - the GPU backend's own kernels (see cuda_kernels.h): conversions between the
 * host-facing f32 tensors and an f16 network's half tensors.
 */
#include "cuda_kernels.h"

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

} // namespace

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
