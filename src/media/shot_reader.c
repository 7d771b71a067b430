/*
 * shot_reader.c - decoded frames to the shot detector's pictures (shot_reader.h).
 */
#include "media/shot_reader.h"

#include <math.h>

#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/mem.h"

struct vf_shot_reader {
    vf_shots *det;
    struct SwsContext *sws;
    int src_w, src_h, src_fmt; /* what sws converts from */
    int w, h;                  /* the detector's pictures */
    uint8_t *bgr;
};

vf_status vfi_shot_reader_push(vf_shot_reader **pr, const vf_shot_opts *o, const void *frame,
                               int64_t index, double t, vf_err *err)
{
    const AVFrame *av = frame;
    if (!av || av->width < 1 || av->height < 1 || av->hw_frames_ctx)
        return vfi_fail(err, VF_ERR_DECODE, "no picture to look for cuts in");
    vf_shot_reader *r = *pr;
    if (!r) {
        if (!(r = vfi_calloc(1, sizeof(*r))))
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        *pr = r;
        /* PySceneDetect's downscale: a factor of width / 256 on both sides, sizes rounded */
        double f = av->width > VF_SHOTS_WIDTH ? (double)av->width / VF_SHOTS_WIDTH : 1.0;
        r->w = (int)lrint(av->width / f);
        r->h = (int)lrint(av->height / f);
        r->w = r->w < 1 ? 1 : r->w;
        r->h = r->h < 1 ? 1 : r->h;
        if (!(r->bgr = vfi_mallocarray((size_t)r->w * (size_t)r->h, 3)))
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        vf_status rc = vfi_shots_new(o, r->w, r->h, &r->det, err);
        if (rc < 0)
            return rc;
    }
    if (!r->sws || av->width != r->src_w || av->height != r->src_h || av->format != r->src_fmt) {
        sws_freeContext(r->sws);
        r->sws =
            sws_getContext(av->width, av->height, av->format, r->w, r->h, AV_PIX_FMT_BGR24,
                           SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL, NULL, NULL);
        if (!r->sws) {
            const char *name = av_get_pix_fmt_name(av->format);
            return vfi_fail(err, VF_ERR_DECODE, "cannot convert %s pictures to look for cuts",
                            name ? name : "these");
        }
        r->src_w = av->width;
        r->src_h = av->height;
        r->src_fmt = av->format;
    }
    uint8_t *dst[4] = {r->bgr, NULL, NULL, NULL};
    int stride[4] = {r->w * 3, 0, 0, 0};
    if (sws_scale(r->sws, (const uint8_t *const *)av->data, av->linesize, 0, av->height, dst,
                  stride) != r->h)
        return vfi_fail(err, VF_ERR_DECODE, "a picture could not be converted to look for cuts");
    return vfi_shots_push(r->det, r->bgr, stride[0], index, t, err);
}

vf_status vfi_shot_reader_finish(vf_shot_reader *r, double t_end, const vf_shot **shots, int *n,
                                 vf_err *err)
{
    *shots = NULL;
    *n = 0;
    return r && r->det ? vfi_shots_finish(r->det, t_end, shots, n, err) : VF_OK;
}

void vfi_shot_reader_free(vf_shot_reader **pr)
{
    if (!pr || !*pr)
        return;
    vf_shot_reader *r = *pr;
    vfi_shots_free(&r->det);
    sws_freeContext(r->sws);
    vfi_free(r->bgr);
    vfi_free(r);
    *pr = NULL;
}
