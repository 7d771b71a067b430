/*
 * onnx_fold.c - shape arithmetic and constant subgraphs evaluated at load (the loader's folds):
 * Reshape, elementwise arithmetic with numpy broadcasting, Gather, Concat and Transpose of
 * constants, computed here into new constants, with the batch size kept symbolic in int64 shape
 * arithmetic (vfi_dim_batch). Through the loader's interface (onnx_handlers.h); onnx.c's handlers
 * call these when every input is a constant.
 */
#include <string.h>

#include "core/mem.h"
#include "engine/onnx_handlers.h"

/* Storage for n elements of dtype (at least one), or NULL. */
static void *elems(int64_t n, vf_dtype dtype)
{
    return vfi_mallocarray((size_t)(n > 0 ? n : 1), vfi_dtype_size(dtype));
}

/* Row-major strides of dims. */
void vfi_onnx_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* A new constant with the same data as src but other dims (Reshape/Squeeze/... of constants). */
vf_status vfi_onnx_fold_reshape(vfi_onnx_loader *L, const vf_value *src, int rank,
                                const int64_t *dims)
{
    if (vfi_dims_numel(rank, dims) != vfi_value_numel(src))
        return vfi_onnx_fail(L, VF_ERR_MODEL, "reshape changes the element count");
    size_t bytes = (size_t)vfi_value_numel(src) * vfi_dtype_size(src->dtype);
    void *data = elems(vfi_value_numel(src), src->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    memcpy(data, src->data, bytes);
    return vfi_onnx_add_const(L, 0, src->dtype, rank, dims, data);
}

/* Integer arithmetic of shape computations, where an element may stand for a multiple of the
 * batch size (vfi_dim_batch): such an element may be multiplied or divided by a number (heads x
 * batch, batch x tokens / tokens) and have 0 added; anything else on it is refused (*bad = 1).
 * Division by zero sets *bad = 2, a result beyond int64 (a crafted constant) *bad = 3. */
static int64_t fold_i64(int op, int64_t a, int64_t b, int *bad)
{
    int64_t ma = vfi_dim_batch_multiple(a), mb = vfi_dim_batch_multiple(b);
    if (ma || mb) {
        int64_t m = ma ? ma : mb, other = ma ? b : a;
        if (ma && mb)
            *bad = 1;
        else if (op == 'm' && other >= 1 && m <= VF_MAX_DIM / other)
            return vfi_dim_batch(m * other);
        else if (op == 'd' && ma && other >= 1 && m % other == 0)
            return vfi_dim_batch(m / other);
        else if ((op == 'a' && other == 0) || (op == 's' && ma && other == 0))
            return ma ? a : b;
        else
            *bad = 1;
        return 0;
    }
    int64_t r = 0;
    int over;
    switch (op) {
    case 'a':
        over = __builtin_add_overflow(a, b, &r);
        break;
    case 's':
        over = __builtin_sub_overflow(a, b, &r);
        break;
    case 'm':
        over = __builtin_mul_overflow(a, b, &r);
        break;
    default:
        if (b == 0) {
            *bad = 2;
            return 0;
        }
        over = a == INT64_MIN && b == -1;
        r = over ? 0 : a / b;
        break;
    }
    if (over)
        *bad = 3;
    return r;
}

/* Elementwise arithmetic on two constants with numpy broadcasting. op: 'a', 's', 'm', 'd'. */
vf_status vfi_onnx_fold_binary(vfi_onnx_loader *L, const vf_value *a, const vf_value *b, int op)
{
    if (a->dtype != b->dtype)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "operands of different types");
    int rank = a->rank > b->rank ? a->rank : b->rank;
    int64_t dims[VF_MAX_DIMS], sa[VF_MAX_DIMS], sb[VF_MAX_DIMS];
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "shapes do not broadcast");
        dims[i] = da > db ? da : db;
    }
    vfi_dims_broadcast_strides(rank, a->rank, a->dims, sa);
    vfi_dims_broadcast_strides(rank, b->rank, b->dims, sb);
    int64_t n = vfi_dims_numel(rank, dims);
    void *data = elems(n, a->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    int64_t idx[VF_MAX_DIMS] = {0};
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < rank; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        if (a->dtype == VF_DTYPE_F32) {
            float x = ((const float *)a->data)[oa], y = ((const float *)b->data)[ob];
            ((float *)data)[k] = op == 'a' ? x + y : op == 's' ? x - y : op == 'm' ? x * y : x / y;
        } else {
            ((int64_t *)data)[k] =
                fold_i64(op, ((const int64_t *)a->data)[oa], ((const int64_t *)b->data)[ob], &bad);
        }
        vfi_dims_next(rank, dims, idx);
    }
    if (bad) {
        vfi_free(data);
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "%s",
                             bad == 1   ? "shape arithmetic on the batch size"
                             : bad == 2 ? "integer division by zero"
                                        : "integer arithmetic beyond 64 bits");
    }
    return vfi_onnx_add_const(L, 0, a->dtype, rank, dims, data);
}

