/*
 * onnx_ops.c - the operators transformers brought: layer normalisation, the elementwise
 * functions of GELU and attention (Erf, Sqrt, Pow, Reciprocal, Exp, Neg), Split and slices of
 * activations, Expand, and the shape arithmetic exporters emit around them (Equal, Where, Not,
 * Range, Mod), folded here when their inputs are constants; and what a text tower adds: ArgMax
 * (the end token) and the row pick x[arange(N), k]. Each handler is an entry of onnx.c's
 * operator table; shapes are checked by the graph (graph.c) as each node is added.
 */
#include <math.h>
#include <string.h>

#include "core/mem.h"
#include "engine/onnx_handlers.h"

#define FAIL(L, code, ...) vfi_onnx_fail(L, code, __VA_ARGS__)

/* The node's input i, which must be there. */
static vf_status need_input(vfi_onnx_loader *L, size_t i, int *out)
{
    vf_status rc = vfi_onnx_input(L, i, out);
    if (rc >= 0 && *out < 0)
        rc = FAIL(L, VF_ERR_MODEL, "input %zu is missing", i);
    return rc;
}

/* ---- constants: elementwise with numpy broadcasting -------------------------------------- */

/* Broadcast shape of n constants into dims/rank, and each one's strides over it (0 where it has
 * 1 or nothing). */
static vf_status broadcast_shape(vfi_onnx_loader *L, const vf_value *const *v, int n, int *rank,
                                 int64_t *dims, int64_t st[][VF_MAX_DIMS])
{
    int r = 0;
    for (int k = 0; k < n; k++)
        r = v[k]->rank > r ? v[k]->rank : r;
    for (int i = 0; i < r; i++)
        dims[i] = 1;
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < v[k]->rank; i++) {
            int64_t d = v[k]->dims[i], *o = &dims[i + r - v[k]->rank];
            if (d != *o && d != 1 && *o != 1)
                return FAIL(L, VF_ERR_MODEL, "shapes do not broadcast");
            *o = d > *o ? d : *o;
        }
    }
    for (int k = 0; k < n; k++)
        vfi_dims_broadcast_strides(r, v[k]->rank, v[k]->dims, st[k]);
    *rank = r;
    return VF_OK;
}

/* The node's first n inputs, which must be constants (what is folded here). */
static vf_status const_inputs(vfi_onnx_loader *L, int n, const vf_value **v)
{
    for (int k = 0; k < n; k++) {
        int idx;
        vf_status rc = need_input(L, (size_t)k, &idx);
        if (rc < 0)
            return rc;
        v[k] = vfi_onnx_value(L, idx);
        if (!v[k]->data)
            return FAIL(L, VF_ERR_UNSUPPORTED, "on an activation ('%s')", v[k]->name);
    }
    return VF_OK;
}

typedef enum { CMP_EQUAL, CMP_WHERE, CMP_MOD, CMP_NOT } fold_kind;

/* Equal, Where, Mod and Not of constants. An element standing for a multiple of the batch
 * (vfi_dim_batch) compares as itself and is selected as itself; arithmetic on it is refused. */
