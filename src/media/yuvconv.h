/*
 * yuvconv.h - one decoded YUV picture into its slot of a batch tensor, as plain arithmetic that
 * the host (yuvconv.c, the reference) and the GPU (cuda_kernels.cu) both compile from this one
 * header, so a frame converted on either gives the same floats to rounding.
 *
 * What a slot pixel is: the picture's crop rectangle is mapped onto size x size output pixels
 * (pixel centres aligned); each of Y, U and V is resampled at the output pixel's centre with a
 * triangle (tent) filter whose radius is the scale factor when shrinking and one pixel when
 * enlarging (so shrinking averages every source pixel it covers, as libswscale's bilinear mode
 * does), taps beyond the picture's edges reading its edge samples; the resampled Y'CbCr becomes
 * R'G'B' by the stream's matrix and range, is clipped to [0, 1] and normalised (255 v - mean) / std
 * into the model's channel order, and the square is turned by the stream's rotation. Plane samples
 * are 8-bit or 16-bit little-endian; chroma is planar (two planes) or interleaved (NV12/P010 style,
 * one plane).
 *
 * No FFmpeg here: preprocess.c fills vf_yuv_params from a frame.
 */
#ifndef VIDFEAT_YUVCONV_H
#define VIDFEAT_YUVCONV_H

#include <stdint.h>

#ifndef __CUDACC__
#include <math.h>
#endif

#ifdef __CUDACC__
#define VF_HD __host__ __device__ static inline
#else
#define VF_HD static inline
#endif

/* One axis of the mapping of a plane region onto the n output pixels. */
typedef struct vf_yuv_axis {
    float origin; /* plane coordinate of the region's left (top) edge */
    float scale;  /* plane pixels per output pixel */
    float radius; /* filter radius in plane pixels: max(scale, 1) */
    int last;     /* the plane's last sample along the axis: taps outside [0, last] clamp */
} vf_yuv_axis;

typedef struct vf_yuv_params {
    int size;        /* the slot is 3 x size x size floats */
    int rotation;    /* clockwise degrees: 0, 90, 180, 270 */
    int wide;        /* samples are 16-bit little-endian (else 8-bit) */
    int interleaved; /* chroma is one plane of U,V pairs (NV12, P010) */
    vf_yuv_axis luma_x, luma_y, chroma_x, chroma_y;
    /* R'G'B' = m * (Y*, Cb*, Cr*) where Y* = Y * y_mul - y_sub and C* = C * c_mul - c_sub, the
     * samples taken as read (a 16-bit sample's scaling folds into y_mul / c_mul) */
    float y_mul, y_sub, c_mul, c_sub;
    float cr_r, cb_g, cr_g, cb_b;
    /* slot channel c = clip(rgb[src[c]]) * mul[c] - sub[c] */
    int src[3];
    float mul[3], sub[3];
} vf_yuv_params;

/* The planes of one picture: Y, then U and V (or the interleaved UV plane and NULL), with their
 * line pitches in bytes. Host or device addresses, as the caller's code runs. */
typedef struct vf_yuv_planes {
    const uint8_t *data[3];
    int pitch[3];
} vf_yuv_planes;

/* Where output pixel i's centre falls, in plane coordinates (pixel centres at integers). */
VF_HD float vf_yuv_centre(const vf_yuv_axis *a, int i)
{
    return a->origin + ((float)i + 0.5f) * a->scale - 0.5f;
}

/* Sample number i of line y of a plane. */
VF_HD float vf_yuv_sample(const vf_yuv_planes *p, int plane, int wide, int i, int y)
{
    const uint8_t *row = p->data[plane] + (int64_t)y * p->pitch[plane];
    if (wide)
        return (float)(row[2 * i] | row[2 * i + 1] << 8);
    return (float)row[i];
}

/* The tent-filtered value of one plane (offset and step pick U or V of an interleaved plane) at
 * the output pixel (ox, oy): each column's taps top to bottom, then the columns left to right,
 * normalised by the sum of the weights, so clamped edges keep a flat picture flat. */
