/*
 * yuvconv.c - yuvconv.h on the host, twice: vfi_yuv_convert_ref runs vf_yuv_pixel for every
 * slot pixel (what a GPU thread does; the oracle), vfi_yuv_convert is the CPU path, in
 * separable passes (filter_plane). The latter performs the reference's operations in the
 * reference's order (each column's taps top to bottom, then the columns left to right, both
 * normalised by the same sums), so its floats are the reference's: test_yuvconv holds them
 * equal.
 */
#include "media/yuvconv.h"

#include <stddef.h>
#include <string.h>

#include "core/mem.h"
#include "core/vecmath.h"

/* filter_plane is nearly all of the time: built for AVX-512 and AVX2 too (gathers, wider
 * vectors: VF_VECTOR_CLONES, core/vecmath.h). Without floating-point contraction (ISO C mode),
 * every version computes the same floats. */

/* One axis's taps for every output pixel: the clamped source index of each tap and its weight,
 * `taps` per output (unused ones weigh 0 on a repeated index, which adds exactly nothing), and
 * the sum of the positive weights. Tap-major: tap k of output i at [k * size + i]. */
typedef struct axis_taps {
    int taps;
    int *index;   /* taps * size */
    float *w;     /* taps * size */
    float *total; /* size */
} axis_taps;

struct vf_yuv_host {
    void *scratch; /* taps, filtered lines and the pre-rotation planes, carved per call */
    size_t cap;
};

vf_yuv_host *vfi_yuv_host_new(void)
{
    return vfi_calloc(1, sizeof(vf_yuv_host));
}

void vfi_yuv_host_free(vf_yuv_host **ph)
{
    vf_yuv_host *h = ph ? *ph : NULL;
    if (!h)
        return;
    vfi_free(h->scratch);
    vfi_free(h);
    *ph = NULL;
}

void vfi_yuv_convert_ref(const vf_yuv_params *q, const vf_yuv_planes *p, float *slot)
{
    const int n = q->size;
    const size_t plane = (size_t)n * n;
    for (int y = 0; y < n; y++) {
        for (int x = 0; x < n; x++) {
            float v[3];
            vf_yuv_pixel(q, p, x, y, v);
            for (int c = 0; c < 3; c++)
                slot[c * plane + (size_t)y * n + x] = v[c];
        }
    }
}

/* Most taps one output can have: the integers strictly inside (c - r, c + r). */
static int max_taps(const vf_yuv_axis *a)
{
    return (int)(2.0f * a->radius) + 1;
}

/* Bytes of scratch one axis's taps take for `size` outputs. */
static size_t taps_bytes(const vf_yuv_axis *a, int size)
{
    return (size_t)size * ((size_t)max_taps(a) * (sizeof(int) + sizeof(float)) + sizeof(float));
}

/* Lay out the taps of axis a at *mem (advanced past them), as vf_yuv_filter walks them. */
static axis_taps make_taps(const vf_yuv_axis *a, int size, char **mem)
{
    axis_taps t = {.taps = max_taps(a)};
    t.w = (float *)(void *)*mem;
    t.total = t.w + (size_t)size * t.taps;
    t.index = (int *)(void *)(t.total + size);
    *mem = (char *)(t.index + (size_t)size * t.taps);
    for (int i = 0; i < size; i++) {
        float c = vf_yuv_centre(a, i);
        int x0 = (int)floorf(c - a->radius) + 1, x1 = (int)floorf(c + a->radius);
        float sum = 0.0f;
        int k = 0, last = 0;
        for (int x = x0; x <= x1 && k < t.taps; x++) {
            float wx = 1.0f - fabsf((float)x - c) / a->radius;
            if (wx <= 0.0f)
                continue;
            last = x < 0 ? 0 : x > a->last ? a->last : x;
            t.index[(size_t)k * size + i] = last;
            t.w[(size_t)k * size + i] = wx;
            sum += wx;
            k++;
        }
        for (; k < t.taps; k++) {
            t.index[(size_t)k * size + i] = last;
            t.w[(size_t)k * size + i] = 0.0f;
        }
        t.total[i] = sum;
    }
    return t;
}

/* Resample one plane (offset and step pick U or V of an interleaved plane) into out, size x
 * size. Per output row: the vertical taps fold the source lines into one line of column sums
 * (contiguous, so it vectorises), then the horizontal taps pick from it. The loops run over the
 * outputs innermost (taps are stored tap-major), each output still summing its taps in the
 * reference's order. */
