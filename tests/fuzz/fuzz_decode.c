/*
 * fuzz_decode.c - libFuzzer target over one file's way through vidfeat's media code: FFmpeg's
 * demuxers and decoders as decode.c drives them (stream choice, timestamps, sampling by the
 * input's last byte - every frame, every 2nd, 5 per second, key frames, a window - so that the
 * corpus can be plain media files), then
 * preprocess.c's conversion of each kept frame (a small 32x32 slot, both resize policies,
 * rotations) and yuvconv's description of it; then its sound as an audio model reads it
 * (audio.c: the best audio stream, channels averaged, resampled to 16 or 32 kHz, kept to its
 * timestamps) through a log-mel front end (VGGish's or PANNs', streamed in the chunks read). Any
 * bytes: frames, samples and log-mel frames (never NaN), or a failure with a message, never a
 * crash, hang or leak. FFmpeg itself is not instrumented; vidfeat's code around it is.
 */
#include <math.h>

#include "media/audio.h"
#include "media/decode.h"
#include "fuzz_common.h"
#include "media/logmel.h"
#include "media/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SOUND_MAX 64000 /* samples read at most: 2 to 4 s */

/* The file's sound through a front end like VGGish's (16 kHz) or PANNs' (32 kHz, centred). */
static void sound(const char *path, uint8_t mode)
{
    int panns = mode & 64;
    vf_logmel_cfg c = {.sample_rate = panns ? 32000 : 16000,
                       .window = panns ? 1024 : 400,
                       .hop = panns ? 320 : 160,
                       .n_fft = panns ? 1024 : 512,
                       .center = panns,
                       .power = panns ? 2 : 1,
                       .n_mels = 64,
                       .fmin = panns ? 50 : 125,
                       .fmax = panns ? 14000 : 7500,
                       .scale = panns ? VF_MEL_SLANEY : VF_MEL_HTK,
                       .triangles_in_mel = !panns,
                       .slaney_norm = panns,
                       .log = panns ? VF_MEL_DB : VF_MEL_LN_OFFSET,
                       .log_offset = panns ? 1e-10 : 0.01};
    vf_audio_opts o = {.sample_rate = c.sample_rate, .stall_timeout = 5};
    vf_audio *a = NULL;
    vf_logmel *m = NULL;
    vf_err err = {0};
    if (vfi_audio_open(path, &o, &a, &err) != VF_OK) {
        if (!err.msg[0] || a)
            abort();
        return;
    }
    if (vfi_logmel_new(&c, &m, &err) != VF_OK)
        abort(); /* the front end above is one it computes */
    float buf[1000 + 7], frame[64];
    int got = 0, total = 0;
    vf_status rc = VF_OK;
    while (total < SOUND_MAX &&
           (rc = vfi_audio_read(a, buf, 1000 + mode % 8, &got, &err)) == VF_OK) {
        for (int i = 0; i < got; i++)
            if (!isfinite(buf[i]))
                abort(); /* decoded, averaged and resampled samples are numbers */
        total += got;
        if (vfi_logmel_push(m, buf, got, &err) != VF_OK)
            break;
        while (vfi_logmel_next(m, frame))
            for (int b = 0; b < 64; b++)
                if (frame[b] != frame[b])
                    abort(); /* a log-mel value is never NaN */
    }
    if (rc < 0 && !err.msg[0])
        abort();
    vfi_logmel_end(m);
    while (vfi_logmel_next(m, frame))
        ;
    vfi_logmel_free(&m);
    vfi_audio_free(&a);
}

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
    sound(path, mode);
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
