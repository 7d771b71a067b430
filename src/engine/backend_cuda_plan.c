/*
 * backend_cuda_plan.c - building the CUDA backend's steps (backend_cuda_int.h): library failures as
 * messages, buffers and steps with their lifetimes, cuDNN tensor views, constants uploaded in
 * the activation type, activations as steps, copies, fills and conversions. Below every
 * operator's lowering; knows nothing of operators.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "core/mem.h"
#include "engine/backend_cuda_int.h"
#include "engine/cuda_kernels.h"

/* ---- errors --------------------------------------------------------------------------------- */

/* A failed library call as b->err in the user's words (the node, what failed, what to do), never
 * the library's (its call, status, our file and line: the module has no log of its own to put
 * them in; a debugger sees them here). */
static vf_status lib_fail(vf_backend *b, vf_status code, const char *lib, const char *what,
                          const char *text, const char *file, int line)
{
    const cuda_ctx *c = b->ctx;
    const char *node = c && c->node ? c->node : NULL;
    (void)lib, (void)what, (void)text, (void)file, (void)line;
    char at[320] = "";
    if (node)
        snprintf(at, sizeof(at), "node '%.250s': ", node);
    switch (code) {
    case VF_ERR_NOMEM:
        return vfi_fail(&b->err, code,
                        "%sthe GPU ran out of memory: run smaller batches (--batch) or on the CPU "
                        "(--device cpu)",
                        at);
    case VF_ERR_UNSUPPORTED:
        return vfi_fail(&b->err, code,
                        "%sthe GPU backend cannot run this layer in this form or precision: run "
                        "it in f32 (--precision f32) or on the CPU (--device cpu)",
                        at);
    default:
        return vfi_fail(&b->err, code,
                        "%sthe GPU failed: run again with -v -v and report the lines it prints",
                        at);
    }
}

vf_status vfi_cuda_fail(vf_backend *b, cudaError_t e, const char *what, const char *file, int line)
{
    char text[256];
    snprintf(text, sizeof(text), "%s (error %d)", cudaGetErrorString(e), (int)e);
    return lib_fail(b, e == cudaErrorMemoryAllocation ? VF_ERR_NOMEM : VF_ERR_BACKEND, "CUDA", what,
                    text, file, line);
}

vf_status vfi_cuda_dnn_fail(vf_backend *b, cudnnStatus_t s, const char *what, const char *file,
                            int line)
{
    vf_status code = s == CUDNN_STATUS_ALLOC_FAILED ? VF_ERR_NOMEM
                     : s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_BAD_PARAM
                         ? VF_ERR_UNSUPPORTED
                         : VF_ERR_BACKEND;
    return lib_fail(b, code, "cuDNN", what, cudnnGetErrorString(s), file, line);
}

vf_status vfi_cuda_blas_fail(vf_backend *b, cublasStatus_t s, const char *what, const char *file,
                             int line)
{
    return lib_fail(b, s == CUBLAS_STATUS_ALLOC_FAILED ? VF_ERR_NOMEM : VF_ERR_BACKEND, "cuBLAS",
                    what, cublasGetStatusString(s), file, line);
}

vf_status vfi_cuda_unsupported(vf_backend *b, const char *what)
{
    cuda_ctx *c = b->ctx;
    return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s': the CUDA backend has no %s",
                    c->node ? c->node : "?", what);
}

/* ---- buffers and steps ---------------------------------------------------------------------- */

vf_status vfi_cuda_new_buf(vf_backend *b, enum cbuf_kind kind, size_t size, int *out)
{
    cuda_ctx *c = b->ctx;
    void *grown = vfi_grow(c->bufs, &c->cap_bufs, c->n_bufs + 1, sizeof(cbuf));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->bufs = grown;
    cbuf *d = &c->bufs[c->n_bufs];
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    d->parent = -1;
    d->size = size;
    d->first = d->last = -1;
    *out = c->n_bufs++;
    return VF_OK;
}

/* The buffer whose memory a view lives in. */
static int root_of(const cuda_ctx *c, int buf)
{
    while (buf >= 0 && c->bufs[buf].kind == BUF_VIEW)
        buf = c->bufs[buf].parent;
    return buf;
}

