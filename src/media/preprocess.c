/*
 * preprocess.c - a decoded frame into its slot of the batch tensor. YUV frames (every format
 * the decoders give for video: 8- or 16-bit, planar or NV12-style, any subsampling) go through
 * yuvconv.h, the arithmetic the GPU kernel shares, so a frame converts to the same floats on
 * either; vfi_preproc_yuv describes a frame for it (geometry, chroma siting, matrix, range,
 * normalisation). Anything else (RGB, paletted, big-endian, ...) falls back to libswscale:
 * straight into the slot as planar float RGB (AV_PIX_FMT_GBRPF32, 0..1), honouring the source's
 * colour matrix and range, then normalisation and rotation in place. Called on the pipeline's
 * convert workers; owns its yuvconv scratch, its SwsContext (recreated only when the source
 * format or size changes) and one plane of scratch space for rotations.
 *
 * Why not libswscale for everything: its float output is only about 8 bits exact (limited-range
 * white comes out as 254.02/255, 0.4% dark), it truncates an odd crop's corner on the chroma grid
 * (chroma shifted by half a pixel) and it cannot run where the GPU's frames are.
 *
 * Resize policy: "stretch" scales the whole frame to size x size; "short_side_crop" is the
 * torchvision recipe (shorter side to resize_short, centre crop size x size), done as one
 * centred square crop of side min(w, h) x size / resize_short scaled to size x size. The crop is
 * a centred square, so it is the same before and after rotation, and the rotation can be
 * applied to the small square result. "resize_crop" is torchvision's video recipe (the frame
 * scaled to resize_to, aspect not kept, then a centred size x size crop), done as the centred
 * region of size / resize_to of each side scaled to size x size (the sides as the frame is
 * shown: a rotated frame's region is chosen across).
 */
#include "media/preprocess.h"

#include <string.h>

#include <libavutil/frame.h>
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/mem.h"

