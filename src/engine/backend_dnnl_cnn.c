/*
 * backend_dnnl_cnn.c - the oneDNN lowering of the operators convolutional networks brought:
 * convolutions (Winograd where it pays, in chunks of images where its scratchpad would not fit,
 * int8 with per-channel scales; vidfeat's own kernels where backend_dnnl_own.c measures them
 * faster), inner products, activations, pooling, binary operators
 * (broadcasting), concatenation, softmax and LRN, padding, reductions, relayouts and gathers.
 * Each reads its node and adds buffers and steps to the plan being built (backend_dnnl_plan.c);
 * backend_dnnl.c's table calls them by operator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "engine/dwconv.h"
#define VF_DNNL_FILE "backend_dnnl_cnn.c"
#include "engine/backend_dnnl_int.h"

static size_t scratch_bytes(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* md for `batch` images in the layout md has for fewer (vfi_dnnl_batch_outermost(md) holds). */
static dnnl_memory_desc_t with_batch(const dnnl_memory_desc_t *md, int64_t batch)
{
    dnnl_memory_desc_t m = *md;
    m.dims[0] = m.padded_dims[0] = batch;
    return m;
}

/* Steps running convolution pd (made for one chunk of the batch) over `chunks` consecutive
 * chunks of buffers x and y (views at byte offsets), weights w, bias or -1. */
static vf_status chunk_steps(vf_backend *b, const_dnnl_primitive_desc_t pd, int64_t chunks, int x,
                             int w, int bias, int y)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    const dnnl_memory_desc_t *sub_x = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *sub_y = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    size_t x_bytes = dnnl_memory_desc_get_size(sub_x), y_bytes = dnnl_memory_desc_get_size(sub_y);
    for (int64_t k = 0; k < chunks; k++) {
        int xs, ys;
        TRY(vfi_dnnl_new_view(b, x, sub_x, &xs));
        c->p->bufs[xs].view_offset = (size_t)k * x_bytes;
        TRY(vfi_dnnl_new_view(b, y, sub_y, &ys));
        c->p->bufs[ys].view_offset = (size_t)k * y_bytes;
        int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
        int bufs[4] = {xs, w, ys, bias};
        TRY(vfi_dnnl_add_step(b, pd, bias >= 0 ? 4 : 3, kinds, bufs));
    }
fail:
    return rc;
}

/* A convolution in chunks of `sub` images: one primitive for `sub` images, executed over
 * consecutive slices of the input and output (views at byte offsets), its scratchpad that much
 * smaller. The layouts must keep the batch outermost; *done = 0 when they do not. */
static vf_status conv_chunked(vf_backend *b, const vf_node *nd, const_dnnl_primitive_desc_t pd,
                              const dnnl_memory_desc_t *w_user, const dnnl_memory_desc_t *b_md,
                              int *done)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    vf_status rc = VF_OK;
    const dnnl_memory_desc_t *sub_src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *sub_dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *want_w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    *done = 0;
    if (!vfi_dnnl_batch_outermost(sub_src) || !vfi_dnnl_batch_outermost(sub_dst))
        return VF_OK;
    int64_t sub = sub_src->dims[0], n = c->p->batch / sub;
    dnnl_memory_desc_t full_src = with_batch(sub_src, c->p->batch);
    dnnl_memory_desc_t full_dst = with_batch(sub_dst, c->p->batch);
    int x_buf, w_buf, b_buf = -1, y_buf;
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &full_src, &x_buf));
    TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[1]], w_user, want_w, &w_buf));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], b_md, b_md, &b_buf));
    TRY(vfi_dnnl_new_buf(b, &full_dst, BUF_ARENA, &y_buf));
    TRY(chunk_steps(b, pd, n, x_buf, w_buf, b_buf, y_buf));
    c->p->vbuf[nd->output] = y_buf;
    c->p->wino_chunked++;
    *done = 1;
fail:
    return rc;
}

/* ---- int8 ---------------------------------------------------------------------------------- */

/* The int8 form of a convolution or inner product's constants: weights to s8 with one scale per
 * output channel (127 / its largest |w|), the bias into the s32 accumulator's units (bias x
 * x_scale x w_scale), and the output scales that take the accumulator to the output's units
 * (y_scale / (x_scale x w_scale); y_scale 1 for an f32 output). Arrays are allocated here. */
typedef struct qparams {
    int8_t *w;
    float *bias, *oscale;
    int64_t oc;
} qparams;

static void qparams_free(qparams *q)
{
    vfi_free(q->w);
    vfi_free(q->bias);
    vfi_free(q->oscale);
}

static vf_status quantize_wb(vf_backend *b, const vf_node *nd, float x_scale, float y_scale,
                             qparams *q)
{
    dnnl_ctx *c = b->ctx;
    const vf_value *wv = &c->g->values[nd->inputs[1]];
    const vf_value *bv = nd->n_inputs > 2 ? &c->g->values[nd->inputs[2]] : NULL;
    const float *w = wv->data, *bias = bv ? bv->data : NULL;
    memset(q, 0, sizeof(*q));
    q->oc = wv->dims[0];
    int64_t per = vfi_value_numel(wv) / q->oc;
    q->w = vfi_mallocarray((size_t)(per * q->oc), 1);
    q->oscale = vfi_mallocarray((size_t)q->oc, sizeof(float));
    q->bias = bias ? vfi_mallocarray((size_t)q->oc, sizeof(float)) : NULL;
    if (!w || (bv && !bias))
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': weights already released", nd->name);
    if (!q->w || !q->oscale || (bias && !q->bias))
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < q->oc; o++) {
        const float *row = w + o * per;
        float m = 0.0f;
        for (int64_t k = 0; k < per; k++)
            m = fmaxf(m, fabsf(row[k]));
        float ws = m > 0.0f ? 127.0f / m : 1.0f;
        for (int64_t k = 0; k < per; k++)
            q->w[o * per + k] = (int8_t)lrintf(fminf(127.0f, fmaxf(-127.0f, row[k] * ws)));
        if (bias)
            q->bias[o] = bias[o] * x_scale * ws;
        q->oscale[o] = y_scale / (x_scale * ws);
    }
    return VF_OK;
}

