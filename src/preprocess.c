/*
 * preprocess.c - libswscale converts each frame straight into its slot of the batch tensor as
 * planar float RGB (AV_PIX_FMT_GBRPF32, 0..1), honouring the source's colour matrix and range;
 * normalisation and rotation then work in place on the slot. Called on the pipeline's convert
 * thread; owns its SwsContext (recreated only when the source format or size changes) and one
 * plane of scratch space for rotations.
 *
 * Resize policy: "stretch" scales the whole frame to size x size; "short_side_crop" is the
 * torchvision recipe (shorter side to resize_short, centre crop size x size), done as one
 * centred square crop of side min(w, h) x size / resize_short scaled to size x size. The crop is
 * a centred square, so it is the same before and after rotation, and the rotation can be
 * applied to the small square result.
 */
#include "preprocess.h"

#include <string.h>

#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "mem.h"

struct vf_preproc {
    vf_preproc_opts o;
    struct SwsContext *sws;
    int src_w, src_h, src_fmt, src_space, src_range; /* what sws was made for */
    AVFrame *view;                                   /* a reference to the frame being cropped */
    float *scratch;                                  /* one plane, for rotations */
};

vf_status vfi_preproc_create(const vf_preproc_opts *opts, vf_preproc **out, vf_err *err)
{
    if (opts->size < 1 || opts->size > 8192)
        return vfi_fail(err, VF_ERR_INVALID, "input size %d", opts->size);
    vf_preproc *p = vfi_calloc(1, sizeof(*p));
    if (!p)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    p->o = *opts;
    p->view = av_frame_alloc();
    p->scratch =
        vfi_aligned_alloc(VF_TENSOR_ALIGN, (size_t)opts->size * opts->size * sizeof(float));
    if (!p->view || !p->scratch) {
        vfi_preproc_free(&p);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    *out = p;
    return VF_OK;
}

void vfi_preproc_free(vf_preproc **pp)
{
    vf_preproc *p = pp ? *pp : NULL;
    if (!p)
        return;
    sws_freeContext(p->sws);
    av_frame_free(&p->view);
    vfi_free(p->scratch);
    vfi_free(p);
    *pp = NULL;
}

static int full_range(const AVFrame *f)
{
    if (f->color_range == AVCOL_RANGE_JPEG)
        return 1;
    switch (f->format) { /* the deprecated "J" formats are full range by definition */
    case AV_PIX_FMT_YUVJ420P:
    case AV_PIX_FMT_YUVJ422P:
    case AV_PIX_FMT_YUVJ444P:
    case AV_PIX_FMT_YUVJ440P:
    case AV_PIX_FMT_YUVJ411P:
        return 1;
    default:
        return 0;
    }
}

/* The SWS_CS_* matrix for the frame's colour space; unspecified follows FFmpeg's default
 * guess: BT.709 for HD sizes, BT.601 otherwise. */
static int sws_space(const AVFrame *f)
{
    switch (f->colorspace) {
    case AVCOL_SPC_BT709:
        return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
        return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
        return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
        return SWS_CS_BT2020;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M:
        return SWS_CS_ITU601;
    default:
        return f->height >= 720 ? SWS_CS_ITU709 : SWS_CS_ITU601;
    }
}

static vf_status ensure_scaler(vf_preproc *p, const AVFrame *f, vf_err *err)
{
    int space = sws_space(f), range = full_range(f);
    if (p->sws && p->src_w == f->width && p->src_h == f->height && p->src_fmt == f->format &&
        p->src_space == space && p->src_range == range)
        return VF_OK;
    sws_freeContext(p->sws);
    p->sws = sws_getContext(f->width, f->height, f->format, p->o.size, p->o.size,
                            AV_PIX_FMT_GBRPF32, SWS_BILINEAR | SWS_ACCURATE_RND, NULL, NULL, NULL);
    if (!p->sws) {
        const char *name = av_get_pix_fmt_name(f->format);
        return vfi_fail(err, VF_ERR_DECODE, "cannot convert %dx%d %s frames", f->width, f->height,
                        name ? name : "unknown-format");
    }
    int *inv, *tab, src_range, dst_range, bright, contrast, sat;
    if (sws_getColorspaceDetails(p->sws, &inv, &src_range, &tab, &dst_range, &bright, &contrast,
                                 &sat) >= 0)
        sws_setColorspaceDetails(p->sws, sws_getCoefficients(space), range, tab, 1, bright,
                                 contrast, sat);
    p->src_w = f->width;
    p->src_h = f->height;
    p->src_fmt = f->format;
    p->src_space = space;
    p->src_range = range;
    return VF_OK;
}

/* Rotate one size x size plane clockwise by 90, 180 or 270 degrees, through scratch. */
static void rotate_plane(float *plane, float *scratch, int n, int rotation)
{
    memcpy(scratch, plane, (size_t)n * n * sizeof(float));
    for (int y = 0; y < n; y++) {
        for (int x = 0; x < n; x++) {
            int sx, sy; /* the source pixel that lands at (x, y) */
            if (rotation == 90) {
                sx = y;
                sy = n - 1 - x;
            } else if (rotation == 180) {
                sx = n - 1 - x;
                sy = n - 1 - y;
            } else {
                sx = n - 1 - y;
                sy = x;
            }
            plane[(size_t)y * n + x] = scratch[(size_t)sy * n + sx];
        }
    }
}

vf_status vfi_preproc_frame(vf_preproc *p, const vf_frame *fr, int rotation, float *slot,
                            vf_err *err)
{
    const AVFrame *src = fr->av;
    const int n = p->o.size;
    const size_t plane = (size_t)n * n;
    if (src->width < 1 || src->height < 1 || !src->data[0])
        return vfi_fail(err, VF_ERR_DECODE, "empty frame");
    av_frame_unref(p->view);
    if (av_frame_ref(p->view, src) < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (p->o.resize == VF_RESIZE_SHORT_CROP) {
        int shorter = src->width < src->height ? src->width : src->height;
        int side = (int)((int64_t)shorter * n / p->o.resize_short);
        side = side < 1 ? 1 : side;
        p->view->crop_left = (size_t)(src->width - side) / 2;
        p->view->crop_right = (size_t)(src->width - side) - p->view->crop_left;
        p->view->crop_top = (size_t)(src->height - side) / 2;
        p->view->crop_bottom = (size_t)(src->height - side) - p->view->crop_top;
        if (av_frame_apply_cropping(p->view, AV_FRAME_CROP_UNALIGNED) < 0)
            return vfi_fail(err, VF_ERR_DECODE, "cannot crop a %dx%d frame", src->width,
                            src->height);
    }
    vf_status rc = ensure_scaler(p, p->view, err);
    if (rc < 0)
        return rc;
    /* GBRP plane order is G, B, R; the slot's planes follow the model's channel order. */
    int r = p->o.order == VF_CHANNELS_RGB ? 0 : 2, b = 2 - r;
    uint8_t *dst[4] = {(uint8_t *)(slot + plane), (uint8_t *)(slot + b * plane),
                       (uint8_t *)(slot + r * plane), NULL};
    int stride[4] = {n * (int)sizeof(float), n * (int)sizeof(float), n * (int)sizeof(float), 0};
    int h = sws_scale(p->sws, (const uint8_t *const *)p->view->data, p->view->linesize, 0,
                      p->view->height, dst, stride);
    av_frame_unref(p->view);
    if (h != n)
        return vfi_fail(err, VF_ERR_DECODE, "scaling failed");
    /* (255 v - mean) / std in place; mean/std are given in RGB order. */
    for (int c = 0; c < 3; c++) {
        int rgb = p->o.order == VF_CHANNELS_RGB ? c : 2 - c;
        float scale = 255.0f / p->o.std[rgb], shift = p->o.mean[rgb] / p->o.std[rgb];
        float *x = slot + c * plane;
        for (size_t i = 0; i < plane; i++)
            x[i] = x[i] * scale - shift;
        if (rotation == 90 || rotation == 180 || rotation == 270)
            rotate_plane(x, p->scratch, n, rotation);
    }
    return VF_OK;
}
