/*
 * backend_dnnl_ops.c - the oneDNN lowering of the operators transformers brought: MatMul (the
 * linear layers over tokens and attention's two products, oneDNN's matmul), LayerNormalization,
 * slices of activations and broadcasts (Expand), and PRelu. Each but PRelu takes its inputs in
 * plain row-major layout (what these models' activations are in) and writes a plain output. A text
 * tower's operators oneDNN 2.6 lacks (a lookup by token ids, argmax, each image's row) are host
 * steps: loops of ours over plain buffers, between the primitives. The plan and its helpers are
 * backend_dnnl.c's (backend_dnnl_int.h).
 */
#include <string.h>

#define VF_DNNL_FILE "backend_dnnl_ops.c"
#include "engine/backend_dnnl_int.h"
#include "engine/ids_ops.h"

/* Value v's buffer as a plain row-major buffer of type dt. */
static vf_status plain_as(vf_backend *b, int vi, dnnl_data_type_t dt, int *out)
{
    dnnl_ctx *c = b->ctx;
    dnnl_memory_desc_t md;
    vf_status rc = vfi_dnnl_plain_md(b, &c->g->values[vi], dt, &md);
    if (rc >= 0)
        rc = vfi_dnnl_ensure_md(b, c->p->vbuf[vi], &md, out);
    return rc;
}

/* ... of the activation type. */
static vf_status plain_input(vf_backend *b, int vi, int *out)
{
    return plain_as(b, vi, ((dnnl_ctx *)b->ctx)->act_dt, out);
}

/* A plain buffer for the node's output. */
static vf_status plain_output(vf_backend *b, const vf_node *nd, int *out)
{
    dnnl_ctx *c = b->ctx;
    dnnl_memory_desc_t md;
    vf_status rc = vfi_dnnl_plain_md(b, &c->g->values[nd->output], c->act_dt, &md);
    if (rc >= 0)
        rc = vfi_dnnl_new_buf(b, &md, BUF_ARENA, out);
    if (rc >= 0)
        c->p->vbuf[nd->output] = *out;
    return rc;
}

/* A 2-D row-major view [rows, cols] over buffer buf (whose bytes are rows x cols elements). */
static vf_status view_2d(vf_backend *b, int buf, int64_t rows, int64_t cols, int *out)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {rows, cols};
    CHECK(dnnl_memory_desc_init_by_tag(&md, 2, d, c->p->bufs[buf].md.data_type, dnnl_ab));
    rc = vfi_dnnl_new_view(b, buf, &md, out);
fail:
    return rc;
}

/* The attr of a MatMul: a user scratchpad and, as post-ops, its scale, activation and residual
 * sum (sum_md: the sum's plain descriptor, or NULL). */
static vf_status matmul_attr(vf_backend *b, const vf_matmul_params *p,
                             const dnnl_memory_desc_t *sum_md, dnnl_primitive_attr_t *out,
                             int *sum_index)
{
    vf_status rc = VF_OK;
    dnnl_post_ops_t po = NULL;
    TRY(vfi_dnnl_make_attr(b, NULL, out));
    CHECK(dnnl_post_ops_create(&po));
    if (p->scale != 1.0f)
        CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, p->scale, 0.0f));
    TRY(vfi_dnnl_append_act(b, po, &p->act));
    if (sum_md) {
        *sum_index = dnnl_post_ops_len(po);
        CHECK(dnnl_post_ops_append_binary(po, dnnl_binary_add, sum_md));
    }
    if (dnnl_post_ops_len(po) > 0)
        CHECK(dnnl_primitive_attr_set_post_ops(*out, po));
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    return rc;
}

