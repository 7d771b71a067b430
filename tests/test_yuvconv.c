/*
 * test_yuvconv.c - frame conversion (yuvconv.h, preprocess.c): the CPU path (separable, and as
 * the pipeline calls it) equals the per-pixel reference the GPU kernel shares, on real frames of
 * every shared clip, both resize policies, each rotation, RGB and BGR order; NV12, P010 and
 * 16-bit copies of a frame convert alike; colours are ITU-T H.273's formula's, computed here,
 * on one-colour clips the ffmpeg CLI makes (BT.709/BT.601, limited/full range, 8/10 bits,
 * described or guessed by size); RGB frames are refused by yuvconv and converted by the
 * libswscale fallback; torchvision's video fit (scaled to a fixed size, then the centre crop)
 * sees the region it should, upright and turned.
 * Usage: test_yuvconv             (the fallback, the layouts, the colours)
 *        test_yuvconv VIDEOS_DIR  (the shared clips; 77 without them; each must open)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>

#include "check.h"
#include "media/decode.h"
#include "core/mem.h"
#include "media/preprocess.h"
#include "media/yuvconv.h"

static const float kMean[3] = {123.675f, 116.28f, 103.53f}, kStd[3] = {58.395f, 57.12f, 57.375f};

typedef struct stats {
    double max_abs;  /* vfi_preproc_frame (the pipeline's) against the reference */
    double max_fast; /* the separable CPU path against the per-pixel reference */
} stats;

/* Convert up to max_frames of path three ways with o: as the pipeline does, the separable CPU
 * path and the per-pixel reference; keep the largest differences from the reference. */
static int compare_clip(const char *path, const vf_preproc_opts *o, int rotation, int max_frames,
                        stats *st)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {.every = 7}; /* spread over the clip: several start black */
    CHECK_OK(vfi_decoder_open(path, &s, NULL, &d, &err), err.msg);
    vf_yuv_host *host = vfi_yuv_host_new();
    CHECK(host);
    vf_preproc *p = NULL;
    CHECK_OK(vfi_preproc_create(o, &p, &err), err.msg);
    const size_t floats = 3 * (size_t)o->size * o->size;
    float *a = vfi_malloc(floats * sizeof(float)), *b = vfi_malloc(floats * sizeof(float));
    float *fast = vfi_malloc(floats * sizeof(float));
    CHECK(a && b && fast);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    int n = 0;
    while (n < max_frames && vfi_decoder_next(d, &f, &err) == VF_OK) {
        CHECK_OK(vfi_preproc_frame(p, &f, rotation, a, &err), err.msg);
        vf_yuv_params q;
        vf_yuv_planes planes;
        CHECK_OK(vfi_preproc_yuv(o, &f, rotation, &q, &planes, &err), err.msg);
        vfi_yuv_convert_ref(&q, &planes, b);
        CHECK_OK(vfi_yuv_convert(host, &q, &planes, fast), "out of memory");
        st->max_abs = fmax(st->max_abs, vf_max_abs_diff(a, b, floats));
        st->max_fast = fmax(st->max_fast, vf_max_abs_diff(fast, b, floats));
        n++;
    }
    vfi_frame_destroy(&f);
    vfi_free(a);
    vfi_free(b);
    vfi_free(fast);
    vfi_yuv_host_free(&host);
    vfi_preproc_free(&p);
    vfi_decoder_free(&d);
    return n;
}

/* A frame of format fmt holding f's picture (8-bit 4:2:0 planar): NV12 interleaves the chroma,
 * the 16-bit formats hold each sample times 256 (so the same values in 8-bit units). */
