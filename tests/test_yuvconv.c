/*
 * test_yuvconv.c - frame conversion (yuvconv.h, preprocess.c): the CPU path (separable, and as
 * the pipeline calls it) equals the per-pixel reference the GPU kernel shares, on real frames of
 * every shared clip, both resize policies, each rotation, RGB and BGR order; NV12, P010 and
 * 16-bit copies of a frame convert alike; colours are the exact formula's; RGB frames are
 * refused by yuvconv and converted by the libswscale fallback.
 * Usage: test_yuvconv [VIDEOS_DIR]
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <libavutil/frame.h>

#include "check.h"
#include "decode.h"
#include "mem.h"
#include "preprocess.h"
#include "yuvconv.h"

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
    if (vfi_decoder_open(path, &s, NULL, &d, &err) < 0)
        return 0;
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
    if (vfi_decoder_open(path, &s, NULL, &d, &err) < 0)
        return;
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

/* The 1x1 4:4:4 clip: every slot pixel is that one pixel's colour, by the BT.601 limited-range
 * formula in double precision (its stream states neither, and it is not HD). */
static void check_colour(const char *path, const vf_preproc_opts *o)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {0};
    if (vfi_decoder_open(path, &s, NULL, &d, &err) < 0)
        return;
    vf_preproc *p = NULL;
    CHECK_OK(vfi_preproc_create(o, &p, &err), err.msg);
    const size_t plane = (size_t)o->size * o->size;
    float *a = vfi_malloc(3 * plane * sizeof(float));
    CHECK(a);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    while (vfi_decoder_next(d, &f, &err) == VF_OK) {
        const AVFrame *av = f.av;
        double y = (av->data[0][0] - 16) / 219.0, u = (av->data[1][0] - 128) / 224.0,
               v = (av->data[2][0] - 128) / 224.0;
        double rgb[3] = {y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u};
        CHECK_OK(vfi_preproc_frame(p, &f, 0, a, &err), err.msg);
        for (int c = 0; c < 3; c++) {
            double want = (255 * fmin(1, fmax(0, rgb[c])) - o->mean[c]) / o->std[c];
            for (size_t i = 0; i < plane; i++)
                CHECK_NEAR(a[c * plane + i], want, 2e-4);
        }
    }
    printf("%s: exact colours\n", path);
    vfi_free(a);
    vfi_frame_destroy(&f);
    vfi_preproc_free(&p);
    vfi_decoder_free(&d);
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

int main(int argc, char **argv)
{
    const char *videos = argc > 1 ? argv[1] : VF_SHARED_DIR "/videos";
    vf_preproc_opts crop = {
        .size = 224, .resize = VF_RESIZE_SHORT_CROP, .resize_short = 256, .order = VF_CHANNELS_RGB};
    memcpy(crop.mean, kMean, sizeof(kMean));
    memcpy(crop.std, kStd, sizeof(kStd));
    check_fallback(&crop);
    check_layouts(VF_SAMPLES_DIR "/testsrc_64x48.mp4", &crop);
    /* each shared clip: the pipeline's conversion and the separable CPU path against the
     * per-pixel reference, both resize policies, a rotation per clip, RGB and BGR */
    const char *clips[] = {"h264_720p_bigbuckbunny.mp4",    "h264_640x480_asl_again.mkv",
                           "hevc_640x360_aac.mp4",          "mpeg2_ps_600x450_xine_logo.mpg",
                           "mpeg4asp_megamind.avi",         "phone_rotated180_ipad2.mov",
                           "vp9_480p_bigbuckbunny_1s.webm", "av1_320x180.ivf",
                           "h264_1x1_yuv444_5frames.mp4",   "h264_1080p_smpte_bars_counter.mp4"};
    int compared = 0;
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
            if (!n)
                continue;
            compared++;
            printf("%-36s %-7s %d frames, turned %3d: pipeline - reference %.3g, separable - "
                   "reference %.3g\n",
                   clips[c], policy ? "stretch" : "crop", n, (int)(c % 4) * 90, st.max_abs,
                   st.max_fast);
            CHECK_MSG(st.max_abs <= 1e-5 && st.max_fast <= 1e-5, "%s", clips[c]);
        }
        if (!strcmp(clips[c], "h264_1x1_yuv444_5frames.mp4"))
            check_colour(path, &crop);
    }
    if (!compared)
        printf("(no shared videos in %s: only the committed sample was compared)\n", videos);
    return 0;
}
