/*
 * backend_cuda_cnn.c - the operators cuDNN runs: convolutions (NHWC where tensor cores want it,
 * asymmetric padding as a padded copy, algorithms searched by backend_cuda.c; 3-D ones NCDHW),
 * inner products (cuBLAS), activations, pooling, binary operators, concatenation (cudaMemcpy2D into
 * slices), gathers, transposes, padding, softmax, LRN, reductions and reshapes (views). Each reads
 * its node and adds steps through backend_cuda_plan.c; backend_cuda.c's table calls them.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/mem.h"
#include "engine/backend_cuda_int.h"

/* ---- ops ------------------------------------------------------------------------------------ */

/* The node's output buffer and its view, in the layout the op chose (vlay[output], set first). */
static vf_status out_buf(vf_backend *b, const vf_node *nd, tview *yv, int *y)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[nd->output];
    vf_status rc = vfi_cuda_act_view(b, yv, nd->output);
    if (rc < 0)
        return rc;
    rc = vfi_cuda_new_buf(b, BUF_ARENA,
                          (size_t)vfi_value_sample_numel(v) * (size_t)c->max_batch * c->es, y);
    if (rc >= 0)
        c->vbuf[nd->output] = *y;
    return rc;
}

/* The filter [K, C / group, R, S] of a convolution, read as KCRS or (nhwc) KRSC. */
static vf_status set_filter(vf_backend *b, cudnnFilterDescriptor_t wd, const vf_value *wv, int nhwc)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    DN(cudnnSetFilter4dDescriptor(wd, c->act_dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                  (int)wv->dims[0], (int)wv->dims[1], (int)wv->dims[2],
                                  (int)wv->dims[3]));
fail:
    return rc;
}

static vf_status set_conv(vf_backend *b, cudnnConvolutionDescriptor_t cd, const vf_conv_params *p,
                          int pad_h, int pad_w)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    DN(cudnnSetConvolution2dDescriptor(cd, pad_h, pad_w, p->win.stride[0], p->win.stride[1],
                                       p->win.dilation[0], p->win.dilation[1],
                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DN(cudnnSetConvolutionGroupCount(cd, p->group));
    DN(cudnnSetConvolutionMathType(cd, c->precision == VF_PRECISION_F32 ? CUDNN_FMA_MATH
                                                                        : CUDNN_TENSOR_OP_MATH));
fail:
    return rc;
}

/* The input of a convolution as the call sees it: x's dims grown by an asymmetric padding
 * (which a padded copy then provides), and the symmetric padding left to cuDNN. */
static void conv_input(const vf_conv_params *p, const vf_value *xv, int64_t dims[4], int *pad_h,
                       int *pad_w)
{
    const int *pads = p->win.pads;
    memcpy(dims, xv->dims, 4 * sizeof(int64_t));
    *pad_h = pads[0];
    *pad_w = pads[1];
    if (pads[0] != pads[2] || pads[1] != pads[3]) {
        dims[2] += pads[0] + pads[2];
        dims[3] += pads[1] + pads[3];
        *pad_h = *pad_w = 0;
    }
}

/* Does convolution nd run NHWC? With tensor-core math, when its input and output channels are
 * multiples of 8 (what those kernels are made for; any under VIDFEAT_CUDA_NHWC=all) and cuDNN's
 * heuristics offer an algorithm for that layout. */
static vf_status conv_layout(vf_backend *b, const vf_node *nd, int *nhwc)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]], *wv = &c->g->values[nd->inputs[1]];
    *nhwc = 0;
    if (!c->nhwc || (c->nhwc == 1 && (xv->dims[1] % 8 || wv->dims[0] % 8)))
        return VF_OK;
    vf_status rc = VF_OK;
    tview xt = {0}, yt = {0};
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    int64_t dims[4];
    int pad_h, pad_w;
    conv_input(&nd->p.conv, xv, dims, &pad_h, &pad_w);
    TRY(vfi_cuda_dense_view(b, &xt, 4, dims, 1, c->act_dt));
    TRY(vfi_cuda_nhwc_view(b, &xt));
    TRY(vfi_cuda_value_view(b, &yt, &c->g->values[nd->output]));
    TRY(vfi_cuda_nhwc_view(b, &yt));
    DN(cudnnCreateFilterDescriptor(&wd));
    TRY(set_filter(b, wd, wv, 1));
    DN(cudnnCreateConvolutionDescriptor(&cd));
    TRY(set_conv(b, cd, &nd->p.conv, pad_h, pad_w));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    DN(cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, xt.d, wd, cd, yt.d,
                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
    for (int j = 0; j < got; j++)
        *nhwc |= perf[j].status == CUDNN_STATUS_SUCCESS;
fail:
    vfi_cuda_destroy_view(&xt);
    vfi_cuda_destroy_view(&yt);
    if (wd)
        cudnnDestroyFilterDescriptor(wd);
    if (cd)
        cudnnDestroyConvolutionDescriptor(cd);
    return rc;
}

