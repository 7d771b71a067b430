/*
 * shots.c - cut detection by content score (shots.h; the definition is docs/shots.md's).
 */
#include "media/shots.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/vecmath.h"

/* OpenCV's fixed-point reciprocals, rounded: sdiv[v] = (255 << 12) / v, hdiv[d] = (180 << 12) /
 * (6 d); 0 at 0. */
typedef struct hsv_tables {
    int sdiv[256], hdiv[256];
} hsv_tables;

static void make_tables(hsv_tables *t)
{
    t->sdiv[0] = t->hdiv[0] = 0;
    for (int i = 1; i < 256; i++) {
        t->sdiv[i] = (int)lrint((double)(255 << 12) / i);
        t->hdiv[i] = (int)lrint((double)(180 << 12) / (6.0 * i));
    }
}

VF_VECTOR_CLONES static void to_hsv(const hsv_tables *t, const uint8_t *bgr, int n, uint8_t *h,
                                    uint8_t *s, uint8_t *v)
{
    for (int i = 0; i < n; i++) {
        int b = bgr[3 * i], g = bgr[3 * i + 1], r = bgr[3 * i + 2];
        int mx = b > g ? b : g, mn = b < g ? b : g;
        mx = r > mx ? r : mx;
        mn = r < mn ? r : mn;
        int d = mx - mn;
        /* the hue's sector: red's when the maximum is red, else green's, else blue's */
        int hh = mx == r ? g - b : mx == g ? b - r + 2 * d : r - g + 4 * d;
        hh = (hh * t->hdiv[d] + (1 << 11)) >> 12;
        if (hh < 0)
            hh += 180;
        h[i] = (uint8_t)hh;
        s[i] = (uint8_t)((d * t->sdiv[mx] + (1 << 11)) >> 12);
        v[i] = (uint8_t)mx;
    }
}

void vfi_shots_bgr_to_hsv(const uint8_t *bgr, int n, uint8_t *h, uint8_t *s, uint8_t *v)
{
    hsv_tables t;
    make_tables(&t);
    to_hsv(&t, bgr, n, h, s, v);
}

/* A frame the detector has seen: its number and time, and the number of the frame before it. */
typedef struct seen {
    int64_t index, prev;
    double t;
} seen;

struct vf_shots {
    vf_shot_opts o;
    hsv_tables tables;
    int w, h;
    uint8_t *planes[2]; /* HSV planes (3 x w x h) of the last frame and of the one coming */
    uint8_t *bgr;       /* a packed copy of the frame coming (rows without padding) */
    int have_last;
    double score;
    seen first, last;
    /* the merge filter (shots.h) */
    seen above; /* the last frame at or above the threshold (the first frame until one is) */
    int merge_enabled, merging;
    int64_t merge_start;
    /* cuts found: the first frame of each shot after the first */
    seen *cuts;
    int n_cuts, cap_cuts;
    vf_shot *shots;
};

