/*
 * backend_ref.c - the reference backend: every op as plain loops over dense row-major float32.
 * It is the oracle the fast backends are tested against (and is itself checked against goldens
 * computed by PyTorch), and a portable fallback. Clarity beats speed here; the only concession
 * to speed is loop order. Runs on the calling thread; owns one buffer per activation.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "core/mem.h"
#include "engine/ids_ops.h"

typedef struct ref_ctx {
    const vf_graph *g;
    int max_batch;
    float **buf; /* per value: activation storage for max_batch images, NULL otherwise (an
                    int64 activation's is int64_t, aligned as floats are) */
} ref_ctx;

static vf_status ref_probe(vf_err *err)
{
    (void)err;
    return VF_OK;
}

static vf_status ref_init(vf_backend *b, const vf_backend_opts *opts)
{
    if (opts->precision != VF_PRECISION_F32)
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                        "the reference backend computes in f32 only (asked for %s)",
                        vf_precision_str(opts->precision));
    b->ctx = vfi_calloc(1, sizeof(ref_ctx));
    return b->ctx ? VF_OK : vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
}

static void ref_destroy(vf_backend *b)
{
    ref_ctx *c = b->ctx;
    if (!c)
        return;
    if (c->buf) {
        for (int i = 0; i < c->g->n_values; i++)
            vfi_free(c->buf[i]);
        vfi_free(c->buf);
    }
    vfi_free(c);
    b->ctx = NULL;
}

static vf_status ref_prepare(vf_backend *b, vf_graph *g, int max_batch)
{
    ref_ctx *c = b->ctx;
    vf_status rc = vfi_backend_check_ops(b, g);
    if (rc < 0)
        return rc;
    c->g = g;
    c->max_batch = max_batch;
    c->buf = vfi_calloc((size_t)g->n_values, sizeof(float *));
    if (!c->buf)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++) {
        const vf_value *v = &g->values[i];
        if (!v->is_batched || i == g->input)
            continue;
        size_t n = (size_t)vfi_value_sample_numel(v) * (size_t)max_batch;
        c->buf[i] = vfi_aligned_alloc(VF_TENSOR_ALIGN, n * vfi_dtype_size(v->dtype));
        if (!c->buf[i])
            return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for '%s'", v->name);
    }
    return VF_OK;
}

/* A value's dims (for an activation: at batch n) and their row-major strides. */
static void dims_strides(const vf_value *v, int n, int64_t *dims, int64_t *st)
{
    vfi_value_dims_at(v, n, dims);
    vfi_dims_strides(v->rank, dims, st);
}

/* A window of 2 or 3 axes as one of 3 over [N, C, T, H, W] (a 2-D window: one frame), with the
 * input's and output's lengths along them. */
typedef struct ref_axes {
    int64_t in[3], out[3], k[3], st[3], d[3], pb[3];
} ref_axes;

static void as_3d(const vf_axes *ax, const vf_value *xv, const vf_value *yv, ref_axes *r)
{
    for (int a = 0, off = 3 - ax->n; a < 3; a++) {
        int i = a - off;
        r->in[a] = i < 0 ? 1 : xv->dims[2 + i];
        r->out[a] = i < 0 ? 1 : yv->dims[2 + i];
        r->k[a] = i < 0 ? 1 : ax->kernel[i];
        r->st[a] = i < 0 ? 1 : ax->stride[i];
        r->d[a] = i < 0 ? 1 : ax->dilation[i];
        r->pb[a] = i < 0 ? 0 : ax->pad_begin[i];
    }
}