static AVFrame *repack(const AVFrame *f, enum AVPixelFormat fmt)
{
    AVFrame *g = av_frame_alloc();
    CHECK(g);
    g->format = fmt;
    g->width = f->width;
    g->height = f->height;
    g->color_range = f->color_range;
    g->colorspace = f->colorspace;
    g->chroma_location = f->chroma_location;
    CHECK(av_frame_get_buffer(g, 0) >= 0);
    int cw = (f->width + 1) / 2, ch = (f->height + 1) / 2;
    int wide = fmt != AV_PIX_FMT_NV12;
    for (int y = 0; y < f->height; y++) {
        for (int x = 0; x < f->width; x++) {
            uint8_t v = f->data[0][y * f->linesize[0] + x];
            if (wide)
                ((uint16_t *)(void *)(g->data[0] + y * g->linesize[0]))[x] = (uint16_t)(v << 8);
            else
                g->data[0][y * g->linesize[0] + x] = v;
        }
    }
    for (int y = 0; y < ch; y++) {
        for (int x = 0; x < cw; x++) {
            uint8_t u = f->data[1][y * f->linesize[1] + x], v = f->data[2][y * f->linesize[2] + x];
            if (fmt == AV_PIX_FMT_NV12) {
                g->data[1][y * g->linesize[1] + 2 * x] = u;
                g->data[1][y * g->linesize[1] + 2 * x + 1] = v;
            } else if (fmt == AV_PIX_FMT_P010LE) {
                uint16_t *row = (uint16_t *)(void *)(g->data[1] + y * g->linesize[1]);
                row[2 * x] = (uint16_t)(u << 8);
                row[2 * x + 1] = (uint16_t)(v << 8);
            } else {
                ((uint16_t *)(void *)(g->data[1] + y * g->linesize[1]))[x] = (uint16_t)(u << 8);
                ((uint16_t *)(void *)(g->data[2] + y * g->linesize[2]))[x] = (uint16_t)(v << 8);
            }
        }
    }
    return g;
}

/* NV12, P010 and 16-bit planar copies of a 4:2:0 frame convert to the same floats. */
static void check_layouts(const char *path, const vf_preproc_opts *o)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {.every = 5};
    CHECK_OK(vfi_decoder_open(path, &s, NULL, &d, &err), err.msg);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    CHECK_OK(vfi_decoder_next(d, &f, &err), err.msg);
    CHECK_EQ(((AVFrame *)f.av)->format, AV_PIX_FMT_YUV420P);
    const size_t floats = 3 * (size_t)o->size * o->size;
    float *a = vfi_malloc(floats * sizeof(float)), *b = vfi_malloc(floats * sizeof(float));
    CHECK(a && b);
    vf_yuv_params q;
    vf_yuv_planes planes;
    CHECK_OK(vfi_preproc_yuv(o, &f, 90, &q, &planes, &err), err.msg);
    vfi_yuv_convert_ref(&q, &planes, a);
    enum AVPixelFormat fmts[] = {AV_PIX_FMT_NV12, AV_PIX_FMT_P010LE, AV_PIX_FMT_YUV420P16LE};
    for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
        vf_frame g = f;
        g.av = repack(f.av, fmts[k]);
        CHECK_OK(vfi_preproc_yuv(o, &g, 90, &q, &planes, &err), err.msg);
        CHECK_EQ(q.interleaved, fmts[k] != AV_PIX_FMT_YUV420P16LE);
        CHECK_EQ(q.wide, fmts[k] != AV_PIX_FMT_NV12);
        vfi_yuv_convert_ref(&q, &planes, b);
        double worst = vf_max_abs_diff(a, b, floats);
        CHECK_MSG(worst <= 1e-5, "%s as format %d: %.3g", path, (int)fmts[k], worst);
        av_frame_free((AVFrame **)&g.av);
    }
    printf("%s: NV12, P010 and 16-bit planar copies convert alike\n", path);
    vfi_free(a);
    vfi_free(b);
    vfi_frame_destroy(&f);
    vfi_decoder_free(&d);
}

/* One sample of plane c at (0, 0), in its own units (8 or 16-bit storage). */
static double sample00(const AVFrame *av, int c, int wide)
{
    return wide ? ((const uint16_t *)av->data[c])[0] : av->data[c][0];
}

/* Every sample of every plane equals the first: the frame is one colour, so that colour
 * describes every output pixel whatever the resize. */
static void check_uniform(const AVFrame *av, int wide)
{
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get((enum AVPixelFormat)av->format);
    CHECK(desc && !(desc->flags & AV_PIX_FMT_FLAG_RGB) && desc->nb_components == 3);
    for (int c = 0; c < 3; c++) {
        int w = c ? -((-av->width) >> desc->log2_chroma_w) : av->width;
        int h = c ? -((-av->height) >> desc->log2_chroma_h) : av->height;
        double first = sample00(av, c, wide);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const uint8_t *row = av->data[c] + (size_t)y * av->linesize[c];
                double v = wide ? ((const uint16_t *)row)[x] : row[x];
                CHECK_MSG(v == first, "plane %d not uniform at %d,%d: %g vs %g", c, x, y, v, first);
            }
    }
}