/* A convolution step s (writing pre) finished: bias and ReLU fused into its call (fuse), else
 * its bias as a step of its own and act's steps from pre into y. s is sealed here. */
static vf_status conv_epilogue(vf_backend *b, cstep *s, int fuse, int pre, int y, const vf_act *act)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    if (fuse) {
        DN(cudnnCreateActivationDescriptor(&s->ad));
        DN(cudnnSetActivationDescriptor(s->ad, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
        vfi_cuda_seal(c, s);
        return VF_OK;
    }
    vfi_cuda_seal(c, s);
    if (s->bias >= 0) {
        cstep *t;
        int bias = s->bias;
        s->bias = -1; /* the conv call adds nothing; a bias step follows */
        TRY(vfi_cuda_new_step(b, ST_BIAS, -1, pre, &t));
        s = NULL; /* the step array may have moved */
        t->bias = bias;
        t->n_views = 3;
        const cstep *conv = &c->steps[c->n_steps - 2];
        t->v[1] = conv->v[1];
        t->v[2] = conv->v[2];
        t->v[1].d = t->v[2].d = NULL;
        TRY(vfi_cuda_set_view(b, &t->v[1], c->max_batch));
        TRY(vfi_cuda_set_view(b, &t->v[2], c->max_batch));
        vfi_cuda_seal(c, t);
    }
    tview shape = c->steps[c->n_steps - 1].v[2];
    shape.d = NULL;
    rc = vfi_cuda_act_steps(b, act, pre, y, &shape);
    vfi_cuda_destroy_view(&shape);
fail:
    return rc;
}

vf_status vfi_cuda_conv_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_conv_params *p = &nd->p.conv;
    const vf_value *xv = &g->values[nd->inputs[0]], *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, pview = {0};
    if (xv->rank != 4 || wv->rank != 4)
        return vfi_cuda_unsupported(b, "convolution other than 2-D");
    int nhwc;
    TRY(conv_layout(b, nd, &nhwc));
    TRY(vfi_cuda_to_layout(b, nd->inputs[0], nhwc));
    int x = c->vbuf[nd->inputs[0]], y;
    TRY(vfi_cuda_act_view(b, &xview, nd->inputs[0]));
    int64_t in_dims[4];
    int pad_h, pad_w;
    conv_input(p, xv, in_dims, &pad_h, &pad_w);
    if (in_dims[2] != xv->dims[2] || in_dims[3] != xv->dims[3]) {
        TRY(vfi_cuda_padded_copy(b, x, &xview, nhwc, p->win.pads, 0.0f, &x, &pview));
        vfi_cuda_destroy_view(&xview);
        xview = pview;
    }
    c->vlay[nd->output] = (unsigned char)nhwc;
    c->n_nhwc_convs += nhwc;
    TRY(out_buf(b, nd, &yview, &y));
    int fuse = nd->n_inputs > 2 && p->act.kind == VF_ACT_RELU && p->act.alpha == 0.0f;
    int pre = y; /* what the convolution writes; the activation then goes pre -> y */
    if (!vfi_cuda_act_in_place(&p->act))
        TRY(vfi_cuda_temp_like(b, &yview, &pre));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_CONV, x, pre, &s));
    TRY(vfi_cuda_upload_filter(b, nd->inputs[1], nhwc, &s->w));
    if (nd->n_inputs > 2) {
        TRY(vfi_cuda_upload_value(b, nd->inputs[2], 0, &s->bias));
        int64_t bd[4] = {1, wv->dims[0], 1, 1};
        TRY(vfi_cuda_dense_view(b, &s->v[1], 4, bd, 0, c->act_dt));
    }
    s->v[0] = xview;
    s->v[2] = yview;
    xview.d = yview.d = NULL;
    s->n_views = 3;
    DN(cudnnCreateFilterDescriptor(&s->wd));
    TRY(set_filter(b, s->wd, wv, nhwc));
    DN(cudnnCreateConvolutionDescriptor(&s->cd));
    TRY(set_conv(b, s->cd, p, pad_h, pad_w));
    int on, oc, oh, ow;
    DN(cudnnGetConvolution2dForwardOutputDim(s->cd, s->v[0].d, s->wd, &on, &oc, &oh, &ow));
    if (oc != s->v[2].dims[1] || oh != s->v[2].dims[2] || ow != s->v[2].dims[3]) {
        rc = vfi_fail(&b->err, VF_ERR_INTERNAL,
                      "node '%s': cuDNN computes a %dx%dx%d output, the graph %dx%dx%d", nd->name,
                      oc, oh, ow, s->v[2].dims[1], s->v[2].dims[2], s->v[2].dims[3]);
        goto fail;
    }
    TRY(conv_epilogue(b, s, fuse, pre, y, &p->act));