/* Gather along `axis` of a constant with constant indices. */
vf_status vfi_onnx_fold_gather(vfi_onnx_loader *L, const vf_value *d, const vf_value *ind, int axis)
{
    int64_t n_ind = vfi_value_numel(ind);
    const int64_t *ix = ind->data;
    int rank = d->rank - 1 + ind->rank;
    if (rank > VF_MAX_DIMS)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "gather result rank %d", rank);
    int64_t dims[VF_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < axis; i++)
        dims[r++] = d->dims[i];
    for (int i = 0; i < ind->rank; i++)
        dims[r++] = ind->dims[i];
    for (int i = axis + 1; i < d->rank; i++)
        dims[r++] = d->dims[i];
    int64_t outer = vfi_dims_numel(axis, d->dims),
            inner = vfi_dims_numel(d->rank - axis - 1, d->dims + axis + 1);
    int64_t len = d->dims[axis];
    size_t es = vfi_dtype_size(d->dtype);
    uint8_t *data = elems(outer * n_ind * inner, d->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < n_ind; j++) {
            int64_t k = ix[j] < 0 ? ix[j] + len : ix[j];
            if (k < 0 || k >= len) {
                vfi_free(data);
                return vfi_onnx_fail(L, VF_ERR_MODEL, "gather index %lld out of range",
                                     (long long)ix[j]);
            }
            memcpy(data + ((o * n_ind + j) * inner) * es,
                   (const uint8_t *)d->data + ((o * len + k) * inner) * es, (size_t)inner * es);
        }
    }
    return vfi_onnx_add_const(L, 0, d->dtype, rank, dims, data);
}

vf_status vfi_onnx_fold_concat(vfi_onnx_loader *L, int axis, int rank)
{
    size_t n_in = vfi_onnx_n_inputs(L);
    int64_t dims[VF_MAX_DIMS];
    const vf_value *first = NULL;
    int64_t total = 0;
    if (n_in < 1)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "concat without inputs");
    for (size_t i = 0; i < n_in; i++) {
        int idx;
        vf_status rc = vfi_onnx_input(L, i, &idx);
        if (rc < 0)
            return rc;
        if (idx < 0)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "concat input %zu is missing", i);
        const vf_value *v = vfi_onnx_value(L, idx);
        if (!first)
            first = v;
        if (v->rank != rank || v->dtype != first->dtype)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "concat inputs differ in rank or type");
        for (int d = 0; d < rank; d++) {
            if (d != axis && v->dims[d] != first->dims[d])
                return vfi_onnx_fail(L, VF_ERR_MODEL, "concat inputs differ in dim %d", d);
        }
        total += v->dims[axis];
    }
    if (!first)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "concat without inputs");
    memcpy(dims, first->dims, sizeof(dims));
    dims[axis] = total;
    if (total > VF_MAX_DIM)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "concat too large");
    size_t es = vfi_dtype_size(first->dtype);
    int64_t outer = vfi_dims_numel(axis, dims),
            inner = vfi_dims_numel(rank - axis - 1, dims + axis + 1);
    uint8_t *data = elems(vfi_dims_numel(rank, dims), first->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    int64_t at = 0;
    for (size_t i = 0; i < n_in; i++) {
        int idx;
        vfi_onnx_input(L, i, &idx);
        const vf_value *v = vfi_onnx_value(L, idx);
        int64_t chunk = v->dims[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(data + (o * total * inner + at) * es, (const uint8_t *)v->data + o * chunk * es,
                   (size_t)chunk * es);
        at += chunk;
    }
    return vfi_onnx_add_const(L, 0, first->dtype, rank, dims, data);
}

vf_status vfi_onnx_fold_transpose(vfi_onnx_loader *L, const vf_value *x, const int *perm)
{
    int64_t dims[VF_MAX_DIMS], src_strides[VF_MAX_DIMS], st[VF_MAX_DIMS];
    vfi_onnx_strides(x->rank, x->dims, src_strides);
    for (int i = 0; i < x->rank; i++) {
        dims[i] = x->dims[perm[i]];
        st[i] = src_strides[perm[i]];
    }
    int64_t n = vfi_value_numel(x);
    size_t es = vfi_dtype_size(x->dtype);
    uint8_t *data = elems(n, x->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    int64_t idx[VF_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int i = 0; i < x->rank; i++)
            off += idx[i] * st[i];
        memcpy(data + k * es, (const uint8_t *)x->data + off * es, es);
        vfi_dims_next(x->rank, dims, idx);
    }
    return vfi_onnx_add_const(L, 0, x->dtype, x->rank, dims, data);
}