/* The attr of an int8 convolution or inner product: per-channel output scales, then the
 * activation in the output's units. */
static vf_status int8_attr(vf_backend *b, const vf_act *act, float y_scale, const qparams *q,
                           dnnl_primitive_attr_t *out)
{
    vf_status rc = VF_OK;
    vf_act scaled = *act;
    if (act->kind == VF_ACT_CLIP) { /* bounds in the quantized output's units */
        scaled.alpha *= y_scale;
        scaled.beta *= y_scale;
    }
    TRY(vfi_dnnl_make_attr(b, &scaled, out));
    CHECK(dnnl_primitive_attr_set_output_scales(*out, q->oc, 1 << 1, q->oscale));
fail:
    return rc;
}

/* The step of a convolution or inner product whose primitive is pd: its source in the layout
 * pd wants (quantized by x_scale when non-zero), the weights and bias from w_data / b_data (the
 * graph's, or their int8 forms) in theirs. */
static vf_status weighted_step(vf_backend *b, const vf_node *nd, const_dnnl_primitive_desc_t pd,
                               const void *w_data, const void *b_data,
                               const dnnl_memory_desc_t *w_user, float x_scale)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    vf_status rc = VF_OK;
    int x_buf, w_buf, b_buf = -1, y_buf;
    TRY(vfi_dnnl_ensure_md_scaled(b, c->p->vbuf[nd->inputs[0]],
                                  dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), x_scale,
                                  &x_buf));
    TRY(vfi_dnnl_upload_data(b, &g->values[nd->inputs[1]], w_data, w_user,
                             dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &w_buf));
    if (nd->n_inputs > 2) {
        dnnl_memory_desc_t b_md;
        dnnl_dims_t bd = {g->values[nd->inputs[1]].dims[0]};
        CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
        TRY(vfi_dnnl_upload_data(b, &g->values[nd->inputs[2]], b_data, &b_md, &b_md, &b_buf));
    }
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA,
                         &y_buf));
    int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int bufs[4] = {x_buf, w_buf, y_buf, b_buf};
    TRY(vfi_dnnl_add_step(b, pd, b_buf >= 0 ? 4 : 3, kinds, bufs));
    c->p->vbuf[nd->output] = y_buf;
fail:
    return rc;
}

/* The scale an int8 layer's source gets quantized by: none when it is stored int8 already. */
static float src_scale(const dnnl_ctx *c, int xi)
{
    return vfi_dnnl_is_int8(vfi_dnnl_dt_of(c, xi)) ? 0.0f : c->vscale[xi];
}

static float out_scale(const dnnl_ctx *c, int vi)
{
    return vfi_dnnl_is_int8(c->vdt[vi]) ? c->vscale[vi] : 1.0f;
}