static vf_status fold_consts(vfi_onnx_loader *L, fold_kind kind, int n_in)
{
    const vf_value *v[3];
    vf_status rc = const_inputs(L, n_in, v);
    if (rc < 0)
        return rc;
    const vf_value *a = kind == CMP_WHERE ? v[1] : v[0], *b = kind == CMP_WHERE ? v[2] : v[1];
    if (kind != CMP_NOT && a->dtype != b->dtype)
        return FAIL(L, VF_ERR_MODEL, "operands of different types");
    int rank = 0;
    int64_t dims[VF_MAX_DIMS], st[3][VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    rc = broadcast_shape(L, v, n_in, &rank, dims, st);
    if (rc < 0)
        return rc;
    vf_dtype out_dt = kind == CMP_EQUAL || kind == CMP_NOT ? VF_DTYPE_I64 : a->dtype;
    int64_t total = vfi_dims_numel(rank, dims);
    if (total > VF_MAX_DIM)
        return FAIL(L, VF_ERR_UNSUPPORTED, "a constant of %lld elements", (long long)total);
    void *data = vfi_mallocarray((size_t)(total ? total : 1), vfi_dtype_size(out_dt));
    if (!data)
        return FAIL(L, VF_ERR_NOMEM, "out of memory");
    int fmod_attr = kind == CMP_MOD && vfi_onnx_attr_int(L, "fmod", 0) != 0;
    for (int64_t e = 0; e < total; e++) {
        int64_t o[3] = {0, 0, 0};
        for (int k = 0; k < n_in; k++)
            o[k] = vfi_dims_offset(rank, idx, st[k]);
        const int64_t *ai = a->data, *bi = b->data;
        const float *af = a->data, *bf = b->data;
        if (kind == CMP_EQUAL) {
            ((int64_t *)data)[e] =
                a->dtype == VF_DTYPE_I64 ? ai[o[0]] == bi[o[1]] : af[o[0]] == bf[o[1]];
        } else if (kind == CMP_NOT) {
            const int64_t *x = v[0]->data;
            ((int64_t *)data)[e] = v[0]->dtype == VF_DTYPE_I64
                                       ? x[o[0]] == 0
                                       : ((const float *)v[0]->data)[o[0]] == 0.0f;
        } else if (kind == CMP_WHERE) {
            int cond = v[0]->dtype == VF_DTYPE_I64 ? ((const int64_t *)v[0]->data)[o[0]] != 0
                                                   : ((const float *)v[0]->data)[o[0]] != 0.0f;
            if (a->dtype == VF_DTYPE_I64)
                ((int64_t *)data)[e] = cond ? ai[o[1]] : bi[o[2]];
            else
                ((float *)data)[e] = cond ? af[o[1]] : bf[o[2]];
        } else if (a->dtype == VF_DTYPE_I64) {
            int64_t x = ai[o[0]], y = bi[o[1]];
            if (y == 0 || vfi_dim_batch_multiple(x) || vfi_dim_batch_multiple(y)) {
                vfi_free(data);
                return FAIL(L, VF_ERR_UNSUPPORTED, "%s",
                            y == 0 ? "integer modulo by zero" : "modulo of the batch size");
            }
            int64_t r = x % y;
            if (!fmod_attr && r != 0 && ((r < 0) != (y < 0)))
                r += y; /* the sign of the divisor, as Python's */
            ((int64_t *)data)[e] = r;
        } else {
            float x = af[o[0]], y = bf[o[1]];
            float r = fmodf(x, y);
            if (!fmod_attr && r != 0.0f && ((r < 0.0f) != (y < 0.0f)))
                r += y;
            ((float *)data)[e] = r;
        }
        vfi_dims_next(rank, dims, idx);
    }
    return vfi_onnx_add_const(L, 0, out_dt, rank, dims, data);
}

vf_status vfi_onnx_equal(vfi_onnx_loader *L)
{
    return fold_consts(L, CMP_EQUAL, 2);
}

vf_status vfi_onnx_where(vfi_onnx_loader *L)
{
    return fold_consts(L, CMP_WHERE, 3);
}

vf_status vfi_onnx_not(vfi_onnx_loader *L)
{
    return fold_consts(L, CMP_NOT, 1);
}

vf_status vfi_onnx_mod(vfi_onnx_loader *L)
{
    return fold_consts(L, CMP_MOD, 2);
}

/* A scalar constant input as a double; its dtype into *dt. */
static vf_status scalar_input(vfi_onnx_loader *L, size_t i, double *out, vf_dtype *dt)
{
    int idx;
    vf_status rc = need_input(L, i, &idx);
    if (rc < 0)
        return rc;
    const vf_value *v = vfi_onnx_value(L, idx);
    if (!v->data || vfi_dims_numel(v->rank, v->dims) != 1)
        return FAIL(L, VF_ERR_UNSUPPORTED, "input %zu must be a constant scalar", i);
    if (v->dtype == VF_DTYPE_I64 && vfi_dim_batch_multiple(*(const int64_t *)v->data))
        return FAIL(L, VF_ERR_UNSUPPORTED, "a range over the batch size");
    *out = v->dtype == VF_DTYPE_I64 ? (double)*(const int64_t *)v->data : *(const float *)v->data;
    if (dt)
        *dt = v->dtype;
    return VF_OK;
}

/* Input i as a constant int64 scalar into *v; 0 when it is something else. */
static int i64_scalar(vfi_onnx_loader *L, size_t i, int64_t *v)
{
    int idx;
    if (vfi_onnx_input(L, i, &idx) < 0 || idx < 0)
        return 0;
    const vf_value *x = vfi_onnx_value(L, idx);
    if (!x->data || x->dtype != VF_DTYPE_I64 || vfi_dims_numel(x->rank, x->dims) != 1)
        return 0;
    *v = *(const int64_t *)x->data;
    return 1;
}

vf_status vfi_onnx_range(vfi_onnx_loader *L)
{
    int64_t s0, lim, step;
    /* Range(0, N, 1): the numbers of the images (arange(x.shape[0])) */
    if (i64_scalar(L, 0, &s0) && i64_scalar(L, 1, &lim) && i64_scalar(L, 2, &step) && s0 == 0 &&
        step == 1 && vfi_dim_batch_multiple(lim) == 1)
        return vfi_onnx_add_ramp(L, 0, (vf_onnx_ramp){1, -1});
    double start, limit, delta;
    vf_dtype dt;
    vf_status rc = scalar_input(L, 0, &start, &dt);
    if (rc >= 0)
        rc = scalar_input(L, 1, &limit, NULL);
    if (rc >= 0)
        rc = scalar_input(L, 2, &delta, NULL);
    if (rc < 0)
        return rc;
    if (delta == 0.0)
        return FAIL(L, VF_ERR_MODEL, "range with step 0");
    double count = ceil((limit - start) / delta);
    if (!(count <= (double)VF_MAX_DIM)) /* NaN and infinities too */
        return FAIL(L, VF_ERR_UNSUPPORTED, "a range of %g elements", count);
    int64_t n = count > 0 ? (int64_t)count : 0;
    void *data = vfi_mallocarray((size_t)(n ? n : 1), vfi_dtype_size(dt));
    if (!data)
        return FAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (dt == VF_DTYPE_I64)
            ((int64_t *)data)[i] = (int64_t)start + i * (int64_t)delta;
        else
            ((float *)data)[i] = (float)(start + (double)i * delta);
    }
    return vfi_onnx_add_const(L, 0, dt, 1, &n, data);
}