/* CONV and CONV3D: a 2-D window is a 3-D one over a single frame. */
static void conv(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    const vf_value *wv = &g->values[nd->inputs[1]];
    const float *w = wv->data;
    const float *bias = nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL;
    vf_conv_window cw;
    vfi_conv_window(g, nd, &cw);
    ref_axes ra;
    as_3d(&cw.ax, xv, yv, &ra);
    const int64_t *in = ra.in, *out = ra.out, *k = ra.k, *st = ra.st, *d = ra.d, *pb = ra.pb;
    int64_t C = xv->dims[1], K = yv->dims[1], G = cw.group, CG = C / G, KG = K / G;
    int64_t in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2];
    for (int b = 0; b < n; b++) {
        for (int64_t ko = 0; ko < K; ko++) {
            float *o = y + ((int64_t)b * K + ko) * out_size;
            float b0 = bias ? bias[ko] : 0.0f;
            for (int64_t i = 0; i < out_size; i++)
                o[i] = b0;
            int64_t gi = ko / KG;
            for (int64_t c = 0; c < CG; c++) {
                const float *src = x + ((int64_t)b * C + gi * CG + c) * in_size;
                for (int64_t q = 0; q < k[0]; q++) {
                    for (int64_t r = 0; r < k[1]; r++) {
                        for (int64_t s = 0; s < k[2]; s++) {
                            float wt = w[(((ko * CG + c) * k[0] + q) * k[1] + r) * k[2] + s];
                            for (int64_t ot = 0; ot < out[0]; ot++) {
                                int64_t it = ot * st[0] - pb[0] + q * d[0];
                                if (it < 0 || it >= in[0])
                                    continue;
                                for (int64_t oh = 0; oh < out[1]; oh++) {
                                    int64_t ih = oh * st[1] - pb[1] + r * d[1];
                                    if (ih < 0 || ih >= in[1])
                                        continue;
                                    const float *row = src + (it * in[1] + ih) * in[2];
                                    float *orow = o + (ot * out[1] + oh) * out[2];
                                    for (int64_t ow = 0; ow < out[2]; ow++) {
                                        int64_t iw = ow * st[2] - pb[2] + s * d[2];
                                        if (iw >= 0 && iw < in[2])
                                            orow[ow] += wt * row[iw];
                                    }
                                }
                            }
                        }
                    }
                }
            }
            for (int64_t i = 0; i < out_size; i++)
                o[i] = vfi_act_apply(&cw.act, o[i]);
        }
    }
}

static void fc(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *wv = &g->values[nd->inputs[1]];
    const float *w = wv->data;
    const float *bias = nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL;
    int64_t O = wv->dims[0], I = wv->dims[1];
    int64_t rows = (int64_t)n * g->values[nd->inputs[0]].dims[0];
    for (int64_t b = 0; b < rows; b++) {
        for (int64_t o = 0; o < O; o++) {
            double acc = bias ? bias[o] : 0.0;
            const float *wr = w + o * I, *xr = x + (int64_t)b * I;
            for (int64_t i = 0; i < I; i++)
                acc += (double)wr[i] * xr[i];
            y[(int64_t)b * O + o] = vfi_act_apply(&nd->p.fc.act, (float)acc);
        }
    }
}

/* POOL and POOL3D: a 2-D window is a 3-D one over a single frame. */
static void pool(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_pool_window w;
    vfi_pool_window(g, nd, &w);
    ref_axes ra;
    as_3d(&w.ax, xv, yv, &ra);
    const int64_t *in = ra.in, *out = ra.out, *k = ra.k, *s = ra.st, *d = ra.d, *pb = ra.pb;
    int64_t C = xv->dims[1], in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2];
    for (int64_t plane = 0; plane < (int64_t)n * C; plane++) {
        const float *src = x + plane * in_size;
        float *dst = y + plane * out_size;
        for (int64_t o = 0; o < out_size; o++) {
            int64_t ot = o / (out[1] * out[2]), oh = o / out[2] % out[1], ow = o % out[2];
            double acc = w.kind == VF_POOL_MAX ? -INFINITY : 0.0;
            int64_t count = 0;
            for (int64_t q = 0; q < k[0]; q++) {
                int64_t it = ot * s[0] - pb[0] + q * d[0];
                for (int64_t r = 0; r < k[1]; r++) {
                    int64_t ih = oh * s[1] - pb[1] + r * d[1];
                    for (int64_t t = 0; t < k[2]; t++) {
                        int64_t iw = ow * s[2] - pb[2] + t * d[2];
                        if (it < 0 || it >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2])
                            continue;
                        float v = src[(it * in[1] + ih) * in[2] + iw];
                        if (w.kind == VF_POOL_MAX)
                            acc = v > acc ? v : acc;
                        else
                            acc += v;
                        count++;
                    }
                }
            }
            if (w.kind == VF_POOL_AVG) {
                int64_t div = w.count_include_pad ? k[0] * k[1] * k[2] : count;
                acc = div ? acc / (double)div : 0.0;
            }
            dst[o] = (float)acc;
        }
    }
}