/* R'G'B' in [0, 1] of one Y'CbCr sample triple by ITU-T H.273's equations, written out here
 * independently of preprocess.c: limited range scales 219 (luma) and 224 (chroma) by 2^(depth-8)
 * around 16 and 128 times the same, full range divides by 2^depth - 1 around 2^(depth-1). */
static void h273_rgb(double Y, double U, double V, double kr, double kb, int full, int depth,
                     double rgb[3])
{
    double y, u, v;
    if (full) {
        double max = ldexp(1.0, depth) - 1, mid = ldexp(1.0, depth - 1);
        y = Y / max, u = (U - mid) / max, v = (V - mid) / max;
    } else {
        double k = ldexp(1.0, depth - 8);
        y = (Y - 16 * k) / (219 * k), u = (U - 128 * k) / (224 * k), v = (V - 128 * k) / (224 * k);
    }
    double kg = 1 - kr - kb;
    rgb[0] = y + 2 * (1 - kr) * v;
    rgb[1] = y - 2 * kb * (1 - kb) / kg * u - 2 * kr * (1 - kr) / kg * v;
    rgb[2] = y + 2 * (1 - kb) * u;
}

typedef struct colour_case {
    const char *what;
    const char *file;        /* path (generated or shared) */
    double kr, kb;           /* the matrix the stream asks for (or implies) */
    int full, depth;         /* range and bits per sample */
    double alt_kr, alt_kb;   /* a matrix the clip must tell apart (the wrong guess) */
    int alt_full, alt_depth; /* and a range/depth it must tell apart */
} colour_case;

/* Every slot pixel of every frame of a one-colour clip is that colour by the H.273 formula
 * above, within 2e-4 of normalised units; and the clip's colour would come out measurably
 * different (over 0.01) with the wrong matrix, range or depth, so the check can tell them apart. */
static void check_colour(const colour_case *k, const vf_preproc_opts *o)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {0};
    CHECK_OK(vfi_decoder_open(k->file, &s, NULL, &d, &err), err.msg);
    vf_preproc *p = NULL;
    CHECK_OK(vfi_preproc_create(o, &p, &err), err.msg);
    const size_t plane = (size_t)o->size * o->size;
    float *a = vfi_malloc(3 * plane * sizeof(float));
    CHECK(a);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    int frames = 0;
    double worst = 0, apart = 0;
    while (vfi_decoder_next(d, &f, &err) == VF_OK) {
        const AVFrame *av = f.av;
        const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get((enum AVPixelFormat)av->format);
        CHECK_EQ(desc->comp[0].depth, k->depth);
        int wide = desc->comp[0].step > 1;
        check_uniform(av, wide);
        double Y = sample00(av, 0, wide), U = sample00(av, 1, wide), V = sample00(av, 2, wide);
        double rgb[3], alt[2][3];
        h273_rgb(Y, U, V, k->kr, k->kb, k->full, k->depth, rgb);
        h273_rgb(Y, U, V, k->alt_kr, k->alt_kb, k->full, k->depth, alt[0]);
        h273_rgb(Y, U, V, k->kr, k->kb, k->alt_full, k->alt_depth, alt[1]);
        CHECK_OK(vfi_preproc_frame(p, &f, 0, a, &err), err.msg);
        for (int c = 0; c < 3; c++) {
            double want = (255 * fmin(1, fmax(0, rgb[c])) - o->mean[c]) / o->std[c];
            for (int w = 0; w < 2; w++) {
                double other = (255 * fmin(1, fmax(0, alt[w][c])) - o->mean[c]) / o->std[c];
                apart = fmax(apart, fabs(other - want));
            }
            for (size_t i = 0; i < plane; i++) {
                CHECK_MSG(isfinite(a[c * plane + i]), "%s: not finite", k->what);
                worst = fmax(worst, fabs(a[c * plane + i] - want));
            }
        }
        CHECK_MSG(worst <= 2e-4, "%s (%s, Y'CbCr %g %g %g): off the H.273 colour by %.3g", k->what,
                  k->file, Y, U, V, worst);
        frames++;
    }
    CHECK_MSG(frames > 0, "%s: no frame decoded", k->what);
    CHECK_MSG(apart > 0.01, "%s: the wrong matrix or range would give the same colour", k->what);
    printf("%-40s %d frames: the H.273 colour within %.1e (a wrong matrix or range: %.3f off)\n",
           k->what, frames, worst, apart);
    vfi_free(a);
    vfi_frame_destroy(&f);
    vfi_preproc_free(&p);
    vfi_decoder_free(&d);
}

