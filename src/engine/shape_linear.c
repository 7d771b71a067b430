/*
 * shape_linear.c - shape rules of the linear operators: Gemm (a fully connected layer over
 * [N, K]), MatMul (with what the passes fuse into it) and LayerNormalization.
 */
#include <string.h>

#include "engine/shape.h"

vf_status vfi_shape_fc(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    if (n->n_inputs < 2 || n->n_inputs > 3)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': Gemm needs 2 or 3 inputs", n->name);
    const vf_value *w = &g->values[n->inputs[1]];
    if (x->rank != 2 || x->batch_axis != 0)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': Gemm input must be 2-D [N, K], the batch in N", n->name);
    if (!w->data || w->rank != 2 || w->dims[1] != x->dims[1])
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': weights do not match input width %lld", n->name,
                         (long long)x->dims[1]);
    if (n->n_inputs == 3) {
        const vf_value *b = &g->values[n->inputs[2]];
        if (!b->data || vfi_value_numel(b) != w->dims[0])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': bias must be a constant of %lld values",
                             n->name, (long long)w->dims[0]);
    }
    y->rank = 2;
    y->dims[0] = x->dims[0];
    y->dims[1] = w->dims[0];
    return VF_OK;
}

static vf_status infer_product(vf_graph *g, vf_node *n, vf_value *y, vf_err *err)
{
    const vf_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
    const vf_matmul_params *p = &n->p.matmul;
    if (n->n_inputs != 2 + (p->has_bias != 0) + (p->has_sum != 0))
        return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul inputs", n->name);
    int r = a->rank;
    if (r < 2 || b->rank < 2)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': MatMul of a vector", n->name);
    if (a->batch_axis >= r - 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': the batch in the reduced dimension",
                         n->name);
    if (a->dims[r - 1] != b->dims[b->rank - 2])
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': inner dimensions %lld and %lld differ", n->name,
                         (long long)a->dims[r - 1], (long long)b->dims[b->rank - 2]);
    memcpy(y->dims, a->dims, sizeof(y->dims));
    y->rank = r;
    y->dims[r - 1] = b->dims[b->rank - 1];
    vfi_same_batch(y, a);
    if (!b->is_batched) {
        /* a constant [..., K, N]: its leading dimensions are a's last ones, the batch before */
        int lead = b->rank - 2;
        if (b->rank > r || (lead > 0 && a->batch_axis >= r - 2 - lead))
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': a constant second operand of rank %d whose leading "
                             "dimensions are not the first operand's last ones",
                             n->name, b->rank);
        for (int i = 0; i < lead; i++) {
            if (b->dims[i] != a->dims[r - 2 - lead + i])
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': leading dimension %d differs", n->name,
                                 r - 2 - lead + i);
        }
        return VF_OK;
    }
    /* two activations: the same leading dimensions, the batch among them in the same way */
    if (b->rank != r || b->batch_axis != a->batch_axis || b->batch_outer != a->batch_outer ||
        a->batch_axis >= r - 2)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': MatMul of activations needs the batch in the same leading "
                         "dimension of both",
                         n->name);
    for (int i = 0; i < r - 2; i++) {
        if (a->dims[i] != b->dims[i])
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': leading dimension %d differs", n->name,
                             i);
    }
    return VF_OK;
}

/* The product, then what the passes fused into it: a bias of N values, a sum of y's shape. */
vf_status vfi_shape_matmul(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)x;
    vf_status rc = infer_product(g, n, y, err);
    if (rc < 0)
        return rc;
    const vf_matmul_params *p = &n->p.matmul;
    int k = 2;
    if (p->has_bias) {
        const vf_value *bias = &g->values[n->inputs[k++]];
        if (!bias->data || vfi_value_numel(bias) != y->dims[y->rank - 1])
            return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul bias", n->name);
    }
    if (p->has_sum) {
        const vf_value *sum = &g->values[n->inputs[k]];
        if (!sum->is_batched || sum->rank != y->rank || sum->batch_axis != y->batch_axis ||
            sum->batch_outer != y->batch_outer ||
            memcmp(sum->dims, y->dims, (size_t)y->rank * sizeof(y->dims[0])))
            return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul sum", n->name);
    }
    return VF_OK;
}

vf_status vfi_shape_layernorm(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    int axis = n->p.layernorm.axis;
    if (n->n_inputs < 2 || n->n_inputs > 3)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': LayerNormalization needs 2 or 3 inputs",
                         n->name);
    if (axis <= x->batch_axis || axis >= x->rank)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': normalising over axis %d of %s", n->name,
                         axis, x->name);
    int64_t count = 1;
    for (int d = axis; d < x->rank; d++)
        count *= x->dims[d];
    for (int i = 1; i < n->n_inputs; i++) {
        const vf_value *c = &g->values[n->inputs[i]];
        if (!c->data || vfi_value_numel(c) != count)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': %s must be a constant of %lld values",
                             n->name, i == 1 ? "scale" : "bias", (long long)count);
    }
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof(y->dims));
    vfi_same_batch(y, x);
    return VF_OK;
}