static vf_status conv_int8(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t w_user, b_md;
    qparams q;
    float ys = out_scale(c, nd->output);
    TRY(quantize_wb(b, nd, c->vscale[nd->inputs[0]], ys, &q));
    TRY(int8_attr(b, &nd->p.conv.act, ys, &q, &attr));
    TRY(vfi_dnnl_conv_pd(b, nd, c->p->batch, CONV_DIRECT, attr, &pd, &w_user, &b_md));
    TRY(weighted_step(b, nd, pd, q.w, q.bias, &w_user, src_scale(c, nd->inputs[0])));
fail:
    qparams_free(&q);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The layout md2 of frames [N x T, C, H, W] seen as the clips [N, C, T, H, W] it holds (each
 * frame's image in md2's layout, the frames of a clip consecutive); 0 when md2 is not a blocked
 * layout or blocks its batch. */
static int clip_of_frames(const dnnl_memory_desc_t *md2, int64_t t, dnnl_memory_desc_t *md5)
{
    const dnnl_blocking_desc_t *b2 = &md2->format_desc.blocking;
    if (md2->format_kind != dnnl_blocked || md2->ndims != 4 || md2->offset0 != 0 ||
        md2->dims[0] % t != 0)
        return 0;
    static const int axis[4] = {0, 1, 3, 4}; /* N x T, C, H, W -> their clip axes */
    memset(md5, 0, sizeof(*md5));
    md5->ndims = 5;
    md5->data_type = md2->data_type;
    md5->format_kind = dnnl_blocked;
    for (int i = 0; i < 4; i++) {
        md5->dims[axis[i]] = md2->dims[i];
        md5->padded_dims[axis[i]] = md2->padded_dims[i];
        md5->format_desc.blocking.strides[axis[i]] = b2->strides[i];
    }
    md5->dims[0] = md5->padded_dims[0] = md2->dims[0] / t;
    md5->dims[2] = md5->padded_dims[2] = t;
    md5->format_desc.blocking.strides[0] = b2->strides[0] * t;
    md5->format_desc.blocking.strides[2] = b2->strides[0];
    md5->format_desc.blocking.inner_nblks = b2->inner_nblks;
    for (int k = 0; k < b2->inner_nblks; k++) {
        if (b2->inner_idxs[k] == 0)
            return 0;
        md5->format_desc.blocking.inner_blks[k] = b2->inner_blks[k];
        md5->format_desc.blocking.inner_idxs[k] = axis[b2->inner_idxs[k]];
    }
    return dnnl_memory_desc_get_size(md5) == dnnl_memory_desc_get_size(md2);
}

/* A Conv3D of kernel (1, 3, 3), stride and dilation 1, one group (R(2+1)D's spatial
 * convolutions), in f32, as a 2-D Winograd convolution over all the frames of the batch's clips:
 * 2.4x faster than oneDNN 2.6's direct 3-D kernel on Zen 4, a relayout of its input included.
 * The input is relaid so that each frame is one image of the Winograd's layout, the output seen
 * as clips through a view; as for 2-D Winograd, clips go in chunks when the whole batch's
 * scratchpad would outgrow a quarter of the output. *done = 0 when oneDNN has no Winograd
 * kernel for it (the caller convolves the clip directly). */
static vf_status conv_frames(vf_backend *b, const vf_node *nd, const vf_conv_window *cw,
                             const_dnnl_primitive_attr_t attr, int *done)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *wv = &g->values[nd->inputs[1]];
    const vf_axes *ax = &cw->ax;
    *done = 0;
    if (!c->winograd || ax->n != 3 || cw->group != 1 || ax->kernel[0] != 1 || ax->kernel[1] != 3 ||
        ax->kernel[2] != 3 || ax->pad_begin[0] != 0 || ax->pad_end[0] != 0)
        return VF_OK;
    for (int a = 0; a < 3; a++) {
        if (ax->stride[a] != 1 || ax->dilation[a] != 1)
            return VF_OK;
    }
    dnnl_primitive_desc_t pd = NULL, sub_pd = NULL;
    dnnl_memory_desc_t w_user, b_md, x2, y2, x5, y5;
    int64_t t = xv->dims[2], clips = c->p->batch;
    vf_status rc = vfi_dnnl_conv_pd(b, nd, clips, CONV_FRAMES_WINO, attr, &pd, &w_user, &b_md);
    if (rc == VF_ERR_UNSUPPORTED)
        return VF_OK;
    if (rc < 0)
        return rc;
    size_t budget =
        dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0)) / 4;
    while (scratch_bytes(pd) > budget && clips % 2 == 0) {
        if (vfi_dnnl_conv_pd(b, nd, clips / 2, CONV_FRAMES_WINO, attr, &sub_pd, &w_user, &b_md) < 0)
            break; /* the whole batch's, then */
        dnnl_primitive_desc_destroy(pd);
        pd = sub_pd;
        sub_pd = NULL;
        clips /= 2;
    }
    const dnnl_memory_desc_t *sub_x = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *sub_y = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!vfi_dnnl_batch_outermost(sub_x) || !vfi_dnnl_batch_outermost(sub_y))
        goto fail; /* not done */
    x2 = with_batch(sub_x, c->p->batch * t);
    y2 = with_batch(sub_y, c->p->batch * t);
    if (!clip_of_frames(&x2, t, &x5) || !clip_of_frames(&y2, t, &y5))
        goto fail;
    int x, w, bias = -1, y, y_clip;
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &x5, &x));
    TRY(vfi_dnnl_upload_const(b, wv, &w_user,
                              dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &w));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &b_md, &b_md, &bias));
    TRY(vfi_dnnl_new_buf(b, &y2, BUF_ARENA, &y));
    TRY(chunk_steps(b, pd, c->p->batch / clips, x, w, bias, y));
    TRY(vfi_dnnl_new_view(b, y, &y5, &y_clip));
    c->p->vbuf[nd->output] = y_clip;
    *done = 1;
fail:
    if (sub_pd)
        dnnl_primitive_desc_destroy(sub_pd);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Is node nd a depthwise Conv3D (a filter per channel)? */
static int depthwise3d(const vf_graph *g, const vf_node *nd, const vf_conv_window *cw)
{
    int64_t channels = g->values[nd->inputs[0]].dims[1];
    return cw->ax.n == 3 && cw->group > 1 && cw->group == channels &&
           g->values[nd->inputs[1]].dims[0] == channels;
}

/* A host step's work: the depthwise 3-D convolution of node nd over its first n clips, on the
 * buffers input, weights, output, bias (when it has one), channels last (dwconv.h). */
static vf_status run_dw3d(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data,
                          int n, int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)s, (void)batch;
    vf_conv_window cw;
    vfi_conv_window(c->g, nd, &cw);
    const vf_value *xv = &c->g->values[nd->inputs[0]], *yv = &c->g->values[nd->output];
    vfi_dwconv3d_nlc(&cw, n, xv->dims[1], xv->dims + 2, yv->dims + 2, data[0], data[1],
                     nd->n_inputs > 2 ? data[3] : NULL, data[2]);
    return VF_OK;
}

/* A depthwise Conv3D as a host step (dwconv.h): f32, channels last in and out, whatever the
 * activation type (the step's neighbours convert). */
static vf_status conv_dw3d_host(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_dims_t xd, yd, wd, bd = {wv->dims[0]};
    memcpy(wd, wv->dims, 5 * sizeof(int64_t));
    vfi_dnnl_value_dims(c, &g->values[nd->inputs[0]], xd);
    vfi_dnnl_value_dims(c, &g->values[nd->output], yd);
    dnnl_memory_desc_t xmd, ymd, w_user, w_want, b_md;
    CHECK(dnnl_memory_desc_init_by_tag(&xmd, 5, xd, dnnl_f32, dnnl_acdeb));
    CHECK(dnnl_memory_desc_init_by_tag(&ymd, 5, yd, dnnl_f32, dnnl_acdeb));
    /* the filters [C, 1, KT, KH, KW] as [KT, KH, KW, C] */
    CHECK(dnnl_memory_desc_init_by_tag(&w_user, 5, wd, dnnl_f32, dnnl_abcde));
    CHECK(dnnl_memory_desc_init_by_tag(&w_want, 5, wd, dnnl_f32, dnnl_bcdea));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    int bufs[4], n_bufs = 3;
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &xmd, &bufs[0]));
    TRY(vfi_dnnl_upload_const(b, wv, &w_user, &w_want, &bufs[1]));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &bufs[2]));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &b_md, &b_md, &bufs[n_bufs++]));
    TRY(vfi_dnnl_add_host(b, nd, run_dw3d, n_bufs, bufs));
    c->p->vbuf[nd->output] = bufs[2];
