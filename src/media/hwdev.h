/*
 * hwdev.h - hardware decoding devices (hwdev.c).
 */
#ifndef VIDFEAT_HWDEV_H
#define VIDFEAT_HWDEV_H

#include "core/status.h"

/* A hardware decoding device (FFmpeg's hwdevice), opened once and shared by the decoders of a
 * run, one at a time or several at once. */
typedef struct vf_hwdev vf_hwdev;

/* Open the device of this type ("cuda": NVDEC; on the CUDA runtime's context, the device's
 * primary one, so that the GPU backend can read the frames). VF_ERR_NO_DEVICE with FFmpeg's reason
 * when there is none (no driver, no GPU, an FFmpeg built without it), VF_ERR_INVALID for an unknown
 * type. */
vf_status vfi_hwdev_open(const char *type, vf_hwdev **out, vf_err *err);
void vfi_hwdev_free(vf_hwdev **pdev);

/* The device's FFmpeg name ("cuda") and context (an AVBufferRef of its AVHWDeviceContext,
 * borrowed). */
const char *vfi_hwdev_name(const vf_hwdev *dev);
struct AVBufferRef *vfi_hwdev_context(const vf_hwdev *dev);

/* The pixel format (an enum AVPixelFormat) this codec's decoder gives frames in on the device;
 * AV_PIX_FMT_NONE when this FFmpeg cannot decode the codec there. */
struct AVCodec;
int vfi_hwdev_format(const struct AVCodec *codec, const vf_hwdev *dev);

/* Replace the device picture in f by its copy in system memory, with its properties, through
 * scratch; f is left empty on failure (an AVERROR). */
struct AVFrame;
int vfi_hwdev_copy_back(struct AVFrame *f, struct AVFrame *scratch);

#endif /* VIDFEAT_HWDEV_H */