vf_status vfi_dnnl_matmul_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *av = &g->values[nd->inputs[0]], *bv = &g->values[nd->inputs[1]];
    const vf_value *yv = &g->values[nd->output];
    const vf_matmul_params *p = &nd->p.matmul;
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int x, w, y, bias = -1, sum = -1, sum_view = -1;
    /* every row of a times a constant [K, N]: one 2-D product of all rows */
    int flat = vfi_matmul_flat(g, nd);
    if (flat)
        TRY(plain_input(b, nd->inputs[0], &x));
    else /* a as it lies (a transpose before is a strided view) */
        x = c->p->vbuf[nd->inputs[0]];
    TRY(plain_output(b, nd, &y));
    dnnl_dims_t ad;
    vfi_dnnl_value_dims(c, av, ad);
    int64_t rows = 1, N = yv->dims[yv->rank - 1];
    for (int i = 0; i < av->rank - 1; i++)
        rows *= ad[i];
    int xa = x, ya = y;
    if (flat) {
        TRY(view_2d(b, x, rows, bv->dims[0], &xa));
        TRY(view_2d(b, y, rows, N, &ya));
    }
    int ndims = c->p->bufs[ya].md.ndims;
    if (p->has_sum) {
        TRY(plain_input(b, nd->inputs[nd->n_inputs - 1], &sum));
        sum_view = sum;
        if (flat)
            TRY(view_2d(b, sum, rows, N, &sum_view));
    }
    int sum_index = 0;
    TRY(matmul_attr(b, p, p->has_sum ? &c->p->bufs[sum_view].md : NULL, &attr, &sum_index));
    dnnl_memory_desc_t bias_md;
    if (p->has_bias) { /* [1, ..., 1, N], f32 */
        dnnl_dims_t bd;
        for (int i = 0; i < ndims; i++)
            bd[i] = i == ndims - 1 ? N : 1;
        dnnl_dims_t st;
        for (int i = 0; i < ndims; i++)
            st[i] = i == ndims - 1 ? 1 : N;
        CHECK(dnnl_memory_desc_init_by_strides(&bias_md, ndims, bd, dnnl_f32, st));
        /* the N values of the graph's constant, seen with the product's rank */
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &bias_md, &bias_md, &bias));
    }
    dnnl_matmul_desc_t md;
    if (!bv->is_batched) {
        /* a constant [K, N], or [..., K, N] broadcast over a's first leading dimensions */
        dnnl_memory_desc_t w_any, w_user;
        int wn = flat ? 2 : ndims;
        dnnl_dims_t wd, ws;
        int64_t stride = 1;
        for (int i = wn - 1; i >= 0; i--) {
            wd[i] = i < wn - bv->rank ? 1 : bv->dims[i - (wn - bv->rank)];
            ws[i] = stride;
            stride *= wd[i];
        }
        CHECK(dnnl_memory_desc_init_by_tag(&w_any, wn, wd, c->act_dt, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_strides(&w_user, wn, wd, dnnl_f32, ws));
        CHECK(dnnl_matmul_desc_init(&md, &c->p->bufs[xa].md, &w_any, p->has_bias ? &bias_md : NULL,
                                    &c->p->bufs[ya].md));
        CHECK(dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL));
        /* the weights in the layout the product chose */
        TRY(vfi_dnnl_upload_const(b, bv, &w_user,
                                  dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &w));
    } else { /* attention: one product per leading index, both operands activations */
        w = c->p->vbuf[nd->inputs[1]];
        CHECK(dnnl_matmul_desc_init(&md, &c->p->bufs[x].md, &c->p->bufs[w].md,
                                    p->has_bias ? &bias_md : NULL, &c->p->bufs[y].md));
        CHECK(dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL));
    }
    int kinds[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int bufs[5] = {xa, w, ya, bias}, n_args = p->has_bias ? 4 : 3;
    if (p->has_sum) {
        kinds[n_args] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(sum_index) | DNNL_ARG_SRC_1;
        bufs[n_args++] = sum_view;
    }
    TRY(vfi_dnnl_add_step(b, pd, n_args, kinds, bufs));
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

vf_status vfi_dnnl_layernorm_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    int x, y, xa, ya, scale, shift = -1;
    TRY(plain_input(b, nd->inputs[0], &x));
    TRY(plain_output(b, nd, &y));
    /* [rows, len]: every row normalised over the dimensions from axis on */
    dnnl_dims_t xd;
    vfi_dnnl_value_dims(c, xv, xd);
    int64_t rows = 1, len = 1;
    for (int i = 0; i < xv->rank; i++)
        *(i < nd->p.layernorm.axis ? &rows : &len) *= xd[i];
    TRY(view_2d(b, x, rows, len, &xa));
    TRY(view_2d(b, y, rows, len, &ya));
    dnnl_memory_desc_t pmd;
    dnnl_dims_t pd_dims = {len};
    CHECK(dnnl_memory_desc_init_by_tag(&pmd, 1, pd_dims, dnnl_f32, dnnl_a));
    TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[1]], &pmd, &pmd, &scale));
    unsigned flags = dnnl_use_scale;
    if (nd->n_inputs > 2) {
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &pmd, &pmd, &shift));
        flags |= dnnl_use_shift;
    }
    dnnl_layer_normalization_desc_t ld;
    CHECK(dnnl_layer_normalization_forward_desc_init(
        &ld, dnnl_forward_inference, &c->p->bufs[xa].md, NULL, nd->p.layernorm.epsilon, flags));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT};
    int bufs[4] = {xa, ya, scale, shift};
    TRY(vfi_dnnl_add_prim(b, &ld, attr, shift >= 0 ? 4 : 3, kinds, bufs, NULL));
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* A strided window of the input as a view (its offset and strides), reordered into the plain
 * output. */