fail:
    vfi_cuda_destroy_view(&xview);
    vfi_cuda_destroy_view(&yview);
    return rc;
}

/* A window cuDNN's N-d calls take: even padding on every axis (cuDNN pads both ends alike;
 * `uneven` names what makes them differ) and each number an int. */
static vf_status nd_window(const vf_axes *ax, const char *what, const char *uneven, vf_err *err)
{
    for (int a = 0; a < ax->n; a++) {
        if (ax->pad_begin[a] != ax->pad_end[a])
            return vfi_fail(err, VF_ERR_UNSUPPORTED,
                            "%s with uneven padding (%s): cuDNN pads evenly", what, uneven);
        if (ax->kernel[a] > INT32_MAX || ax->stride[a] > INT32_MAX || ax->dilation[a] > INT32_MAX ||
            ax->pad_begin[a] > INT32_MAX)
            return vfi_fail(err, VF_ERR_UNSUPPORTED, "a %s window this large", what);
    }
    return VF_OK;
}

/* Conv3D over [N, C, T, H, W] by cuDNN's N-d convolution (NCDHW, weights KCTRS): symmetric
 * padding only (uneven padding is refused when planned: vfi_cuda_conv3d_supports); bias and
 * ReLU in the call where cuDNN fuses them, else a bias step and the activation's steps. */
vf_status vfi_cuda_conv3d_supports(const vf_graph *g, const vf_node *nd, vf_err *err)
{
    vf_conv_window w;
    vfi_conv_window(g, nd, &w);
    return nd_window(&w.ax, "3-D convolution", "SAME", err);
}