/* ---- elementwise functions ----------------------------------------------------------------- */

/* An elementwise function: a graph node on an activation, folded on a float constant. */
static vf_status unary(vfi_onnx_loader *L, vf_act_kind kind, float alpha, float beta)
{
    int x;
    vf_status rc = need_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    vf_act act = {kind, alpha, beta};
    if (!xv->data)
        return vfi_onnx_add_node(L, VF_OP_ACT, &x, 1, &act, 0);
    if (xv->dtype != VF_DTYPE_F32)
        return FAIL(L, VF_ERR_UNSUPPORTED, "on an integer constant");
    int64_t n = vfi_dims_numel(xv->rank, xv->dims);
    float *data = vfi_mallocarray((size_t)(n ? n : 1), sizeof(float));
    if (!data)
        return FAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        data[i] = vfi_act_apply(&act, ((const float *)xv->data)[i]);
    return vfi_onnx_add_const(L, 0, VF_DTYPE_F32, xv->rank, xv->dims, data);
}

vf_status vfi_onnx_erf(vfi_onnx_loader *L)
{
    return unary(L, VF_ACT_ERF, 0.0f, 0.0f);
}

vf_status vfi_onnx_sqrt(vfi_onnx_loader *L)
{
    return unary(L, VF_ACT_SQRT, 0.0f, 0.0f);
}

vf_status vfi_onnx_reciprocal(vfi_onnx_loader *L)
{
    return unary(L, VF_ACT_RECIPROCAL, 0.0f, 0.0f);
}

vf_status vfi_onnx_exp(vfi_onnx_loader *L)
{
    return unary(L, VF_ACT_EXP, 0.0f, 0.0f);
}

vf_status vfi_onnx_neg(vfi_onnx_loader *L)
{
    return unary(L, VF_ACT_LINEAR, -1.0f, 0.0f);
}

vf_status vfi_onnx_pow(vfi_onnx_loader *L)
{
    double e = 0.0;
    vf_status rc = scalar_input(L, 1, &e, NULL);
    if (rc < 0)
        return rc;
    return unary(L, VF_ACT_POW, (float)e, 0.0f);
}

/* ---- normalisation --------------------------------------------------------------------------- */