vf_status vfi_dnnl_slice_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    const vf_slice_params *p = &nd->p.slice;
    vf_status rc = VF_OK;
    int x, y, view;
    for (int i = 0; i < xv->rank; i++) {
        if (p->step[i] < 1)
            return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                            "node '%s': a slice with a negative step (the reference backend "
                            "runs it)",
                            nd->name);
    }
    TRY(plain_input(b, nd->inputs[0], &x));
    TRY(plain_output(b, nd, &y));
    const dnnl_memory_desc_t *xmd = &c->p->bufs[x].md;
    dnnl_dims_t yd, st;
    vfi_dnnl_value_dims(c, yv, yd);
    int64_t offset = 0;
    for (int i = 0; i < xv->rank; i++) {
        int64_t s = xmd->format_desc.blocking.strides[i];
        st[i] = s * p->step[i];
        offset += s * p->start[i];
    }
    dnnl_memory_desc_t vmd;
    CHECK(dnnl_memory_desc_init_by_strides(&vmd, xv->rank, yd, c->act_dt, st));
    vmd.offset0 = offset;
    TRY(vfi_dnnl_new_view(b, x, &vmd, &view));
    TRY(vfi_dnnl_add_reorder(b, view, y));
fail:
    return rc;
}

/* Broadcast to the output's shape: the output filled with 0, then the input added to it (oneDNN's
 * binary primitive broadcasts its second operand over dimensions of size 1). */
vf_status vfi_dnnl_expand_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    int x, y;
    TRY(plain_output(b, nd, &y));
    TRY(vfi_dnnl_add_fill(b, y, 0.0f));
    /* the input aligned to the output's rank with leading 1s */
    vf_value aligned = *xv;
    aligned.rank = yv->rank;
    for (int i = 0; i < yv->rank; i++) {
        int j = i - (yv->rank - xv->rank);
        aligned.dims[i] = j >= 0 ? xv->dims[j] : 1;
    }
    aligned.batch_axis = xv->batch_axis + (yv->rank - xv->rank);
    dnnl_memory_desc_t amd;
    if (xv->is_batched) {
        int xp;
        TRY(plain_input(b, nd->inputs[0], &xp));
        TRY(vfi_dnnl_plain_md(b, &aligned, c->act_dt, &amd));
        TRY(vfi_dnnl_new_view(b, xp, &amd, &x));
    } else {
        dnnl_memory_desc_t user;
        TRY(vfi_dnnl_plain_md(b, &aligned, dnnl_f32, &user));
        TRY(vfi_dnnl_plain_md(b, &aligned, c->act_dt, &amd));
        TRY(vfi_dnnl_upload_const(b, xv, &user, &amd, &x));
    }
    dnnl_binary_desc_t bd;
    CHECK(dnnl_binary_desc_init(&bd, dnnl_binary_add, &c->p->bufs[y].md, &c->p->bufs[x].md,
                                &c->p->bufs[y].md));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, bufs[3] = {y, x, y};
    TRY(vfi_dnnl_add_prim(b, &bd, attr, 3, kinds, bufs, NULL));
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* PRelu on oneDNN's prelu primitive, the activation in whatever layout it has (a convolution's
 * blocked one too), the slope aligned to its rank with leading 1s in the layout the primitive
 * picks; int8 activations are read as f32 (the slope is not quantized). */