static float binary_apply(vf_binary_kind k, float a, float b)
{
    switch (k) {
    case VF_BIN_ADD:
        return a + b;
    case VF_BIN_SUB:
        return a - b;
    case VF_BIN_MUL:
        return a * b;
    case VF_BIN_DIV:
        return a / b;
    }
    return 0.0f;
}

/* PRelu's: the slope b where a is negative. */
static float prelu_apply(vf_binary_kind k, float a, float b)
{
    (void)k;
    return a < 0.0f ? a * b : a;
}

/* y = f(kind, a, b) elementwise with numpy broadcasting; either operand may be a constant. */
static void binary(const vf_node *nd, const vf_graph *g, const float *a, const float *b, float *y,
                   int n, float (*f)(vf_binary_kind, float, float), vf_binary_kind kind)
{
    const vf_value *av = &g->values[nd->inputs[0]], *bv = &g->values[nd->inputs[1]];
    const vf_value *yv = &g->values[nd->output];
    int rank = yv->rank;
    int64_t sa[VF_MAX_DIMS], sb[VF_MAX_DIMS], dims[VF_MAX_DIMS], da[VF_MAX_DIMS], db[VF_MAX_DIMS],
        idx[VF_MAX_DIMS] = {0};
    vfi_value_dims_at(yv, n, dims);
    vfi_value_dims_at(av, n, da);
    vfi_value_dims_at(bv, n, db);
    vfi_dims_broadcast_strides(rank, av->rank, da, sa);
    vfi_dims_broadcast_strides(rank, bv->rank, db, sb);
    int64_t total = vfi_dims_numel(rank, dims);
    for (int64_t k = 0; k < total; k++) {
        y[k] = f(kind, a[vfi_dims_offset(rank, idx, sa)], b[vfi_dims_offset(rank, idx, sb)]);
        vfi_dims_next(rank, dims, idx);
    }
}

/* outer x axis x inner decomposition of a value around one (non-batch) axis, at batch n. */
static void split_axis(const vf_value *v, int axis, int n, int64_t *outer, int64_t *len,
                       int64_t *inner)
{
    int64_t dims[VF_MAX_DIMS];
    vfi_value_dims_at(v, n, dims);
    vfi_dims_split(v->rank, dims, axis, outer, len, inner);
}

static void softmax(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    int64_t outer, len, inner;
    split_axis(&g->values[nd->inputs[0]], nd->p.axis, n, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const float *xs = x + o * len * inner + i;
            float *ys = y + o * len * inner + i;
            double m = -INFINITY, sum = 0.0;
            for (int64_t k = 0; k < len; k++)
                m = xs[k * inner] > m ? xs[k * inner] : m;
            for (int64_t k = 0; k < len; k++)
                sum += exp(xs[k * inner] - m);
            for (int64_t k = 0; k < len; k++)
                ys[k * inner] = (float)(exp(xs[k * inner] - m) / sum);
        }
    }
}