vf_status vfi_onnx_layernorm(vfi_onnx_loader *L)
{
    int in[3], n_in = 2;
    vf_status rc = need_input(L, 0, &in[0]);
    if (rc >= 0)
        rc = need_input(L, 1, &in[1]);
    if (rc >= 0)
        rc = vfi_onnx_input(L, 2, &in[2]);
    if (rc < 0)
        return rc;
    if (in[2] >= 0)
        n_in = 3;
    for (size_t i = 1; i < vfi_onnx_n_outputs(L); i++) {
        if (*vfi_onnx_output_name(L, i))
            return FAIL(L, VF_ERR_UNSUPPORTED, "the mean and deviation outputs");
    }
    const vf_value *x = vfi_onnx_value(L, in[0]);
    vf_layernorm_params p;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", -1), x->rank, &p.axis);
    if (rc < 0)
        return rc;
    p.epsilon = vfi_onnx_attr_float(L, "epsilon", 1e-5f);
    if (!(p.epsilon >= 0.0f))
        return FAIL(L, VF_ERR_MODEL, "epsilon %g", p.epsilon);
    return vfi_onnx_add_node(L, VF_OP_LAYERNORM, in, n_in, &p, 0);
}

/* ---- slices, splits, broadcasts ----------------------------------------------------------------
 */

static vf_status slice_out(vfi_onnx_loader *L, int x, const int64_t *start, const int64_t *step,
                           const int64_t *count, size_t out)
{
    const vf_value *xv = vfi_onnx_value(L, x);
    vf_slice_params p;
    memset(&p, 0, sizeof(p));
    int whole = 1;
    for (int d = 0; d < xv->rank; d++) {
        p.start[d] = start[d];
        p.step[d] = step[d];
        p.count[d] = count[d];
        whole &= start[d] == 0 && step[d] == 1 && count[d] == xv->dims[d];
    }
    if (whole)
        return vfi_onnx_add_alias(L, out, x);
    return vfi_onnx_add_node(L, VF_OP_SLICE, &x, 1, &p, out);
}

vf_status vfi_onnx_slice_activation(vfi_onnx_loader *L, int x, const int64_t *start,
                                    const int64_t *step, const int64_t *count)
{
    return slice_out(L, x, start, step, count, 0);
}

vf_status vfi_onnx_split(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = need_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    if (xv->data)
        return FAIL(L, VF_ERR_UNSUPPORTED, "splitting a constant");
    int axis, rank = xv->rank;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 0), rank, &axis);
    if (rc < 0)
        return rc;
    size_t outs = vfi_onnx_n_outputs(L);
    if (outs < 1 || outs > 4096)
        return FAIL(L, VF_ERR_MODEL, "%zu outputs", outs);
    int64_t sizes[4096];
    int n = -1, split_in;
    rc = vfi_onnx_input(L, 1, &split_in);
    if (rc < 0)
        return rc;
    if (split_in >= 0) {
        rc = vfi_onnx_const_ints(L, 1, sizes, 4096, &n);
        if (rc < 0)
            return rc;
    } else {
        n = vfi_onnx_attr_ints(L, "split", sizes, 4096);
    }
    int64_t len = xv->dims[axis];
    if (n < 0) { /* equal parts, the last smaller (num_outputs) */
        int64_t part = (len + (int64_t)outs - 1) / (int64_t)outs;
        for (size_t i = 0; i < outs; i++) {
            int64_t left = len - part * (int64_t)i;
            sizes[i] = left < part ? (left > 0 ? left : 0) : part;
        }
        n = (int)outs;
    }
    if ((size_t)n != outs)
        return FAIL(L, VF_ERR_MODEL, "%d sizes for %zu outputs", n, outs);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > len)
            return FAIL(L, VF_ERR_MODEL, "split size %lld", (long long)sizes[i]);
        sum += sizes[i];
    }
    if (sum != len)
        return FAIL(L, VF_ERR_MODEL, "split sizes add up to %lld, not %lld", (long long)sum,
                    (long long)len);
    int64_t start[VF_MAX_DIMS] = {0}, step[VF_MAX_DIMS], count[VF_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        step[d] = 1;
        count[d] = xv->dims[d];
    }
    for (int i = 0; i < n && rc >= 0; i++) {
        count[axis] = sizes[i];
        if (*vfi_onnx_output_name(L, (size_t)i))
            rc = slice_out(L, x, start, step, count, (size_t)i);
        start[axis] += sizes[i];
    }
    return rc;
}