fail:
    return rc;
}

/* Winograd keeps the transformed tiles of the whole batch in its scratchpad: for VGG19's
 * 224x224 layers at batch 32 that is 1.1 GB, more than the layer's own output (411 MB). Such a
 * layer runs in the fewest equal chunks (halving) whose scratchpad fits in a quarter of the
 * layer's output, so that the activations, not the scratchpad, set the peak memory: VGG19 at
 * batch 32 peaks at 1.67 GB instead of 2.72 GB (scratchpad 49 MB), at the same speed. */
vf_status vfi_dnnl_conv_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    if (c->vdt && vfi_dnnl_runs_int8(c, nd))
        return conv_int8(b, nd);
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_conv_window cw;
    vfi_conv_window(g, nd, &cw);
    if (depthwise3d(g, nd, &cw))
        return conv_dw3d_host(b, nd);
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL, sub_pd = NULL;
    dnnl_memory_desc_t w_user, b_md;
    TRY(vfi_dnnl_make_attr(b, &cw.act, &attr));
    int framed = 0;
    TRY(conv_frames(b, nd, &cw, attr, &framed));
    if (framed)
        goto fail; /* finished: only the cleanup is left */
    int try_wino = c->winograd && cw.ax.n == 2 && cw.group == 1 && wv->dims[2] == 3 &&
                   wv->dims[3] == 3 && cw.ax.stride[0] == 1 && cw.ax.stride[1] == 1 &&
                   cw.ax.dilation[0] == 1 && cw.ax.dilation[1] == 1;
    int own = 0;
    TRY(vfi_dnnl_conv_own(b, nd, &cw, attr, try_wino, &own));
    if (own)
        goto fail; /* finished: only the cleanup is left */
    TRY(vfi_dnnl_conv_pd(b, nd, c->p->batch, try_wino ? CONV_WINO : CONV_DIRECT, attr, &pd, &w_user,
                         &b_md));
    const dnnl_memory_desc_t *got_dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    size_t budget = dnnl_memory_desc_get_size(got_dst) / 4;
    if (try_wino && scratch_bytes(pd) > budget) {
        /* halve the batch while that shrinks the scratchpad: a small map of many channels
         * (VGGish's 12x8x512) spends it on the transformed weights, whatever the batch, and
         * chunks of one image would only run slower */
        dnnl_primitive_desc_t cand = NULL;
        for (int64_t k = 2; k <= c->p->batch && c->p->batch % k == 0; k *= 2) {
            TRY(vfi_dnnl_conv_pd(b, nd, c->p->batch / k, CONV_WINO, attr, &cand, &w_user, &b_md));
            size_t was = scratch_bytes(sub_pd ? sub_pd : pd);
            if (scratch_bytes(cand) > was / 4 * 3) {
                dnnl_primitive_desc_destroy(cand);
                break;
            }
            if (sub_pd)
                dnnl_primitive_desc_destroy(sub_pd);
            sub_pd = cand;
            if (scratch_bytes(sub_pd) <= budget)
                break;
        }
        if (sub_pd) {
            int done = 0;
            TRY(conv_chunked(b, nd, sub_pd, &w_user, &b_md, &done));
            if (done)
                goto fail; /* finished: only the cleanup is left */
        }
    }
    TRY(weighted_step(b, nd, pd, wv->data, nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL,
                      &w_user, 0.0f));
fail:
    if (sub_pd)
        dnnl_primitive_desc_destroy(sub_pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* An inner product, in f32 / bf16, or in int8 when plan_int8 chose it. */
vf_status vfi_dnnl_fc_op(vf_backend *b, const vf_node *nd)
{
    int own;
    vf_status orc = vfi_dnnl_fc_own(b, nd, &own); /* AVX2: one order of sums for every row */
    if (orc < 0 || own)
        return orc;
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t src_md, w_md, b_md, dst_md, w_user;
    /* the rows: the batch times the rows per image ([N x tokens, K] in a transformer) */
    int64_t rows = c->p->batch * c->g->values[nd->inputs[0]].dims[0];
    dnnl_dims_t xd = {rows, wv->dims[1]}, yd = {rows, wv->dims[0]}, bd = {wv->dims[0]},
                wd = {wv->dims[0], wv->dims[1]};
    int i8 = c->vdt && vfi_dnnl_runs_int8(c, nd);
    qparams q;
    memset(&q, 0, sizeof(q));
    dnnl_data_type_t sdt = c->act_dt, wdt = c->act_dt, ddt = c->act_dt;
    if (i8) {
        float ys = out_scale(c, nd->output);
        TRY(quantize_wb(b, nd, c->vscale[nd->inputs[0]], ys, &q));
        TRY(int8_attr(b, &nd->p.fc.act, ys, &q, &attr));
        sdt = c->qdt[nd->inputs[0]];
        wdt = dnnl_s8;
        ddt = c->vdt[nd->output];
    } else {
        TRY(vfi_dnnl_make_attr(b, &nd->p.fc.act, &attr));
    }
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 2, xd, sdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&w_md, 2, wd, wdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&w_user, 2, wd, i8 ? dnnl_s8 : dnnl_f32, dnnl_oi));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 2, yd, ddt, dnnl_format_tag_any));
    dnnl_inner_product_desc_t ipd;
    CHECK(dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src_md, &w_md,
                                               nd->n_inputs > 2 ? &b_md : NULL, &dst_md));
    CHECK(dnnl_primitive_desc_create(&pd, &ipd, attr, c->engine, NULL));
    if (i8)
        TRY(weighted_step(b, nd, pd, q.w, q.bias, &w_user, src_scale(c, nd->inputs[0])));
    else
        TRY(weighted_step(b, nd, pd, wv->data,
                          nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL, &w_user, 0.0f));
