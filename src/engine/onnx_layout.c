/*
 * onnx_layout.c - loading the ONNX operators that move elements: Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Gather, Concat, Pad and Slice. On constants they are folded
 * (onnx_fold.c); on activations they become graph nodes that keep the batch where the images
 * are. Handlers of onnx.c's table, on onnx_handlers.h's API.
 */
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "engine/onnx_handlers.h"

/* Reshape of an activation to `target` resolved against the input (0: copy, -1: infer, an
 * element standing for a multiple of the batch: where the batch goes). The batch lands in the
 * entry standing for it; without one, in the -1 entry, or, where the images are outermost, in
 * the first entry (a file exported with a fixed batch of 1). The graph checks that the images
 * keep their place in memory. */
static vf_status reshape_to(vfi_onnx_loader *L, int x, int rank, const int64_t *target,
                            int allow_zero)
{
    const vf_value *xv = vfi_onnx_value(L, x);
    if (rank < 1 || rank > VF_MAX_DIMS)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "reshape to rank %d", rank);
    vf_value t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    t.batch_axis = -1;
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d = target[i], m = vfi_dim_batch_multiple(d);
        if (m) {
            if (t.batch_axis >= 0)
                return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "the batch size in two dimensions");
            t.batch_axis = i;
            d = m;
        } else if (d == 0 && !allow_zero) {
            if (i >= xv->rank)
                return vfi_onnx_fail(L, VF_ERR_MODEL, "0 in shape beyond the input rank");
            d = xv->dims[i];
            if (i == xv->batch_axis) {
                if (t.batch_axis >= 0)
                    return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "the batch size in two dimensions");
                t.batch_axis = i;
            }
        } else if (d == -1) {
            if (infer_at >= 0)
                return vfi_onnx_fail(L, VF_ERR_MODEL, "more than one -1 in shape");
            infer_at = i;
            continue;
        } else if (d < 1 || d > VF_MAX_DIM) {
            return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid shape entry %lld", (long long)d);
        }
        if (d > 0 && known > VF_MAX_NUMEL / d)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "shape of more than %lld elements",
                                 (long long)VF_MAX_NUMEL);
        t.dims[i] = d;
        known *= d;
    }
    int64_t total = vfi_value_sample_numel(xv); /* per image */
    int first_is_batch = t.batch_axis < 0 && xv->batch_axis == 0 && xv->batch_outer == 1 &&
                         infer_at != 0 && target[0] == 1;
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "cannot infer -1 in shape");
        t.dims[infer_at] = total / known;
        if (t.batch_axis < 0 && !first_is_batch)
            t.batch_axis = infer_at;
    }
    if (t.batch_axis < 0) {
        if (!first_is_batch)
            return vfi_onnx_fail(
                L, VF_ERR_UNSUPPORTED,
                "a fixed shape where the batch cannot be placed (a file traced with a "
                "fixed batch: export it with a dynamic batch axis)");
        t.batch_axis = 0;
    }
    /* where the images sit in the batch's dimension: after as many entries as before */
    int64_t outer = vfi_value_outer_entries(xv), before = 1;
    for (int i = 0; i < t.batch_axis && before > 0; i++) /* 0 when beyond outer (or empty) */
        before = t.dims[i] < 1 || before > outer / t.dims[i] ? 0 : before * t.dims[i];
    if (before < 1 || outer % before || t.dims[t.batch_axis] % (outer / before))
        return vfi_onnx_fail(
            L, VF_ERR_UNSUPPORTED,
            "reshape mixes the batch into other dimensions (the images would not stay "
            "whole)");
    t.batch_outer = outer / before;
    return vfi_onnx_add_node(L, VF_OP_RESHAPE, &x, 1, &t, 0);
}

