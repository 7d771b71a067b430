/*
 * ids_ops.c - a text tower's operators over token ids, as loops (ids_ops.h).
 */
#include "engine/ids_ops.h"

#include <string.h>

void vfi_ids_split(const vf_graph *g, const vf_node *nd, int64_t n, int64_t *outer, int64_t *len,
                   int64_t *inner)
{
    const vf_value *x = &g->values[nd->inputs[0]];
    int64_t dims[VF_MAX_DIMS];
    int axis = nd->op == VF_OP_ARGMAX ? nd->p.argmax.axis : nd->p.axis;
    if (nd->op == VF_OP_ARGMAX) {
        vfi_value_dims_at(x, n, dims); /* the whole batch: its axis is not the batch's */
        *outer = vfi_dims_numel(axis, dims);
    } else { /* one image's part: the batch outermost, its rows along axis 0 or within */
        memcpy(dims, x->dims, sizeof(dims));
        *outer = axis ? vfi_dims_numel(axis - 1, dims + 1) : 1;
    }
    *len = dims[axis];
    *inner = vfi_dims_numel(x->rank - axis - 1, dims + axis + 1);
}

vf_status vfi_ids_lookup(const vf_node *nd, const int64_t *ids, int64_t count, int64_t valid,
                         const float *table, int64_t rows, int64_t row, float *out, vf_err *err)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t id = ids[i] < 0 ? ids[i] + rows : ids[i];
        if ((id < 0 || id >= rows) && i < valid)
            return vfi_fail(err, VF_ERR_INVALID, "node '%s': token id %lld outside the %lld rows",
                            nd->name, (long long)ids[i], (long long)rows);
        if (id < 0 || id >= rows)
            id = 0;
        memcpy(out + i * row, table + id * row, (size_t)row * sizeof(float));
    }
    return VF_OK;
}

void vfi_ids_argmax(const void *x, int x_i64, int64_t outer, int64_t len, int64_t inner,
                    int64_t *out)
{
    const int64_t *xi = x;
    const float *xf = x;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            int64_t best = 0, at = o * len * inner + j;
            for (int64_t k = 1; k < len; k++) {
                int64_t a = at + k * inner, b = at + best * inner;
                if (x_i64 ? xi[a] > xi[b] : xf[a] > xf[b])
                    best = k;
            }
            out[o * inner + j] = best;
        }
    }
}

vf_status vfi_ids_take(const vf_node *nd, const float *x, const int64_t *k, int n, int valid,
                       int64_t outer, int64_t len, int64_t inner, float *y, vf_err *err)
{
    for (int i = 0; i < n; i++) {
        int64_t ki = k[i];
        if ((ki < 0 || ki >= len) && i < valid)
            return vfi_fail(err, VF_ERR_INVALID, "node '%s': index %lld outside the %lld rows",
                            nd->name, (long long)ki, (long long)len);
        if (ki < 0 || ki >= len)
            ki = 0;
        const float *xi = x + (int64_t)i * outer * len * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + ((int64_t)i * outer + o) * inner, xi + (o * len + ki) * inner,
                   (size_t)inner * sizeof(float));
    }
    return VF_OK;
}