VF_HD float vf_yuv_filter(const vf_yuv_planes *p, int plane, int offset, int step, int wide,
                          const vf_yuv_axis *ax, const vf_yuv_axis *ay, int ox, int oy)
{
    float cx = vf_yuv_centre(ax, ox), cy = vf_yuv_centre(ay, oy);
    int x0 = (int)floorf(cx - ax->radius) + 1, x1 = (int)floorf(cx + ax->radius);
    int y0 = (int)floorf(cy - ay->radius) + 1, y1 = (int)floorf(cy + ay->radius);
    float acc = 0.0f, wsum = 0.0f;
    for (int x = x0; x <= x1; x++) {
        float wx = 1.0f - fabsf((float)x - cx) / ax->radius;
        if (wx <= 0.0f)
            continue;
        int sx = x < 0 ? 0 : x > ax->last ? ax->last : x;
        float col = 0.0f, csum = 0.0f;
        for (int y = y0; y <= y1; y++) {
            float wy = 1.0f - fabsf((float)y - cy) / ay->radius;
            if (wy <= 0.0f)
                continue;
            int sy = y < 0 ? 0 : y > ay->last ? ay->last : y;
            col += wy * vf_yuv_sample(p, plane, wide, sx * step + offset, sy);
            csum += wy;
        }
        acc += wx * col;
        wsum += wx * csum;
    }
    return acc / wsum;
}

/* Resampled Y, Cb, Cr (as read) into the three slot values, in slot channel order. */
VF_HD void vf_yuv_rgb(const vf_yuv_params *q, float lum, float cb, float cr, float out[3])
{
    float yy = lum * q->y_mul - q->y_sub;
    float u = cb * q->c_mul - q->c_sub, v = cr * q->c_mul - q->c_sub;
    float rgb[3] = {yy + q->cr_r * v, yy - q->cb_g * u - q->cr_g * v, yy + q->cb_b * u};
    for (int c = 0; c < 3; c++) {
        float s = rgb[q->src[c]];
        s = s < 0.0f ? 0.0f : s > 1.0f ? 1.0f : s;
        out[c] = s * q->mul[c] - q->sub[c];
    }
}

/* The pre-rotation pixel (ox, oy) whose value lands at slot pixel (x, y). */
VF_HD void vf_yuv_unrotate(const vf_yuv_params *q, int x, int y, int *ox, int *oy)
{
    const int n = q->size;
    switch (q->rotation) {
    case 90:
        *ox = y, *oy = n - 1 - x;
        break;
    case 180:
        *ox = n - 1 - x, *oy = n - 1 - y;
        break;
    case 270:
        *ox = n - 1 - y, *oy = x;
        break;
    default:
        *ox = x, *oy = y;
        break;
    }
}

/* The three slot values of slot pixel (x, y), in slot channel order: what one GPU thread does. */
VF_HD void vf_yuv_pixel(const vf_yuv_params *q, const vf_yuv_planes *p, int x, int y, float out[3])
{
    int ox, oy;
    vf_yuv_unrotate(q, x, y, &ox, &oy);
    const int step = q->interleaved ? 2 : 1, vplane = q->interleaved ? 1 : 2;
    float lum = vf_yuv_filter(p, 0, 0, 1, q->wide, &q->luma_x, &q->luma_y, ox, oy);
    float cb = vf_yuv_filter(p, 1, 0, step, q->wide, &q->chroma_x, &q->chroma_y, ox, oy);
    float cr =
        vf_yuv_filter(p, vplane, step - 1, step, q->wide, &q->chroma_x, &q->chroma_y, ox, oy);
    vf_yuv_rgb(q, lum, cb, cr, out);
}

#ifndef __CUDACC__
#include "vidfeat.h"

/* Host reference: convert the picture in planes into slot (3 x size x size floats), pixel by
 * pixel through vf_yuv_pixel. Slow; the oracle for the other two. */
void vfi_yuv_convert_ref(const vf_yuv_params *q, const vf_yuv_planes *p, float *slot);

/* The CPU path: the same arithmetic in separable passes (each source line filtered once), so the
 * same floats as vfi_yuv_convert_ref. Keeps its scratch between calls; not thread-safe. */
typedef struct vf_yuv_host vf_yuv_host;
vf_yuv_host *vfi_yuv_host_new(void); /* NULL when out of memory */
/* VF_ERR_NOMEM when its scratch cannot grow. */
vf_status vfi_yuv_convert(vf_yuv_host *h, const vf_yuv_params *q, const vf_yuv_planes *p,
                          float *slot);
void vfi_yuv_host_free(vf_yuv_host **ph);
#endif

#endif /* VIDFEAT_YUVCONV_H */