vf_status vfi_onnx_reshape(vfi_onnx_loader *L)
{
    int x;
    int64_t shape[VF_MAX_DIMS];
    int n;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc >= 0)
        rc = vfi_onnx_const_ints(L, 1, shape, VF_MAX_DIMS, &n);
    if (rc < 0)
        return rc;
    if (x < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    int allow_zero = vfi_onnx_attr_int(L, "allowzero", 0) != 0;
    if (vfi_onnx_value(L, x)->data) {
        const vf_value *xv = vfi_onnx_value(L, x);
        int64_t dims[VF_MAX_DIMS], known = 1;
        int infer_at = -1;
        for (int i = 0; i < n; i++) {
            dims[i] = shape[i] == 0 && !allow_zero && i < xv->rank ? xv->dims[i] : shape[i];
            if (dims[i] == -1)
                infer_at = i;
            else if (dims[i] < 0 || (dims[i] > 0 && known > VF_MAX_NUMEL / dims[i]))
                return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid shape entry");
            else
                known *= dims[i];
        }
        if (infer_at >= 0)
            dims[infer_at] = known ? vfi_value_numel(xv) / known : 0;
        return vfi_onnx_fold_reshape(L, xv, n, dims);
    }
    return reshape_to(L, x, n, shape, allow_zero);
}

vf_status vfi_onnx_flatten(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    int axis;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 1), xv->rank + 1, &axis);
    if (rc < 0)
        return rc;
    int64_t dims[2] = {vfi_dims_numel(axis, xv->dims),
                       vfi_dims_numel(xv->rank - axis, xv->dims + axis)};
    if (xv->data)
        return vfi_onnx_fold_reshape(L, xv, 2, dims);
    /* the part holding the batch stands for its multiple of it */
    int64_t target[2] = {dims[0], dims[1]};
    target[xv->batch_axis < axis ? 0 : 1] = vfi_dim_batch(dims[xv->batch_axis < axis ? 0 : 1]);
    return reshape_to(L, x, 2, target, 0);
}

/* Squeeze (sign -1) or Unsqueeze (sign +1). */
static vf_status squeeze_node(vfi_onnx_loader *L, int unsqueeze)
{
    int x;
    int64_t axes[VF_MAX_DIMS];
    int n_axes = -1;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    if (vfi_onnx_opset(L) >= 13 && vfi_onnx_has_input(L, 1)) {
        rc = vfi_onnx_const_ints(L, 1, axes, VF_MAX_DIMS, &n_axes);
        if (rc < 0)
            return rc;
    } else {
        n_axes = vfi_onnx_attr_ints(L, "axes", axes, VF_MAX_DIMS);
        if (n_axes == -2)
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "too many axes");
    }
    const vf_value *xv = vfi_onnx_value(L, x);
    int out_rank = unsqueeze ? xv->rank + (n_axes > 0 ? n_axes : 0) : xv->rank;
    if (unsqueeze && n_axes < 1)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "unsqueeze without axes");
    if (out_rank > VF_MAX_DIMS)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "rank %d", out_rank);
    uint32_t mask = 0;
    for (int i = 0; i < n_axes; i++) {
        int a = 0;
        rc = vfi_onnx_axis(L, axes[i], out_rank, &a);
        if (rc < 0)
            return rc;
        mask |= 1u << a;
    }
    int64_t dims[VF_MAX_DIMS];
    int r = 0;
    if (unsqueeze) {
        int j = 0;
        for (int i = 0; i < out_rank; i++)
            dims[r++] = (mask & (1u << i)) ? 1 : xv->dims[j++];
    } else {
        for (int i = 0; i < xv->rank; i++) {
            int drop = n_axes < 0 ? (xv->dims[i] == 1 && !(xv->is_batched && i == xv->batch_axis))
                                  : (int)((mask >> i) & 1u);
            if (drop && xv->dims[i] != 1)
                return vfi_onnx_fail(L, VF_ERR_MODEL, "squeezing a dimension of size %lld",
                                     (long long)xv->dims[i]);
            if (!drop)
                dims[r++] = xv->dims[i];
        }
    }
    if (xv->data)
        return vfi_onnx_fold_reshape(L, xv, r, dims);
    /* where the batch's dimension lands */
    int at = xv->batch_axis;
    if (unsqueeze) {
        for (int i = 0, j = 0; i < out_rank; i++) {
            if (mask & (1u << i))
                continue;
            if (j++ == xv->batch_axis)
                at = i;
        }
    } else {
        if (mask & (1u << xv->batch_axis))
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "squeezing the batch dimension");
        for (int i = 0; i < xv->batch_axis; i++)
            at -= n_axes < 0 ? (xv->dims[i] == 1) : (int)((mask >> i) & 1u);
    }
    dims[at] = vfi_dim_batch(dims[at]);
    return reshape_to(L, x, r, dims, 0);
}