static void lrn(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]];
    const vf_lrn_params *p = &nd->p.lrn;
    int64_t C = xv->dims[1], HW = xv->dims[2] * xv->dims[3];
    int64_t lo = (p->size - 1) / 2, hi = p->size - 1 - lo;
    for (int b = 0; b < n; b++) {
        for (int64_t c = 0; c < C; c++) {
            for (int64_t i = 0; i < HW; i++) {
                double sq = 0.0;
                for (int64_t k = c - lo; k <= c + hi; k++) {
                    if (k >= 0 && k < C) {
                        double v = x[((int64_t)b * C + k) * HW + i];
                        sq += v * v;
                    }
                }
                int64_t at = ((int64_t)b * C + c) * HW + i;
                y[at] = (float)(x[at] / pow(p->bias + p->alpha / p->size * sq, p->beta));
            }
        }
    }
}

static void concat(const vf_node *nd, const vf_graph *g, float *const *buf, const float *in,
                   float *y, int n)
{
    const vf_value *yv = &g->values[nd->output];
    int64_t outer, ylen, inner;
    split_axis(yv, nd->p.axis, n, &outer, &ylen, &inner);
    int64_t at = 0;
    for (int j = 0; j < nd->n_inputs; j++) {
        int vi = nd->inputs[j];
        const float *x = vi == g->input ? in : buf[vi];
        int64_t len = g->values[vi].dims[nd->p.axis];
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (o * ylen + at) * inner, x + o * len * inner,
                   (size_t)(len * inner) * sizeof(float));
        at += len;
    }
}

static void pad(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    int rank = yv->rank;
    int64_t sx[VF_MAX_DIMS], xd[VF_MAX_DIMS], dims[VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    dims_strides(xv, n, xd, sx);
    vfi_value_dims_at(yv, n, dims);
    int64_t total = vfi_dims_numel(rank, dims);
    for (int64_t k = 0; k < total; k++) {
        int64_t off = 0;
        int inside = 1;
        for (int i = 0; i < rank; i++) {
            int64_t s = idx[i] - nd->p.pad.begin[i];
            if (s < 0 || s >= xd[i])
                inside = 0;
            off += s * sx[i];
        }
        y[k] = inside ? x[off] : nd->p.pad.value;
        vfi_dims_next(rank, dims, idx);
    }
}

/* Every output element from the input element at the strided offset (transpose, slice,
 * broadcast): off = base + sum idx[i] * st[i]. */
static void strided_copy(int rank, const int64_t *dims, const int64_t *st, int64_t base,
                         const float *x, float *y)
{
    int64_t idx[VF_MAX_DIMS] = {0}, total = vfi_dims_numel(rank, dims);
    for (int64_t k = 0; k < total; k++) {
        y[k] = x[base + vfi_dims_offset(rank, idx, st)];
        vfi_dims_next(rank, dims, idx);
    }
}

static void transpose(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    int64_t sx[VF_MAX_DIMS], xd[VF_MAX_DIMS], st[VF_MAX_DIMS], dims[VF_MAX_DIMS];
    dims_strides(xv, n, xd, sx);
    vfi_value_dims_at(yv, n, dims);
    for (int i = 0; i < yv->rank; i++)
        st[i] = sx[nd->p.perm[i]];
    strided_copy(yv->rank, dims, st, 0, x, y);
}

static void slice(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    const vf_slice_params *p = &nd->p.slice;
    int64_t sx[VF_MAX_DIMS], xd[VF_MAX_DIMS], st[VF_MAX_DIMS], dims[VF_MAX_DIMS], base = 0;
    dims_strides(xv, n, xd, sx);
    vfi_value_dims_at(yv, n, dims);
    for (int i = 0; i < yv->rank; i++) {
        st[i] = sx[i] * p->step[i];
        base += p->start[i] * sx[i];
    }
    strided_copy(yv->rank, dims, st, base, x, y);
}

/* Broadcast to the output's shape: stride 0 where the input has 1 or nothing. */
static void expand(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    int64_t xd[VF_MAX_DIMS], st[VF_MAX_DIMS], dims[VF_MAX_DIMS];
    vfi_value_dims_at(xv, n, xd);
    vfi_value_dims_at(yv, n, dims);
    vfi_dims_broadcast_strides(yv->rank, xv->rank, xd, st);
    strided_copy(yv->rank, dims, st, 0, x, y);
}

/* y [..., M, N] = act(scale x (a [..., M, K] b) + bias) + sum: b a constant [K, N] for every
 * row, a constant [..., K, N] for a's last leading dimensions, or an activation with the same
 * leading dimensions (one product per leading index). */
static void matmul(const vf_node *nd, const vf_graph *g, const float *a, const float *b,
                   const float *sum, float *y, int n)
{
    const vf_matmul_params *p = &nd->p.matmul;
    const float *bias = p->has_bias ? g->values[nd->inputs[2]].data : NULL;
    int64_t lead, M, K, N, b_mats;
    vfi_matmul_dims(g, nd, n, &lead, &M, &K, &N, &b_mats);
    for (int64_t l = 0; l < lead; l++) {
        const float *al = a + l * M * K, *bl = b + (l % b_mats) * K * N;
        float *yl = y + l * M * N;
        for (int64_t m = 0; m < M; m++) {
            for (int64_t j = 0; j < N; j++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++)
                    acc += (double)al[m * K + k] * bl[k * N + j];
                float v = vfi_act_apply(&p->act, (float)(p->scale * acc + (bias ? bias[j] : 0.0)));
                yl[m * N + j] = sum ? v + sum[(l * M + m) * N + j] : v;
            }
        }
    }
}