vf_status vfi_shots_new(const vf_shot_opts *o, int w, int h, vf_shots **out, vf_err *err)
{
    *out = NULL;
    if (w <= 0 || h <= 0 || w > 4 * VF_SHOTS_WIDTH || (int64_t)w * h > (1 << 22))
        return vfi_fail(err, VF_ERR_INVALID, "shot detection: pictures of %dx%d", w, h);
    vf_shot_opts opts = o ? *o : (vf_shot_opts){0};
    if (!(opts.threshold > 0.0))
        opts.threshold = VF_SHOTS_DEFAULT_THRESHOLD;
    if (opts.min_frames == 0)
        opts.min_frames = VF_SHOTS_DEFAULT_MIN_FRAMES;
    double wsum = 0.0;
    for (int c = 0; c < 3; c++) {
        if (!isfinite(opts.weights[c]))
            return vfi_fail(err, VF_ERR_INVALID, "shot detection: a weight is not a number");
        wsum += fabs(opts.weights[c]);
    }
    if (wsum == 0.0)
        opts.weights[0] = opts.weights[1] = opts.weights[2] = 1.0;
    vf_shots *d = vfi_calloc(1, sizeof(*d));
    size_t px = (size_t)w * (size_t)h;
    if (!d || !(d->planes[0] = vfi_malloc(3 * px)) || !(d->planes[1] = vfi_malloc(3 * px)) ||
        !(d->bgr = vfi_malloc(3 * px))) {
        vfi_shots_free(&d);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    d->o = opts;
    make_tables(&d->tables);
    d->w = w;
    d->h = h;
    *out = d;
    return VF_OK;
}

/* Mean absolute difference of two planes of n pixels. */
VF_VECTOR_CLONES static double mean_distance(const uint8_t *a, const uint8_t *b, size_t n)
{
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += abs((int)a[i] - (int)b[i]);
    return (double)sum / (double)n;
}

static vf_status add_cut(vf_shots *d, seen at, vf_err *err)
{
    if (d->n_cuts == d->cap_cuts) {
        int cap = d->cap_cuts ? 2 * d->cap_cuts : 16;
        seen *c = vfi_realloc(d->cuts, (size_t)cap * sizeof(*c));
        if (!c)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        d->cuts = c;
        d->cap_cuts = cap;
    }
    d->cuts[d->n_cuts++] = at;
    return VF_OK;
}

/* The merge filter over frame `now` (shots.h): a cut, or none yet. */
static vf_status filter(vf_shots *d, seen now, int high, vf_err *err)
{
    int64_t len = d->o.min_frames;
    if (len < 0)
        return high ? add_cut(d, now, err) : VF_OK;
    int long_enough = now.index - d->above.index >= len;
    if (high)
        d->above = now;
    if (d->merging) {
        if (long_enough && !high && d->above.index - d->merge_start >= len) {
            d->merging = 0;
            return add_cut(d, d->above, err);
        }
        return VF_OK;
    }
    if (!high)
        return VF_OK;
    if (long_enough) {
        d->merge_enabled = 1;
        return add_cut(d, now, err);
    }
    if (d->merge_enabled) {
        d->merging = 1;
        d->merge_start = now.index;
    }
    return VF_OK;
}

vf_status vfi_shots_push(vf_shots *d, const uint8_t *bgr, ptrdiff_t stride, int64_t index, double t,
                         vf_err *err)
{
    size_t row = 3 * (size_t)d->w, px = (size_t)d->w * (size_t)d->h;
    uint8_t *cur = d->planes[1], *last = d->planes[0];
    if (stride == (ptrdiff_t)row) { /* packed already */
        to_hsv(&d->tables, bgr, (int)px, cur, cur + px, cur + 2 * px);
    } else {
        for (int y = 0; y < d->h; y++)
            memcpy(d->bgr + (size_t)y * row, bgr + (ptrdiff_t)y * stride, row);
        to_hsv(&d->tables, d->bgr, (int)px, cur, cur + px, cur + 2 * px);
    }
    seen now = {index, d->have_last ? d->last.index : index, t};
    if (!d->have_last) {
        d->first = d->above = now;
        d->score = 0.0;
    } else {
        double score = 0.0, wsum = 0.0;
        for (int c = 0; c < 3; c++) {
            score += mean_distance(cur + c * px, last + c * px, px) * d->o.weights[c];
            wsum += fabs(d->o.weights[c]);
        }
        d->score = score / wsum;
    }
    d->planes[0] = cur;
    d->planes[1] = last;
    d->last = now;
    d->have_last = 1;
    return filter(d, now, d->score >= d->o.threshold, err);
}

double vfi_shots_score(const vf_shots *d)
{
    return d->score;
}

vf_status vfi_shots_finish(vf_shots *d, double t_end, const vf_shot **shots, int *n, vf_err *err)
{
    *shots = NULL;
    *n = 0;
    if (!d->have_last)
        return VF_OK;
    vfi_free(d->shots);
    if (!(d->shots = vfi_mallocarray((size_t)d->n_cuts + 1, sizeof(*d->shots))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    seen from = d->first;
    for (int i = 0; i <= d->n_cuts; i++) {
        vf_shot *s = &d->shots[i];
        s->first = from.index;
        s->start = from.t;
        if (i < d->n_cuts) {
            s->last = d->cuts[i].prev;
            s->end = d->cuts[i].t;
            from = d->cuts[i];
        } else {
            s->last = d->last.index;
            s->end = t_end > d->last.t ? t_end : d->last.t;
        }
    }
    *shots = d->shots;
    *n = d->n_cuts + 1;
    return VF_OK;
}

void vfi_shots_free(vf_shots **pd)
{
    if (!pd || !*pd)
        return;
    vf_shots *d = *pd;
    vfi_free(d->planes[0]);
    vfi_free(d->planes[1]);
    vfi_free(d->bgr);
    vfi_free(d->cuts);
    vfi_free(d->shots);
    vfi_free(d);
    *pd = NULL;
}