vf_status vfi_onnx_squeeze(vfi_onnx_loader *L)
{
    return squeeze_node(L, 0);
}

vf_status vfi_onnx_unsqueeze(vfi_onnx_loader *L)
{
    return squeeze_node(L, 1);
}

vf_status vfi_onnx_transpose(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    int64_t perm64[VF_MAX_DIMS];
    int n = vfi_onnx_attr_ints(L, "perm", perm64, VF_MAX_DIMS);
    int perm[VF_MAX_DIMS];
    if (n == -1) {
        n = xv->rank;
        for (int i = 0; i < n; i++)
            perm64[i] = n - 1 - i;
    }
    if (n != xv->rank)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "perm has %d entries for rank %d", n, xv->rank);
    uint32_t seen = 0;
    for (int i = 0; i < n; i++) {
        if (perm64[i] < 0 || perm64[i] >= n || (seen & (1u << perm64[i])))
            return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid perm");
        seen |= 1u << perm64[i];
        perm[i] = (int)perm64[i];
    }
    if (xv->data)
        return vfi_onnx_fold_transpose(L, xv, perm);
    vf_node tmp;
    memcpy(tmp.p.perm, perm, sizeof(perm));
    return vfi_onnx_add_node(L, VF_OP_TRANSPOSE, &x, 1, tmp.p.perm, 0);
}

vf_status vfi_onnx_gather(vfi_onnx_loader *L)
{
    if (vfi_onnx_ramp_input(L, 1))
        return vfi_onnx_take(L);
    int x, ii;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc >= 0)
        rc = vfi_onnx_input(L, 1, &ii);
    if (rc < 0)
        return rc;
    if (x < 0 || ii < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    const vf_value *xv = vfi_onnx_value(L, x), *iv = vfi_onnx_value(L, ii);
    int axis;
    rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 0), xv->rank, &axis);
    if (rc < 0)
        return rc;
    if (xv->data && !iv->data) { /* rows of a table by token ids: an embedding */
        if (axis != 0 || xv->dtype != VF_DTYPE_F32)
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "a lookup of a constant along axis %d",
                                 axis);
        int in[2] = {ii, x};
        return vfi_onnx_add_node(L, VF_OP_LOOKUP, in, 2, NULL, 0);
    }
    if (!iv->data || iv->dtype != VF_DTYPE_I64)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "indices must be a constant");
    if (xv->data)
        return vfi_onnx_fold_gather(L, xv, iv, axis);
    if (iv->rank > 1)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "indices of rank %d on an activation",
                             iv->rank);
    vf_gather_params p;
    p.axis = axis;
    p.scalar = iv->rank == 0;
    int64_t n = vfi_value_numel(iv);
    if (n < 1 || n > VF_MAX_DIM)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "gather with %lld indices", (long long)n);
    p.n_indices = (int)n;
    p.indices = vfi_mallocarray((size_t)n, sizeof(int64_t));
    if (!p.indices)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int64_t k = ((const int64_t *)iv->data)[i];
        p.indices[i] = k < 0 ? k + xv->dims[axis] : k;
    }
    return vfi_onnx_add_node(L, VF_OP_GATHER, &x, 1, &p, 0); /* frees p.indices if need be */
}

/* Constants concatenated with activations (a file exported with a fixed batch of 1 joins
 * ViT's class token, [1, 1, 768], to the patches): the same for every image, so each is
 * expanded over the batch as the activations hold it. */