static void layernorm(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]];
    const float *scale = g->values[nd->inputs[1]].data;
    const float *bias = nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL;
    int64_t dims[VF_MAX_DIMS];
    vfi_value_dims_at(xv, n, dims);
    int axis = nd->p.layernorm.axis;
    int64_t rows = vfi_dims_numel(axis, dims), len = vfi_dims_numel(xv->rank - axis, dims + axis);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        float *yr = y + r * len;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < len; i++)
            mean += xr[i];
        mean /= (double)len;
        for (int64_t i = 0; i < len; i++)
            var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        var /= (double)len;
        double inv = 1.0 / sqrt(var + nd->p.layernorm.epsilon);
        for (int64_t i = 0; i < len; i++)
            yr[i] = (float)(((double)xr[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0));
    }
}

static void gather(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_gather_params *p = &nd->p.gather;
    int64_t outer, len, inner;
    split_axis(&g->values[nd->inputs[0]], p->axis, n, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int j = 0; j < p->n_indices; j++)
            memcpy(y + (o * p->n_indices + j) * inner, x + (o * len + p->indices[j]) * inner,
                   (size_t)inner * sizeof(float));
    }
}

static void reduce_mean(const vf_node *nd, const vf_graph *g, const float *x, float *y, int n)
{
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    int rank = xv->rank;
    uint32_t axes = nd->p.reduce.axes;
    int64_t dims[VF_MAX_DIMS], ys[VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    vfi_value_dims_at(xv, n, dims);
    /* Output strides over the input's dimensions (0 on reduced axes). */
    int64_t s = 1, count = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (axes & (1u << i)) {
            ys[i] = 0;
            count *= dims[i];
        } else {
            ys[i] = s;
            s *= dims[i];
        }
    }
    int64_t out_total = (int64_t)n * vfi_value_sample_numel(yv);
    for (int64_t k = 0; k < out_total; k++)
        y[k] = 0.0f;
    int64_t total = vfi_dims_numel(rank, dims);
    for (int64_t k = 0; k < total; k++) {
        y[vfi_dims_offset(rank, idx, ys)] += x[k];
        vfi_dims_next(rank, dims, idx);
    }
    for (int64_t k = 0; k < out_total; k++)
        y[k] /= (float)count;
}

/* ---- the kernel table ------------------------------------------------------------------------ */

/* One node's run: the node, its output's storage, the batch size. */
typedef struct ref_step {
    const ref_ctx *c;
    const vf_node *nd;
    const void *in; /* the batch input */
    const float *x; /* input 0 */
    float *y;
    int n;
    vf_err *err;
} ref_step;