VF_VECTOR_CLONES
static void filter_plane(const vf_yuv_params *q, const vf_yuv_planes *p, int plane, int offset,
                         int step, const axis_taps *tx, const axis_taps *ty, float *restrict cols,
                         float *restrict wsum, float *restrict out)
{
    const int n = q->size;
    /* the columns the horizontal taps reach: from output 0's first tap to output n-1's last */
    const int first = tx->index[0], last = tx->index[(size_t)(tx->taps - 1) * n + n - 1];
    const int width = last - first + 1;
    for (int o = 0; o < n; o++) {
        float *restrict col = cols;
        for (int x = 0; x < width; x++)
            col[x] = 0.0f;
        for (int k = 0; k < ty->taps; k++) {
            const float w = ty->w[(size_t)k * n + o];
            const uint8_t *row =
                p->data[plane] + (int64_t)ty->index[(size_t)k * n + o] * p->pitch[plane];
            if (q->wide) {
                const uint16_t *r16 = (const uint16_t *)(const void *)row;
                for (int x = 0; x < width; x++)
                    col[x] += w * (float)r16[(first + x) * step + offset];
            } else {
                for (int x = 0; x < width; x++)
                    col[x] += w * (float)row[(first + x) * step + offset];
            }
        }
        const float csum = ty->total[o];
        float *restrict dst = out + (size_t)o * n;
        for (int i = 0; i < n; i++)
            dst[i] = wsum[i] = 0.0f;
        for (int k = 0; k < tx->taps; k++) {
            const int *restrict index = tx->index + (size_t)k * n;
            const float *restrict w = tx->w + (size_t)k * n;
            for (int i = 0; i < n; i++) {
                dst[i] += w[i] * col[index[i] - first];
                wsum[i] += w[i] * csum;
            }
        }
        for (int i = 0; i < n; i++)
            dst[i] /= wsum[i];
    }
}

static float clip01(float v)
{
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* vf_yuv_rgb over whole planes (no rotation), in a form the compiler vectorises: the same
 * operations on the same values. */
VF_VECTOR_CLONES
static void colour_plane(const vf_yuv_params *q, const float *restrict pre, size_t plane,
                         float *restrict slot)
{
    int at[3]; /* the slot channel of R, G, B */
    for (int c = 0; c < 3; c++)
        at[q->src[c]] = c;
    float *restrict r_out = slot + at[0] * plane, *restrict g_out = slot + at[1] * plane;
    float *restrict b_out = slot + at[2] * plane;
    const float *restrict py = pre, *restrict pu = pre + plane, *restrict pv = pre + 2 * plane;
    const float rm = q->mul[at[0]], rs = q->sub[at[0]], gm = q->mul[at[1]], gs = q->sub[at[1]];
    const float bm = q->mul[at[2]], bs = q->sub[at[2]];
    for (size_t i = 0; i < plane; i++) {
        float yy = py[i] * q->y_mul - q->y_sub;
        float u = pu[i] * q->c_mul - q->c_sub, v = pv[i] * q->c_mul - q->c_sub;
        r_out[i] = clip01(yy + q->cr_r * v) * rm - rs;
        g_out[i] = clip01(yy - q->cb_g * u - q->cr_g * v) * gm - gs;
        b_out[i] = clip01(yy + q->cb_b * u) * bm - bs;
    }
}

vf_status vfi_yuv_convert(vf_yuv_host *h, const vf_yuv_params *q, const vf_yuv_planes *p,
                          float *slot)
{
    const int n = q->size;
    const size_t plane = (size_t)n * n;
    size_t cols = (size_t)q->luma_x.last + 1; /* the widest plane's line */
    size_t need = taps_bytes(&q->luma_x, n) + taps_bytes(&q->luma_y, n) +
                  taps_bytes(&q->chroma_x, n) + taps_bytes(&q->chroma_y, n) +
                  (3 * plane + cols + (size_t)n) * sizeof(float);
    if (need > h->cap) {
        void *mem = vfi_malloc(need);
        if (!mem)
            return VF_ERR_NOMEM;
        vfi_free(h->scratch);
        h->scratch = mem;
        h->cap = need;
    }
    float *pre = h->scratch, *line = pre + 3 * plane, *wsum = line + cols;
    char *mem = (char *)(wsum + n);
    axis_taps lx = make_taps(&q->luma_x, n, &mem), ly = make_taps(&q->luma_y, n, &mem);
    axis_taps cx = make_taps(&q->chroma_x, n, &mem), cy = make_taps(&q->chroma_y, n, &mem);
    const int step = q->interleaved ? 2 : 1, vplane = q->interleaved ? 1 : 2;
    filter_plane(q, p, 0, 0, 1, &lx, &ly, line, wsum, pre);
    filter_plane(q, p, 1, 0, step, &cx, &cy, line, wsum, pre + plane);
    filter_plane(q, p, vplane, step - 1, step, &cx, &cy, line, wsum, pre + 2 * plane);
    if (q->rotation == 0) {
        colour_plane(q, pre, plane, slot);
        return VF_OK;
    }
    for (int y = 0; y < n; y++) {
        for (int x = 0; x < n; x++) {
            int ox, oy;
            vf_yuv_unrotate(q, x, y, &ox, &oy);
            size_t at = (size_t)oy * n + ox;
            float v[3];
            vf_yuv_rgb(q, pre[at], pre[plane + at], pre[2 * plane + at], v);
            for (int c = 0; c < 3; c++)
                slot[c * plane + (size_t)y * n + x] = v[c];
        }
    }
    return VF_OK;
}