/* Make a one-colour clip with the ffmpeg CLI (lossless H.264, so the samples are uniform):
 * colour, size, pixel format, and the colour description written into the stream. */
static void make_clip(const char *path, const char *size, const char *pix_fmt, const char *matrix,
                      const char *range)
{
    char cmd[1400];
    snprintf(
        cmd, sizeof(cmd),
        "ffmpeg -nostdin -v error -y -f lavfi -i color=c=0x3A80C8:s=%s:r=5:d=0.6 -vf "
        "scale=out_color_matrix=%s:out_range=%s:flags=accurate_rnd+full_chroma_int:sws_dither=none,"
        "format=%s -c:v libx264 -qp 0 %s%s "
        "-color_range %s '%s'",
        size, strcmp(matrix, "unspecified") ? matrix : "bt709", strcmp(range, "pc") ? "tv" : "pc",
        pix_fmt, strcmp(matrix, "unspecified") ? "-colorspace " : "",
        strcmp(matrix, "unspecified") ? matrix : "", range, path);
    CHECK_MSG(system(cmd) == 0, "could not make a test clip (is the ffmpeg CLI installed?): %s",
              cmd);
}

/* The colour equations on clips made here: BT.709 and BT.601, limited and full range, 8 and 10
 * bits, the matrix read from the stream's colour description or (undescribed) guessed from the
 * frame height; each against the formula above. */
static void check_colours(const vf_preproc_opts *o)
{
    char dir[] = "/tmp/vidfeat_colour_XXXXXX";
    CHECK(mkdtemp(dir));
    const double k709[2] = {0.2126, 0.0722}, k601[2] = {0.299, 0.114};
    struct {
        const char *what, *size, *pix_fmt, *matrix, *range;
        const double *k, *alt;
        int full, depth;
    } gen[] = {
        {"BT.709 limited 8-bit (described)", "96x64", "yuv444p", "bt709", "tv", k709, k601, 0, 8},
        {"BT.601 full 8-bit (described)", "96x64", "yuv444p", "smpte170m", "pc", k601, k709, 1, 8},
        {"BT.709 full 8-bit 4:2:0 (described)", "96x64", "yuv420p", "bt709", "pc", k709, k601, 1,
         8},
        {"BT.709 limited 10-bit (described)", "96x64", "yuv444p10le", "bt709", "tv", k709, k601, 0,
         10},
        {"BT.709 full 10-bit (described)", "96x64", "yuv444p10le", "bt709", "pc", k709, k601, 1,
         10},
        {"BT.601 limited 10-bit 4:2:0 (described)", "96x64", "yuv420p10le", "smpte170m", "tv", k601,
         k709, 0, 10},
        {"undescribed 1280x720: BT.709 by size", "1280x720", "yuv420p", "unspecified", "tv", k709,
         k601, 0, 8},
    };
    for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
        char path[1100];
        snprintf(path, sizeof(path), "%s/colour%zu.mkv", dir, i);
        make_clip(path, gen[i].size, gen[i].pix_fmt, gen[i].matrix, gen[i].range);
        /* the other range, or for full range the other depth's divisor, must be told apart */
        colour_case k = {gen[i].what,  path,          gen[i].k[0],   gen[i].k[1],  gen[i].full,
                         gen[i].depth, gen[i].alt[0], gen[i].alt[1], !gen[i].full, gen[i].depth};
        check_colour(&k, o);
        CHECK(remove(path) == 0);
    }
    CHECK(rmdir(dir) == 0);
}

