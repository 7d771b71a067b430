/*
 * shape_image.c - shape rules of the operators over images [N, C, H, W]: Conv, Pool and LRN
 * (their input's batch is its dimension 0 alone: graph.c checks it), Pad, and Pool3D and
 * Conv3D over clips [N, C, T, H, W]. A window's
 * automatic padding and ceil mode are resolved here, against the input plane, into explicit
 * padding: backends read windows as explicit.
 */
#include <string.h>

#include "engine/shape.h"

/* One axis of a window: its kernel k, stride s and dilation d over an input of length in, the
 * padding before and after (*pb, *pe) resolved from auto_pad and grown at the end for ceil_mode;
 * the output's length into *out. */
static vf_status window_axis(int64_t in, int k, int s, int d, vf_auto_pad auto_pad, int ceil_mode,
                             int avg_include_pad, int *pb, int *pe, int64_t *out_len,
                             const vf_node *n, vf_err *err)
{
    if (k < 1 || s < 1 || d < 1 || k > VF_MAX_DIM || s > VF_MAX_DIM || d > VF_MAX_DIM)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': invalid kernel/stride/dilation", n->name);
    int64_t eff = (int64_t)(k - 1) * d + 1;
    if (auto_pad == VF_PAD_SAME_UPPER || auto_pad == VF_PAD_SAME_LOWER) {
        int64_t out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + eff - in;
        if (total < 0)
            total = 0;
        int64_t small = total / 2;
        *pb = (int)(auto_pad == VF_PAD_SAME_UPPER ? small : total - small);
        *pe = (int)(total - *pb);
    } else if (auto_pad == VF_PAD_VALID) {
        *pb = *pe = 0;
    }
    if (*pb < 0 || *pe < 0 || *pb >= eff || *pe >= eff)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': padding %d/%d not smaller than the "
                         "kernel extent %lld",
                         n->name, *pb, *pe, (long long)eff);
    int64_t span = in + *pb + *pe - eff;
    if (span < 0)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': kernel %lld larger than padded input %lld",
                         n->name, (long long)eff, (long long)(in + *pb + *pe));
    int64_t out = span / s + 1;
    if (ceil_mode) {
        int64_t out_c = (span + s - 1) / s + 1;
        if ((out_c - 1) * s >= in + *pb) /* last window must start inside */
            out_c--;
        if (out_c > out) {
            if (avg_include_pad)
                return NODE_FAIL(VF_ERR_UNSUPPORTED,
                                 "node '%s': ceil_mode with "
                                 "count_include_pad changes the output size",
                                 n->name);
            /* Grow the end padding so the floor formula gives the ceil size. */
            *pe += (int)((out_c - 1) * s + eff - (in + *pb + *pe));
            out = out_c;
        }
    }
    *out_len = out;
    return VF_OK;
}

/* Resolve a 2-D window's auto_pad / ceil_mode against the input plane and compute the output
 * plane size. Idempotent: once resolved, the window is explicit. */
static vf_status window_out(vf_window *w, int ceil_mode, int avg_include_pad, const int64_t *in_hw,
                            int64_t *out_hw, const vf_node *n, vf_err *err)
{
    for (int a = 0; a < 2; a++) {
        vf_status rc = window_axis(in_hw[a], w->kernel[a], w->stride[a], w->dilation[a],
                                   w->auto_pad, ceil_mode, avg_include_pad, &w->pads[a],
                                   &w->pads[a + 2], &out_hw[a], n, err);
        if (rc < 0)
            return rc;
    }
    w->auto_pad = VF_PAD_EXPLICIT;
    return VF_OK;
}

/* A convolution's weights [OC, IC / group, kernel...] against its input's channels, its group
 * and its kernel of n_axes, and its bias (input 2, optional) against OC. */
static vf_status check_weights(const vf_graph *g, const vf_node *n, const vf_value *x,
                               const vf_value *w, int group, const int *kernel, int n_axes,
                               vf_err *err)
{
    if (group < 1 || w->dims[0] % group || w->dims[1] * group != x->dims[1])
        return NODE_FAIL(VF_ERR_MODEL,
                         "node '%s': weights %lldx%lld do not fit %lld input "
                         "channels in %d groups",
                         n->name, (long long)w->dims[0], (long long)w->dims[1],
                         (long long)x->dims[1], group);
    for (int a = 0; a < n_axes; a++) {
        if (kernel[a] != w->dims[2 + a])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': kernel_shape does not match the weights",
                             n->name);
    }
    if (n->n_inputs == 3) {
        const vf_value *b = &g->values[n->inputs[2]];
        if (!b->data || vfi_value_numel(b) != w->dims[0])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': bias must be a constant of %lld values",
                             n->name, (long long)w->dims[0]);
    }
    return VF_OK;
}

