/*
 * picture.c - a frame as a small upright RGB picture (picture.h), through libswscale.
 */
#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/mem.h"
#include "media/picture.h"

/* The picture (w x h, 3 bytes a pixel) turned by rot degrees clockwise into out. */
static void turn(const uint8_t *in, int w, int h, int rot, uint8_t *out)
{
    int ow = rot == 90 || rot == 270 ? h : w;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int ox = x, oy = y;
            if (rot == 90) {
                ox = h - 1 - y;
                oy = x;
            } else if (rot == 180) {
                ox = w - 1 - x;
                oy = h - 1 - y;
            } else if (rot == 270) {
                ox = y;
                oy = w - 1 - x;
            }
            const uint8_t *s = in + ((size_t)y * (size_t)w + (size_t)x) * 3;
            uint8_t *d = out + ((size_t)oy * (size_t)ow + (size_t)ox) * 3;
            d[0] = s[0];
            d[1] = s[1];
            d[2] = s[2];
        }
}

vf_status vfi_picture_rgb(const vf_frame *f, int rotation, int max_side, uint8_t **rgb, int *w,
                          int *h, vf_err *err)
{
    *rgb = NULL;
    const AVFrame *av = f->av;
    if (!av || av->width < 1 || av->height < 1 || av->hw_frames_ctx || max_side < 1)
        return vfi_fail(err, VF_ERR_DECODE, "no picture to convert");
    /* the display size: the sample aspect ratio widens or narrows the coded one */
    double dw = av->width, dh = av->height;
    if (av->sample_aspect_ratio.num > 0 && av->sample_aspect_ratio.den > 0)
        dw *= (double)av->sample_aspect_ratio.num / av->sample_aspect_ratio.den;
    int turned = rotation == 90 || rotation == 270;
    double scale = max_side / (turned ? (dh > dw ? dh : dw) : (dw > dh ? dw : dh));
    if (scale > 1.0)
        scale = 1.0;
    int sw = (int)(dw * scale + 0.5), sh = (int)(dh * scale + 0.5);
    sw = sw < 1 ? 1 : sw;
    sh = sh < 1 ? 1 : sh;
    struct SwsContext *sws =
        sws_getContext(av->width, av->height, av->format, sw, sh, AV_PIX_FMT_RGB24,
                       SWS_AREA | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL, NULL, NULL);
    uint8_t *out = vfi_mallocarray((size_t)sw * (size_t)sh, 3);
    uint8_t *upright = rotation ? vfi_mallocarray((size_t)sw * (size_t)sh, 3) : NULL;
    vf_status rc = VF_OK;
    if (!sws) {
        const char *name = av_get_pix_fmt_name(av->format);
        rc = vfi_fail(err, VF_ERR_DECODE, "cannot convert %s pictures to RGB",
                      name ? name : "these");
    } else if (!out || (rotation && !upright)) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    } else {
        uint8_t *dst[4] = {out, NULL, NULL, NULL};
        int stride[4] = {sw * 3, 0, 0, 0};
        if (sws_scale(sws, (const uint8_t *const *)av->data, av->linesize, 0, av->height, dst,
                      stride) != sh)
            rc = vfi_fail(err, VF_ERR_DECODE, "the picture could not be converted to RGB");
    }
    sws_freeContext(sws);
    if (rc >= 0 && rotation) {
        turn(out, sw, sh, rotation, upright);
        vfi_free(out);
        out = upright;
        upright = NULL;
    }
    vfi_free(upright);
    if (rc < 0) {
        vfi_free(out);
        return rc;
    }
    *rgb = out;
    *w = turned ? sh : sw;
    *h = turned ? sw : sh;
    return VF_OK;
}
