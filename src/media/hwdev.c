/*
 * hwdev.c - hardware decoding devices (FFmpeg's hwdevice): opened once and shared by the
 * decoders of a run, the format a codec decodes to there, and a picture copied back to system
 * memory.
 */
#include "media/hwdev.h"

#include <dlfcn.h>
#include <stdio.h>

#include <libavcodec/avcodec.h>
#include <libavutil/dict.h>
#include <libavutil/hwcontext.h>

#include "core/mem.h"
#include "media/ffmpeg.h"

struct vf_hwdev {
    AVBufferRef *ref; /* AVHWDeviceContext */
    enum AVHWDeviceType type;
    char name[16];
};

vf_status vfi_hwdev_open(const char *type, vf_hwdev **out, vf_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    vfi_ff_log_init();
    enum AVHWDeviceType t = av_hwdevice_find_type_by_name(type);
    if (t == AV_HWDEVICE_TYPE_NONE) {
        char known[256] = "";
        size_t n = 0;
        for (enum AVHWDeviceType k = av_hwdevice_iterate_types(AV_HWDEVICE_TYPE_NONE);
             k != AV_HWDEVICE_TYPE_NONE && n < sizeof(known); k = av_hwdevice_iterate_types(k))
            n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s", n ? ", " : "",
                                  av_hwdevice_get_type_name(k));
        return vfi_fail(err, VF_ERR_INVALID, "unknown hardware decoder '%s' (this FFmpeg has: %s)",
                        type, n ? known : "none");
    }
    vf_hwdev *dev = vfi_calloc(1, sizeof(*dev));
    if (!dev)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    dev->type = t;
    snprintf(dev->name, sizeof(dev->name), "%s", av_hwdevice_get_type_name(t));
    vfi_ff_error_clear();
    /* CUDA: FFmpeg makes a context of its own unless told to take the device's primary context,
     * the one the CUDA runtime (the GPU backend) uses; device memory is per context. */
    AVDictionary *opts = NULL;
    if (t == AV_HWDEVICE_TYPE_CUDA && av_dict_set(&opts, "primary_ctx", "1", 0) < 0) {
        vfi_free(dev);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    int ret = av_hwdevice_ctx_create(&dev->ref, t, NULL, opts, 0);
    av_dict_free(&opts);
    void *driver = NULL;
    if (ret < 0 && t == AV_HWDEVICE_TYPE_CUDA && !(driver = dlopen("libcuda.so.1", RTLD_LAZY))) {
        /* FFmpeg says "Could not dynamically load CUDA"; the reason is simpler */
        vf_status rc = vfi_fail(
            err, VF_ERR_NO_DEVICE,
            "cannot open a cuda device for decoding: no NVIDIA driver found (%s)", dlerror());
        vfi_free(dev);
        return rc;
    }
    if (driver)
        dlclose(driver);
    if (ret < 0) {
        /* FFmpeg's log line names the cause ("Cannot load libcuda.so.1"); the code rarely does */
        vf_status rc = vfi_fail(
            err, VF_ERR_NO_DEVICE, "cannot open a %s device for decoding: %s", dev->name,
            vfi_ff_first_error()[0] ? vfi_ff_first_error() : vfi_ff_err(ret, eb, sizeof(eb)));
        vfi_free(dev);
        return rc;
    }
    *out = dev;
    return VF_OK;
}

void vfi_hwdev_free(vf_hwdev **pdev)
{
    vf_hwdev *dev = pdev ? *pdev : NULL;
    if (!dev)
        return;
    av_buffer_unref(&dev->ref);
    vfi_free(dev);
    *pdev = NULL;
}

/* The pixel format this codec's decoder gives frames in on a device of this type; NONE when
 * this FFmpeg cannot decode the codec there. */
int vfi_hwdev_format(const AVCodec *codec, const vf_hwdev *dev)
{
    for (int i = 0;; i++) {
        const AVCodecHWConfig *c = avcodec_get_hw_config(codec, i);
        if (!c)
            return AV_PIX_FMT_NONE;
        if ((c->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) && c->device_type == dev->type)
            return c->pix_fmt;
    }
}

/* Replace the device picture in f by its copy in system memory, with its properties, through
 * scratch; f is left empty on failure. */
int vfi_hwdev_copy_back(AVFrame *f, AVFrame *scratch)
{
    av_frame_unref(scratch);
    int ret = av_hwframe_transfer_data(scratch, f, 0);
    if (ret >= 0)
        ret = av_frame_copy_props(scratch, f);
    av_frame_unref(f);
    if (ret < 0) {
        av_frame_unref(scratch);
        return ret;
    }
    av_frame_move_ref(f, scratch);
    return 0;
}

const char *vfi_hwdev_name(const vf_hwdev *dev)
{
    return dev->name;
}

AVBufferRef *vfi_hwdev_context(const vf_hwdev *dev)
{
    return dev->ref;
}