fail:
    qparams_free(&q);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* One eltwise step on buffer x into buffer y (in place when y == x). */

vf_status vfi_dnnl_act_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    int x = c->p->vbuf[nd->inputs[0]], y;
    vf_status rc = vfi_dnnl_new_buf(b, &c->p->bufs[x].md, BUF_ARENA, &y);
    if (rc < 0)
        return rc;
    vfi_dnnl_eltwise op[2];
    int n = vfi_dnnl_act_eltwise(&nd->p.act, op);
    if (n < 0) /* no erf kernel: Erf outside GELU's pattern is not run here */
        rc = vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                      "node '%s': Erf outside the GELU pattern (the reference backend runs it)",
                      nd->name);
    else if (n == 0)
        rc = vfi_dnnl_add_reorder(b, x, y);
    for (int i = 0; i < n && rc >= 0; i++) /* the first into y, the others in place */
        rc = vfi_dnnl_eltwise_step(b, i ? y : x, y, op[i].alg, op[i].alpha, op[i].beta);
    c->p->vbuf[nd->output] = y;
    return rc;
}

/* POOL and POOL3D: oneDNN pools 4-D and 5-D tensors alike. */
static int has_tag(const dnnl_memory_desc_t *md, dnnl_format_tag_t tag);

vf_status vfi_dnnl_pool_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t dst_md;
    dnnl_dims_t yd, kernel, strides, dil, pl, pr;
    vf_pool_window w;
    vfi_pool_window(g, nd, &w);
    vfi_dnnl_value_dims(c, yv, yd);
    for (int a = 0; a < w.ax.n; a++) {
        kernel[a] = w.ax.kernel[a];
        strides[a] = w.ax.stride[a];
        dil[a] = w.ax.dilation[a] - 1;
        pl[a] = w.ax.pad_begin[a];
        pr[a] = w.ax.pad_end[a];
    }
    dnnl_alg_kind_t alg = w.kind == VF_POOL_MAX ? dnnl_pooling_max
                          : w.count_include_pad ? dnnl_pooling_avg_include_padding
                                                : dnnl_pooling_avg_exclude_padding;
    int x = c->p->vbuf[nd->inputs[0]], y;
    if (w.ax.n == 3 && has_tag(&c->p->bufs[x].md, dnnl_abcde)) {
        /* oneDNN 2.6 pools a row-major clip with a plain loop 10x slower than its kernel for
         * channels last (MViT's skip connections): the reorder costs less than the loss */
        dnnl_memory_desc_t last;
        const dnnl_memory_desc_t *md = &c->p->bufs[x].md;
        CHECK(dnnl_memory_desc_init_by_tag(&last, 5, md->dims, md->data_type, dnnl_acdeb));
        TRY(vfi_dnnl_ensure_md(b, x, &last, &x));
    }
    dnnl_data_type_t ydt = c->vdt ? vfi_dnnl_dt_of(c, nd->output) : c->p->bufs[x].md.data_type;
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 2 + w.ax.n, yd, ydt, dnnl_format_tag_any));
    dnnl_pooling_v2_desc_t pdsc;
    CHECK(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &c->p->bufs[x].md,
                                            &dst_md, strides, kernel, dil, pl, pr));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_primitive_desc_create(&pd, &pdsc, attr, c->engine, NULL));
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA, &y));
    int kinds[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, bufs[2] = {x, y};
    TRY(vfi_dnnl_add_step(b, pd, 2, kinds, bufs));
    c->p->vbuf[nd->output] = y;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Does constant b broadcast over a dimension of y other than the batch's first one, in a
 * tensor whose images are outermost? (Swin's window mask [1, 64, 1, 49, 49] over [N, 64, 3, 49,
 * 49]: oneDNN runs such a broadcast with its reference kernel, 0.9 s a batch of 32.) */
static int spreads(const vf_value *a, const vf_value *b, const vf_value *y)
{
    if (y->rank == 4 || a->batch_axis != 0 || a->batch_outer != 1)
        return 0;
    for (int i = 1; i < y->rank; i++) {
        int j = i - (y->rank - b->rank);
        if ((j < 0 ? 1 : b->dims[j]) != y->dims[i])
            return 1;
    }
    return 0;
}

/* x op b with b spread over an image's elements once, at planning: [N, per image] op [1, per
 * image], which oneDNN's kernel broadcasts fast. */