/* RGB frames are not yuvconv's: refused there, converted by the libswscale fallback. */
static void check_fallback(const vf_preproc_opts *o)
{
    AVFrame *av = av_frame_alloc();
    CHECK(av);
    av->format = AV_PIX_FMT_RGB24;
    av->width = 40;
    av->height = 30;
    CHECK(av_frame_get_buffer(av, 0) >= 0);
    for (int y = 0; y < av->height; y++)
        for (int x = 0; x < 3 * av->width; x++)
            av->data[0][y * av->linesize[0] + x] = (uint8_t)(x % 3 == 0 ? 200 : 50);
    vf_frame f = {.av = av};
    vf_yuv_params q;
    vf_err err = {0};
    CHECK_EQ(vfi_preproc_yuv(o, &f, 0, &q, NULL, &err), VF_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "rgb24"));
    vf_preproc *p = NULL;
    CHECK_OK(vfi_preproc_create(o, &p, &err), err.msg);
    const size_t plane = (size_t)o->size * o->size;
    float *a = vfi_malloc(3 * plane * sizeof(float));
    CHECK(a);
    CHECK_OK(vfi_preproc_frame(p, &f, 0, a, &err), err.msg);
    CHECK_NEAR(a[0], (200 - o->mean[0]) / o->std[0], 0.02);
    CHECK_NEAR(a[plane + 7], (50 - o->mean[1]) / o->std[1], 0.02);
    vfi_free(a);
    vfi_preproc_free(&p);
    av_frame_free(&av);
}

/* A w x h picture of fmt (yuv420p or rgb24) with a pattern that tells places apart. */
static AVFrame *pattern(enum AVPixelFormat fmt, int w, int h)
{
    AVFrame *av = av_frame_alloc();
    CHECK(av);
    av->format = fmt;
    av->width = w;
    av->height = h;
    CHECK(av_frame_get_buffer(av, 0) >= 0);
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fmt);
    int planes = fmt == AV_PIX_FMT_RGB24 ? 1 : 3;
    for (int k = 0; k < planes; k++) {
        int pw = k ? -((-w) >> d->log2_chroma_w) : w, ph = k ? -((-h) >> d->log2_chroma_h) : h;
        if (fmt == AV_PIX_FMT_RGB24)
            pw *= 3;
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw; x++)
                av->data[k][y * av->linesize[k] + x] =
                    (uint8_t)(16 + (x * 7 + y * 13 + k * 50 + (x * y) % 31) % 220);
    }
    return av;
}

static float *convert(const vf_preproc_opts *o, AVFrame *av, int rotation)
{
    vf_preproc *p = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_preproc_create(o, &p, &err), err.msg);
    float *out = vfi_malloc((size_t)3 * o->size * o->size * sizeof(float));
    CHECK(out);
    vf_frame f = {.av = av};
    CHECK_OK(vfi_preproc_frame(p, &f, rotation, out, &err), err.msg);
    vfi_preproc_free(&p);
    return out;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
    return m;
}

/* VF_RESIZE_FIXED_CROP: where resize_to keeps the picture's aspect, the region is the shorter
 * side's centred square, as VF_RESIZE_SHORT_CROP's (yuvconv, upright and turned: resize_to is
 * as the picture is shown); where it does not (16:9 fitted to 128x171), the region is the
 * centred size / resize_to of each side: the libswscale fallback gives the same numbers as
 * stretching that region, cut out by hand. */