vf_status vfi_onnx_expand(vfi_onnx_loader *L)
{
    int x;
    int64_t shape[VF_MAX_DIMS];
    int n;
    vf_status rc = need_input(L, 0, &x);
    if (rc >= 0)
        rc = vfi_onnx_const_ints(L, 1, shape, VF_MAX_DIMS, &n);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    int rank = n > xv->rank ? n : xv->rank;
    vf_value t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    t.batch_axis = -1;
    t.batch_outer = 1;
    for (int i = 0; i < rank; i++) {
        int is = i - (rank - n), ix = i - (rank - xv->rank);
        int64_t s = is >= 0 ? shape[is] : 1, d = ix >= 0 ? xv->dims[ix] : 1;
        int64_t m = vfi_dim_batch_multiple(s);
        if (m) { /* the batch size: to every image */
            if (t.batch_axis >= 0 || (xv->is_batched && ix != xv->batch_axis))
                return FAIL(L, VF_ERR_UNSUPPORTED, "the batch size in two dimensions");
            if (d != 1 && d != m)
                return FAIL(L, VF_ERR_MODEL, "dim %d of size %lld does not expand", i,
                            (long long)d);
            t.batch_axis = i;
            t.dims[i] = m;
            continue;
        }
        if (s < 0 || s > VF_MAX_DIM || (s != d && s != 1 && d != 1))
            return FAIL(L, VF_ERR_MODEL, "shape entry %lld does not fit dim %lld", (long long)s,
                        (long long)d);
        t.dims[i] = s > d ? s : d;
        if (xv->is_batched && ix == xv->batch_axis)
            t.batch_axis = i;
    }
    if (xv->is_batched) {
        t.batch_outer = xv->batch_outer;
        if (t.batch_axis < 0 || t.dims[t.batch_axis] != xv->dims[xv->batch_axis])
            return FAIL(L, VF_ERR_UNSUPPORTED, "expanding over the batch");
    }
    if (t.batch_axis >= 0)
        return vfi_onnx_add_node(L, VF_OP_EXPAND, &x, 1, &t, 0);
    /* a constant to a fixed shape: folded */
    int64_t total = vfi_dims_numel(rank, t.dims);
    if (total > VF_MAX_NUMEL / 4 || total > (int64_t)1 << 28)
        return FAIL(L, VF_ERR_UNSUPPORTED, "expanding to %lld elements", (long long)total);
    size_t es = vfi_dtype_size(xv->dtype);
    unsigned char *data = vfi_mallocarray((size_t)(total ? total : 1), es);
    if (!data)
        return FAIL(L, VF_ERR_NOMEM, "out of memory");
    int64_t st[VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    vfi_dims_broadcast_strides(rank, xv->rank, xv->dims, st);
    for (int64_t e = 0; e < total; e++) {
        memcpy(data + (size_t)e * es,
               (const unsigned char *)xv->data + (size_t)vfi_dims_offset(rank, idx, st) * es, es);
        vfi_dims_next(rank, t.dims, idx);
    }
    return vfi_onnx_add_const(L, 0, xv->dtype, rank, t.dims, data);
}

/* ScatterND of constants (Swin's attention mask is built by assigning to windows of a zero
 * image): a copy of data with the slices that indices name replaced by updates. */
vf_status vfi_onnx_scatter_nd(vfi_onnx_loader *L)
{
    const vf_value *v[3];
    vf_status rc = const_inputs(L, 3, v);
    if (rc < 0)
        return rc;
    const vf_value *data = v[0], *ind = v[1], *upd = v[2];
    if (vfi_onnx_attr_int(L, "reduction", 0) != 0 && vfi_onnx_n_inputs(L) > 3)
        return FAIL(L, VF_ERR_UNSUPPORTED, "a reduction");
    if (ind->dtype != VF_DTYPE_I64 || ind->rank < 1 || upd->dtype != data->dtype)
        return FAIL(L, VF_ERR_MODEL, "indices or updates of the wrong type");
    int k = (int)ind->dims[ind->rank - 1];
    if (k < 1 || k > data->rank || upd->rank != ind->rank - 1 + data->rank - k)
        return FAIL(L, VF_ERR_MODEL, "indices of depth %d for rank %d", k, data->rank);
    for (int i = 0; i < ind->rank - 1; i++) {
        if (upd->dims[i] != ind->dims[i])
            return FAIL(L, VF_ERR_MODEL, "updates do not match the indices");
    }
    for (int i = k; i < data->rank; i++) {
        if (upd->dims[ind->rank - 1 + i - k] != data->dims[i])
            return FAIL(L, VF_ERR_MODEL, "updates do not match the data");
    }
    size_t es = vfi_dtype_size(data->dtype);
    int64_t total = vfi_dims_numel(data->rank, data->dims);
    int64_t slice = vfi_dims_numel(data->rank - k, data->dims + k),
            n_idx = vfi_dims_numel(ind->rank - 1, ind->dims);
    unsigned char *out = vfi_mallocarray((size_t)(total ? total : 1), es);
    if (!out)
        return FAIL(L, VF_ERR_NOMEM, "out of memory");
    memcpy(out, data->data, (size_t)total * es);
    const int64_t *ix = ind->data;
    for (int64_t j = 0; j < n_idx; j++) {
        int64_t off = 0;
        for (int d = 0; d < k; d++) {
            int64_t i = ix[j * k + d], len = data->dims[d];
            i = i < 0 ? i + len : i;
            if (i < 0 || i >= len) {
                vfi_free(out);
                return FAIL(L, VF_ERR_MODEL, "scatter index %lld out of range",
                            (long long)ix[j * k + d]);
            }
            off = off * len + i;
        }
        memcpy(out + (size_t)(off * slice) * es,
               (const unsigned char *)upd->data + (size_t)(j * slice) * es, (size_t)slice * es);
    }
    return vfi_onnx_add_const(L, 0, data->dtype, data->rank, data->dims, out);
}

/* ---- text towers ----------------------------------------------------------------------------- */

/* ArgMax of an activation along a non-batch axis (the end token: the largest id of a text). */
vf_status vfi_onnx_argmax(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = need_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    if (xv->data)
        return FAIL(L, VF_ERR_UNSUPPORTED, "an argmax of a constant");
    if (vfi_onnx_attr_int(L, "select_last_index", 0) != 0)
        return FAIL(L, VF_ERR_UNSUPPORTED, "select_last_index 1 (the last of equal values)");
    vf_argmax_params p;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 0), xv->rank, &p.axis);
    if (rc < 0)
        return rc;
    p.keepdims = vfi_onnx_attr_int(L, "keepdims", 1) != 0;
    return vfi_onnx_add_node(L, VF_OP_ARGMAX, &x, 1, &p, 0);
}

