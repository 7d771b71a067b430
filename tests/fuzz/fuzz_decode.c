/*
 * fuzz_decode.c - libFuzzer target over one file's way through vidfeat's media code: FFmpeg's
 * demuxers and decoders as decode.c drives them (stream choice, timestamps, sampling by the
 * input's last byte - every frame, every 2nd, 5 per second, key frames, a window - so that the
 * corpus can be plain media files), then
 * preprocess.c's conversion of each kept frame (a small 32x32 slot, both resize policies,
 * rotations) and yuvconv's description of it. Any bytes: frames or a failure with a message,
 * never a crash, hang or leak. FFmpeg itself is not instrumented; vidfeat's code around it is.
 */
#include "media/decode.h"
#include "fuzz_common.h"
#include "media/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fuzz_quiet_logs();
    uint8_t mode = data[size - 1];
    const char *path = fuzz_file(data, size, "");
    if (!path)
        return 0;
    vf_sampling s = {0};
    switch (mode % 5) {
    case 1:
        s.every = 2;
        break;
    case 2:
        s.fps = 5;
        break;
    case 3:
        s.keyframes = 1;
        break;
    case 4:
        s.start = 0.2, s.duration = 0.5;
        break;
    default:
        break;
    }
    s.max_frames = 16;
    vf_decode_opts o = {.threads = 1, .stall_timeout = 5};
    vf_decoder *d = NULL;
    vf_err err = {0};
    if (vfi_decoder_open(path, &s, &o, &d, &err) != VF_OK) {
        if (!err.msg[0])
            abort();
        return 0;
    }
    vf_preproc_opts po = {.size = 32,
                          .resize = mode & 8 ? VF_RESIZE_STRETCH : VF_RESIZE_SHORT_CROP,
                          .resize_short = 36,
                          .order = mode & 16 ? VF_CHANNELS_BGR : VF_CHANNELS_RGB,
                          .mean = {123.675f, 116.28f, 103.53f},
                          .std = {58.395f, 57.12f, 57.375f}};
    vf_preproc *p = NULL;
    float slot[3 * 32 * 32];
    vf_frame f;
    if (vfi_preproc_create(&po, &p, &err) == VF_OK && vfi_frame_init(&f) == VF_OK) {
        int rotation = (vfi_decoder_meta(d)->rotation + 90 * ((mode >> 5) & 3)) % 360;
        vf_status rc;
        while ((rc = vfi_decoder_next(d, &f, &err)) == VF_OK) {
            vf_yuv_params q;
            vf_yuv_planes planes;
            (void)vfi_preproc_yuv(&po, &f, rotation, &q, &planes, &err);
            if (vfi_preproc_frame(p, &f, rotation, slot, &err) == VF_OK) {
                for (size_t i = 0; i < sizeof(slot) / sizeof(slot[0]); i++)
                    if (slot[i] != slot[i])
                        abort(); /* a converted frame is never NaN */
            }
        }
        if (rc != VF_EOF && !err.msg[0])
            abort();
        vfi_frame_destroy(&f);
    }
    vfi_preproc_free(&p);
    vfi_decoder_free(&d);
    return 0;
}
