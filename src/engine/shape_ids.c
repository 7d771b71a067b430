/*
 * shape_ids.c - shape rules of a text tower's operators of token ids: Lookup (an embedding
 * table's rows by id), ArgMax and Take (each image's own row).
 */
#include <string.h>

#include "engine/shape.h"

vf_status vfi_shape_lookup(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    const vf_value *t = n->n_inputs == 2 ? &g->values[n->inputs[1]] : NULL;
    if (!t || !t->data || t->rank < 2 || x->rank + t->rank - 1 > VF_MAX_DIMS)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': a lookup needs a constant table [rows, ...] whose "
                         "rows fit the ids' dimensions",
                         n->name);
    y->rank = x->rank + t->rank - 1;
    memcpy(y->dims, x->dims, (size_t)x->rank * sizeof(int64_t));
    memcpy(y->dims + x->rank, t->dims + 1, (size_t)(t->rank - 1) * sizeof(int64_t));
    return VF_OK;
}

vf_status vfi_shape_argmax(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    const vf_argmax_params *p = &n->p.argmax;
    if (n->n_inputs != 1 || p->axis < 0 || p->axis >= x->rank || p->axis == x->batch_axis)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': argmax along axis %d", n->name, p->axis);
    y->dtype = VF_DTYPE_I64;
    vfi_shape_drop_axes(x, y, 1u << p->axis, p->keepdims);
    return VF_OK;
}

/* x holds each image's part contiguously; k is [N]. */
vf_status vfi_shape_take(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    const vf_value *k = n->n_inputs == 2 ? &g->values[n->inputs[1]] : NULL;
    int axis = n->p.axis;
    if (!k || k->rank != 1 || !vfi_value_batch_first(k))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': take needs one index [N] an image",
                         n->name);
    if (x->batch_axis != 0 || x->batch_outer != 1 || axis < 0 || axis >= x->rank ||
        (axis > 0 && x->dims[0] != 1))
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': take along axis %d of an input whose images are not "
                         "outermost",
                         n->name, axis);
    y->batch_axis = 0;
    y->batch_outer = 1;
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d == 0 && axis == 0)
            y->dims[y->rank++] = 1; /* the images stay, one row each */
        else if (d != axis)
            y->dims[y->rank++] = x->dims[d];
    }
    return VF_OK;
}