static vf_status binary_spread(vf_backend *b, const vf_node *nd, int i1, int x0)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *bv = &g->values[i1], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    int64_t per = vfi_value_numel(yv), st[VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    float *spread = vfi_mallocarray((size_t)per, sizeof(float));
    if (!spread)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    vfi_dims_broadcast_strides(yv->rank, bv->rank, bv->dims, st);
    for (int64_t k = 0; k < per; k++) {
        spread[k] = ((const float *)bv->data)[vfi_dims_offset(yv->rank, idx, st)];
        vfi_dims_next(yv->rank, yv->dims, idx);
    }
    dnnl_memory_desc_t user, want, md2;
    dnnl_dims_t cd = {1, per}, xd = {c->p->batch, per};
    int x1, y, xv, yv2;
    dnnl_data_type_t dt = c->p->bufs[x0].md.data_type;
    CHECK(dnnl_memory_desc_init_by_tag(&user, 2, cd, dnnl_f32, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&want, 2, cd, dt, dnnl_ab));
    TRY(vfi_dnnl_upload_data(b, bv, spread, &user, &want, &x1));
    CHECK(dnnl_memory_desc_init_by_tag(&md2, 2, xd, dt, dnnl_ab));
    TRY(vfi_dnnl_new_view(b, x0, &md2, &xv));
    TRY(vfi_dnnl_new_buf(b, &c->p->bufs[x0].md, BUF_ARENA, &y));
    TRY(vfi_dnnl_new_view(b, y, &md2, &yv2));
    static const dnnl_alg_kind_t algs[] = {dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
                                           dnnl_binary_div};
    dnnl_binary_desc_t bd;
    CHECK(dnnl_binary_desc_init(&bd, algs[nd->p.binary], &md2, &want, &md2));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, bufs[3] = {xv, x1, yv2};
    TRY(vfi_dnnl_add_prim(b, &bd, attr, 3, kinds, bufs, NULL));
    c->p->vbuf[nd->output] = y;
fail:
    vfi_free(spread);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* A clip's activation in a layout the 3-D convolutions chose (channels last, or channels in
 * blocks of 16 or 8), which the binary kernel reads as fast as its plain one. */
static int clip_layout(const dnnl_memory_desc_t *md)
{
    return md->ndims == 5 &&
           (has_tag(md, dnnl_acdeb) || has_tag(md, dnnl_aBcde16b) || has_tag(md, dnnl_aBcde8b));
}

vf_status vfi_dnnl_binary_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    int i0 = nd->inputs[0], i1 = nd->inputs[1];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    /* oneDNN broadcasts only src1: the full-size operand goes first (add/mul commute). */
    if (vfi_value_numel(&g->values[i0]) < vfi_value_numel(yv) && g->values[i1].is_batched) {
        if (nd->p.binary == VF_BIN_SUB || nd->p.binary == VF_BIN_DIV)
            return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                            "node '%s': broadcasting the first operand of a sub/div", nd->name);
        int t = i0;
        i0 = i1;
        i1 = t;
    }
    const vf_value *av = &g->values[i0], *bv = &g->values[i1];
    if (vfi_value_numel(av) != vfi_value_numel(yv))
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s': both operands broadcast",
                        nd->name);
    int x0 = c->p->vbuf[i0], x1, y;
    if (av->rank != 4 && !clip_layout(&c->p->bufs[x0].md)) {
        /* outside the image operators' blocked layouts, row-major (oneDNN's binary kernel
         * for other orders of dimensions is its slow reference one) */
        dnnl_memory_desc_t pmd;
        TRY(vfi_dnnl_plain_md(b, av, c->p->bufs[x0].md.data_type, &pmd));
        TRY(vfi_dnnl_ensure_md(b, x0, &pmd, &x0));
    }
    if (!bv->is_batched && spreads(av, bv, yv))
        return binary_spread(b, nd, i1, x0);
    if (bv->is_batched) {
        x1 = c->p->vbuf[i1];
        if (vfi_value_numel(bv) == vfi_value_numel(av))
            TRY(vfi_dnnl_ensure_md(b, x1, &c->p->bufs[x0].md, &x1));
    } else {
        /* A constant, aligned to the output's rank with leading 1s, in the activation type. */
        vf_value aligned = *bv;
        aligned.rank = yv->rank;
        aligned.is_batched = 0;
        for (int i = 0; i < yv->rank; i++) {
            int j = i - (yv->rank - bv->rank);
            aligned.dims[i] = j >= 0 ? bv->dims[j] : 1;
        }
        dnnl_memory_desc_t user, want;
        TRY(vfi_dnnl_plain_md(b, &aligned, dnnl_f32, &user));
        TRY(vfi_dnnl_plain_md(b, &aligned, c->p->bufs[x0].md.data_type, &want));
        TRY(vfi_dnnl_upload_const(b, bv, &user, &want, &x1));
    }
    static const dnnl_alg_kind_t algs[] = {dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
                                           dnnl_binary_div};
    TRY(vfi_dnnl_new_buf(b, &c->p->bufs[x0].md, BUF_ARENA, &y));
    dnnl_binary_desc_t bd;
    CHECK(dnnl_binary_desc_init(&bd, algs[nd->p.binary], &c->p->bufs[x0].md, &c->p->bufs[x1].md,
                                &c->p->bufs[y].md));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, bufs[3] = {x0, x1, y};
    TRY(vfi_dnnl_add_prim(b, &bd, attr, 3, kinds, bufs, NULL));
    c->p->vbuf[nd->output] = y;
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Is md exactly the layout `tag` for its dims and data type? */
static int has_tag(const dnnl_memory_desc_t *md, dnnl_format_tag_t tag)
{
    dnnl_memory_desc_t t;
    if (dnnl_memory_desc_init_by_tag(&t, md->ndims, md->dims, md->data_type, tag) != dnnl_success)
        return 0;
    return dnnl_memory_desc_equal(md, &t);
}

