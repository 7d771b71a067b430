/*
 * tensor.c - a value's shape arithmetic: element counts, the batch's place, row-major strides
 * and indices, the batch size's stand-ins in shape constants, limits, and a fused activation
 * on one float. Pure functions of their arguments, below everything else of the engine.
 */
#include <stddef.h>
#include <stdio.h>

#include "engine/graph.h"

size_t vfi_dtype_size(vf_dtype dtype)
{
    return dtype == VF_DTYPE_I64 ? 8 : 4;
}

int64_t vfi_value_numel(const vf_value *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= v->dims[i];
    return n;
}

int64_t vfi_value_sample_numel(const vf_value *v)
{
    return vfi_value_numel(v);
}

void vfi_value_dims_at(const vf_value *v, int64_t n, int64_t *out)
{
    for (int i = 0; i < v->rank; i++)
        out[i] = v->dims[i] * (v->is_batched && i == v->batch_axis ? n : 1);
}

int vfi_value_batch_first(const vf_value *v)
{
    return v->is_batched && v->batch_axis == 0 && v->rank > 0 && v->dims[0] == 1;
}

int64_t vfi_dims_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > 0 && n > INT64_MAX / dims[i])
            return INT64_MAX;
        n *= dims[i];
    }
    return n;
}

void vfi_dims_next(int rank, const int64_t *dims, int64_t *idx)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < dims[i])
            return;
        idx[i] = 0;
    }
}

void vfi_dims_broadcast_strides(int out_rank, int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = out_rank - 1; i >= 0; i--) {
        int j = i - (out_rank - rank);
        int64_t d = j >= 0 ? dims[j] : 1;
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

void vfi_dims_strides(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

void vfi_dims_split(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *len,
                    int64_t *inner)
{
    *outer = vfi_dims_numel(axis, dims);
    *len = dims[axis];
    *inner = vfi_dims_numel(rank - axis - 1, dims + axis + 1);
}

int64_t vfi_dims_offset(int rank, const int64_t *idx, const int64_t *st)
{
    int64_t off = 0;
    for (int i = 0; i < rank; i++)
        off += idx[i] * st[i];
    return off;
}

int64_t vfi_dim_batch(int64_t m)
{
    return VF_DIM_BATCH + (m - 1);
}

int64_t vfi_dim_batch_multiple(int64_t v)
{
    return v >= VF_DIM_BATCH && v < VF_DIM_BATCH + VF_MAX_DIM ? v - VF_DIM_BATCH + 1 : 0;
}

const char *vfi_value_shape_str(const vf_value *v, char *buf, size_t size)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < v->rank && len < size; i++) {
        const char *sep = i ? "," : "";
        if (v->is_batched && i == v->batch_axis && v->dims[i] == 1)
            len += (size_t)snprintf(buf + len, size - len, "%sN", sep);
        else if (v->is_batched && i == v->batch_axis)
            len += (size_t)snprintf(buf + len, size - len, "%sNx%lld", sep, (long long)v->dims[i]);
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%lld", sep, (long long)v->dims[i]);
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

int64_t vfi_value_outer_entries(const vf_value *v)
{
    int64_t n = v->batch_outer;
    for (int i = 0; i < v->batch_axis; i++)
        n *= v->dims[i];
    return n;
}

vf_status vfi_dims_check(int rank, const int64_t *dims, const char *name, vf_err *err)
{
    if (rank < 0 || rank > VF_MAX_DIMS)
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "tensor '%s' has rank %d (at most %d supported)",
                        name, rank, VF_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || dims[i] > VF_MAX_DIM)
            return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' has invalid dimension %lld", name,
                            (long long)dims[i]);
        if (dims[i] && n > VF_MAX_NUMEL / dims[i])
            return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' is too large", name);
        n *= dims[i];
    }
    return VF_OK;
}

/* Where each operator that applies an activation to its output keeps it. */
static const struct {
    vf_op op;
    size_t offset;
} act_slots[] = {
    {VF_OP_ACT, offsetof(vf_node, p.act)},           {VF_OP_CONV, offsetof(vf_node, p.conv.act)},
    {VF_OP_CONV3D, offsetof(vf_node, p.conv3d.act)}, {VF_OP_FC, offsetof(vf_node, p.fc.act)},
    {VF_OP_MATMUL, offsetof(vf_node, p.matmul.act)},
};

vf_act *vfi_node_act(vf_node *nd)
{
    for (size_t i = 0; i < sizeof(act_slots) / sizeof(act_slots[0]); i++)
        if (act_slots[i].op == nd->op)
            return (vf_act *)((char *)nd + act_slots[i].offset);
    return NULL;
}

const vf_act *vfi_node_act_const(const vf_node *nd)
{
    return vfi_node_act((vf_node *)nd);
}

float vfi_act_apply(const vf_act *act, float x)
{
    return vf_act_math((int)act->kind, act->alpha, act->beta, x);
}