static vf_status expand_constants(vfi_onnx_loader *L, int *in, int n)
{
    /* the activations' batch placement, copied: adding a node may move the values */
    vf_value act;
    memset(&act, 0, sizeof(act));
    for (int i = 0; i < n; i++) {
        if (!vfi_onnx_value(L, in[i])->data) {
            act = *vfi_onnx_value(L, in[i]);
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        const vf_value *c = vfi_onnx_value(L, in[i]);
        if (!c->data)
            continue;
        if (c->rank != act.rank || c->dims[act.batch_axis] != 1)
            return vfi_onnx_fail(
                L, VF_ERR_UNSUPPORTED,
                "constant '%s' joined to activations differs along the batch's dimension", c->name);
        vf_value t = *c;
        t.dims[act.batch_axis] = act.dims[act.batch_axis];
        t.batch_axis = act.batch_axis;
        t.batch_outer = act.batch_outer;
        char suffix[32];
        snprintf(suffix, sizeof(suffix), "vidfeat_expand_%d", i);
        int src = in[i];
        vf_status rc = vfi_onnx_add_named_node(L, VF_OP_EXPAND, suffix, &src, 1, &t, &in[i]);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

vf_status vfi_onnx_concat(vfi_onnx_loader *L)
{
    size_t n_in = vfi_onnx_n_inputs(L);
    if (n_in < 1 || n_in > 4096)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "concat of %zu inputs", n_in);
    int *in = vfi_mallocarray(n_in, sizeof(int));
    if (!in)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    int consts = 0;
    vf_status rc = VF_OK;
    for (size_t i = 0; i < n_in && rc >= 0; i++) {
        rc = vfi_onnx_input(L, i, &in[i]);
        if (rc >= 0 && in[i] < 0)
            rc = vfi_onnx_fail(L, VF_ERR_MODEL, "empty input name");
        if (rc >= 0)
            consts += vfi_onnx_value(L, in[i])->data != NULL;
    }
    if (rc >= 0) {
        int rank = vfi_onnx_value(L, in[0])->rank, axis;
        rc = vfi_onnx_axis(L, vfi_onnx_attr_int(L, "axis", 0), rank, &axis);
        if (rc >= 0 && consts == (int)n_in)
            rc = vfi_onnx_fold_concat(L, axis, rank);
        else if (rc >= 0 && consts)
            rc = expand_constants(L, in, (int)n_in);
        if (rc >= 0 && consts < (int)n_in)
            rc = vfi_onnx_add_node(L, VF_OP_CONCAT, in, (int)n_in, &axis, 0);
    }
    vfi_free(in);
    return rc;
}

vf_status vfi_onnx_pad(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    if (!vfi_onnx_attr_str_is(L, "mode", "constant", 1))
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "only constant padding is supported");
    int rank = vfi_onnx_value(L, x)->rank;
    int64_t pads[2 * VF_MAX_DIMS];
    int n;
    vf_pad_params p;
    memset(&p, 0, sizeof(p));
    if (vfi_onnx_opset(L) < 11) {
        n = vfi_onnx_attr_ints(L, "pads", pads, 2 * VF_MAX_DIMS);
        p.value = vfi_onnx_attr_float(L, "value", 0.0f);
    } else {
        rc = vfi_onnx_const_ints(L, 1, pads, 2 * VF_MAX_DIMS, &n);
        if (rc < 0)
            return rc;
        int vi;
        rc = vfi_onnx_input(L, 2, &vi);
        if (rc < 0)
            return rc;
        if (vi >= 0) {
            const vf_value *v = vfi_onnx_value(L, vi);
            if (!v->data || v->dtype != VF_DTYPE_F32 || vfi_value_numel(v) != 1)
                return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                                     "constant_value must be a float scalar");
            p.value = *(const float *)v->data;
        }
        if (vfi_onnx_has_input(L, 3))
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "the axes input");
    }
    if (n != 2 * rank)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "pads has %d entries for rank %d", n, rank);
    for (int i = 0; i < rank; i++) {
        p.begin[i] = pads[i];
        p.end[i] = pads[rank + i];
    }
    return vfi_onnx_add_node(L, VF_OP_PAD, &x, 1, &p, 0);
}