vf_status vfi_cuda_conv3d_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]], *wv = &c->g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    tview yview = {0};
    vf_conv_window w;
    vfi_conv_window(c->g, nd, &w);
    if (vfi_cuda_conv3d_supports(c->g, nd, &b->err) < 0) /* checked when planned: kept here */
        return b->err.code;
    int pads[3], strides[3], dil[3], filter[5];
    for (int a = 0; a < 3; a++) {
        pads[a] = (int)w.ax.pad_begin[a];
        strides[a] = (int)w.ax.stride[a];
        dil[a] = (int)w.ax.dilation[a];
    }
    for (int i = 0; i < 5; i++)
        filter[i] = (int)wv->dims[i];
    TRY(vfi_cuda_to_layout(b, nd->inputs[0], 0));
    c->vlay[nd->output] = 0;
    int y;
    TRY(out_buf(b, nd, &yview, &y));
    int fuse = nd->n_inputs > 2 && w.act.kind == VF_ACT_RELU && w.act.alpha == 0.0f;
    int pre = y; /* what the convolution writes; the activation then goes pre -> y */
    if (!vfi_cuda_act_in_place(&w.act))
        TRY(vfi_cuda_temp_like(b, &yview, &pre));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_CONV, c->vbuf[nd->inputs[0]], pre, &s));
    TRY(vfi_cuda_upload_filter(b, nd->inputs[1], 0, &s->w));
    if (nd->n_inputs > 2) {
        TRY(vfi_cuda_upload_value(b, nd->inputs[2], 0, &s->bias));
        int64_t bd[5] = {1, wv->dims[0], 1, 1, 1};
        TRY(vfi_cuda_dense_view(b, &s->v[1], 5, bd, 0, c->act_dt));
    }
    TRY(vfi_cuda_value_view(b, &s->v[0], xv));
    s->v[2] = yview;
    yview.d = NULL;
    s->n_views = 3;
    DN(cudnnCreateFilterDescriptor(&s->wd));
    DN(cudnnSetFilterNdDescriptor(s->wd, c->act_dt, CUDNN_TENSOR_NCHW, 5, filter));
    DN(cudnnCreateConvolutionDescriptor(&s->cd));
    DN(cudnnSetConvolutionNdDescriptor(s->cd, 3, pads, strides, dil, CUDNN_CROSS_CORRELATION,
                                       CUDNN_DATA_FLOAT));
    DN(cudnnSetConvolutionGroupCount(s->cd, w.group));
    DN(cudnnSetConvolutionMathType(s->cd, c->precision == VF_PRECISION_F32 ? CUDNN_FMA_MATH
                                                                           : CUDNN_TENSOR_OP_MATH));
    int out[5];
    DN(cudnnGetConvolutionNdForwardOutputDim(s->cd, s->v[0].d, s->wd, 5, out));
    for (int i = 1; i < 5; i++) {
        if (out[i] != s->v[2].dims[i]) {
            rc = vfi_fail(&b->err, VF_ERR_INTERNAL,
                          "node '%s': cuDNN computes a %dx%dx%dx%d output, the graph %dx%dx%dx%d",
                          nd->name, out[1], out[2], out[3], out[4], s->v[2].dims[1],
                          s->v[2].dims[2], s->v[2].dims[3], s->v[2].dims[4]);
            goto fail;
        }
    }
    TRY(conv_epilogue(b, s, fuse, pre, y, &w.act));
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_fc_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    tview yview = {0};
    if (wv->rank != 2 || vfi_value_sample_numel(xv) != wv->dims[1])
        return vfi_cuda_unsupported(b, "fully connected layer of this shape");
    int y, pre;
    TRY(out_buf(b, nd, &yview, &y));
    pre = y;
    if (!vfi_cuda_act_in_place(&nd->p.fc.act))
        TRY(vfi_cuda_temp_like(b, &yview, &pre));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_GEMM, c->vbuf[nd->inputs[0]], pre, &s));
    s->m = (int)wv->dims[0];
    s->k = (int)wv->dims[1];
    TRY(vfi_cuda_upload_value(b, nd->inputs[1], 0, &s->w));
    vfi_cuda_seal(c, s);
    /* [N, M] seen as [N, M, 1, 1] for the bias and the activation */
    int64_t d4[4] = {1, wv->dims[0], 1, 1};
    tview y4 = {0};
    TRY(vfi_cuda_dense_view(b, &y4, 4, d4, 1, c->act_dt));
    if (nd->n_inputs > 2) {
        cstep *t;
        int bias;
        TRY(vfi_cuda_upload_value(b, nd->inputs[2], 0, &bias));
        TRY(vfi_cuda_new_step(b, ST_BIAS, -1, pre, &t));
        t->bias = bias;
        t->n_views = 3;
        int64_t bd[4] = {1, wv->dims[0], 1, 1};
        TRY(vfi_cuda_dense_view(b, &t->v[1], 4, bd, 0, c->act_dt));
        t->v[2] = y4;
        t->v[2].d = NULL;
        TRY(vfi_cuda_set_view(b, &t->v[2], c->max_batch));
        vfi_cuda_seal(c, t);
    }
    rc = vfi_cuda_act_steps(b, &nd->p.fc.act, pre, y, &y4);
    vfi_cuda_destroy_view(&y4);
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_act_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    c->vlay[nd->output] = c->vlay[nd->inputs[0]]; /* elementwise: either layout */
    TRY(out_buf(b, nd, &yview, &y));
    TRY(vfi_cuda_act_steps(b, &nd->p.act, c->vbuf[nd->inputs[0]], y, &yview));
    if (nd->p.act.kind == VF_ACT_NONE) {
        cstep *s;
        TRY(vfi_cuda_copy_step(b, c->vbuf[nd->inputs[0]], 0, &yview, y, 0, &yview, &s));
    }
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_pool_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_pool_params *p = &nd->p.pool;
    const vf_value *xv = &c->g->values[nd->inputs[0]], *yv = &c->g->values[nd->output];
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, pview = {0};
    if (xv->rank != 4)
        return vfi_cuda_unsupported(b, "pooling other than 2-D");
    int x = c->vbuf[nd->inputs[0]], y, nhwc = c->vlay[nd->inputs[0]]; /* pooled as it is */
    TRY(vfi_cuda_act_view(b, &xview, nd->inputs[0]));
    int kh, kw, sh = 1, sw = 1, pads[4] = {0, 0, 0, 0};
    if (p->global) {
        kh = (int)xv->dims[2];
        kw = (int)xv->dims[3];
    } else {
        kh = p->win.kernel[0];
        kw = p->win.kernel[1];
        sh = p->win.stride[0];
        sw = p->win.stride[1];
        memcpy(pads, p->win.pads, sizeof(pads));
        if (p->win.dilation[0] != 1 || p->win.dilation[1] != 1) {
            rc = vfi_cuda_unsupported(b, "dilated pooling");
            goto fail;
        }
        /* ceil mode: more padding at the end so that floor division gives the graph's size */
        for (int a = 0; a < 2; a++) {
            int64_t need = (yv->dims[2 + a] - 1) * (a ? sw : sh) + (a ? kw : kh);
            int64_t have = xv->dims[2 + a] + pads[a] + pads[a + 2];
            if (need > have)
                pads[a + 2] += (int)(need - have);
        }
    }
    int avg = p->kind == VF_POOL_AVG;
    int asym = pads[0] != pads[2] || pads[1] != pads[3];
    int extended = !p->global && (pads[2] != p->win.pads[2] || pads[3] != p->win.pads[3]);
    if (avg && (asym || extended) && !p->count_include_pad) {
        rc = vfi_cuda_unsupported(b,
                                  "average pooling with uneven padding that excludes the padding");
        goto fail;
    }
    if (avg && extended) {
        rc = vfi_cuda_unsupported(b, "average pooling in ceil mode");
        goto fail;
    }
    int ph = pads[0], pw = pads[1];
    if (asym) {
        TRY(vfi_cuda_padded_copy(b, x, &xview, nhwc, pads, avg ? 0.0f : -INFINITY, &x, &pview));
        vfi_cuda_destroy_view(&xview);
        xview = pview;
        ph = pw = 0;
    }
    c->vlay[nd->output] = (unsigned char)nhwc;
    TRY(out_buf(b, nd, &yview, &y));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_POOL, x, y, &s));
    s->n_views = 3;
    s->v[0] = xview;
    s->v[2] = yview;
    xview.d = yview.d = NULL;
    cudnnPoolingMode_t mode = !avg                   ? CUDNN_POOLING_MAX
                              : p->count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    DN(cudnnCreatePoolingDescriptor(&s->pd));
    DN(cudnnSetPooling2dDescriptor(s->pd, mode, CUDNN_PROPAGATE_NAN, kh, kw, ph, pw, sh, sw));
    int on, oc, oh, ow;
    DN(cudnnGetPooling2dForwardOutputDim(s->pd, s->v[0].d, &on, &oc, &oh, &ow));
    if (oh != s->v[2].dims[2] || ow != s->v[2].dims[3]) {
        rc = vfi_fail(&b->err, VF_ERR_INTERNAL,
                      "node '%s': cuDNN pools to %dx%d, the graph to %dx%d", nd->name, oh, ow,
                      s->v[2].dims[2], s->v[2].dims[3]);
        goto fail;
    }
    vfi_cuda_seal(c, s);