static vf_status concat_narrow(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int n = nd->n_inputs;
    dnnl_memory_desc_t *mds = vfi_mallocarray((size_t)n, sizeof(*mds));
    int *kinds = vfi_mallocarray((size_t)n + 1, sizeof(int));
    int *bufs = vfi_mallocarray((size_t)n + 1, sizeof(int));
    if (!mds || !kinds || !bufs) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (n + 1 > MAX_ARGS) {
        /* Many inputs (DenseNet): concatenate pairwise into plain buffers instead. */
        rc = vfi_fail(&b->err, VF_ERR_INTERNAL, "concat_op called with %d inputs", n);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        bufs[i] = c->p->vbuf[nd->inputs[i]];
        kinds[i] = DNNL_ARG_MULTIPLE_SRC + i;
        mds[i] = c->p->bufs[bufs[i]].md;
    }
    /* Inputs in different layouts send oneDNN to its slow reference concat: bring 4-D inputs
     * to channels-last (what its convolutions use on this class of CPU) when they differ. */
    static const dnnl_format_tag_t layouts[] = {dnnl_acdb, dnnl_aBcd16b, dnnl_abcd};
    int uniform = mds[0].ndims != 4;
    for (size_t t = 0; !uniform && t < sizeof(layouts) / sizeof(layouts[0]); t++) {
        uniform = 1;
        for (int i = 0; i < n && uniform; i++)
            uniform = has_tag(&mds[i], layouts[t]);
    }
    /* one data type too: a bf16 plan's f32 layers give f32 inputs (dt_of is bf16 there) */
    for (int i = 1; i < n && uniform; i++)
        uniform = mds[i].data_type == mds[0].data_type;
    for (int i = 0; !uniform && i < n; i++) {
        dnnl_memory_desc_t want;
        if (mds[i].ndims == 4)
            CHECK(dnnl_memory_desc_init_by_tag(&want, 4, mds[i].dims,
                                               vfi_dnnl_dt_of(c, nd->inputs[i]), dnnl_acdb));
        else
            TRY(vfi_dnnl_plain_md(b, &c->g->values[nd->inputs[i]], vfi_dnnl_dt_of(c, nd->inputs[i]),
                                  &want));
        TRY(vfi_dnnl_ensure_md(b, bufs[i], &want, &bufs[i]));
        mds[i] = want;
    }
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_concat_primitive_desc_create(&pd, NULL, n, nd->p.axis, mds, attr, c->engine));
    int y;
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA, &y));
    kinds[n] = DNNL_ARG_DST;
    bufs[n] = y;
    TRY(vfi_dnnl_add_step(b, pd, n + 1, kinds, bufs));
    c->p->vbuf[nd->output] = y;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    vfi_free(mds);
    vfi_free(kinds);
    vfi_free(bufs);
    return rc;
}

/* Concat with more inputs than a step has argument slots: each input is reordered into its
 * slice (a view) of one plain output buffer. */
static vf_status concat_wide(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd;
    int y;
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    dnnl_dims_t offsets = {0};
    for (int i = 0; i < nd->n_inputs; i++) {
        const vf_value *xv = &g->values[nd->inputs[i]];
        dnnl_dims_t xd;
        vfi_dnnl_value_dims(c, xv, xd);
        dnnl_memory_desc_t sub;
        int view;
        CHECK(dnnl_memory_desc_init_submemory(&sub, &ymd, xd, offsets));
        TRY(vfi_dnnl_new_view(b, y, &sub, &view));
        TRY(vfi_dnnl_add_reorder(b, c->p->vbuf[nd->inputs[i]], view));
        offsets[nd->p.axis] += xv->dims[nd->p.axis];
    }
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

/* Softmax and LRN: the output keeps the input's layout. */
vf_status vfi_dnnl_softmax_lrn_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    int x = c->p->vbuf[nd->inputs[0]], y;
    const dnnl_memory_desc_t *md = &c->p->bufs[x].md;
    dnnl_softmax_desc_t sd;
    dnnl_lrn_desc_t ld;
    const_dnnl_op_desc_t desc = &sd;
    if (nd->op == VF_OP_SOFTMAX) {
        CHECK(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, md, nd->p.axis));
    } else {
        const vf_lrn_params *p = &nd->p.lrn;
        CHECK(dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, dnnl_lrn_across_channels, md,
                                         p->size, p->alpha, p->beta, p->bias));
        desc = &ld;
    }
    TRY(vfi_dnnl_new_buf(b, md, BUF_ARENA, &y));
    TRY(vfi_dnnl_src_dst_step(b, x, y, desc));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

vf_status vfi_dnnl_pad_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd, sub;
    dnnl_dims_t xd, offsets;
    int y, view;
    vfi_dnnl_value_dims(c, xv, xd);
    for (int i = 0; i < xv->rank; i++)
        offsets[i] = nd->p.pad.begin[i];
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    TRY(vfi_dnnl_add_fill(b, y, nd->p.pad.value));
    CHECK(dnnl_memory_desc_init_submemory(&sub, &ymd, xd, offsets));
    TRY(vfi_dnnl_new_view(b, y, &sub, &view));
    TRY(vfi_dnnl_add_reorder(b, c->p->vbuf[nd->inputs[0]], view));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