static void check_fixed_crop(void)
{
    vf_preproc_opts fixed = {.size = 112, .resize = VF_RESIZE_FIXED_CROP, .order = VF_CHANNELS_RGB};
    memcpy(fixed.mean, kMean, sizeof(kMean));
    memcpy(fixed.std, kStd, sizeof(kStd));
    vf_preproc_opts square = fixed;
    square.resize = VF_RESIZE_SHORT_CROP;
    square.resize_short = 128;
    const size_t n = (size_t)3 * 112 * 112;
    AVFrame *yuv = pattern(AV_PIX_FMT_YUV420P, 342, 256);
    for (int rotation = 0; rotation < 360; rotation += 90) {
        int across = rotation == 90 || rotation == 270;
        fixed.resize_to[0] = across ? 171 : 128; /* the shown picture is 256 x 342 then */
        fixed.resize_to[1] = across ? 128 : 171;
        float *a = convert(&fixed, yuv, rotation), *b = convert(&square, yuv, rotation);
        double d = max_diff(a, b, n);
        printf("fixed crop, 4:3 turned %3d: against the square crop %.3g\n", rotation, d);
        CHECK_MSG(d == 0, "turned %d: the fixed crop's region is not the centred square", rotation);
        vfi_free(a);
        vfi_free(b);
    }
    av_frame_free(&yuv);
    /* 640 x 360 to 128 x 171, crop 112: 419 x 315 centred (round(640 x 112 / 171) = 419) */
    AVFrame *rgb = pattern(AV_PIX_FMT_RGB24, 640, 360), *cut = pattern(AV_PIX_FMT_RGB24, 419, 315);
    for (int y = 0; y < 315; y++)
        memcpy(cut->data[0] + y * cut->linesize[0],
               rgb->data[0] + (y + (360 - 315) / 2) * rgb->linesize[0] + 3 * ((640 - 419) / 2),
               3 * 419);
    fixed.resize_to[0] = 128;
    fixed.resize_to[1] = 171;
    vf_preproc_opts stretch = fixed;
    stretch.resize = VF_RESIZE_STRETCH;
    float *a = convert(&fixed, rgb, 0), *b = convert(&stretch, cut, 0);
    /* every column but the last: libswscale's last taps read past a cropped view's right edge
     * (the picture's pixels there), past the hand-cut copy's into its edge */
    double d = 0;
    for (size_t i = 0; i < n; i += 112)
        d = fmax(d, max_diff(a + i, b + i, 111));
    printf("fixed crop, 16:9 to 128x171: against its region stretched %.3g\n", d);
    CHECK_MSG(d == 0, "16:9: the fixed crop is not the centred 419 x 315 region");
    vfi_free(a);
    vfi_free(b);
    av_frame_free(&rgb);
    av_frame_free(&cut);
}

int main(int argc, char **argv)
{
    vf_preproc_opts crop = {
        .size = 224, .resize = VF_RESIZE_SHORT_CROP, .resize_short = 256, .order = VF_CHANNELS_RGB};
    memcpy(crop.mean, kMean, sizeof(kMean));
    memcpy(crop.std, kStd, sizeof(kStd));
    if (argc < 2) { /* what needs no shared data: the fallback, layouts, colours */
        check_fallback(&crop);
        check_fixed_crop();
        check_layouts(VF_SAMPLES_DIR "/testsrc_64x48.mp4", &crop);
        check_colours(&crop);
        return 0;
    }
    /* test_yuvconv_clips: each shared clip - the pipeline's conversion and the separable CPU
     * path against the per-pixel reference, both resize policies, a rotation per clip, RGB and
     * BGR - and the 1x1 clip's colour; every clip must open */
    const char *videos = argv[1];
    if (access(videos, R_OK) != 0)
        SKIP("%s missing: the shared clips are not here", videos);
    const char *clips[] = {"h264_720p_bigbuckbunny.mp4",    "h264_640x480_asl_again.mkv",
                           "hevc_640x360_aac.mp4",          "mpeg2_ps_600x450_xine_logo.mpg",
                           "mpeg4asp_megamind.avi",         "phone_rotated180_ipad2.mov",
                           "vp9_480p_bigbuckbunny_1s.webm", "av1_320x180.ivf",
                           "h264_1x1_yuv444_5frames.mp4",   "h264_1080p_smpte_bars_counter.mp4"};
    for (size_t c = 0; c < sizeof(clips) / sizeof(clips[0]); c++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", videos, clips[c]);
        for (int policy = 0; policy < 2; policy++) {
            vf_preproc_opts o = crop;
            if (policy) {
                o.size = 299;
                o.resize = VF_RESIZE_STRETCH;
                o.order = VF_CHANNELS_BGR;
            }
            stats st = {0};
            int n = compare_clip(path, &o, (int)(c % 4) * 90, 3, &st);
            CHECK_MSG(n > 0, "%s: no frame converted", path);
            printf("%-36s %-7s %d frames, turned %3d: pipeline - reference %.3g, separable - "
                   "reference %.3g\n",
                   clips[c], policy ? "stretch" : "crop", n, (int)(c % 4) * 90, st.max_abs,
                   st.max_fast);
            CHECK_MSG(st.max_abs <= 1e-5 && st.max_fast <= 1e-5, "%s", clips[c]);
        }
        if (!strcmp(clips[c], "h264_1x1_yuv444_5frames.mp4")) {
            /* its stream describes neither matrix nor range, and it is not HD: BT.601 limited */
            colour_case k = {
                "1x1 4:4:4 (undescribed, SD)", path, 0.299, 0.114, 0, 8, 0.2126, 0.0722, 1, 8};
            check_colour(&k, &crop);
        }
    }
    return 0;
}