fail:
    vfi_cuda_destroy_view(&xview);
    vfi_cuda_destroy_view(&yview);
    return rc;
}

/* Pool3D over [N, C, T, H, W] by cuDNN's N-d pooling (NCDHW): symmetric padding only (an end
 * grown by ceil mode, or uneven SAME padding, is refused when planned: vfi_cuda_pool3d_supports),
 * no dilation. */
vf_status vfi_cuda_pool3d_supports(const vf_graph *g, const vf_node *nd, vf_err *err)
{
    vf_pool_window w;
    vfi_pool_window(g, nd, &w);
    for (int a = 0; a < 3; a++) {
        if (w.ax.dilation[a] != 1)
            return vfi_fail(err, VF_ERR_UNSUPPORTED, "dilated 3-D pooling (cuDNN has none)");
    }
    return nd_window(&w.ax, "3-D pooling", "ceil mode, SAME", err);
}

vf_status vfi_cuda_pool3d_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    tview yview = {0};
    vf_pool_window w;
    vfi_pool_window(c->g, nd, &w);
    int window[3], pads[3], strides[3];
    if (vfi_cuda_pool3d_supports(c->g, nd, &b->err) < 0) /* checked when planned: kept here */
        return b->err.code;
    for (int a = 0; a < 3; a++) {
        window[a] = (int)w.ax.kernel[a];
        pads[a] = (int)w.ax.pad_begin[a];
        strides[a] = (int)w.ax.stride[a];
    }
    TRY(vfi_cuda_to_layout(b, nd->inputs[0], 0));
    c->vlay[nd->output] = 0;
    int y;
    TRY(out_buf(b, nd, &yview, &y));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_POOL, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 3;
    TRY(vfi_cuda_value_view(b, &s->v[0], xv));
    s->v[2] = yview;
    yview.d = NULL;
    cudnnPoolingMode_t mode = w.kind == VF_POOL_MAX ? CUDNN_POOLING_MAX
                              : w.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    DN(cudnnCreatePoolingDescriptor(&s->pd));
    DN(cudnnSetPoolingNdDescriptor(s->pd, mode, CUDNN_PROPAGATE_NAN, 3, window, pads, strides));
    vfi_cuda_seal(c, s);
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