vf_status vfi_shape_conv(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    vf_conv_params *p = &n->p.conv;
    if (n->n_inputs < 2 || n->n_inputs > 3)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': Conv needs 2 or 3 inputs", n->name);
    const vf_value *w = &g->values[n->inputs[1]];
    if (x->rank != 4)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': only 2-D convolution is supported "
                         "(input rank %d)",
                         n->name, x->rank);
    if (!w->data || w->rank != 4)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': weights must be a constant 4-D tensor",
                         n->name);
    vf_status rc = check_weights(g, n, x, w, p->group, p->win.kernel, 2, err);
    if (rc < 0)
        return rc;
    int64_t hw[2];
    rc = window_out(&p->win, 0, 0, &x->dims[2], hw, n, err);
    if (rc < 0)
        return rc;
    y->rank = 4;
    y->dims[0] = 1;
    y->dims[1] = w->dims[0];
    y->dims[2] = hw[0];
    y->dims[3] = hw[1];
    return VF_OK;
}

vf_status vfi_shape_pool(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    vf_pool_params *p = &n->p.pool;
    if (x->rank != 4)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': only 2-D pooling is supported", n->name);
    y->rank = 4;
    y->dims[0] = 1;
    y->dims[1] = x->dims[1];
    if (p->global) {
        y->dims[2] = y->dims[3] = 1;
        return VF_OK;
    }
    int64_t hw[2];
    vf_status rc = window_out(&p->win, p->ceil_mode, p->kind == VF_POOL_AVG && p->count_include_pad,
                              &x->dims[2], hw, n, err);
    if (rc < 0)
        return rc;
    p->ceil_mode = 0; /* folded into the end padding */
    if (p->kind == VF_POOL_AVG && (p->win.dilation[0] != 1 || p->win.dilation[1] != 1))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': dilated average pooling", n->name);
    y->dims[2] = hw[0];
    y->dims[3] = hw[1];
    return VF_OK;
}

vf_status vfi_shape_lrn(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    if (x->rank != 4 || n->p.lrn.size < 1 || n->p.lrn.size > 1024)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': LRN needs a 4-D input and a size "
                         "in 1..1024",
                         n->name);
    y->rank = 4;
    memcpy(y->dims, x->dims, sizeof(y->dims));
    return VF_OK;
}

vf_status vfi_shape_pad(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    vf_pad_params *p = &n->p.pad;
    y->rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        if (d == x->batch_axis && (p->begin[d] || p->end[d]))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': padding the batch dimension", n->name);
        if (p->begin[d] < 0 || p->end[d] < 0 || p->begin[d] > VF_MAX_DIM || p->end[d] > VF_MAX_DIM)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': negative or huge pads", n->name);
        y->dims[d] = x->dims[d] + p->begin[d] + p->end[d];
    }
    return vfi_dims_check(y->rank, y->dims, y->name, err);
}

vf_status vfi_shape_pool3d(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    (void)g;
    vf_pool3d_params *p = &n->p.pool3d;
    if (x->rank != 5)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': 3-D pooling of a %d-D input", n->name,
                         x->rank);
    y->rank = 5;
    y->dims[0] = 1;
    y->dims[1] = x->dims[1];
    for (int a = 0; a < 3; a++) {
        if (p->global) {
            y->dims[2 + a] = 1;
            continue;
        }
        vf_status rc =
            window_axis(x->dims[2 + a], p->kernel[a], p->stride[a], p->dilation[a], p->auto_pad,
                        p->ceil_mode, p->kind == VF_POOL_AVG && p->count_include_pad, &p->pads[a],
                        &p->pads[a + 3], &y->dims[2 + a], n, err);
        if (rc < 0)
            return rc;
        if (p->kind == VF_POOL_AVG && p->dilation[a] != 1)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': dilated average pooling", n->name);
    }
    p->auto_pad = VF_PAD_EXPLICIT;
    p->ceil_mode = 0; /* folded into the end padding */
    return VF_OK;
}

vf_status vfi_shape_conv3d(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    vf_conv3d_params *p = &n->p.conv3d;
    if (n->n_inputs < 2 || n->n_inputs > 3)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': Conv needs 2 or 3 inputs", n->name);
    const vf_value *w = &g->values[n->inputs[1]];
    if (x->rank != 5)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': 3-D convolution of a %d-D input", n->name,
                         x->rank);
    if (!w->data || w->rank != 5)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': weights must be a constant 5-D tensor",
                         n->name);
    vf_status rc = check_weights(g, n, x, w, p->group, p->kernel, 3, err);
    if (rc < 0)
        return rc;
    y->rank = 5;
    y->dims[0] = 1;
    y->dims[1] = w->dims[0];
    for (int a = 0; a < 3; a++) {
        rc = window_axis(x->dims[2 + a], p->kernel[a], p->stride[a], p->dilation[a], p->auto_pad, 0,
                         0, &p->pads[a], &p->pads[a + 3], &y->dims[2 + a], n, err);
        if (rc < 0)
            return rc;
    }
    p->auto_pad = VF_PAD_EXPLICIT;
    return VF_OK;
}
