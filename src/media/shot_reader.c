/*
 * shot_reader.c - decoded frames to the shot detector's pictures (shot_reader.h).
 */
#include "media/shot_reader.h"

#include <math.h>

#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/mem.h"
#include "core/vecmath.h"

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
    /* the own path (8-bit planar YUV): taps per output column and row, luma and chroma; a
     * row of each plane blended vertically (x 256), and an output row's Y', Cb, Cr (x 256) */
    tap *lx, *ly, *cx, *cy;
    uint16_t *vy, *vu, *vv;
    int32_t *oy, *ou, *ov;
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
    vfi_free(r->vy);
    vfi_free(r->oy);
    r->lx = vfi_mallocarray(2 * (size_t)r->w + 2 * (size_t)r->h, sizeof(tap));
    r->vy = vfi_mallocarray((size_t)av->width + 2 * (size_t)cw, sizeof(uint16_t));
    r->oy = vfi_mallocarray(3 * (size_t)r->w, sizeof(int32_t));
    if (!r->lx || !r->vy || !r->oy) { /* none kept: the next frame makes them again */
        vfi_free(r->lx);
        vfi_free(r->vy);
        vfi_free(r->oy);
        r->lx = NULL;
        r->vy = r->vu = r->vv = NULL;
        r->oy = r->ou = r->ov = NULL;
        return VF_ERR_NOMEM;
    }
    r->vu = r->vy + av->width;
    r->vv = r->vu + cw;
    r->ou = r->oy + r->w;
    r->ov = r->ou + r->w;
    r->cx = r->lx + r->w;
    r->ly = r->cx + r->w;
    r->cy = r->ly + r->h;
    make_taps(r->lx, r->w, av->width);
    make_taps(r->cx, r->w, cw);
    make_taps(r->ly, r->h, av->height);
    make_taps(r->cy, r->h, ch);
    return VF_OK;
}

/* Two source rows blended: out[i] = a[i] (256 - w) + b[i] w, n samples. */
VF_VECTOR_CLONES static void blend_rows(const uint8_t *a, const uint8_t *b, int w, int n,
                                        uint16_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (uint16_t)(a[i] * (256 - w) + b[i] * w);
}

/* A blended row (x 256) resampled along its taps: out[x] x 256, rounded. */
VF_VECTOR_CLONES static void resample_row(const uint16_t *row, const tap *t, int n, int32_t *out)
{
    for (int x = 0; x < n; x++)
        out[x] = (row[t[x].i0] * (256 - t[x].w) + row[t[x].i1] * t[x].w + (1 << 7)) >> 8;
}

static inline uint8_t clip8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* R'G'B' from Y', Cb, Cr (each x 256) by coefficients x 4096: BT.601, limited range (Y' 16..235)
 * or full. */
typedef struct yuv_matrix {
    int ky, y0, kr, kgu, kgv, kb;
} yuv_matrix;

/* One output row's Y', Cb, Cr (x 256) to packed BGR. */
VF_VECTOR_CLONES static void convert_row(const yuv_matrix *m, const int32_t *ys, const int32_t *us,
                                         const int32_t *vs, int n, uint8_t *out)
{
    const int half = 1 << 19;
    for (int x = 0; x < n; x++) {
        int Y = ys[x] - m->y0, U = us[x] - (128 << 8), V = vs[x] - (128 << 8);
        int l = m->ky * Y + half;
        out[3 * x] = clip8((l + m->kb * U) >> 20);
        out[3 * x + 1] = clip8((l - m->kgu * U - m->kgv * V) >> 20);
        out[3 * x + 2] = clip8((l + m->kr * V) >> 20);
    }
}

/* The picture av scaled and converted by the taps into r->bgr: BT.601, as libswscale (and so
 * OpenCV's FFmpeg reader) converts untagged video. Separable: each output row blends its two
 * source rows (contiguous: vectorised), takes its columns' taps, then converts. */
static void own_picture(vf_shot_reader *r, const AVFrame *av)
{
    static const yuv_matrix limited = {4769, 16 << 8, 6537, 1605, 3330, 8263};
    static const yuv_matrix full = {4096, 0, 5743, 1410, 2925, 7258};
    const yuv_matrix *m = r->full_range ? &full : &limited;
    int cw = (int)(r->vv - r->vu);
    for (int y = 0; y < r->h; y++) {
        const tap *ly = &r->ly[y], *cy = &r->cy[y];
        const int *ls = av->linesize;
        blend_rows(av->data[0] + (ptrdiff_t)ly->i0 * ls[0], av->data[0] + (ptrdiff_t)ly->i1 * ls[0],
                   ly->w, av->width, r->vy);
        blend_rows(av->data[1] + (ptrdiff_t)cy->i0 * ls[1], av->data[1] + (ptrdiff_t)cy->i1 * ls[1],
                   cy->w, cw, r->vu);
        blend_rows(av->data[2] + (ptrdiff_t)cy->i0 * ls[2], av->data[2] + (ptrdiff_t)cy->i1 * ls[2],
                   cy->w, cw, r->vv);
        resample_row(r->vy, r->lx, r->w, r->oy);
        resample_row(r->vu, r->cx, r->w, r->ou);
        resample_row(r->vv, r->cx, r->w, r->ov);
        convert_row(m, r->oy, r->ou, r->ov, r->w, r->bgr + (size_t)y * 3 * (size_t)r->w);
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
    vfi_free(r->vy);
    vfi_free(r->oy);
    vfi_free(r->bgr);
    vfi_free(r);
    *pr = NULL;
}
