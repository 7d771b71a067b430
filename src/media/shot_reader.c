/*
 * shot_reader.c - decoded frames to the shot detector's pictures (shot_reader.h).
 */
#include "media/shot_reader.h"

#include <math.h>

#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/mem.h"

/* Where an output pixel's two taps are along one axis, and the far tap's weight (of 256). */
typedef struct tap {
    int i0, i1, w;
} tap;

struct vf_shot_reader {
    vf_shots *det;
    struct SwsContext *sws;    /* pictures the own path does not take */
    int src_w, src_h, src_fmt; /* what sws or the taps were made for */
    int w, h;                  /* the detector's pictures */
    uint8_t *bgr;
    /* the own path (8-bit planar YUV): taps per output column and row, luma and chroma */
    tap *lx, *ly, *cx, *cy;
    int full_range;
};

/* OpenCV's INTER_LINEAR along an axis of n source samples onto out pixels: centres aligned,
 * two taps, edges clamped. */
static void make_taps(tap *t, int out, int n)
{
    double scale = (double)n / out;
    for (int i = 0; i < out; i++) {
        double x = (i + 0.5) * scale - 0.5;
        int x0 = (int)floor(x);
        double f = x - x0;
        if (x0 < 0) {
            x0 = 0;
            f = 0.0;
        }
        t[i].i0 = x0 < n ? x0 : n - 1;
        t[i].i1 = x0 + 1 < n ? x0 + 1 : n - 1;
        t[i].w = (int)lrint(f * 256.0);
    }
}

/* The formats the own path reads: 8-bit Y, U, V planes (4:2:0, 4:2:2, 4:4:4; J: full range). */
static int own_format(int fmt, int *full)
{
    *full = fmt == AV_PIX_FMT_YUVJ420P || fmt == AV_PIX_FMT_YUVJ422P || fmt == AV_PIX_FMT_YUVJ444P;
    return *full || fmt == AV_PIX_FMT_YUV420P || fmt == AV_PIX_FMT_YUV422P ||
           fmt == AV_PIX_FMT_YUV444P;
}

static vf_status make_own(vf_shot_reader *r, const AVFrame *av)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(av->format);
    int cw = AV_CEIL_RSHIFT(av->width, d->log2_chroma_w);
    int ch = AV_CEIL_RSHIFT(av->height, d->log2_chroma_h);
    vfi_free(r->lx);
    r->lx = vfi_mallocarray(2 * (size_t)r->w + 2 * (size_t)r->h, sizeof(tap));
    if (!r->lx)
        return VF_ERR_NOMEM;
    r->cx = r->lx + r->w;
    r->ly = r->cx + r->w;
    r->cy = r->ly + r->h;
    make_taps(r->lx, r->w, av->width);
    make_taps(r->cx, r->w, cw);
    make_taps(r->ly, r->h, av->height);
    make_taps(r->cy, r->h, ch);
    return VF_OK;
}

/* Row y's two source rows a and b blended by weight wy, and by tap x along them: the sample in
 * 1/256 steps. */
static inline int sample(const uint8_t *a, const uint8_t *b, int wy, const tap *x)
{
    int top = a[x->i0] * (256 - x->w) + a[x->i1] * x->w;
    int bottom = b[x->i0] * (256 - x->w) + b[x->i1] * x->w;
    return (top * (256 - wy) + bottom * wy + (1 << 7)) >> 8;
}

static inline uint8_t clip8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The picture av scaled and converted by the taps into r->bgr: BT.601, as libswscale (and so
 * OpenCV's FFmpeg reader) converts untagged video. */
static void own_picture(vf_shot_reader *r, const AVFrame *av)
{
    /* R'G'B' from Y', Cb, Cr (each x 256) by coefficients x 4096: limited range (Y' 16..235), or
     * full */
    const int full = r->full_range, ky = full ? 4096 : 4769, y0 = full ? 0 : 16 << 8;
    const int kr = full ? 5743 : 6537, kgu = full ? 1410 : 1605, kgv = full ? 2925 : 3330;
    const int kb = full ? 7258 : 8263, half = 1 << 19;
    uint8_t *out = r->bgr;
    for (int y = 0; y < r->h; y++) {
        const tap *ly = &r->ly[y], *cy = &r->cy[y];
        const uint8_t *y_a = av->data[0] + (ptrdiff_t)ly->i0 * av->linesize[0];
        const uint8_t *y_b = av->data[0] + (ptrdiff_t)ly->i1 * av->linesize[0];
        const uint8_t *u_a = av->data[1] + (ptrdiff_t)cy->i0 * av->linesize[1];
        const uint8_t *u_b = av->data[1] + (ptrdiff_t)cy->i1 * av->linesize[1];
        const uint8_t *v_a = av->data[2] + (ptrdiff_t)cy->i0 * av->linesize[2];
        const uint8_t *v_b = av->data[2] + (ptrdiff_t)cy->i1 * av->linesize[2];
        for (int x = 0; x < r->w; x++) {
            int Y = sample(y_a, y_b, ly->w, &r->lx[x]) - y0;
            int U = sample(u_a, u_b, cy->w, &r->cx[x]) - (128 << 8);
            int V = sample(v_a, v_b, cy->w, &r->cx[x]) - (128 << 8);
            int l = ky * Y + half;
            *out++ = clip8((l + kb * U) >> 20);
            *out++ = clip8((l - kgu * U - kgv * V) >> 20);
            *out++ = clip8((l + kr * V) >> 20);
        }
    }
}

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
    int full;
    if (own_format(av->format, &full)) { /* the common case, at a fraction of libswscale's cost */
        if (!r->lx || av->width != r->src_w || av->height != r->src_h || av->format != r->src_fmt) {
            if (make_own(r, av) < 0)
                return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            r->full_range = full;
            r->src_w = av->width;
            r->src_h = av->height;
            r->src_fmt = av->format;
        }
        own_picture(r, av);
        return vfi_shots_push(r->det, r->bgr, 3 * r->w, index, t, err);
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
    vfi_free(r->lx);
    vfi_free(r->bgr);
    vfi_free(r);
    *pr = NULL;
}