/* A constant operand aligned to the output's rank (leading 1s), as a broadcast view. */
static vf_status const_operand(vf_backend *b, int vi, const vf_value *yv, int invert, int *buf,
                               tview *view)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[vi];
    int64_t dims[VF_MAX_DIMS];
    for (int i = 0; i < yv->rank; i++) {
        int j = i - (yv->rank - v->rank);
        dims[i] = j >= 0 ? v->dims[j] : 1;
    }
    dims[0] = 1;
    vf_status rc = vfi_cuda_dense_view(b, view, yv->rank, dims, 0, c->act_dt);
    return rc < 0 ? rc : vfi_cuda_upload_value(b, vi, invert, buf);
}

vf_status vfi_cuda_binary_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    int i0 = nd->inputs[0], i1 = nd->inputs[1];
    vf_binary_kind kind = nd->p.binary;
    vf_status rc = VF_OK;
    tview yview = {0}, bview = {0};
    float a1 = 1.0f, a2 = 1.0f;
    if (yv->rank > 5)
        return VFI_CUDA_ON_KERNELS;
    /* cudnnOpTensor broadcasts only its second operand: the full-size one goes first. */
    if (vfi_value_numel(&g->values[i0]) < vfi_value_numel(yv)) {
        if (kind == VF_BIN_DIV)
            return VFI_CUDA_ON_KERNELS; /* division broadcasting its first operand */
        int t = i0;
        i0 = i1;
        i1 = t;
        if (kind == VF_BIN_SUB)
            a1 = -1.0f; /* a - b = -b + a */
    } else if (kind == VF_BIN_SUB) {
        a2 = -1.0f;
    }
    const vf_value *av = &g->values[i0], *bv = &g->values[i1];
    if (vfi_value_numel(av) != vfi_value_numel(yv) || !av->is_batched ||
        (bv->is_batched && kind == VF_BIN_DIV))
        return VFI_CUDA_ON_KERNELS; /* both operands broadcast, or a division by an activation */
    /* NHWC when the first operand is and the second reads the same either way or is full-size */
    int nhwc = c->vlay[i0] && yv->rank == 4 &&
               (vfi_cuda_layout_free(bv) ||
                (bv->is_batched && vfi_value_numel(bv) == vfi_value_numel(yv)));
    TRY(vfi_cuda_to_layout(b, i0, nhwc));
    if (bv->is_batched)
        TRY(vfi_cuda_to_layout(b, i1, nhwc));
    c->vlay[nd->output] = (unsigned char)nhwc;
    int x2;
    if (bv->is_batched) {
        x2 = c->vbuf[i1];
        int64_t dims[VF_MAX_DIMS];
        for (int i = 0; i < yv->rank; i++)
            dims[i] = bv->dims[i];
        TRY(vfi_cuda_dense_view(b, &bview, yv->rank, dims, 1, c->act_dt));
        if (nhwc)
            TRY(vfi_cuda_nhwc_view(b, &bview));
    } else {
        TRY(const_operand(b, i1, yv, kind == VF_BIN_DIV, &x2, &bview));
    }
    int y;
    TRY(out_buf(b, nd, &yview, &y));
    cudnnOpTensorOp_t op =
        kind == VF_BIN_MUL || kind == VF_BIN_DIV ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD;
    TRY(vfi_cuda_optensor(b, op, c->vbuf[i0], a1, x2, a2, &bview, y, &yview));