void vfi_cuda_touch(cuda_ctx *c, int buf, int at)
{
    int r = root_of(c, buf);
    if (r < 0)
        return;
    if (c->bufs[r].first < 0 || at < c->bufs[r].first)
        c->bufs[r].first = at;
    if (at > c->bufs[r].last)
        c->bufs[r].last = at;
}

void *vfi_cuda_buf_ptr(const cuda_ctx *c, int buf)
{
    size_t off = 0;
    while (c->bufs[buf].kind == BUF_VIEW) {
        off += c->bufs[buf].view_offset;
        buf = c->bufs[buf].parent;
    }
    const cbuf *d = &c->bufs[buf];
    char *base = d->kind == BUF_ARENA    ? (char *)c->arena + d->offset
                 : d->kind == BUF_INPUT  ? (char *)c->in_cur /* only ever read */
                 : d->kind == BUF_OUTPUT ? (char *)c->out_dev
                                         : (char *)d->dev;
    return base + off;
}

/* A new step of `kind` reading buffer x and writing y (-1: none); the caller sets the rest of its
 * operands, then calls vfi_cuda_seal(). */
vf_status vfi_cuda_new_step(vf_backend *b, enum step_kind kind, int x, int y, cstep **out)
{
    cuda_ctx *c = b->ctx;
    void *grown = vfi_grow(c->steps, &c->cap_steps, c->n_steps + 1, sizeof(cstep));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->steps = grown;
    cstep *s = &c->steps[c->n_steps++];
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->node = -1;
    s->x = x;
    s->y = y;
    s->x2 = s->x3 = s->w = s->bias = -1;
    s->alpha1 = 1.0f;
    s->alpha2 = 0.0f;
    *out = s;
    return VF_OK;
}

/* Record the lifetimes of a finished step's operands. */
void vfi_cuda_seal(cuda_ctx *c, const cstep *s)
{
    int at = (int)(s - c->steps);
    int ops[] = {s->x, s->x2, s->x3, s->y, s->w, s->bias};
    for (size_t i = 0; i < sizeof(ops) / sizeof(*ops); i++)
        vfi_cuda_touch(c, ops[i], at);
}

/* ---- tensor views --------------------------------------------------------------------------- */

void vfi_cuda_destroy_view(tview *v)
{
    if (v->d)
        cudnnDestroyTensorDescriptor(v->d);
    v->d = NULL;
}

vf_status vfi_cuda_set_view(vf_backend *b, tview *v, int n)
{
    vf_status rc = VF_OK;
    int dims[MAXD];
    memcpy(dims, v->dims, sizeof(dims));
    if (v->batched)
        dims[0] = n;
    if (!v->d)
        DN(cudnnCreateTensorDescriptor(&v->d));
    DN(cudnnSetTensorNdDescriptor(v->d, v->dt, v->nd, dims, v->strides));
fail:
    return rc;
}

/* A dense view of `rank` dims (dims[0] = the batch when batched), padded to 4-D with trailing
 * 1s. */
vf_status vfi_cuda_dense_view(vf_backend *b, tview *v, int rank, const int64_t *dims, int batched,
                              cudnnDataType_t dt)
{
    cuda_ctx *c = b->ctx;
    v->dt = dt;
    v->batched = batched;
    v->nd = rank < MIN_ND ? MIN_ND : rank;
    if (v->nd > MAXD)
        return vfi_cuda_unsupported(b, "tensors of more than 8 dimensions");
    for (int i = 0; i < v->nd; i++)
        v->dims[i] = i < rank ? (int)dims[i] : 1;
    if (batched)
        v->dims[0] = c->max_batch;
    int64_t stride = 1;
    for (int i = v->nd - 1; i >= 0; i--) {
        if (stride > INT32_MAX)
            return vfi_cuda_unsupported(b, "tensors this large (strides beyond 2^31)");
        v->strides[i] = (int)stride;
        stride *= v->dims[i];
    }
    return vfi_cuda_set_view(b, v, c->max_batch);
}