struct vf_preproc {
    vf_preproc_opts o;
    vf_yuv_host *yuv; /* the conversion of YUV frames (yuvconv.c) */
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
    p->yuv = vfi_yuv_host_new();
    p->view = av_frame_alloc();
    p->scratch =
        vfi_aligned_alloc(VF_TENSOR_ALIGN, (size_t)opts->size * opts->size * sizeof(float));
    if (!p->yuv || !p->view || !p->scratch) {
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
    vfi_yuv_host_free(&p->yuv);
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
 * guess: BT.709 for HD sizes, BT.601 otherwise (by the whole picture's height, not a crop's). */
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

/* The region of a w x h picture the slot shows: its top-left corner and size in picture pixels.
 * VF_RESIZE_SHORT_CROP: a centred square (the same before and after rotation).
 * VF_RESIZE_FIXED_CROP: the centred size x size of the picture as shown (turned by rotation)
 * scaled to resize_to[1] x resize_to[0]: size / resize_to of each side as shown, a side shown
 * across being the picture's other one. */
static void crop_region(const vf_preproc_opts *o, int w, int h, int rotation, int r[4])
{
    int cw = w, ch = h;
    if (o->resize == VF_RESIZE_SHORT_CROP) {
        int shorter = w < h ? w : h;
        cw = ch = (int)((int64_t)shorter * o->size / o->resize_short);
    } else if (o->resize == VF_RESIZE_FIXED_CROP) {
        int across = rotation == 90 || rotation == 270;
        int over_w = across ? o->resize_to[0] : o->resize_to[1]; /* the picture's width's */
        int over_h = across ? o->resize_to[1] : o->resize_to[0];
        cw = (int)(((int64_t)w * o->size * 2 + over_w) / (2 * (int64_t)over_w)); /* rounded */
        ch = (int)(((int64_t)h * o->size * 2 + over_h) / (2 * (int64_t)over_h));
    }
    cw = cw < 1 ? 1 : cw;
    ch = ch < 1 ? 1 : ch;
    r[0] = (w - cw) / 2;
    r[1] = (h - ch) / 2;
    r[2] = cw;
    r[3] = ch;
}

static vf_status ensure_scaler(vf_preproc *p, const AVFrame *f, int space, int range, vf_err *err)
{
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
    vf_yuv_params q;
    vf_yuv_planes planes;
    vf_err ignored;
    if (!src->hw_frames_ctx && vfi_preproc_yuv(&p->o, fr, rotation, &q, &planes, &ignored) >= 0) {
        if (vfi_yuv_convert(p->yuv, &q, &planes, slot) < 0)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return VF_OK;
    }
    av_frame_unref(p->view);
    if (av_frame_ref(p->view, src) < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (p->o.resize != VF_RESIZE_STRETCH) {
        int r[4];
        crop_region(&p->o, src->width, src->height, rotation, r);
        p->view->crop_left = (size_t)r[0];
        p->view->crop_right = (size_t)(src->width - r[2] - r[0]);
        p->view->crop_top = (size_t)r[1];
        p->view->crop_bottom = (size_t)(src->height - r[3] - r[1]);
        if (av_frame_apply_cropping(p->view, AV_FRAME_CROP_UNALIGNED) < 0)
            return vfi_fail(err, VF_ERR_DECODE, "cannot crop a %dx%d frame", src->width,
                            src->height);
    }
    vf_status rc = ensure_scaler(p, p->view, sws_space(src), full_range(src), err);
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

vf_status vfi_preproc_rgb(vf_preproc *p, const uint8_t *rgb, int width, int height, float *slot,
                          vf_err *err)
{
    if (width < 1 || height < 1 || width > 65536 || height > 65536)
        return vfi_fail(err, VF_ERR_INVALID, "a %dx%d image", width, height);
    /* a picture as FFmpeg's PNG decoder gives one: 8-bit RGB, full range, in a buffer of
     * FFmpeg's own with its row padding zeroed (libswscale's SIMD reads past a row's end) */
    AVFrame *f = av_frame_alloc();
    if (!f)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    f->format = AV_PIX_FMT_RGB24;
    f->width = width;
    f->height = height;
    f->color_range = AVCOL_RANGE_JPEG;
    if (av_frame_get_buffer(f, 0) < 0) {
        av_frame_free(&f);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    for (int y = 0; y < height; y++) {
        uint8_t *row = f->data[0] + (size_t)y * (size_t)f->linesize[0];
        memcpy(row, rgb + (size_t)y * (size_t)width * 3, (size_t)width * 3);
        memset(row + (size_t)width * 3, 0, (size_t)f->linesize[0] - (size_t)width * 3);
    }
    vf_frame fr = {.av = f, .index = 0, .pts = 0, .t = 0};
    vf_status rc = vfi_preproc_frame(p, &fr, 0, slot, err);
    av_frame_free(&f);
    return rc;
}

/* Kr and Kb of the SWS_CS_* matrix space (ITU-T H.273's table). */
static void matrix_weights(int space, float *kr, float *kb)
{
    switch (space) {
    case SWS_CS_ITU709:
        *kr = 0.2126f, *kb = 0.0722f;
        break;
    case SWS_CS_FCC:
        *kr = 0.30f, *kb = 0.11f;
        break;
    case SWS_CS_SMPTE240M:
        *kr = 0.212f, *kb = 0.087f;
        break;
    case SWS_CS_BT2020:
        *kr = 0.2627f, *kb = 0.0593f;
        break;
    default: /* BT.601 */
        *kr = 0.299f, *kb = 0.114f;
        break;
    }
}

/* One axis: the region [start, start + len) of a plane line of `extent` samples onto n output
 * pixels; taps past the plane's edges read its edge samples. */
static vf_yuv_axis make_axis(float start, float len, int extent, int n)
{
    vf_yuv_axis a;
    a.origin = start;
    a.scale = len / (float)n;
    a.radius = a.scale > 1.0f ? a.scale : 1.0f;
    a.last = extent - 1;
    return a;
}

/* Where a subsampled chroma plane's samples sit, as a shift of the chroma axis's origin in
 * chroma samples: 0 for samples centred between the luma samples they cover (unspecified is
 * taken so, as JPEG has it), 0.5 - 0.5 / 2^shift when they sit on the first one (left or top,
 * H.264's default), the opposite on the last (bottom). */
static float siting(int loc, int shift, int vertical)
{
    float off = shift ? 0.5f - 0.5f / (float)(1 << shift) : 0.0f;
    switch (loc) {
    case AVCHROMA_LOC_LEFT:
        return vertical ? 0.0f : off;
    case AVCHROMA_LOC_TOPLEFT:
        return off;
    case AVCHROMA_LOC_TOP:
        return vertical ? off : 0.0f;
    case AVCHROMA_LOC_BOTTOMLEFT:
        return vertical ? -off : off;
    case AVCHROMA_LOC_BOTTOM:
        return vertical ? -off : 0.0f;
    default:
        return 0.0f;
    }
}

vf_status vfi_preproc_yuv(const vf_preproc_opts *o, const vf_frame *fr, int rotation,
                          vf_yuv_params *q, vf_yuv_planes *planes, vf_err *err)
{
    const AVFrame *f = fr->av;
    int fmt = f->format;
    if (f->hw_frames_ctx)
        fmt = ((const AVHWFramesContext *)(const void *)f->hw_frames_ctx->data)->sw_format;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fmt);
    if (!d || f->width < 1 || f->height < 1)
        return vfi_fail(err, VF_ERR_DECODE, "empty frame");
    const AVComponentDescriptor *cy = &d->comp[0], *cu = &d->comp[1], *cv = &d->comp[2];
    int bytes = (cy->depth + 7) / 8;
    int interleaved = cu->plane == 1 && cv->plane == 1 && cu->step == 2 * bytes &&
                      cu->offset == 0 && cv->offset == bytes;
    int planar = cu->plane == 1 && cv->plane == 2 && cu->step == bytes && cv->step == bytes;
    if (d->nb_components < 3 ||
        (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BE |
                     AV_PIX_FMT_FLAG_FLOAT)) ||
        cy->plane != 0 || cy->step != bytes || cy->offset != 0 || bytes > 2 ||
        cy->depth != cu->depth || (!interleaved && !planar))
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "no YUV layout for %s frames",
                        d->name ? d->name : "unknown-format");
    const int n = o->size;
    memset(q, 0, sizeof(*q));
    q->size = n;
    q->rotation = rotation == 90 || rotation == 180 || rotation == 270 ? rotation : 0;
    q->wide = bytes == 2;
    q->interleaved = interleaved;

    int r[4];
    crop_region(o, f->width, f->height, q->rotation, r);
    int x = r[0], y = r[1], w = r[2], h = r[3];
    int sx = d->log2_chroma_w, sy = d->log2_chroma_h;
    float fx = (float)(1 << sx), fy = (float)(1 << sy);
    q->luma_x = make_axis((float)x, (float)w, f->width, n);
    q->luma_y = make_axis((float)y, (float)h, f->height, n);
    q->chroma_x = make_axis((float)x / fx + siting(f->chroma_location, sx, 0), (float)w / fx,
                            -((-f->width) >> sx), n);
    q->chroma_y = make_axis((float)y / fy + siting(f->chroma_location, sy, 1), (float)h / fy,
                            -((-f->height) >> sy), n);

    /* a 16-bit sample holds depth bits above `shift` zero bits. Full range spans 0 ..
     * 2^depth - 1 with the chroma centred on 2^(depth - 1) (H.273: 1023 at 10 bits, not
     * 4 x 255); limited range is the 8-bit range scaled by 2^(depth - 8) */
    float unit = (float)(1 << (cy->shift + cy->depth - 8));
    if (full_range(f)) {
        float top = (float)((1 << cy->depth) - 1);
        q->y_mul = 1.0f / (top * (float)(1 << cy->shift)), q->y_sub = 0.0f;
        q->c_mul = q->y_mul, q->c_sub = (float)(1 << (cy->depth - 1)) / top;
    } else {
        q->y_mul = 1.0f / (219.0f * unit), q->y_sub = 16.0f / 219.0f;
        q->c_mul = 1.0f / (224.0f * unit), q->c_sub = 128.0f / 224.0f;
    }
    float kr, kb;
    matrix_weights(sws_space(f), &kr, &kb);
    float kg = 1.0f - kr - kb;
    q->cr_r = 2.0f * (1.0f - kr);
    q->cb_b = 2.0f * (1.0f - kb);
    q->cb_g = 2.0f * kb * (1.0f - kb) / kg;
    q->cr_g = 2.0f * kr * (1.0f - kr) / kg;
    for (int c = 0; c < 3; c++) {
        int rgb = o->order == VF_CHANNELS_RGB ? c : 2 - c;
        q->src[c] = rgb;
        q->mul[c] = 255.0f / o->std[rgb];
        q->sub[c] = o->mean[rgb] / o->std[rgb];
    }
    if (planes) {
        memset(planes, 0, sizeof(*planes));
        for (int i = 0; i < (interleaved ? 2 : 3); i++) {
            planes->data[i] = f->data[i];
            planes->pitch[i] = f->linesize[i];
        }
    }
    return VF_OK;
}