vf_status vfi_dnnl_prelu_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *sv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int x = c->p->vbuf[nd->inputs[0]], w, y;
    if (vfi_dnnl_is_int8(c->p->bufs[x].md.data_type))
        TRY(plain_as(b, nd->inputs[0], dnnl_f32, &x));
    const dnnl_memory_desc_t *xmd = &c->p->bufs[x].md;
    vf_value aligned = *sv;
    aligned.rank = xv->rank;
    for (int i = 0; i < xv->rank; i++) {
        int j = i - (xv->rank - sv->rank);
        aligned.dims[i] = j >= 0 ? sv->dims[j] : 1;
    }
    dnnl_memory_desc_t user, any;
    TRY(vfi_dnnl_plain_md(b, &aligned, dnnl_f32, &user));
    CHECK(dnnl_memory_desc_init_by_tag(&any, xmd->ndims, user.dims, xmd->data_type,
                                       dnnl_format_tag_any));
    dnnl_prelu_desc_t desc;
    CHECK(dnnl_prelu_forward_desc_init(&desc, dnnl_forward_inference, xmd, &any));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_primitive_desc_create(&pd, &desc, attr, c->engine, NULL));
    TRY(vfi_dnnl_upload_const(b, sv, &user,
                              dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &w));
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA, &y));
    int kinds[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, bufs[3] = {x, w, y};
    TRY(vfi_dnnl_add_step(b, pd, 3, kinds, bufs));
    c->p->vbuf[nd->output] = y;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* ---- a text tower's host steps ------------------------------------------------------------ */

/* A host step's output: plain f32 that the host step writes, then the node's output buffer in
 * the activation type (a reorder where that is not f32). */
static vf_status host_output(vf_backend *b, const vf_node *nd, int *f32_buf)
{
    dnnl_ctx *c = b->ctx;
    dnnl_memory_desc_t md;
    vf_status rc = vfi_dnnl_plain_md(b, &c->g->values[nd->output], dnnl_f32, &md);
    if (rc >= 0)
        rc = vfi_dnnl_new_buf(b, &md, BUF_ARENA, f32_buf);
    return rc;
}

static vf_status host_result(vf_backend *b, const vf_node *nd, int f32_buf)
{
    dnnl_ctx *c = b->ctx;
    if (c->act_dt == dnnl_f32) {
        c->p->vbuf[nd->output] = f32_buf;
        return VF_OK;
    }
    dnnl_memory_desc_t md;
    vf_status rc = vfi_dnnl_plain_md(b, &c->g->values[nd->output], c->act_dt, &md);
    if (rc >= 0)
        rc = vfi_dnnl_ensure_md(b, f32_buf, &md, &c->p->vbuf[nd->output]);
    return rc;
}

/* The host steps' work (ids_ops.h): the whole batch is computed (the padding rows from
 * earlier inputs, or zeros: ids the table has); an index out of range fails only in the first
 * n rows. */
static vf_status run_lookup(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data,
                            int n, int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)s;
    const vf_value *xv = &c->g->values[nd->inputs[0]], *tv = &c->g->values[nd->inputs[1]];
    int64_t per = vfi_value_sample_numel(xv);
    return vfi_ids_lookup(nd, data[0], per * batch, per * n, data[1], tv->dims[0],
                          vfi_value_numel(tv) / tv->dims[0], data[2], &b->err);
}

static vf_status run_argmax(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data,
                            int n, int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)s, (void)n;
    int64_t outer, len, inner;
    vfi_ids_split(c->g, nd, batch, &outer, &len, &inner);
    vfi_ids_argmax(data[0], c->g->values[nd->inputs[0]].dtype == VF_DTYPE_I64, outer, len, inner,
                   data[1]);
    return VF_OK;
}

static vf_status run_take(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data,
                          int n, int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)s;
    int64_t outer, len, inner;
    vfi_ids_split(c->g, nd, batch, &outer, &len, &inner);
    return vfi_ids_take(nd, data[0], data[1], batch, n, outer, len, inner, data[2], &b->err);
}

vf_status vfi_dnnl_lookup_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_value *tv = &c->g->values[nd->inputs[1]];
    dnnl_memory_desc_t md;
    int table, out;
    vf_status rc = VF_OK;
    dnnl_dims_t dims = {tv->dims[0], vfi_value_numel(tv) / tv->dims[0]};
    CHECK(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
    TRY(vfi_dnnl_upload_const(b, tv, &md, &md, &table));
    TRY(host_output(b, nd, &out));
    int bufs[3] = {c->p->vbuf[nd->inputs[0]], table, out};
    TRY(vfi_dnnl_add_host(b, nd, run_lookup, 3, bufs));
    TRY(host_result(b, nd, out));
fail:
    return rc;
}

vf_status vfi_dnnl_argmax_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    dnnl_memory_desc_t md;
    int x, out;
    vf_status rc = VF_OK;
    if (xv->dtype == VF_DTYPE_I64)
        x = c->p->vbuf[nd->inputs[0]];
    else
        TRY(plain_as(b, nd->inputs[0], dnnl_f32, &x));
    TRY(vfi_dnnl_bytes_md(b, &c->g->values[nd->output], &md));
    TRY(vfi_dnnl_new_buf(b, &md, BUF_ARENA, &out));
    int bufs[2] = {x, out};
    TRY(vfi_dnnl_add_host(b, nd, run_argmax, 2, bufs));
    c->p->vbuf[nd->output] = out;
fail:
    return rc;
}

vf_status vfi_dnnl_take_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    int x, out;
    vf_status rc = VF_OK;
    TRY(plain_as(b, nd->inputs[0], dnnl_f32, &x));
    TRY(host_output(b, nd, &out));
    int bufs[3] = {x, c->p->vbuf[nd->inputs[1]], out};
    TRY(vfi_dnnl_add_host(b, nd, run_take, 3, bufs));
    TRY(host_result(b, nd, out));
fail:
    return rc;
}