vf_status vfi_cuda_value_view(vf_backend *b, tview *v, const vf_value *val)
{
    cuda_ctx *c = b->ctx;
    return vfi_cuda_dense_view(b, v, val->rank, val->dims, val->is_batched, c->act_dt);
}

/* Give a packed 4-D view [N, C, H, W] the strides of NHWC memory. */
vf_status vfi_cuda_nhwc_view(vf_backend *b, tview *v)
{
    cuda_ctx *c = b->ctx;
    v->strides[1] = 1;
    v->strides[3] = v->dims[1];
    v->strides[2] = v->dims[3] * v->dims[1];
    v->strides[0] = v->dims[2] * v->strides[2];
    return vfi_cuda_set_view(b, v, c->max_batch);
}

/* The view of value vi's buffer, in the layout it has. */
vf_status vfi_cuda_act_view(vf_backend *b, tview *v, int vi)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = vfi_cuda_value_view(b, v, &c->g->values[vi]);
    return rc >= 0 && c->vlay[vi] ? vfi_cuda_nhwc_view(b, v) : rc;
}

/* Are NCHW and NHWC the same bytes for this value, aligned to 4-D by leading 1s (its C, or its
 * H x W, is 1)? */
int vfi_cuda_layout_free(const vf_value *v)
{
    int64_t d[4] = {1, 1, 1, 1};
    if (v->rank > 4)
        return 0;
    for (int i = 0; i < v->rank; i++)
        d[4 - v->rank + i] = v->dims[i];
    return d[1] == 1 || d[2] * d[3] == 1;
}

/* ---- constants ------------------------------------------------------------------------------ */

/* Upload `count` floats (their reciprocals when `invert`) as a constant buffer in the
 * activation type. */
static vf_status upload(vf_backend *b, const float *data, size_t count, int invert, int *out)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    void *host = vfi_mallocarray(count ? count : 1, c->es);
    if (!host)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        float v = invert ? 1.0f / data[i] : data[i];
        if (c->es == 2)
            ((uint16_t *)host)[i] = vfi_f32_to_f16(v);
        else
            ((float *)host)[i] = v;
    }
    int buf = -1;
    TRY(vfi_cuda_new_buf(b, BUF_CONST, count * c->es, &buf));
    CU(cudaMalloc(&c->bufs[buf].dev, count ? count * c->es : 1));
    CU(cudaMemcpy(c->bufs[buf].dev, host, count * c->es, cudaMemcpyHostToDevice));
    c->const_bytes += count * c->es;
    *out = buf;
fail:
    vfi_free(host);
    return rc;
}

/* A graph constant now on the device: free the graph's copy when allowed. */
static void uploaded(cuda_ctx *c, int vi)
{
    if (c->release_weights && vfi_graph_count_uses(c->g, vi) == 1) {
        vfi_free(c->owner_view->values[vi].data);
        c->owner_view->values[vi].data = NULL;
    }
}

/* A graph constant on the device. */
vf_status vfi_cuda_upload_value(vf_backend *b, int vi, int invert, int *out)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[vi];
    if (v->dtype != VF_DTYPE_F32 || !v->data)
        return vfi_cuda_unsupported(b, "constant that is not float data");
    vf_status rc = upload(b, v->data, (size_t)vfi_value_numel(v), invert, out);
    if (rc >= 0)
        uploaded(c, vi);
    return rc;
}

/* A convolution's filter [K, C, R, S] on the device, reordered to [K, R, S, C] for NHWC. */
vf_status vfi_cuda_upload_filter(vf_backend *b, int vi, int nhwc, int *out)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[vi];
    if (!nhwc)
        return vfi_cuda_upload_value(b, vi, 0, out);
    if (v->dtype != VF_DTYPE_F32 || !v->data)
        return vfi_cuda_unsupported(b, "constant that is not float data");
    size_t n = (size_t)vfi_value_numel(v), k_n = (size_t)v->dims[0], c_n = (size_t)v->dims[1];
    size_t rs_n = (size_t)v->dims[2] * (size_t)v->dims[3];
    float *krsc = vfi_mallocarray(n ? n : 1, sizeof(float));
    if (!krsc)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    const float *kcrs = v->data;
    for (size_t k = 0; k < k_n; k++) {
        for (size_t ch = 0; ch < c_n; ch++) {
            for (size_t rs = 0; rs < rs_n; rs++)
                krsc[(k * rs_n + rs) * c_n + ch] = kcrs[(k * c_n + ch) * rs_n + rs];
        }
    }
    vf_status rc = upload(b, krsc, n, 0, out);
    vfi_free(krsc);
    if (rc >= 0)
        uploaded(c, vi);
    return rc;
}