/* Input i's storage: the batch input, an activation's buffer or a constant's data. */
static const void *arg(const ref_step *s, int i)
{
    int v = s->nd->inputs[i];
    const vf_graph *g = s->c->g;
    return v == g->input ? s->in : s->c->buf[v] ? (const void *)s->c->buf[v] : g->values[v].data;
}

/* Elements of the output at this batch size. */
static int64_t out_count(const ref_step *s)
{
    return (int64_t)s->n * vfi_value_sample_numel(&s->c->g->values[s->nd->output]);
}

typedef vf_status (*ref_kernel)(const ref_step *s);

/* The kernels of one input, x to y. */
#define REF_UNARY(f)                                                                               \
    static vf_status k_##f(const ref_step *s)                                                      \
    {                                                                                              \
        f(s->nd, s->c->g, s->x, s->y, s->n);                                                       \
        return VF_OK;                                                                              \
    }
REF_UNARY(conv)
REF_UNARY(fc)
REF_UNARY(pool)
REF_UNARY(softmax)
REF_UNARY(lrn)
REF_UNARY(pad)
REF_UNARY(reduce_mean)
REF_UNARY(transpose)
REF_UNARY(gather)
REF_UNARY(layernorm)
REF_UNARY(slice)
REF_UNARY(expand)
#undef REF_UNARY

static vf_status k_act(const ref_step *s)
{
    int64_t count = out_count(s);
    for (int64_t k = 0; k < count; k++)
        s->y[k] = vfi_act_apply(&s->nd->p.act, s->x[k]);
    return VF_OK;
}

static vf_status k_reshape(const ref_step *s)
{
    memcpy(s->y, s->x, (size_t)out_count(s) * sizeof(float));
    return VF_OK;
}

static vf_status k_binary(const ref_step *s)
{
    binary(s->nd, s->c->g, s->x, arg(s, 1), s->y, s->n, binary_apply, s->nd->p.binary);
    return VF_OK;
}

static vf_status k_prelu(const ref_step *s)
{
    binary(s->nd, s->c->g, s->x, arg(s, 1), s->y, s->n, prelu_apply, VF_BIN_MUL);
    return VF_OK;
}

static vf_status k_concat(const ref_step *s)
{
    concat(s->nd, s->c->g, s->c->buf, s->in, s->y, s->n);
    return VF_OK;
}

static vf_status k_matmul(const ref_step *s)
{
    const float *sum = s->nd->p.matmul.has_sum ? arg(s, s->nd->n_inputs - 1) : NULL;
    matmul(s->nd, s->c->g, s->x, arg(s, 1), sum, s->y, s->n);
    return VF_OK;
}

static vf_status k_lookup(const ref_step *s)
{
    const vf_graph *g = s->c->g;
    const vf_value *tv = &g->values[s->nd->inputs[1]];
    int64_t n_ids = (int64_t)s->n * vfi_value_sample_numel(&g->values[s->nd->inputs[0]]);
    return vfi_ids_lookup(s->nd, (const int64_t *)(const void *)s->x, n_ids, n_ids, tv->data,
                          tv->dims[0], vfi_value_numel(tv) / tv->dims[0], s->y, s->err);
}

static vf_status k_argmax(const ref_step *s)
{
    int64_t outer, len, inner;
    vfi_ids_split(s->c->g, s->nd, s->n, &outer, &len, &inner);
    vfi_ids_argmax(s->x, s->c->g->values[s->nd->inputs[0]].dtype == VF_DTYPE_I64, outer, len, inner,
                   (int64_t *)(void *)s->y);
    return VF_OK;
}

static vf_status k_take(const ref_step *s)
{
    int64_t outer, len, inner;
    vfi_ids_split(s->c->g, s->nd, s->n, &outer, &len, &inner);
    return vfi_ids_take(s->nd, s->x, arg(s, 1), s->n, s->n, outer, len, inner, s->y, s->err);
}

/* Indexed by operator: every operator of op_list.h has its kernel here (an operator without one
 * is refused when a graph is prepared). */
