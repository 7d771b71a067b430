/*
 * onnx_math.c - loading the ONNX operators that compute elementwise or along one axis:
 * activations (Relu, LeakyRelu, PRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Clip), arithmetic
 * (Add, Sub, Mul, Div, Sum of two; folded when both operands are constants), Softmax, LRN and
 * ReduceMean. Handlers of onnx.c's table, on onnx_handlers.h's API.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/onnx_handlers.h"

static vf_status act_node(vfi_onnx_loader *L, vf_act_kind kind, float alpha, float beta)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    vf_act a = {kind, alpha, beta};
    return vfi_onnx_add_node(L, VF_OP_ACT, &x, 1, &a, 0);
}

vf_status vfi_onnx_clip(vfi_onnx_loader *L)
{
    float lo = -FLT_MAX, hi = FLT_MAX;
    if (vfi_onnx_opset(L) < 11) {
        lo = vfi_onnx_attr_float(L, "min", lo);
        hi = vfi_onnx_attr_float(L, "max", hi);
    } else {
        for (size_t i = 1; i < 3; i++) {
            int idx;
            vf_status rc = vfi_onnx_input(L, i, &idx);
            if (rc < 0)
                return rc;
            if (idx < 0)
                continue;
            const vf_value *v = vfi_onnx_value(L, idx);
            if (!v->data || v->dtype != VF_DTYPE_F32 || vfi_value_numel(v) != 1)
                return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "min/max must be constant scalars");
            *(i == 1 ? &lo : &hi) = *(const float *)v->data;
        }
    }
    if (lo == 0.0f && hi == FLT_MAX)
        return act_node(L, VF_ACT_RELU, 0.0f, 0.0f);
    return act_node(L, VF_ACT_CLIP, lo, hi);
}

vf_status vfi_onnx_relu(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_RELU, 0.0f, 0.0f);
}

vf_status vfi_onnx_leaky_relu(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_RELU, vfi_onnx_attr_float(L, "alpha", 0.01f), 0.0f);
}

/* PRelu: x where x >= 0, else x times its slope (a constant broadcast to x: one per channel, as
 * PyTorch's nn.PReLU exports it [C, 1, 1]); one slope for all is LeakyRelu. */
vf_status vfi_onnx_prelu(vfi_onnx_loader *L)
{
    int in[2];
    vf_status rc = vfi_onnx_input(L, 0, &in[0]);
    if (rc >= 0)
        rc = vfi_onnx_input(L, 1, &in[1]);
    if (rc < 0)
        return rc;
    if (in[0] < 0 || in[1] < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    const vf_value *x = vfi_onnx_value(L, in[0]), *slope = vfi_onnx_value(L, in[1]);
    if (!slope->data || slope->dtype != VF_DTYPE_F32)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "a slope that is not a float constant");
    if (slope->rank > x->rank)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "a slope of rank %d for an input of rank %d",
                             slope->rank, x->rank);
    for (int i = 0; i < slope->rank; i++) {
        int64_t d = slope->dims[i], want = x->dims[x->rank - slope->rank + i];
        if (d != 1 && d != want)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "the slope does not broadcast to the input");
    }
    if (vfi_value_numel(slope) == 1) {
        vf_act a = {VF_ACT_RELU, *(const float *)slope->data, 0.0f};
        return vfi_onnx_add_node(L, VF_OP_ACT, &in[0], 1, &a, 0);
    }
    return vfi_onnx_add_node(L, VF_OP_PRELU, in, 2, NULL, 0);
}

vf_status vfi_onnx_sigmoid(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_SIGMOID, 0.0f, 0.0f);
}

vf_status vfi_onnx_tanh(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_TANH, 0.0f, 0.0f);
}

vf_status vfi_onnx_hard_sigmoid(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_HARD_SIGMOID, vfi_onnx_attr_float(L, "alpha", 0.2f),
                    vfi_onnx_attr_float(L, "beta", 0.5f));
}

vf_status vfi_onnx_hard_swish(vfi_onnx_loader *L)
{
    return act_node(L, VF_ACT_HARD_SWISH, 0.0f, 0.0f);
}