static vf_status scalar(vf_backend *b, float value, int *out)
{
    return upload(b, &value, 1, 0, out);
}

/* A 4-D all-ones view for a scalar constant (broadcast by cudnnOpTensor). */
static vf_status scalar_view(vf_backend *b, tview *v, int nd)
{
    cuda_ctx *c = b->ctx;
    int64_t ones[MAXD] = {1, 1, 1, 1, 1, 1, 1, 1};
    return vfi_cuda_dense_view(b, v, nd, ones, 0, c->act_dt);
}

/* ---- activations as steps ------------------------------------------------------------------ */

static vf_status cudnn_act(vf_backend *b, int x, int y, const tview *shape,
                           cudnnActivationMode_t mode, double coef)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_ACT, x, y, &s));
    s->v[0] = *shape;
    s->v[0].d = NULL;
    s->n_views = 1;
    TRY(vfi_cuda_set_view(b, &s->v[0], c->max_batch));
    DN(cudnnCreateActivationDescriptor(&s->ad));
    DN(cudnnSetActivationDescriptor(s->ad, mode, CUDNN_PROPAGATE_NAN, coef));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* y = op(a1 * x, a2 * x2) where x2 is a scalar constant or another tensor (x2_view NULL: the
 * scalar view). */
vf_status vfi_cuda_optensor(vf_backend *b, cudnnOpTensorOp_t op, int x, float a1, int x2, float a2,
                            const tview *x2_view, int y, const tview *shape)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_OPTENSOR, x, y, &s));
    s->x2 = x2;
    s->alpha1 = a1;
    s->alpha2 = a2;
    s->n_views = 3;
    s->v[0] = *shape;
    s->v[0].d = NULL;
    TRY(vfi_cuda_set_view(b, &s->v[0], c->max_batch));
    if (x2_view) {
        s->v[1] = *x2_view;
        s->v[1].d = NULL;
        TRY(vfi_cuda_set_view(b, &s->v[1], c->max_batch));
    } else {
        TRY(scalar_view(b, &s->v[1], shape->nd));
    }
    s->v[2] = *shape;
    s->v[2].d = NULL;
    TRY(vfi_cuda_set_view(b, &s->v[2], c->max_batch));
    DN(cudnnCreateOpTensorDescriptor(&s->od));
    DN(cudnnSetOpTensorDescriptor(s->od, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

vf_status vfi_cuda_temp_like(vf_backend *b, const tview *shape, int *out)
{
    cuda_ctx *c = b->ctx;
    size_t n = 1;
    for (int i = 0; i < shape->nd; i++)
        n *= (size_t)shape->dims[i];
    return vfi_cuda_new_buf(b, BUF_ARENA, n * c->es, out);
}

/* Can vfi_cuda_act_steps() run this activation in place (x == y)? cuDNN's own modes can; the ones
 * built from cudnnOpTensor calls need a separate output. */
int vfi_cuda_act_in_place(const vf_act *act)
{
    switch (act->kind) {
    case VF_ACT_NONE:
    case VF_ACT_SIGMOID:
    case VF_ACT_TANH:
        return 1;
    case VF_ACT_RELU:
        return act->alpha == 0.0f;
    case VF_ACT_CLIP:
        return act->alpha == 0.0f;
    default:
        return act->kind >= VF_ACT_ERF; /* the kernel's (act_steps) */
    }
}

/* y = act(x) by vidfeat's elementwise kernel over every element of shape (dense, either
 * layout). */
static vf_status act_kernel(vf_backend *b, const vf_act *act, int x, int y, const tview *shape)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_ACTK, x, y, &s));
    s->act = *act;
    s->per_sample = 1;
    for (int i = 1; i < shape->nd; i++)
        s->per_sample *= shape->dims[i];
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* y = act(x), elementwise, as one or more steps; x == y only where vfi_cuda_act_in_place(). */
vf_status vfi_cuda_act_steps(vf_backend *b, const vf_act *act, int x, int y, const tview *shape)
{
    vf_status rc = VF_OK;
    int k0 = -1, k1 = -1, t = -1;
    switch (act->kind) {
    case VF_ACT_NONE:
        break;
    case VF_ACT_RELU:
        if (x == y && !vfi_cuda_act_in_place(act))
            return vfi_fail(&b->err, VF_ERR_INTERNAL, "in-place activation %d", (int)act->kind);
        if (act->alpha == 0.0f)
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_RELU, 0.0);
        /* leaky: max(x, a x) for a <= 1, min(x, a x) above */
        return vfi_cuda_optensor(b, act->alpha <= 1.0f ? CUDNN_OP_TENSOR_MAX : CUDNN_OP_TENSOR_MIN,
                                 x, 1.0f, x, act->alpha, shape, y, shape);
    case VF_ACT_CLIP:
        if (act->alpha == 0.0f && isfinite(act->beta))
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_CLIPPED_RELU, act->beta);
        if (act->alpha == 0.0f && act->beta == INFINITY)
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_RELU, 0.0);
        TRY(scalar(b, act->alpha, &k0));
        TRY(scalar(b, act->beta, &k1));
        TRY(vfi_cuda_temp_like(b, shape, &t));
        TRY(vfi_cuda_optensor(b, CUDNN_OP_TENSOR_MAX, x, 1.0f, k0, 1.0f, NULL, t, shape));
        return vfi_cuda_optensor(b, CUDNN_OP_TENSOR_MIN, t, 1.0f, k1, 1.0f, NULL, y, shape);
    case VF_ACT_SIGMOID:
        return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_SIGMOID, 0.0);
    case VF_ACT_TANH:
        return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_TANH, 0.0);
    case VF_ACT_HARD_SIGMOID:
        /* clamp(alpha x + beta, 0, 1) */
        TRY(scalar(b, act->beta, &k0));
        TRY(vfi_cuda_optensor(b, CUDNN_OP_TENSOR_ADD, x, act->alpha, k0, 1.0f, NULL, y, shape));
        return cudnn_act(b, y, y, shape, CUDNN_ACTIVATION_CLIPPED_RELU, 1.0);
    case VF_ACT_HARD_SWISH:
        /* x * clamp(x / 6 + 1/2, 0, 1) */
        TRY(scalar(b, 0.5f, &k0));
        TRY(vfi_cuda_temp_like(b, shape, &t));
        TRY(vfi_cuda_optensor(b, CUDNN_OP_TENSOR_ADD, x, 1.0f / 6.0f, k0, 1.0f, NULL, t, shape));
        TRY(cudnn_act(b, t, t, shape, CUDNN_ACTIVATION_CLIPPED_RELU, 1.0));
        return vfi_cuda_optensor(b, CUDNN_OP_TENSOR_MUL, x, 1.0f, t, 1.0f, shape, y, shape);
    default: /* Erf, GELU, Sqrt, Reciprocal, Pow, Exp, Linear: cuDNN has none of them */
        return act_kernel(b, act, x, y, shape);
    }