fail:
    vfi_cuda_destroy_view(&yview);
    vfi_cuda_destroy_view(&bview);
    return rc;
}

/* Rows of bytes copied with cudaMemcpy2D: per sample, rows_per_sample rows of `width` bytes. */
static vf_status memcpy2d_step(vf_backend *b, int x, size_t x_off, size_t spitch, int y,
                               size_t y_off, size_t dpitch, size_t width, int64_t rows)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_MEMCPY2D, x, y, &s));
    s->x_off = x_off;
    s->y_off = y_off;
    s->spitch = spitch;
    s->dpitch = dpitch;
    s->width = width;
    s->rows_per_sample = rows;
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

vf_status vfi_cuda_concat_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    int axis = nd->p.axis;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y, nhwc = 0;
    /* along the channels of NHWC inputs: a slice of each pixel's channels, all made NHWC */
    for (int i = 0; i < nd->n_inputs && axis == 1 && yv->rank == 4; i++)
        nhwc |= c->vlay[nd->inputs[i]];
    for (int i = 0; i < nd->n_inputs; i++)
        TRY(vfi_cuda_to_layout(b, nd->inputs[i], nhwc));
    c->vlay[nd->output] = (unsigned char)nhwc;
    TRY(out_buf(b, nd, &yview, &y));
    int64_t outer = 1, inner = 1;
    for (int d = 1; d < axis; d++)
        outer *= yv->dims[d];
    for (int d = axis + 1; d < yv->rank; d++)
        inner *= yv->dims[d];
    if (nhwc) { /* rows of C_i channels, one a pixel */
        outer = yv->dims[2] * yv->dims[3];
        inner = 1;
    }
    size_t dpitch = (size_t)(yv->dims[axis] * inner) * c->es, at = 0;
    for (int i = 0; i < nd->n_inputs; i++) {
        const vf_value *xv = &g->values[nd->inputs[i]];
        size_t width = (size_t)(xv->dims[axis] * inner) * c->es;
        TRY(memcpy2d_step(b, c->vbuf[nd->inputs[i]], 0, width, y, at, dpitch, width, outer));
        at += width;
    }
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_gather_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]];
    const vf_gather_params *p = &nd->p.gather;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    TRY(out_buf(b, nd, &yview, &y));
    int64_t outer = 1, inner = 1;
    for (int d = 1; d < p->axis; d++)
        outer *= xv->dims[d];
    for (int d = p->axis + 1; d < xv->rank; d++)
        inner *= xv->dims[d];
    size_t row = (size_t)inner * c->es;
    size_t spitch = (size_t)xv->dims[p->axis] * row, dpitch = (size_t)p->n_indices * row;
    for (int j = 0; j < p->n_indices;) {
        int run = 1; /* consecutive indices: one copy */
        while (j + run < p->n_indices && p->indices[j + run] == p->indices[j] + run)
            run++;
        TRY(memcpy2d_step(b, c->vbuf[nd->inputs[0]], (size_t)p->indices[j] * row, spitch, y,
                          (size_t)j * row, dpitch, (size_t)run * row, outer));
        j += run;
    }
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_transpose_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, pview = {0};
    int y;
    TRY(vfi_cuda_value_view(b, &xview, xv));
    TRY(out_buf(b, nd, &yview, &y));
    pview = yview; /* x read with permuted strides, in y's dims */
    pview.d = NULL;
    for (int i = 0; i < xv->rank; i++)
        pview.strides[i] = xview.strides[nd->p.perm[i]];
    TRY(vfi_cuda_copy_step(b, c->vbuf[nd->inputs[0]], 0, &pview, y, 0, &yview, NULL));
fail:
    vfi_cuda_destroy_view(&xview);
    vfi_cuda_destroy_view(&yview);
    vfi_cuda_destroy_view(&pview);
    return rc;
}

