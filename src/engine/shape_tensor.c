/*
 * shape_tensor.c - shape rules of the operators that keep, broadcast or move elements:
 * activations and Softmax, the binary operators, Concat, ReduceMean, Transpose, Reshape,
 * Gather, Slice and Expand.
 */
#include <string.h>

#include "engine/shape.h"

vf_status vfi_shape_act(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g, (void)n, (void)err;
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof(y->dims));
    return VF_OK;
}

vf_status vfi_shape_softmax(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    vfi_shape_act(g, n, x, y, err);
    if (n->p.axis < 0 || n->p.axis >= x->rank || n->p.axis == x->batch_axis)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': softmax axis %d", n->name, n->p.axis);
    return VF_OK;
}

/* Numpy broadcasting of a and b (either may be a constant) into y, keeping the batch where the
 * batched operand has it: a constant must have 1 (or nothing) over the batch's dimension, and
 * two activations must hold the batch in the same dimension in the same way. */
static vf_status infer_broadcast(const vf_value *a, const vf_value *b, vf_value *y,
                                 const vf_node *n, vf_err *err)
{
    if (!a->is_batched && !b->is_batched)
        return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': %s of two constants", n->name, "Binary");
    y->rank = a->rank >= b->rank ? a->rank : b->rank;
    for (int i = 0; i < y->rank; i++) {
        int ia = i - (y->rank - a->rank), ib = i - (y->rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return NODE_FAIL(VF_ERR_MODEL,
                             "node '%s': shapes do not broadcast (dim %d: %lld vs "
                             "%lld)",
                             n->name, i, (long long)da, (long long)db);
        y->dims[i] = da > db ? da : db;
    }
    const vf_value *act = a->is_batched ? a : b, *other = a->is_batched ? b : a;
    int ba = vfi_aligned(act, y->rank, act->batch_axis);
    y->batch_axis = ba;
    y->batch_outer = act->batch_outer;
    if (y->dims[ba] != act->dims[act->batch_axis])
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': '%s' broadcasts over the batch's dimension %d of '%s'",
                         n->name, other->name, ba, act->name);
    int io = ba - (y->rank - other->rank);
    if (other->is_batched) {
        if (io != other->batch_axis || other->batch_outer != act->batch_outer)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': '%s' and '%s' hold the batch in different dimensions",
                             n->name, a->name, b->name);
    } else if (io >= 0 && other->dims[io] != 1) {
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': constant '%s' varies along the batch's dimension %d", n->name,
                         other->name, ba);
    }
    return VF_OK;
}
vf_status vfi_shape_binary(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)x;
    if (n->n_inputs != 2)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': binary op needs 2 inputs", n->name);
    const vf_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
    vf_status rc = infer_broadcast(a, b, y, n, err);
    if (rc < 0)
        return rc;
    if (a->is_batched && b->is_batched && a->rank != b->rank)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': broadcasting between activations of "
                         "rank %d and %d",
                         n->name, a->rank, b->rank);
    const vf_value *act = a->is_batched ? a : b;
    if (act->rank != y->rank)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': a constant of higher rank than the "
                         "activation",
                         n->name);
    return VF_OK;
}

vf_status vfi_shape_concat(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    int axis = n->p.axis;
    if (axis < 0 || axis >= x->rank || axis == x->batch_axis)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': concat axis %d", n->name, axis);
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof(y->dims));
    y->dims[axis] = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const vf_value *v = &g->values[n->inputs[i]];
        if (!v->is_batched || v->rank != x->rank || v->batch_axis != x->batch_axis ||
            v->batch_outer != x->batch_outer)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': concat of '%s' (a constant, another rank or the "
                             "batch elsewhere)",
                             n->name, v->name);
        for (int d = 0; d < x->rank; d++) {
            if (d != axis && v->dims[d] != x->dims[d])
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': concat inputs differ in dim %d", n->name,
                                 d);
        }
        y->dims[axis] += v->dims[axis];
    }
    if (y->dims[axis] > VF_MAX_DIM)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': concat too large", n->name);
    return VF_OK;
}

vf_status vfi_shape_reduce(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    uint32_t axes = n->p.reduce.axes;
    if (axes & (1u << x->batch_axis))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': reducing over the batch", n->name);
    if (!axes || axes >> x->rank)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': reduce axes out of range", n->name);
    vfi_shape_drop_axes(x, y, axes, n->p.reduce.keepdims);
    return VF_OK;
}