/* Arithmetic on the numbers of the images: i x m times a constant c is i x (m c); i x m plus k
 * ([N], int64) is the row pick i x m + k[i]. Nothing else. */
vf_status vfi_onnx_ramp_binary(vfi_onnx_loader *L, vf_binary_kind kind)
{
    const vf_onnx_ramp *r = vfi_onnx_ramp_input(L, 0);
    size_t other = 1;
    if (!r) {
        r = vfi_onnx_ramp_input(L, 1);
        other = 0;
    }
    if (r->base < 0 && kind == VF_BIN_MUL) {
        int64_t c;
        if (i64_scalar(L, other, &c) && c > 0 && c <= VF_MAX_DIM && r->mult <= VF_MAX_DIM / c)
            return vfi_onnx_add_ramp(L, 0, (vf_onnx_ramp){r->mult * c, -1});
    }
    if (r->base < 0 && kind == VF_BIN_ADD && !vfi_onnx_ramp_input(L, other)) {
        int k;
        vf_status rc = need_input(L, other, &k);
        if (rc < 0)
            return rc;
        const vf_value *kv = vfi_onnx_value(L, k);
        if (kv->is_batched && kv->dtype == VF_DTYPE_I64 && kv->rank == 1 &&
            vfi_value_batch_first(kv))
            return vfi_onnx_add_ramp(L, 0, (vf_onnx_ramp){r->mult, k});
    }
    return FAIL(L, VF_ERR_UNSUPPORTED,
                "arithmetic on the numbers of the images (a Range over the batch size) other "
                "than i x rows + k[i] of int64 [N]");
}

/* Gather of rows i x m + k[i] from x [m x N, ...], m rows an image: image i's row k[i]. */
vf_status vfi_onnx_take(vfi_onnx_loader *L)
{
    const vf_onnx_ramp *r = vfi_onnx_ramp_input(L, 1);
    int x;
    vf_status rc = need_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    int axis;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 0), xv->rank, &axis);
    if (rc < 0)
        return rc;
    if (r->base < 0 || axis != 0 || !xv->is_batched || xv->batch_axis != 0 ||
        xv->batch_outer != 1 || xv->dims[0] != r->mult)
        return FAIL(L, VF_ERR_UNSUPPORTED,
                    "a gather by the numbers of the images that is not each image's own row "
                    "(rows i x %lld + k[i] of '%s')",
                    (long long)r->mult, xv->name);
    int in[2] = {x, r->base};
    int take_axis = 0;
    return vfi_onnx_add_node(L, VF_OP_TAKE, in, 2, &take_axis, 0);
}