vf_status vfi_dnnl_reduce_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_memory_desc_t ymd, kmd;
    int x = c->p->vbuf[nd->inputs[0]], y, view;
    /* in a bf16 plan, an input computed in f32 stays f32 (no f32-to-bf16 reduction kernel) */
    dnnl_data_type_t ydt = c->f32node ? c->p->bufs[x].md.data_type : c->act_dt;
    TRY(vfi_dnnl_plain_md(b, yv, ydt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    /* The same memory seen with the reduced axes kept as 1s. */
    vf_value kept = *xv;
    int reduces = 0; /* an axis longer than 1 is averaged */
    for (int i = 0; i < xv->rank; i++) {
        if (nd->p.reduce.axes & (1u << i)) {
            reduces |= kept.dims[i] > 1;
            kept.dims[i] = 1;
        }
    }
    TRY(vfi_dnnl_plain_md(b, &kept, ydt, &kmd));
    TRY(vfi_dnnl_new_view(b, y, &kmd, &view));
    if (!reduces) {
        /* every averaged axis has one entry: a copy (oneDNN refuses a reduction that keeps
         * every dim, S3D's mean over its last 1 x 1 x 1) */
        TRY(vfi_dnnl_add_reorder(b, x, view));
    } else {
        dnnl_reduction_desc_t rd;
        CHECK(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &c->p->bufs[x].md, &kmd, 0.0f,
                                       0.0f));
        TRY(vfi_dnnl_make_attr(b, NULL, &attr));
        int kinds[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, bufs[2] = {x, view};
        TRY(vfi_dnnl_add_prim(b, &rd, attr, 2, kinds, bufs, NULL));
    }
    c->p->vbuf[nd->output] = y;
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Transpose and Reshape: a reorder from the input's layout into a plain output buffer, seen
 * through a descriptor over the input's dims (permuted strides for a transpose). */
/* Is value v read only as an operand of products that take a as it lies (two activations, or
 * a constant per leading index: any strides), and not the graph's output? */
static int only_products_read(const vf_graph *g, int v)
{
    int users = 0;
    if (v == g->output)
        return 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] != v)
                continue;
            if (n->op != VF_OP_MATMUL || j > 1 || vfi_matmul_flat(g, n))
                return 0;
            users++;
        }
    }
    return users > 0;
}

vf_status vfi_dnnl_relayout_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd, vmd;
    int y, view, x = c->p->vbuf[nd->inputs[0]];
    if (nd->op == VF_OP_RESHAPE) {
        /* a row-major input is the output already: the same bytes seen with the new dims */
        dnnl_data_type_t dt = c->p->bufs[x].md.data_type;
        TRY(vfi_dnnl_plain_md(b, xv, dt, &vmd));
        if (dnnl_memory_desc_equal(&c->p->bufs[x].md, &vmd)) {
            TRY(vfi_dnnl_plain_md(b, yv, dt, &ymd));
            TRY(vfi_dnnl_new_view(b, x, &ymd, &view));
            c->p->vbuf[nd->output] = view;
            return VF_OK;
        }
    }
    if (nd->op == VF_OP_TRANSPOSE && only_products_read(g, nd->output)) {
        /* attention's q, k and v go to oneDNN's matmul as they lie: the input's bytes seen
         * through permuted strides, no copy */
        dnnl_data_type_t dt = c->p->bufs[x].md.data_type;
        TRY(vfi_dnnl_plain_md(b, xv, dt, &vmd));
        if (dnnl_memory_desc_equal(&c->p->bufs[x].md, &vmd)) {
            dnnl_dims_t yd, st;
            vfi_dnnl_value_dims(c, yv, yd);
            for (int i = 0; i < yv->rank; i++)
                st[i] = vmd.format_desc.blocking.strides[nd->p.perm[i]];
            CHECK(dnnl_memory_desc_init_by_strides(&ymd, yv->rank, yd, dt, st));
            TRY(vfi_dnnl_new_view(b, x, &ymd, &view));
            c->p->vbuf[nd->output] = view;
            return VF_OK;
        }
    }
    TRY(vfi_dnnl_plain_md(b, yv, vfi_dnnl_dt_of(c, nd->output), &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    if (nd->op == VF_OP_TRANSPOSE) {
        dnnl_dims_t xd, st;
        vfi_dnnl_value_dims(c, xv, xd);
        for (int i = 0; i < yv->rank; i++)
            st[nd->p.perm[i]] = ymd.format_desc.blocking.strides[i];
        CHECK(dnnl_memory_desc_init_by_strides(&vmd, xv->rank, xd, c->act_dt, st));
    } else {
        TRY(vfi_dnnl_plain_md(b, xv, vfi_dnnl_dt_of(c, nd->inputs[0]), &vmd));
    }
    TRY(vfi_dnnl_new_view(b, y, &vmd, &view));
    TRY(vfi_dnnl_add_reorder(b, x, view));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

vf_status vfi_dnnl_gather_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_gather_params *p = &nd->p.gather;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t xmd, ymd, ext_md;
    int x, y;
    TRY(vfi_dnnl_plain_md(b, xv, c->act_dt, &xmd));
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &xmd, &x));
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    vf_value ext = *xv; /* the output seen with the gathered axis kept */
    ext.dims[p->axis] = p->n_indices;
    TRY(vfi_dnnl_plain_md(b, &ext, c->act_dt, &ext_md));
    dnnl_dims_t slice, src_off = {0}, dst_off = {0};
    vfi_dnnl_value_dims(c, xv, slice);
    slice[p->axis] = 1;
    for (int j = 0; j < p->n_indices; j++) {
        dnnl_memory_desc_t smd, dmd;
        int sv, dv;
        src_off[p->axis] = p->indices[j];
        dst_off[p->axis] = j;
        CHECK(dnnl_memory_desc_init_submemory(&smd, &xmd, slice, src_off));
        CHECK(dnnl_memory_desc_init_submemory(&dmd, &ext_md, slice, dst_off));
        TRY(vfi_dnnl_new_view(b, x, &smd, &sv));
        TRY(vfi_dnnl_new_view(b, y, &dmd, &dv));
        TRY(vfi_dnnl_add_reorder(b, sv, dv));
    }
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

vf_status vfi_dnnl_concat_op(vf_backend *b, const vf_node *nd)
{
    return nd->n_inputs + 1 > MAX_ARGS ? concat_wide(b, nd) : concat_narrow(b, nd);
}