static vf_status binary_node(vfi_onnx_loader *L, int op)
{
    if (vfi_onnx_ramp_input(L, 0) || vfi_onnx_ramp_input(L, 1))
        return vfi_onnx_ramp_binary(L, op == 'a'   ? VF_BIN_ADD
                                       : op == 's' ? VF_BIN_SUB
                                       : op == 'm' ? VF_BIN_MUL
                                                   : VF_BIN_DIV);
    int a, b;
    vf_status rc = vfi_onnx_input(L, 0, &a);
    if (rc >= 0)
        rc = vfi_onnx_input(L, 1, &b);
    if (rc < 0)
        return rc;
    if (a < 0 || b < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    if (vfi_onnx_value(L, a)->data && vfi_onnx_value(L, b)->data)
        return vfi_onnx_fold_binary(L, vfi_onnx_value(L, a), vfi_onnx_value(L, b), op);
    static const vf_binary_kind kinds[128] = {
        ['a'] = VF_BIN_ADD, ['s'] = VF_BIN_SUB, ['m'] = VF_BIN_MUL, ['d'] = VF_BIN_DIV};
    vf_binary_kind kind = kinds[op];
    if (vfi_onnx_value(L, a)->data) {
        /* c - x and 1 / x of a scalar c: elementwise functions of x */
        const vf_value *av = vfi_onnx_value(L, a);
        float c =
            av->dtype == VF_DTYPE_F32 && vfi_value_numel(av) == 1 ? *(const float *)av->data : NAN;
        vf_act act = {kind == VF_BIN_SUB ? VF_ACT_LINEAR : VF_ACT_RECIPROCAL, -1.0f, c};
        if ((kind == VF_BIN_SUB && !isnan(c)) || (kind == VF_BIN_DIV && c == 1.0f))
            return vfi_onnx_add_node(L, VF_OP_ACT, &b, 1, &act, 0);
        if (kind == VF_BIN_SUB || kind == VF_BIN_DIV)
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "a constant first operand");
        int t = a;
        a = b;
        b = t;
    }
    int in[2] = {a, b};
    return vfi_onnx_add_node(L, VF_OP_BINARY, in, 2, &kind, 0);
}

vf_status vfi_onnx_add(vfi_onnx_loader *L)
{
    if (!strcmp(vfi_onnx_op_type(L), "Sum") && vfi_onnx_n_inputs(L) != 2)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "Sum of %zu inputs", vfi_onnx_n_inputs(L));
    return binary_node(L, 'a');
}

vf_status vfi_onnx_sub(vfi_onnx_loader *L)
{
    return binary_node(L, 's');
}

vf_status vfi_onnx_mul(vfi_onnx_loader *L)
{
    return binary_node(L, 'm');
}

vf_status vfi_onnx_div(vfi_onnx_loader *L)
{
    return binary_node(L, 'd');
}

vf_status vfi_onnx_softmax(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    int rank = vfi_onnx_value(L, x)->rank, axis;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", vfi_onnx_opset(L) < 13 ? 1 : -1), rank,
                       &axis);
    if (rc < 0)
        return rc;
    if (vfi_onnx_opset(L) < 13 && axis != rank - 1)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "opset < 13 softmax over several axes");
    return vfi_onnx_add_node(L, VF_OP_SOFTMAX, &x, 1, &axis, 0);
}

vf_status vfi_onnx_lrn(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t size = vfi_onnx_attr_int(L, "size", 0);
    if (size < 1 || size > 1024)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid size");
    vf_lrn_params p = {(int)size, vfi_onnx_attr_float(L, "alpha", 1e-4f),
                       vfi_onnx_attr_float(L, "beta", 0.75f), vfi_onnx_attr_float(L, "bias", 1.0f)};
    return vfi_onnx_add_node(L, VF_OP_LRN, &x, 1, &p, 0);
}

vf_status vfi_onnx_reduce_mean(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t axes[VF_MAX_DIMS];
    int n;
    if (vfi_onnx_opset(L) >= 18) {
        n = 0;
        if (vfi_onnx_has_input(L, 1)) {
            rc = vfi_onnx_const_ints(L, 1, axes, VF_MAX_DIMS, &n);
            if (rc < 0)
                return rc;
        }
    } else {
        n = vfi_onnx_attr_ints(L, "axes", axes, VF_MAX_DIMS);
        if (n == -2)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "too many axes");
    }
    int rank = vfi_onnx_value(L, x)->rank;
    vf_node tmp;
    tmp.p.reduce.axes = 0;
    tmp.p.reduce.keepdims = vfi_onnx_attr_int(L, "keepdims", 1) != 0;
    if (n <= 0)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                             "reducing over every axis (including the batch)");
    for (int i = 0; i < n; i++) {
        int a = 0;
        rc = vfi_onnx_axis(L, axes[i], rank, &a);
        if (rc < 0)
            return rc;
        tmp.p.reduce.axes |= 1u << a;
    }
    return vfi_onnx_add_node(L, VF_OP_REDUCE_MEAN, &x, 1, &tmp.p.reduce, 0);
}