vf_status vfi_cuda_pad_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    const vf_pad_params *p = &nd->p.pad;
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, inner = {0};
    int y;
    TRY(vfi_cuda_value_view(b, &xview, xv));
    TRY(out_buf(b, nd, &yview, &y));
    TRY(vfi_cuda_fill_step(b, y, &yview, p->value));
    inner = yview;
    inner.d = NULL;
    size_t off = 0;
    for (int d = 1; d < xv->rank; d++) {
        inner.dims[d] = xview.dims[d];
        off += (size_t)p->begin[d] * (size_t)yview.strides[d];
    }
    TRY(vfi_cuda_copy_step(b, c->vbuf[nd->inputs[0]], 0, &xview, y, off * c->es, &inner, NULL));
fail:
    vfi_cuda_destroy_view(&xview);
    vfi_cuda_destroy_view(&yview);
    vfi_cuda_destroy_view(&inner);
    return rc;
}

/* Softmax along `axis`: the tensor as [N * outer, D, inner, 1], cuDNN's channel mode. */
vf_status vfi_cuda_softmax_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    int axis = nd->p.axis;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    int64_t outer = 1, inner = 1;
    for (int d = 1; d < axis; d++)
        outer *= xv->dims[d];
    for (int d = axis + 1; d < xv->rank; d++)
        inner *= xv->dims[d];
    if (outer != 1)
        return VFI_CUDA_ON_KERNELS; /* dimensions between the batch and its axis */
    TRY(out_buf(b, nd, &yview, &y));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_SOFTMAX, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 1;
    int64_t dims[4] = {1, xv->dims[axis], inner, 1};
    TRY(vfi_cuda_dense_view(b, &s->v[0], 4, dims, 1, c->act_dt));
    vfi_cuda_seal(c, s);
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_lrn_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_lrn_params *p = &nd->p.lrn;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    if (p->size > CUDNN_LRN_MAX_N || p->bias < CUDNN_LRN_MIN_K || p->beta < CUDNN_LRN_MIN_BETA)
        return vfi_cuda_unsupported(
            b, "LRN with these parameters (size <= 16, bias >= 1e-5, beta >= 0.01)");
    TRY(out_buf(b, nd, &yview, &y));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_LRN, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 1;
    s->v[0] = yview;
    yview.d = NULL;
    DN(cudnnCreateLRNDescriptor(&s->ld));
    DN(cudnnSetLRNDescriptor(s->ld, (unsigned)p->size, p->alpha, p->beta, p->bias));
    vfi_cuda_seal(c, s);
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

vf_status vfi_cuda_reduce_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    if (xv->rank > 8)
        return vfi_cuda_unsupported(b, "reduction over a tensor of this rank");
    TRY(out_buf(b, nd, &yview, &y));
    cstep *s;
    TRY(vfi_cuda_new_step(b, ST_REDUCE, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 3;
    TRY(vfi_cuda_value_view(b, &s->v[0], xv));
    int64_t kept[VF_MAX_DIMS];
    for (int d = 0; d < xv->rank; d++)
        kept[d] = nd->p.reduce.axes & (1u << d) ? 1 : xv->dims[d];
    TRY(vfi_cuda_dense_view(b, &s->v[2], xv->rank, kept, 1, c->act_dt));
    DN(cudnnCreateReduceTensorDescriptor(&s->rd));
    DN(cudnnSetReduceTensorDescriptor(s->rd, CUDNN_REDUCE_TENSOR_AVG, CUDNN_DATA_FLOAT,
                                      CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                      CUDNN_32BIT_INDICES));
    size_t ws = 0;
    DN(cudnnGetReductionWorkspaceSize(c->dnn, s->rd, s->v[0].d, s->v[2].d, &ws));
    if (ws > c->ws_size)
        c->ws_size = ws;
    vfi_cuda_seal(c, s);
fail:
    vfi_cuda_destroy_view(&yview);
    return rc;
}

/* A reshape is the same memory seen with other dims. */
vf_status vfi_cuda_reshape_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    int v;
    vf_status rc = vfi_cuda_new_buf(b, BUF_VIEW, 0, &v);
    if (rc < 0)
        return rc;
    c->bufs[v].parent = c->vbuf[nd->inputs[0]];
    c->vbuf[nd->output] = v;
    return VF_OK;
}