/* Slice of a constant (shape arithmetic: shape[2:], pads reversed with step -1, ...). */
vf_status vfi_onnx_slice(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = vfi_onnx_value(L, x);
    int rank = xv->rank;
    int64_t starts[VF_MAX_DIMS], ends[VF_MAX_DIMS], axes[VF_MAX_DIMS], steps[VF_MAX_DIMS];
    int ns = -1, ne = -1, na = -1, nst = -1;
    if (vfi_onnx_opset(L) < 10) {
        ns = vfi_onnx_attr_ints(L, "starts", starts, VF_MAX_DIMS);
        ne = vfi_onnx_attr_ints(L, "ends", ends, VF_MAX_DIMS);
        na = vfi_onnx_attr_ints(L, "axes", axes, VF_MAX_DIMS);
    } else {
        rc = vfi_onnx_const_ints(L, 1, starts, VF_MAX_DIMS, &ns);
        if (rc >= 0)
            rc = vfi_onnx_const_ints(L, 2, ends, VF_MAX_DIMS, &ne);
        if (rc >= 0 && vfi_onnx_has_input(L, 3))
            rc = vfi_onnx_const_ints(L, 3, axes, VF_MAX_DIMS, &na);
        if (rc >= 0 && vfi_onnx_has_input(L, 4))
            rc = vfi_onnx_const_ints(L, 4, steps, VF_MAX_DIMS, &nst);
        if (rc < 0)
            return rc;
    }
    if (ns < 1 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return vfi_onnx_fail(L, VF_ERR_MODEL, "starts/ends/axes/steps do not match");
    /* Per dimension: first index, step and count (whole dimension by default). */
    int64_t first[VF_MAX_DIMS], step[VF_MAX_DIMS], dims[VF_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        first[d] = 0;
        step[d] = 1;
        dims[d] = xv->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int a = i;
        if (na >= 0) {
            rc = vfi_onnx_axis(L, axes[i], rank, &a);
            if (rc < 0)
                return rc;
        }
        int64_t len = xv->dims[a], st = nst >= 0 ? steps[i] : 1, b = starts[i], e = ends[i];
        if (st == 0)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "slice step 0");
        /* a step longer than the dimension takes one element at most: the same as len + 1,
         * which keeps the arithmetic below in range */
        st = st > len + 1 ? len + 1 : st < -(len + 1) ? -(len + 1) : st;
        b = b < 0 ? b + len : b;
        e = e < 0 ? e + len : e;
        if (st > 0) {
            b = b < 0 ? 0 : b > len ? len : b;
            e = e < 0 ? 0 : e > len ? len : e;
        } else {
            b = b < 0 ? -1 : b > len - 1 ? len - 1 : b;
            e = e < -1 ? -1 : e > len - 1 ? len - 1 : e;
        }
        int64_t count = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
        first[a] = b;
        step[a] = st;
        dims[a] = count > 0 ? count : 0;
    }
    if (!xv->data)
        return vfi_onnx_slice_activation(L, x, first, step, dims);
    int64_t n = vfi_dims_numel(rank, dims), src_strides[VF_MAX_DIMS];
    vfi_onnx_strides(rank, xv->dims, src_strides);
    size_t es = vfi_dtype_size(xv->dtype);
    uint8_t *data = vfi_onnx_alloc(n, xv->dtype);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    int64_t idx[VF_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++)
            off += (first[d] + idx[d] * step[d]) * src_strides[d];
        memcpy(data + k * es, (const uint8_t *)xv->data + off * es, es);
        vfi_dims_next(rank, dims, idx);
    }
    return vfi_onnx_add_const(L, 0, xv->dtype, rank, dims, data);
}
