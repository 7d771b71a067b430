/*
 * cuda_kernels.h - the few CUDA kernels vidfeat needs that cuDNN and cuBLAS lack, behind
 * plain C launchers (cuda_kernels.cu is the only CUDA C++ in the project). Each launcher queues
 * its kernel on `stream` and returns the launch status; nothing here allocates.
 */
#ifndef VIDFEAT_CUDA_KERNELS_H
#define VIDFEAT_CUDA_KERNELS_H

#include <stddef.h>

#include <cuda_runtime.h>

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

#ifdef __cplusplus
}
#endif

#endif /* VIDFEAT_CUDA_KERNELS_H */
