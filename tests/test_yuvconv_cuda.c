/*
 * test_yuvconv_cuda.c - the GPU frame conversion kernel (vfk_yuv_to_slot) against the host
 * reference it shares its arithmetic with (vfi_yuv_convert_ref), on real frames of the samples
 * and the shared clips, each rotation, both resize policies, planar and NV12 chroma. Both are
 * built without fused multiply-adds, so they should agree to the last bit; the bound is 1e-6.
 * Exits 77 (skipped) without a usable CUDA GPU.
 * Usage: test_yuvconv_cuda [VIDEOS_DIR]
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "check.h"
#include "engine/cuda_kernels.h"
#include "media/decode.h"
#include "core/mem.h"
#include "media/preprocess.h"

#define CU_OK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                     \
    } while (0)

/* Upload the planes of a host picture; *dev gets device planes with the same pitches. */
static void upload(const vf_yuv_planes *host, int height, int chroma_height, vf_yuv_planes *dev,
                   void *mem[3])
{
    *dev = *host;
    for (int i = 0; i < 3; i++) {
        mem[i] = NULL;
        if (!host->data[i])
            continue;
        size_t rows = (size_t)(i ? chroma_height : height);
        CU_OK(cudaMalloc(&mem[i], rows * (size_t)host->pitch[i]));
        CU_OK(cudaMemcpy(mem[i], host->data[i], rows * (size_t)host->pitch[i],
                         cudaMemcpyHostToDevice));
        dev->data[i] = mem[i];
    }
}

/* Convert up to max frames of path on both sides; return the largest difference. */
static double compare(const char *path, const vf_preproc_opts *o, int rotation, int max, int *n)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {.every = 5};
    *n = 0;
    if (vfi_decoder_open(path, &s, NULL, &d, &err) < 0)
        return 0;
    const size_t floats = 3 * (size_t)o->size * o->size;
    float *want = vfi_malloc(floats * sizeof(float)), *got = vfi_malloc(floats * sizeof(float));
    CHECK(want && got);
    float *slot = NULL;
    CU_OK(cudaMalloc((void **)&slot, floats * sizeof(float)));
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    double worst = 0;
    while (*n < max && vfi_decoder_next(d, &f, &err) == VF_OK) {
        vf_yuv_params q;
        vf_yuv_planes host, dev;
        CHECK_OK(vfi_preproc_yuv(o, &f, rotation, &q, &host, &err), err.msg);
        vfi_yuv_convert_ref(&q, &host, want);
        void *mem[3]; /* the planes' heights are the axes' last rows + 1 */
        upload(&host, q.luma_y.last + 1, q.chroma_y.last + 1, &dev, mem);
        CU_OK(vfk_yuv_to_slot(&q, &dev, slot, 0));
        CU_OK(cudaMemcpy(got, slot, floats * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < 3; i++)
            cudaFree(mem[i]);
        worst = fmax(worst, vf_max_abs_diff(got, want, floats));
        (*n)++;
    }
    cudaFree(slot);
    vfi_free(want);
    vfi_free(got);
    vfi_frame_destroy(&f);
    vfi_decoder_free(&d);
    return worst;
}

int main(int argc, char **argv)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("no usable CUDA GPU: skipped\n");
        return 77;
    }
    const char *videos = argc > 1 ? argv[1] : VF_SHARED_DIR "/videos";
    const char *clips[] = {VF_SAMPLES_DIR "/testsrc_64x48.mp4",
                           "h264_720p_bigbuckbunny.mp4",
                           "h264_640x480_asl_again.mkv",
                           "hevc_640x360_aac.mp4",
                           "phone_rotated180_ipad2.mov",
                           "vp9_480p_bigbuckbunny_1s.webm",
                           "av1_320x180.ivf",
                           "h264_1x1_yuv444_5frames.mp4",
                           "h264_1080p_smpte_bars_counter.mp4"};
    for (size_t c = 0; c < sizeof(clips) / sizeof(clips[0]); c++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s%s%s", c ? videos : "", c ? "/" : "", clips[c]);
        for (int policy = 0; policy < 2; policy++) {
            vf_preproc_opts o = {.size = policy ? 299 : 224,
                                 .resize = policy ? VF_RESIZE_STRETCH : VF_RESIZE_SHORT_CROP,
                                 .resize_short = 256,
                                 .order = policy ? VF_CHANNELS_BGR : VF_CHANNELS_RGB,
                                 .mean = {123.675f, 116.28f, 103.53f},
                                 .std = {58.395f, 57.12f, 57.375f}};
            int n = 0, rotation = (int)(c % 4) * 90;
            double worst = compare(path, &o, rotation, 3, &n);
            if (!n)
                continue;
            printf("%-40s %-7s turned %3d: %d frames, GPU - host %.3g\n", clips[c],
                   policy ? "stretch" : "crop", rotation, n, worst);
            CHECK_MSG(worst <= 1e-6, "%s", path);
        }
    }
    return 0;
}