fail:
    return rc;
}

/* ---- copies --------------------------------------------------------------------------------- */

/* y view <- x view (same dims; any strides, dtypes, byte offsets). */
vf_status vfi_cuda_copy_step(vf_backend *b, int x, size_t x_off, const tview *xv, int y,
                             size_t y_off, const tview *yv, cstep **out)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_COPY, x, y, &s));
    s->x_off = x_off;
    s->y_off = y_off;
    s->n_views = 2;
    s->v[0] = *xv;
    s->v[0].d = NULL;
    s->v[1] = *yv;
    s->v[1].d = NULL;
    TRY(vfi_cuda_set_view(b, &s->v[0], c->max_batch));
    TRY(vfi_cuda_set_view(b, &s->v[1], c->max_batch));
    vfi_cuda_seal(c, s);
    if (out)
        *out = s;
fail:
    return rc;
}

vf_status vfi_cuda_fill_step(vf_backend *b, int y, const tview *yv, float value)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_FILL, -1, y, &s));
    s->fill = value;
    s->n_views = 1;
    s->v[0] = *yv;
    s->v[0].d = NULL;
    TRY(vfi_cuda_set_view(b, &s->v[0], c->max_batch));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* A new buffer holding x [N, C, H, W] padded by pads (top, left, bottom, right) with `value`,
 * in x's layout (nhwc); *pv receives its view. */