vf_status vfi_shape_transpose(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    uint32_t seen = 0;
    for (int d = 0; d < x->rank; d++) {
        int s = n->p.perm[d];
        if (s < 0 || s >= x->rank || (seen & (1u << s)))
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': invalid perm", n->name);
        seen |= 1u << s;
        y->dims[d] = x->dims[s];
        if (s == x->batch_axis)
            y->batch_axis = d;
    }
    y->rank = x->rank;
    return VF_OK;
}

vf_status vfi_shape_reshape(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    /* The target was stored into y by vfi_graph_add_node; check that the images stay where
     * they are: as many entries before them and as many per image. */
    if (y->rank < 1 || y->rank > VF_MAX_DIMS || y->batch_axis < 0 || y->batch_axis >= y->rank)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': reshape to rank %d", n->name, y->rank);
    vf_status rc = vfi_dims_check(y->rank, y->dims, y->name, err);
    if (rc < 0)
        return rc;
    if (vfi_value_sample_numel(y) != vfi_value_sample_numel(x))
        return NODE_FAIL(VF_ERR_MODEL,
                         "node '%s': reshape changes the element count per "
                         "image (%lld -> %lld)",
                         n->name, (long long)vfi_value_sample_numel(x),
                         (long long)vfi_value_sample_numel(y));
    if (y->batch_outer < 1 || y->dims[y->batch_axis] % y->batch_outer ||
        vfi_value_outer_entries(y) != vfi_value_outer_entries(x))
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': reshape mixes the batch into other "
                         "dimensions",
                         n->name);
    return VF_OK;
}

vf_status vfi_shape_gather(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    vf_gather_params *p = &n->p.gather;
    if (p->axis < 0 || p->axis >= x->rank || p->axis == x->batch_axis)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': gather along axis %d", n->name, p->axis);
    if (p->n_indices < 1 || (p->scalar && p->n_indices != 1))
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': gather indices", n->name);
    for (int i = 0; i < p->n_indices; i++) {
        if (p->indices[i] < 0 || p->indices[i] >= x->dims[p->axis])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': gather index out of range", n->name);
    }
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d == x->batch_axis)
            y->batch_axis = y->rank;
        if (d != p->axis)
            y->dims[y->rank++] = x->dims[d];
        else if (!p->scalar)
            y->dims[y->rank++] = p->n_indices;
    }
    return VF_OK;
}

vf_status vfi_shape_slice(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    const vf_slice_params *p = &n->p.slice;
    y->rank = x->rank;
    vfi_same_batch(y, x);
    for (int d = 0; d < x->rank; d++) {
        int64_t len = x->dims[d], c = p->count[d], s = p->start[d], st = p->step[d];
        if (d == x->batch_axis && (s != 0 || st != 1 || c != len))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': slicing the batch's dimension %d",
                             n->name, d);
        if (c < 0 || c > len || st == 0 || st > VF_MAX_DIM || st < -VF_MAX_DIM ||
            (c > 0 && (s < 0 || s >= len || s + (c - 1) * st < 0 || s + (c - 1) * st >= len)))
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': slice out of range in dimension %d", n->name,
                             d);
        y->dims[d] = c;
    }
    return VF_OK;
}

vf_status vfi_shape_expand(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    /* y's shape was set from the target; x broadcasts to it */
    if (y->rank < x->rank || y->batch_axis < 0 || y->batch_axis >= y->rank || y->batch_outer < 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': expand to a lower rank", n->name);
    for (int i = 0; i < x->rank; i++) {
        int j = vfi_aligned(x, y->rank, i);
        if (x->dims[i] != 1 && x->dims[i] != y->dims[j])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': dim %d of size %lld does not expand to %lld",
                             n->name, i, (long long)x->dims[i], (long long)y->dims[j]);
    }
    int ix = y->batch_axis - (y->rank - x->rank);
    if (x->is_batched && (ix != x->batch_axis || x->dims[ix] != y->dims[y->batch_axis] ||
                          x->batch_outer != y->batch_outer))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': expanding over the batch of '%s'", n->name,
                         x->name);
    if (!x->is_batched && ix >= 0 && x->dims[ix] != 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': constant '%s' varies along the batch's dimension", n->name,
                         x->name);
    return VF_OK;
}