static const ref_kernel kernels[VF_OP_COUNT_] = {
    [VF_OP_CONV] = k_conv,
    [VF_OP_FC] = k_fc,
    [VF_OP_ACT] = k_act,
    [VF_OP_POOL] = k_pool,
    [VF_OP_BINARY] = k_binary,
    [VF_OP_CONCAT] = k_concat,
    [VF_OP_SOFTMAX] = k_softmax,
    [VF_OP_LRN] = k_lrn,
    [VF_OP_PAD] = k_pad,
    [VF_OP_REDUCE_MEAN] = k_reduce_mean,
    [VF_OP_TRANSPOSE] = k_transpose,
    [VF_OP_RESHAPE] = k_reshape,
    [VF_OP_GATHER] = k_gather,
    [VF_OP_MATMUL] = k_matmul,
    [VF_OP_LAYERNORM] = k_layernorm,
    [VF_OP_SLICE] = k_slice,
    [VF_OP_EXPAND] = k_expand,
    [VF_OP_LOOKUP] = k_lookup,
    [VF_OP_ARGMAX] = k_argmax,
    [VF_OP_TAKE] = k_take,
    [VF_OP_POOL3D] = k_pool,
    [VF_OP_CONV3D] = k_conv,
    [VF_OP_PRELU] = k_prelu,
};

static vf_status ref_supports(vf_backend *b, const vf_graph *g, const vf_node *nd, vf_err *err)
{
    (void)b, (void)g, (void)err;
    return (unsigned)nd->op < VF_OP_COUNT_ && kernels[nd->op] ? VF_OK : VF_ERR_UNSUPPORTED;
}

static vf_status ref_run(vf_backend *b, const void *in, float *out, int n)
{
    ref_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    if (n < 1 || n > c->max_batch)
        return vfi_fail(&b->err, VF_ERR_INVALID, "batch of %d (plan is for up to %d)", n,
                        c->max_batch);
    ref_step s = {.c = c, .in = in, .n = n, .err = &b->err};
    for (int i = 0; i < g->n_nodes; i++) {
        if (b->cancel && atomic_load(b->cancel))
            return vfi_fail(&b->err, VF_ERR_CANCELLED, "cancelled");
        s.nd = &g->nodes[i];
        s.x = arg(&s, 0);
        s.y = c->buf[s.nd->output];
        vf_status rc = kernels[s.nd->op](&s);
        if (rc < 0)
            return rc;
    }
    const float *result = g->output == g->input ? in : c->buf[g->output];
    memcpy(out, result,
           (size_t)n * (size_t)vfi_value_sample_numel(&g->values[g->output]) * sizeof(float));
    return VF_OK;
}

/* Frames are converted by yuvconv's per-pixel reference, the oracle of the faster conversions,
 * so a pipeline on this backend is the reference end to end. It needs no state: no converter. */
static vf_status ref_converter_new(vf_backend *b, vf_converter **out, vf_err *err)
{
    (void)b, (void)err;
    *out = NULL;
    return VF_OK;
}

static void ref_converter_free(vf_backend *b, vf_converter *cv)
{
    (void)b, (void)cv;
}

static vf_status ref_convert(vf_backend *b, vf_converter *cv, const vf_yuv_params *q,
                             const vf_yuv_planes *planes, int on_device, float *slot, vf_err *err)
{
    (void)b, (void)cv;
    if (on_device)
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "the reference backend reads host memory only");
    vfi_yuv_convert_ref(q, planes, slot);
    return VF_OK;
}

const vf_backend_ops vfi_backend_ref = {
    .name = "ref",
    .description = "plain C reference (f32, slow; the test oracle)",
    .is_gpu = 0,
    .probe = ref_probe,
    .init = ref_init,
    .supports = ref_supports,
    .prepare = ref_prepare,
    .run = ref_run,
    .converter_new = ref_converter_new,
    .converter_free = ref_converter_free,
    .convert = ref_convert,
    .describe = NULL,
    .library_version = NULL,
    .destroy = ref_destroy,
};