vf_status vfi_cuda_padded_copy(vf_backend *b, int x, const tview *xv, int nhwc, const int pads[4],
                               float value, int *out, tview *pv)
{
    vf_status rc = VF_OK;
    cuda_ctx *c = b->ctx;
    int64_t dims[4] = {1, xv->dims[1], (int64_t)xv->dims[2] + pads[0] + pads[2],
                       (int64_t)xv->dims[3] + pads[1] + pads[3]};
    memset(pv, 0, sizeof(*pv));
    TRY(vfi_cuda_dense_view(b, pv, 4, dims, 1, c->act_dt));
    if (nhwc)
        TRY(vfi_cuda_nhwc_view(b, pv));
    int y = -1;
    TRY(vfi_cuda_new_buf(b, BUF_ARENA, (size_t)pv->strides[0] * (size_t)c->max_batch * c->es, &y));
    TRY(vfi_cuda_fill_step(b, y, pv, value));
    tview inner = *pv; /* the interior: x's dims with the padded strides */
    inner.d = NULL;
    memcpy(inner.dims, xv->dims, sizeof(inner.dims));
    size_t off =
        ((size_t)pads[0] * (size_t)pv->strides[2] + (size_t)pads[1] * (size_t)pv->strides[3]) *
        c->es;
    TRY(vfi_cuda_copy_step(b, x, 0, xv, y, off, &inner, NULL));
    vfi_cuda_destroy_view(&inner);
    *out = y;
fail:
    return rc;
}

/* Make value vi's buffer hold layout nhwc (1) or NCHW (0): a copy step into a new buffer, which
 * the value's later readers use; nothing when the layouts are the same bytes. */
vf_status vfi_cuda_to_layout(vf_backend *b, int vi, int nhwc)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[vi];
    if (c->vlay[vi] == nhwc || !v->is_batched)
        return VF_OK;
    if (vfi_cuda_layout_free(v)) {
        c->vlay[vi] = (unsigned char)nhwc;
        return VF_OK;
    }
    vf_status rc = VF_OK;
    tview from = {0}, to = {0};
    int y = -1;
    TRY(vfi_cuda_act_view(b, &from, vi));
    TRY(vfi_cuda_value_view(b, &to, v));
    if (nhwc)
        TRY(vfi_cuda_nhwc_view(b, &to));
    TRY(vfi_cuda_new_buf(b, BUF_ARENA,
                         (size_t)vfi_value_sample_numel(v) * (size_t)c->max_batch * c->es, &y));
    TRY(vfi_cuda_copy_step(b, c->vbuf[vi], 0, &from, y, 0, &to, NULL));
    c->vbuf[vi] = y;
    c->vlay[vi] = (unsigned char)nhwc;
    c->n_relayouts++;
fail:
    vfi_cuda_destroy_view(&from);
    vfi_cuda_destroy_view(&to);
    return rc;
}

/* A step converting per_sample elements an image between f32 and half (to_half: f32 -> half). */
vf_status vfi_cuda_convert_step(vf_backend *b, int x, int y, int64_t per_sample, int to_half)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    cstep *s = NULL;
    TRY(vfi_cuda_new_step(b, ST_CONVERT, x, y, &s));
    s->per_sample = per_sample;
    s->to_half = to_half;
    vfi_cuda_seal(c, s);
fail:
    return rc;
}
