/*
 * backend_cuda.c - the GPU backend: plain C against the CUDA runtime, cuDNN (its classic
 * descriptor API, still complete in cuDNN 9) and cuBLAS. The only file that sees cudaError_t,
 * cudnnStatus_t and cublasStatus_t. Built as the run-time module libvidfeat-cuda.so (with its
 * own copies of the few pure core and graph files it calls), loaded by backend.c when a run
 * asks for the GPU: the library and the command themselves need no CUDA library. Everything runs on
 * one private stream; prepare() and run() are called on the inference thread.
 *
 * prepare() turns the graph into a flat list of steps, each one library call (a convolution,
 * a GEMM, a pooling, a tensor copy, ...) with its descriptors made and its operands resolved
 * to device addresses. Weights are uploaded once, converted to the activation type. Every
 * activation is a buffer with a lifetime [first step, last step]; the buffers are packed into
 * one device arena by lifetime (arena.h), like the CPU backend does. Reshapes are views of
 * their input's memory; concatenations write into a slice of their output (cudaMemcpy2D), so
 * Inception's branches cost no extra copy beyond one per branch.
 *
 * Convolution algorithms are searched once per distinct shape with
 * cudnnFindConvolutionForwardAlgorithmEx on the real buffers, within a workspace budget, and
 * cached (VGG19 has 16 convolutions but 9 shapes). Conv + bias + ReLU is one fused call; other
 * activations follow as their own step. cuDNN wants symmetric padding, so an asymmetric pad
 * (TF-style SAME, MobileNetV2's stride-2 layers in some exports) becomes an explicit padded copy.
 *
 * Precision: f32 forbids tensor-core TF32 (cuDNN's FMA math, cuBLAS's plain f32 compute) so the
 * features match the CPU within 1e-4; tf32 allows it; f16 stores weights and activations in
 * half with f32 accumulation (tensor cores). The input and output stay f32 on the host side; a
 * half network converts on the device (cuda_kernels.cu: cuDNN's tensor copy does not change
 * the data type).
 *
 * Layout: with tensor-core math (tf32, f16) convolutions run NHWC where cuDNN's kernels want it
 * (channels per group a multiple of 8, so not the 3-channel first layer), which spares cuDNN a
 * transposition before and after each one. Every 4-D activation remembers its layout (vlay);
 * convolution, pooling, elementwise operations and channel concatenation work in either, and
 * any other operator gets its input made NCHW by one copy step, as does the network's output.
 * A tensor whose H x W (or C) is 1 is the same bytes either way and changes layout for free.
 * VIDFEAT_CUDA_NHWC=0 keeps everything NCHW; =all runs every convolution NHWC (tests).
 *
 * Transformers and text towers: their MatMuls, LayerNorms, slices, broadcasts and token-id
 * operators, and whatever operates on tensors whose batch is not their first dimension alone,
 * run on vidfeat's own kernels and cuBLAS's strided batched GEMM (backend_cuda_ops.c), on dense
 * tensors whose shape at batch n is worked out as each step runs.
 *
 * Batches shorter than the prepared maximum run at their own size: the descriptors carry the
 * batch, so run() re-sets them (host-only calls, no allocation) when n changes, and a
 * convolution whose searched algorithm would need more workspace at that size falls back to
 * implicit GEMM, which needs none.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/half.h"
#include "core/mem.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/backend_cuda.h"
#include "engine/cuda_kernels.h"

/* ---- errors --------------------------------------------------------------------------------- */

/* A library call failed: the library's own words, the node being prepared or run, the place
 * (the source file's name without its directories, and the line). */
static vf_status lib_fail(vf_backend *b, vf_status code, const char *lib, const char *what,
                          const char *text, const char *file, int line)
{
    const cuda_ctx *c = b->ctx;
    const char *node = c && c->node ? c->node : NULL;
    const char *base = strrchr(file, '/');
    return vfi_fail(&b->err, code, "%s: %s failed: %s%s%s%s [%s:%d]", lib, what, text,
                    node ? " at node '" : "", node ? node : "", node ? "'" : "",
                    base ? base + 1 : file, line);
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

/* ---- probe / init / destroy ---------------------------------------------------------------- */

static vf_status cuda_probe(vf_err *err)
{
    int count = 0, driver = 0, runtime = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver) {
        /* the runtime says this both for an old driver and for none that works */
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        if (driver == 0)
            return vfi_fail(err, VF_ERR_NO_DEVICE,
                            "no NVIDIA driver found (libcuda.so.1 is there but does not work)");
        return vfi_fail(err, VF_ERR_NO_DEVICE,
                        "the NVIDIA driver supports CUDA %d.%d, this build needs %d.%d: update the "
                        "driver",
                        driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    }
    if (e != cudaSuccess)
        return vfi_fail(err, VF_ERR_NO_DEVICE, "no usable CUDA GPU: %s (error %d)",
                        cudaGetErrorString(e), (int)e);
    if (count < 1)
        return vfi_fail(err, VF_ERR_NO_DEVICE, "no usable CUDA GPU: the driver reports none");
    return VF_OK;
}

static vf_status cuda_init(vf_backend *b, const vf_backend_opts *opts)
{
    cuda_ctx *c = vfi_calloc(1, sizeof(*c));
    if (!c)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    b->ctx = c;
    if (opts->precision == VF_PRECISION_BF16 || opts->precision == VF_PRECISION_INT8)
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                        "the CUDA backend runs f32, tf32 or f16, not %s (that is for the CPU)",
                        vf_precision_str(opts->precision));
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || opts->device < 0 || opts->device >= count)
        return vfi_fail(&b->err, VF_ERR_NO_DEVICE, "no CUDA GPU number %d (%d present)",
                        opts->device, count);
    c->device = opts->device;
    c->precision = opts->precision;
    c->act_dt = opts->precision == VF_PRECISION_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    c->es = opts->precision == VF_PRECISION_F16 ? 2 : 4;
    c->release_weights = opts->release_weights;
    if (opts->precision != VF_PRECISION_F32) {
        const char *env = getenv("VIDFEAT_CUDA_NHWC");
        c->nhwc = !env ? 1 : !strcmp(env, "0") ? 0 : !strcmp(env, "all") ? 2 : 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, c->device) == cudaSuccess)
        snprintf(c->name, sizeof(c->name), "%s", prop.name);
    return VF_OK;
}

static void destroy_view(tview *v)
{
    if (v->d)
        cudnnDestroyTensorDescriptor(v->d);
    v->d = NULL;
}

static void cuda_destroy(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (int i = 0; i < c->n_steps; i++) {
        step *s = &c->steps[i];
        for (int k = 0; k < MAX_VIEWS; k++)
            destroy_view(&s->v[k]);
        if (s->wd)
            cudnnDestroyFilterDescriptor(s->wd);
        if (s->cd)
            cudnnDestroyConvolutionDescriptor(s->cd);
        if (s->ad)
            cudnnDestroyActivationDescriptor(s->ad);
        if (s->pd)
            cudnnDestroyPoolingDescriptor(s->pd);
        if (s->od)
            cudnnDestroyOpTensorDescriptor(s->od);
        if (s->ld)
            cudnnDestroyLRNDescriptor(s->ld);
        if (s->rd)
            cudnnDestroyReduceTensorDescriptor(s->rd);
    }
    for (int i = 0; i < c->n_bufs; i++) {
        if (c->bufs[i].dev)
            cudaFree(c->bufs[i].dev);
    }
    cudaFree(c->arena);
    cudaFree(c->workspace);
    cudaFree(c->in_dev);
    cudaFree(c->out_dev);
    cudaFree(c->bad_dev);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->dnn)
        cudnnDestroy(c->dnn);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    vfi_free(c->steps);
    vfi_free(c->bufs);
    vfi_free(c->vbuf);
    vfi_free(c->vlay);
    vfi_free(c->convs);
    vfi_free(c->summary);
    vfi_free(c);
    b->ctx = NULL;
}

/* ---- buffers and steps ---------------------------------------------------------------------- */

vf_status vfi_cuda_new_buf(vf_backend *b, enum buf_kind kind, size_t size, int *out)
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

static void touch(cuda_ctx *c, int buf, int at)
{
    int r = root_of(c, buf);
    if (r < 0)
        return;
    if (c->bufs[r].first < 0 || at < c->bufs[r].first)
        c->bufs[r].first = at;
    if (at > c->bufs[r].last)
        c->bufs[r].last = at;
}

static void *buf_ptr(const cuda_ctx *c, int buf)
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
vf_status vfi_cuda_new_step(vf_backend *b, enum step_kind kind, int x, int y, step **out)
{
    cuda_ctx *c = b->ctx;
    void *grown = vfi_grow(c->steps, &c->cap_steps, c->n_steps + 1, sizeof(step));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->steps = grown;
    step *s = &c->steps[c->n_steps++];
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
void vfi_cuda_seal(cuda_ctx *c, const step *s)
{
    int at = (int)(s - c->steps);
    int ops[] = {s->x, s->x2, s->x3, s->y, s->w, s->bias};
    for (size_t i = 0; i < sizeof(ops) / sizeof(*ops); i++)
        touch(c, ops[i], at);
}

/* ---- tensor views --------------------------------------------------------------------------- */

static vf_status set_view(vf_backend *b, tview *v, int n)
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
static vf_status dense_view(vf_backend *b, tview *v, int rank, const int64_t *dims, int batched,
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
    return set_view(b, v, c->max_batch);
}

static vf_status value_view(vf_backend *b, tview *v, const vf_value *val)
{
    cuda_ctx *c = b->ctx;
    return dense_view(b, v, val->rank, val->dims, val->is_batched, c->act_dt);
}

/* Give a packed 4-D view [N, C, H, W] the strides of NHWC memory. */
static vf_status nhwc_view(vf_backend *b, tview *v)
{
    cuda_ctx *c = b->ctx;
    v->strides[1] = 1;
    v->strides[3] = v->dims[1];
    v->strides[2] = v->dims[3] * v->dims[1];
    v->strides[0] = v->dims[2] * v->strides[2];
    return set_view(b, v, c->max_batch);
}

/* The view of value vi's buffer, in the layout it has. */
static vf_status act_view(vf_backend *b, tview *v, int vi)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = value_view(b, v, &c->g->values[vi]);
    return rc >= 0 && c->vlay[vi] ? nhwc_view(b, v) : rc;
}

/* Are NCHW and NHWC the same bytes for this value, aligned to 4-D by leading 1s (its C, or its
 * H x W, is 1)? */
static int layout_free(const vf_value *v)
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
    int buf;
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
static vf_status upload_filter(vf_backend *b, int vi, int nhwc, int *out)
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
    return dense_view(b, v, nd, ones, 0, c->act_dt);
}

/* ---- activations as steps ------------------------------------------------------------------ */

static vf_status cudnn_act(vf_backend *b, int x, int y, const tview *shape,
                           cudnnActivationMode_t mode, double coef)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
    TRY(vfi_cuda_new_step(b, ST_ACT, x, y, &s));
    s->v[0] = *shape;
    s->v[0].d = NULL;
    s->n_views = 1;
    TRY(set_view(b, &s->v[0], c->max_batch));
    DN(cudnnCreateActivationDescriptor(&s->ad));
    DN(cudnnSetActivationDescriptor(s->ad, mode, CUDNN_PROPAGATE_NAN, coef));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* y = op(a1 * x, a2 * x2) where x2 is a scalar constant or another tensor (x2_view NULL: the
 * scalar view). */
static vf_status optensor(vf_backend *b, cudnnOpTensorOp_t op, int x, float a1, int x2, float a2,
                          const tview *x2_view, int y, const tview *shape)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
    TRY(vfi_cuda_new_step(b, ST_OPTENSOR, x, y, &s));
    s->x2 = x2;
    s->alpha1 = a1;
    s->alpha2 = a2;
    s->n_views = 3;
    s->v[0] = *shape;
    s->v[0].d = NULL;
    TRY(set_view(b, &s->v[0], c->max_batch));
    if (x2_view) {
        s->v[1] = *x2_view;
        s->v[1].d = NULL;
        TRY(set_view(b, &s->v[1], c->max_batch));
    } else {
        TRY(scalar_view(b, &s->v[1], shape->nd));
    }
    s->v[2] = *shape;
    s->v[2].d = NULL;
    TRY(set_view(b, &s->v[2], c->max_batch));
    DN(cudnnCreateOpTensorDescriptor(&s->od));
    DN(cudnnSetOpTensorDescriptor(s->od, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

static vf_status temp_like(vf_backend *b, const tview *shape, int *out)
{
    cuda_ctx *c = b->ctx;
    size_t n = 1;
    for (int i = 0; i < shape->nd; i++)
        n *= (size_t)shape->dims[i];
    return vfi_cuda_new_buf(b, BUF_ARENA, n * c->es, out);
}

/* Can act_steps() run this activation in place (x == y)? cuDNN's own modes can; the ones built
 * from cudnnOpTensor calls need a separate output. */
static int act_in_place(const vf_act *act)
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
    step *s;
    TRY(vfi_cuda_new_step(b, ST_ACTK, x, y, &s));
    s->act = *act;
    s->per_sample = 1;
    for (int i = 1; i < shape->nd; i++)
        s->per_sample *= shape->dims[i];
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* y = act(x), elementwise, as one or more steps; x == y only where act_in_place(). */
static vf_status act_steps(vf_backend *b, const vf_act *act, int x, int y, const tview *shape)
{
    vf_status rc = VF_OK;
    int k0, k1, t;
    switch (act->kind) {
    case VF_ACT_NONE:
        break;
    case VF_ACT_RELU:
        if (x == y && !act_in_place(act))
            return vfi_fail(&b->err, VF_ERR_INTERNAL, "in-place activation %d", (int)act->kind);
        if (act->alpha == 0.0f)
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_RELU, 0.0);
        /* leaky: max(x, a x) for a <= 1, min(x, a x) above */
        return optensor(b, act->alpha <= 1.0f ? CUDNN_OP_TENSOR_MAX : CUDNN_OP_TENSOR_MIN, x, 1.0f,
                        x, act->alpha, shape, y, shape);
    case VF_ACT_CLIP:
        if (act->alpha == 0.0f && isfinite(act->beta))
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_CLIPPED_RELU, act->beta);
        if (act->alpha == 0.0f && act->beta == INFINITY)
            return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_RELU, 0.0);
        TRY(scalar(b, act->alpha, &k0));
        TRY(scalar(b, act->beta, &k1));
        TRY(temp_like(b, shape, &t));
        TRY(optensor(b, CUDNN_OP_TENSOR_MAX, x, 1.0f, k0, 1.0f, NULL, t, shape));
        return optensor(b, CUDNN_OP_TENSOR_MIN, t, 1.0f, k1, 1.0f, NULL, y, shape);
    case VF_ACT_SIGMOID:
        return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_SIGMOID, 0.0);
    case VF_ACT_TANH:
        return cudnn_act(b, x, y, shape, CUDNN_ACTIVATION_TANH, 0.0);
    case VF_ACT_HARD_SIGMOID:
        /* clamp(alpha x + beta, 0, 1) */
        TRY(scalar(b, act->beta, &k0));
        TRY(optensor(b, CUDNN_OP_TENSOR_ADD, x, act->alpha, k0, 1.0f, NULL, y, shape));
        return cudnn_act(b, y, y, shape, CUDNN_ACTIVATION_CLIPPED_RELU, 1.0);
    case VF_ACT_HARD_SWISH:
        /* x * clamp(x / 6 + 1/2, 0, 1) */
        TRY(scalar(b, 0.5f, &k0));
        TRY(temp_like(b, shape, &t));
        TRY(optensor(b, CUDNN_OP_TENSOR_ADD, x, 1.0f / 6.0f, k0, 1.0f, NULL, t, shape));
        TRY(cudnn_act(b, t, t, shape, CUDNN_ACTIVATION_CLIPPED_RELU, 1.0));
        return optensor(b, CUDNN_OP_TENSOR_MUL, x, 1.0f, t, 1.0f, shape, y, shape);
    default: /* Erf, GELU, Sqrt, Reciprocal, Pow, Exp, Linear: cuDNN has none of them */
        return act_kernel(b, act, x, y, shape);
    }
fail:
    return rc;
}

/* ---- copies --------------------------------------------------------------------------------- */

/* y view <- x view (same dims; any strides, dtypes, byte offsets). */
static vf_status copy_step(vf_backend *b, int x, size_t x_off, const tview *xv, int y, size_t y_off,
                           const tview *yv, step **out)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
    TRY(vfi_cuda_new_step(b, ST_COPY, x, y, &s));
    s->x_off = x_off;
    s->y_off = y_off;
    s->n_views = 2;
    s->v[0] = *xv;
    s->v[0].d = NULL;
    s->v[1] = *yv;
    s->v[1].d = NULL;
    TRY(set_view(b, &s->v[0], c->max_batch));
    TRY(set_view(b, &s->v[1], c->max_batch));
    vfi_cuda_seal(c, s);
    if (out)
        *out = s;
fail:
    return rc;
}

static vf_status fill_step(vf_backend *b, int y, const tview *yv, float value)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
    TRY(vfi_cuda_new_step(b, ST_FILL, -1, y, &s));
    s->fill = value;
    s->n_views = 1;
    s->v[0] = *yv;
    s->v[0].d = NULL;
    TRY(set_view(b, &s->v[0], c->max_batch));
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* A new buffer holding x [N, C, H, W] padded by pads (top, left, bottom, right) with `value`,
 * in x's layout (nhwc); *pv receives its view. */
static vf_status padded_copy(vf_backend *b, int x, const tview *xv, int nhwc, const int pads[4],
                             float value, int *out, tview *pv)
{
    vf_status rc = VF_OK;
    cuda_ctx *c = b->ctx;
    int64_t dims[4] = {1, xv->dims[1], (int64_t)xv->dims[2] + pads[0] + pads[2],
                       (int64_t)xv->dims[3] + pads[1] + pads[3]};
    memset(pv, 0, sizeof(*pv));
    TRY(dense_view(b, pv, 4, dims, 1, c->act_dt));
    if (nhwc)
        TRY(nhwc_view(b, pv));
    int y;
    TRY(vfi_cuda_new_buf(b, BUF_ARENA, (size_t)pv->strides[0] * (size_t)c->max_batch * c->es, &y));
    TRY(fill_step(b, y, pv, value));
    tview inner = *pv; /* the interior: x's dims with the padded strides */
    inner.d = NULL;
    memcpy(inner.dims, xv->dims, sizeof(inner.dims));
    size_t off =
        ((size_t)pads[0] * (size_t)pv->strides[2] + (size_t)pads[1] * (size_t)pv->strides[3]) *
        c->es;
    TRY(copy_step(b, x, 0, xv, y, off, &inner, NULL));
    destroy_view(&inner);
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
    if (layout_free(v)) {
        c->vlay[vi] = (unsigned char)nhwc;
        return VF_OK;
    }
    vf_status rc = VF_OK;
    tview from = {0}, to = {0};
    int y;
    TRY(act_view(b, &from, vi));
    TRY(value_view(b, &to, v));
    if (nhwc)
        TRY(nhwc_view(b, &to));
    TRY(vfi_cuda_new_buf(b, BUF_ARENA,
                         (size_t)vfi_value_sample_numel(v) * (size_t)c->max_batch * c->es, &y));
    TRY(copy_step(b, c->vbuf[vi], 0, &from, y, 0, &to, NULL));
    c->vbuf[vi] = y;
    c->vlay[vi] = (unsigned char)nhwc;
    c->n_relayouts++;
fail:
    destroy_view(&from);
    destroy_view(&to);
    return rc;
}

/* ---- ops ------------------------------------------------------------------------------------ */

/* The node's output buffer and its view, in the layout the op chose (vlay[output], set first). */
static vf_status out_buf(vf_backend *b, const vf_node *nd, tview *yv, int *y)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[nd->output];
    vf_status rc = act_view(b, yv, nd->output);
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
    TRY(dense_view(b, &xt, 4, dims, 1, c->act_dt));
    TRY(nhwc_view(b, &xt));
    TRY(value_view(b, &yt, &c->g->values[nd->output]));
    TRY(nhwc_view(b, &yt));
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
    destroy_view(&xt);
    destroy_view(&yt);
    if (wd)
        cudnnDestroyFilterDescriptor(wd);
    if (cd)
        cudnnDestroyConvolutionDescriptor(cd);
    return rc;
}

static vf_status conv_op(vf_backend *b, const vf_node *nd)
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
    TRY(act_view(b, &xview, nd->inputs[0]));
    int64_t in_dims[4];
    int pad_h, pad_w;
    conv_input(p, xv, in_dims, &pad_h, &pad_w);
    if (in_dims[2] != xv->dims[2] || in_dims[3] != xv->dims[3]) {
        TRY(padded_copy(b, x, &xview, nhwc, p->win.pads, 0.0f, &x, &pview));
        destroy_view(&xview);
        xview = pview;
    }
    c->vlay[nd->output] = (unsigned char)nhwc;
    c->n_nhwc_convs += nhwc;
    TRY(out_buf(b, nd, &yview, &y));
    int fuse = nd->n_inputs > 2 && p->act.kind == VF_ACT_RELU && p->act.alpha == 0.0f;
    int pre = y; /* what the convolution writes; the activation then goes pre -> y */
    if (!act_in_place(&p->act))
        TRY(temp_like(b, &yview, &pre));
    step *s;
    TRY(vfi_cuda_new_step(b, ST_CONV, x, pre, &s));
    TRY(upload_filter(b, nd->inputs[1], nhwc, &s->w));
    if (nd->n_inputs > 2) {
        TRY(vfi_cuda_upload_value(b, nd->inputs[2], 0, &s->bias));
        int64_t bd[4] = {1, wv->dims[0], 1, 1};
        TRY(dense_view(b, &s->v[1], 4, bd, 0, c->act_dt));
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
    if (fuse) {
        DN(cudnnCreateActivationDescriptor(&s->ad));
        DN(cudnnSetActivationDescriptor(s->ad, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    }
    vfi_cuda_seal(c, s);
    if (!fuse && s->bias >= 0) {
        step *t;
        int bias = s->bias;
        s->bias = -1; /* the conv call adds nothing; a bias step follows */
        TRY(vfi_cuda_new_step(b, ST_BIAS, -1, pre, &t));
        s = NULL; /* the step array may have moved */
        t->bias = bias;
        t->n_views = 3;
        const step *conv = &c->steps[c->n_steps - 2];
        t->v[1] = conv->v[1];
        t->v[2] = conv->v[2];
        t->v[1].d = t->v[2].d = NULL;
        TRY(set_view(b, &t->v[1], c->max_batch));
        TRY(set_view(b, &t->v[2], c->max_batch));
        vfi_cuda_seal(c, t);
    }
    if (!fuse) {
        tview shape = c->steps[c->n_steps - 1].v[2];
        shape.d = NULL;
        rc = act_steps(b, &p->act, pre, y, &shape);
        destroy_view(&shape);
    }
fail:
    destroy_view(&xview);
    destroy_view(&yview);
    return rc;
}

static vf_status fc_op(vf_backend *b, const vf_node *nd)
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
    if (!act_in_place(&nd->p.fc.act))
        TRY(temp_like(b, &yview, &pre));
    step *s;
    TRY(vfi_cuda_new_step(b, ST_GEMM, c->vbuf[nd->inputs[0]], pre, &s));
    s->m = (int)wv->dims[0];
    s->k = (int)wv->dims[1];
    TRY(vfi_cuda_upload_value(b, nd->inputs[1], 0, &s->w));
    vfi_cuda_seal(c, s);
    /* [N, M] seen as [N, M, 1, 1] for the bias and the activation */
    int64_t d4[4] = {1, wv->dims[0], 1, 1};
    tview y4 = {0};
    TRY(dense_view(b, &y4, 4, d4, 1, c->act_dt));
    if (nd->n_inputs > 2) {
        step *t;
        int bias;
        TRY(vfi_cuda_upload_value(b, nd->inputs[2], 0, &bias));
        TRY(vfi_cuda_new_step(b, ST_BIAS, -1, pre, &t));
        t->bias = bias;
        t->n_views = 3;
        int64_t bd[4] = {1, wv->dims[0], 1, 1};
        TRY(dense_view(b, &t->v[1], 4, bd, 0, c->act_dt));
        t->v[2] = y4;
        t->v[2].d = NULL;
        TRY(set_view(b, &t->v[2], c->max_batch));
        vfi_cuda_seal(c, t);
    }
    rc = act_steps(b, &nd->p.fc.act, pre, y, &y4);
    destroy_view(&y4);
fail:
    destroy_view(&yview);
    return rc;
}

static vf_status act_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    c->vlay[nd->output] = c->vlay[nd->inputs[0]]; /* elementwise: either layout */
    TRY(out_buf(b, nd, &yview, &y));
    TRY(act_steps(b, &nd->p.act, c->vbuf[nd->inputs[0]], y, &yview));
    if (nd->p.act.kind == VF_ACT_NONE) {
        step *s;
        TRY(copy_step(b, c->vbuf[nd->inputs[0]], 0, &yview, y, 0, &yview, &s));
    }
fail:
    destroy_view(&yview);
    return rc;
}

static vf_status pool_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_pool_params *p = &nd->p.pool;
    const vf_value *xv = &c->g->values[nd->inputs[0]], *yv = &c->g->values[nd->output];
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, pview = {0};
    if (xv->rank != 4)
        return vfi_cuda_unsupported(b, "pooling other than 2-D");
    int x = c->vbuf[nd->inputs[0]], y, nhwc = c->vlay[nd->inputs[0]]; /* pooled as it is */
    TRY(act_view(b, &xview, nd->inputs[0]));
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
        TRY(padded_copy(b, x, &xview, nhwc, pads, avg ? 0.0f : -INFINITY, &x, &pview));
        destroy_view(&xview);
        xview = pview;
        ph = pw = 0;
    }
    c->vlay[nd->output] = (unsigned char)nhwc;
    TRY(out_buf(b, nd, &yview, &y));
    step *s;
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
    destroy_view(&xview);
    destroy_view(&yview);
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
    vf_status rc = dense_view(b, view, yv->rank, dims, 0, c->act_dt);
    return rc < 0 ? rc : vfi_cuda_upload_value(b, vi, invert, buf);
}

static vf_status binary_op(vf_backend *b, const vf_node *nd)
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
        return vfi_cuda_kernel_op(b, nd);
    /* cudnnOpTensor broadcasts only its second operand: the full-size one goes first. */
    if (vfi_value_numel(&g->values[i0]) < vfi_value_numel(yv)) {
        if (kind == VF_BIN_DIV)
            return vfi_cuda_kernel_op(b, nd); /* division broadcasting its first operand */
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
        return vfi_cuda_kernel_op(b,
                                  nd); /* both operands broadcast, or a division by an activation */
    /* NHWC when the first operand is and the second reads the same either way or is full-size */
    int nhwc = c->vlay[i0] && yv->rank == 4 &&
               (layout_free(bv) || (bv->is_batched && vfi_value_numel(bv) == vfi_value_numel(yv)));
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
        TRY(dense_view(b, &bview, yv->rank, dims, 1, c->act_dt));
        if (nhwc)
            TRY(nhwc_view(b, &bview));
    } else {
        TRY(const_operand(b, i1, yv, kind == VF_BIN_DIV, &x2, &bview));
    }
    int y;
    TRY(out_buf(b, nd, &yview, &y));
    cudnnOpTensorOp_t op =
        kind == VF_BIN_MUL || kind == VF_BIN_DIV ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD;
    TRY(optensor(b, op, c->vbuf[i0], a1, x2, a2, &bview, y, &yview));
fail:
    destroy_view(&yview);
    destroy_view(&bview);
    return rc;
}

/* Rows of bytes copied with cudaMemcpy2D: per sample, rows_per_sample rows of `width` bytes. */
static vf_status memcpy2d_step(vf_backend *b, int x, size_t x_off, size_t spitch, int y,
                               size_t y_off, size_t dpitch, size_t width, int64_t rows)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
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

static vf_status convert_step(vf_backend *b, int x, int y, int64_t per_sample, int to_half)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    step *s;
    TRY(vfi_cuda_new_step(b, ST_CONVERT, x, y, &s));
    s->per_sample = per_sample;
    s->to_half = to_half;
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

static vf_status concat_op(vf_backend *b, const vf_node *nd)
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
    destroy_view(&yview);
    return rc;
}

static vf_status gather_op(vf_backend *b, const vf_node *nd)
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
    destroy_view(&yview);
    return rc;
}

static vf_status transpose_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, pview = {0};
    int y;
    TRY(value_view(b, &xview, xv));
    TRY(out_buf(b, nd, &yview, &y));
    pview = yview; /* x read with permuted strides, in y's dims */
    pview.d = NULL;
    for (int i = 0; i < xv->rank; i++)
        pview.strides[i] = xview.strides[nd->p.perm[i]];
    TRY(copy_step(b, c->vbuf[nd->inputs[0]], 0, &pview, y, 0, &yview, NULL));
fail:
    destroy_view(&xview);
    destroy_view(&yview);
    destroy_view(&pview);
    return rc;
}

static vf_status pad_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    const vf_pad_params *p = &nd->p.pad;
    vf_status rc = VF_OK;
    tview xview = {0}, yview = {0}, inner = {0};
    int y;
    TRY(value_view(b, &xview, xv));
    TRY(out_buf(b, nd, &yview, &y));
    TRY(fill_step(b, y, &yview, p->value));
    inner = yview;
    inner.d = NULL;
    size_t off = 0;
    for (int d = 1; d < xv->rank; d++) {
        inner.dims[d] = xview.dims[d];
        off += (size_t)p->begin[d] * (size_t)yview.strides[d];
    }
    TRY(copy_step(b, c->vbuf[nd->inputs[0]], 0, &xview, y, off * c->es, &inner, NULL));
fail:
    destroy_view(&xview);
    destroy_view(&yview);
    destroy_view(&inner);
    return rc;
}

/* Softmax along `axis`: the tensor as [N * outer, D, inner, 1], cuDNN's channel mode. */
static vf_status softmax_op(vf_backend *b, const vf_node *nd)
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
        return vfi_cuda_kernel_op(b, nd); /* dimensions between the batch and its axis */
    TRY(out_buf(b, nd, &yview, &y));
    step *s;
    TRY(vfi_cuda_new_step(b, ST_SOFTMAX, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 1;
    int64_t dims[4] = {1, xv->dims[axis], inner, 1};
    TRY(dense_view(b, &s->v[0], 4, dims, 1, c->act_dt));
    vfi_cuda_seal(c, s);
fail:
    destroy_view(&yview);
    return rc;
}

static vf_status lrn_op(vf_backend *b, const vf_node *nd)
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
    step *s;
    TRY(vfi_cuda_new_step(b, ST_LRN, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 1;
    s->v[0] = yview;
    yview.d = NULL;
    DN(cudnnCreateLRNDescriptor(&s->ld));
    DN(cudnnSetLRNDescriptor(s->ld, (unsigned)p->size, p->alpha, p->beta, p->bias));
    vfi_cuda_seal(c, s);
fail:
    destroy_view(&yview);
    return rc;
}

static vf_status reduce_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *xv = &c->g->values[nd->inputs[0]];
    vf_status rc = VF_OK;
    tview yview = {0};
    int y;
    if (xv->rank > 8)
        return vfi_cuda_unsupported(b, "reduction over a tensor of this rank");
    TRY(out_buf(b, nd, &yview, &y));
    step *s;
    TRY(vfi_cuda_new_step(b, ST_REDUCE, c->vbuf[nd->inputs[0]], y, &s));
    s->n_views = 3;
    TRY(value_view(b, &s->v[0], xv));
    int64_t kept[VF_MAX_DIMS];
    for (int d = 0; d < xv->rank; d++)
        kept[d] = nd->p.reduce.axes & (1u << d) ? 1 : xv->dims[d];
    TRY(dense_view(b, &s->v[2], xv->rank, kept, 1, c->act_dt));
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
    destroy_view(&yview);
    return rc;
}

/* A reshape is the same memory seen with other dims. */
static vf_status reshape_op(vf_backend *b, const vf_node *nd)
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

/* ---- prepare -------------------------------------------------------------------------------- */

static vf_status add_node(vf_backend *b, const vf_node *nd)
{
    if (vfi_cuda_on_kernels(b->ctx, nd))
        return vfi_cuda_kernel_op(b, nd);
    /* the operators that read NHWC choose their layout; the others get NCHW inputs */
    int any_layout = nd->op == VF_OP_CONV || nd->op == VF_OP_POOL || nd->op == VF_OP_ACT ||
                     nd->op == VF_OP_BINARY || nd->op == VF_OP_CONCAT;
    for (int i = 0; i < nd->n_inputs && !any_layout; i++) {
        vf_status rc = vfi_cuda_to_layout(b, nd->inputs[i], 0);
        if (rc < 0)
            return rc;
    }
    switch (nd->op) {
    case VF_OP_CONV:
        return conv_op(b, nd);
    case VF_OP_FC:
        return fc_op(b, nd);
    case VF_OP_ACT:
        return act_op(b, nd);
    case VF_OP_POOL:
        return pool_op(b, nd);
    case VF_OP_BINARY:
        return binary_op(b, nd);
    case VF_OP_CONCAT:
        return concat_op(b, nd);
    case VF_OP_SOFTMAX:
        return softmax_op(b, nd);
    case VF_OP_LRN:
        return lrn_op(b, nd);
    case VF_OP_PAD:
        return pad_op(b, nd);
    case VF_OP_REDUCE_MEAN:
        return reduce_op(b, nd);
    case VF_OP_TRANSPOSE:
        return transpose_op(b, nd);
    case VF_OP_RESHAPE:
        return reshape_op(b, nd);
    case VF_OP_GATHER:
        return gather_op(b, nd);
    default: /* MatMul, LayerNorm, Slice, Expand, the id operators: vfi_cuda_on_kernels */
        break;
    }
    return vfi_cuda_unsupported(b, "operator of this kind");
}

/* The shape key of a convolution for the algorithm cache. */
static void conv_key(const step *s, int key[24])
{
    memset(key, 0, 24 * sizeof(int));
    for (int i = 0; i < 4; i++) {
        key[i] = s->v[0].dims[i];
        key[4 + i] = s->v[0].strides[i];
        key[8 + i] = s->v[2].dims[i];
    }
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int k, c, h, w, pad[2], stride[2], dil[2], group = 1;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t cdt;
    cudnnGetFilter4dDescriptor(s->wd, &dt, &fmt, &k, &c, &h, &w);
    cudnnGetConvolution2dDescriptor(s->cd, &pad[0], &pad[1], &stride[0], &stride[1], &dil[0],
                                    &dil[1], &mode, &cdt);
    cudnnGetConvolutionGroupCount(s->cd, &group);
    int rest[] = {k,         c,         h,      w,      pad[0], pad[1],
                  stride[0], stride[1], dil[0], dil[1], group,  (int)fmt};
    memcpy(key + 12, rest, sizeof(rest));
}

/* Choose each convolution's algorithm by timing them on the real buffers, once per shape. */
static vf_status search_algos(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    void *trial = NULL;
    size_t free_mem = 0, total_mem = 0, cap = WORKSPACE_CAP;
    CU(cudaMemGetInfo(&free_mem, &total_mem));
    if (cap > free_mem / 4)
        cap = free_mem / 4;
    CU(cudaMalloc(&trial, cap ? cap : 1));
    for (int i = 0; i < c->n_steps; i++) {
        step *s = &c->steps[i];
        if (s->kind != ST_CONV)
            continue;
        c->node = s->node >= 0 ? c->g->nodes[s->node].name : NULL;
        int key[24], hit = -1;
        conv_key(s, key);
        for (int j = 0; j < c->n_convs && hit < 0; j++) {
            if (!memcmp(c->convs[j].key, key, sizeof(key)))
                hit = j;
        }
        if (hit < 0) {
            cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            int got = 0;
            DN(cudnnFindConvolutionForwardAlgorithmEx(
                c->dnn, s->v[0].d, buf_ptr(c, s->x), s->wd, buf_ptr(c, s->w), s->cd, s->v[2].d,
                buf_ptr(c, s->y), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, trial, cap));
            int best = -1;
            for (int j = 0; j < got && best < 0; j++) {
                if (perf[j].status == CUDNN_STATUS_SUCCESS && perf[j].memory <= cap &&
                    (c->precision != VF_PRECISION_F32 || perf[j].mathType == CUDNN_FMA_MATH ||
                     perf[j].mathType == CUDNN_DEFAULT_MATH))
                    best = j; /* sorted fastest first */
            }
            if (best < 0) {
                rc = vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                              "node '%s': cuDNN has no convolution algorithm for this shape",
                              c->node ? c->node : "?");
                goto fail;
            }
            void *grown = vfi_grow(c->convs, &c->cap_convs, c->n_convs + 1, sizeof(conv_cache));
            if (!grown) {
                rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
                goto fail;
            }
            c->convs = grown;
            hit = c->n_convs++;
            memcpy(c->convs[hit].key, key, sizeof(key));
            c->convs[hit].algo = perf[best].algo;
            /* f32 stays exact: no TF32 even where cuDNN's default math would allow it */
            c->convs[hit].math =
                c->precision == VF_PRECISION_F32 ? CUDNN_FMA_MATH : perf[best].mathType;
        }
        s->algo = s->algo_full = c->convs[hit].algo;
        DN(cudnnSetConvolutionMathType(s->cd, c->convs[hit].math));
        size_t ws = 0;
        DN(cudnnGetConvolutionForwardWorkspaceSize(c->dnn, s->v[0].d, s->wd, s->cd, s->v[2].d,
                                                   s->algo, &ws));
        if (ws > c->ws_size)
            c->ws_size = ws;
    }
    c->node = NULL;
fail:
    cudaFree(trial);
    return rc;
}

static vf_status make_summary(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    size_t cap = 256 + (size_t)c->n_convs * 64;
    c->summary = vfi_malloc(cap);
    if (!c->summary)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    int n_conv = 0, n_kernel = 0;
    for (int i = 0; i < c->n_steps; i++) {
        n_conv += c->steps[i].kind == ST_CONV;
        n_kernel += c->steps[i].kind == ST_KERNEL || c->steps[i].kind == ST_ACTK;
    }
    size_t len = (size_t)snprintf(
        c->summary, cap,
        "cuda: %s, %s, %d steps, %d convolutions (%d NHWC) in %d shapes, %d on vidfeat's "
        "kernels, %d layout copies, arena %.1f MiB, weights %.1f MiB, workspace %.1f MiB; "
        "algorithms:",
        c->name, vf_precision_str(c->precision), c->n_steps, n_conv, c->n_nhwc_convs, c->n_convs,
        n_kernel, c->n_relayouts, c->arena_size / 1048576.0, c->const_bytes / 1048576.0,
        c->ws_size / 1048576.0);
    for (int i = 0; i < c->n_convs && len < cap; i++)
        len += (size_t)snprintf(c->summary + len, cap - len, " %d%s", (int)c->convs[i].algo,
                                c->convs[i].math == CUDNN_TENSOR_OP_MATH ? "t" : "");
    return VF_OK;
}

static vf_status cuda_prepare(vf_backend *b, vf_graph *g, int max_batch)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    c->g = g;
    c->owner_view = g;
    c->max_batch = c->cur_batch = max_batch;
    CU(cudaSetDevice(c->device));
    CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    DN(cudnnCreate(&c->dnn));
    DN(cudnnSetStream(c->dnn, c->stream));
    BL(cublasCreate(&c->blas));
    BL(cublasSetStream(c->blas, c->stream));
    BL(cublasSetMathMode(c->blas, c->precision == VF_PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                    : CUBLAS_DEFAULT_MATH));
    c->vbuf = vfi_mallocarray((size_t)g->n_values, sizeof(int));
    c->vlay = vfi_calloc((size_t)g->n_values, 1);
    if (!c->vbuf || !c->vlay)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++)
        c->vbuf[i] = -1;

    /* the input: f32 staging, converted to half on the device for an f16 network (token ids
     * stay int64) */
    const vf_value *in = &g->values[g->input], *outv = &g->values[g->output];
    c->in_size = (size_t)vfi_value_sample_numel(in) * (size_t)max_batch * vfi_dtype_size(in->dtype);
    c->out_size = (size_t)vfi_value_sample_numel(outv) * (size_t)max_batch * sizeof(float);
    TRY(vfi_cuda_new_buf(b, BUF_INPUT, c->in_size, &c->in_buf));
    if (c->act_dt == CUDNN_DATA_FLOAT || in->dtype == VF_DTYPE_I64) {
        c->vbuf[g->input] = c->in_buf;
    } else {
        int x;
        TRY(vfi_cuda_new_buf(b, BUF_ARENA, c->in_size / 2, &x));
        TRY(convert_step(b, c->in_buf, x, vfi_value_sample_numel(in), 1));
        c->vbuf[g->input] = x;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        c->node = nd->name;
        int first = c->n_steps;
        TRY(add_node(b, nd));
        for (int k = first; k < c->n_steps; k++)
            c->steps[k].node = i;
    }
    c->node = NULL;
    /* the output: NCHW, read back from its own buffer (f32), or converted into f32 staging (f16) */
    TRY(vfi_cuda_to_layout(b, g->output, 0));
    if (c->act_dt == CUDNN_DATA_HALF) {
        TRY(vfi_cuda_new_buf(b, BUF_OUTPUT, c->out_size, &c->result));
        TRY(convert_step(b, c->vbuf[g->output], c->result, vfi_value_sample_numel(outv), 0));
    } else {
        c->result = c->vbuf[g->output];
        touch(c, c->result, c->n_steps); /* alive until the copy back */
    }

    /* memory: the arena by lifetimes, the staging buffers, then the algorithm search */
    {
        int n = 0;
        vfi_arena_item *items = vfi_mallocarray((size_t)c->n_bufs, sizeof(*items));
        int *which = vfi_mallocarray((size_t)c->n_bufs, sizeof(int));
        rc = items && which ? VF_OK : VF_ERR_NOMEM;
        for (int i = 0; rc == VF_OK && i < c->n_bufs; i++) {
            if (c->bufs[i].kind != BUF_ARENA || c->bufs[i].first < 0)
                continue;
            items[n] = (vfi_arena_item){
                .size = c->bufs[i].size, .first = c->bufs[i].first, .last = c->bufs[i].last};
            which[n++] = i;
        }
        if (rc == VF_OK)
            rc = vfi_arena_place(items, n, 256, &c->arena_size);
        for (int k = 0; rc == VF_OK && k < n; k++)
            c->bufs[which[k]].offset = items[k].offset;
        vfi_free(items);
        vfi_free(which);
        if (rc < 0)
            return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    }
    CU(cudaMalloc(&c->arena, c->arena_size ? c->arena_size : 1));
    CU(cudaMalloc((void **)&c->in_dev, c->in_size));
    c->in_cur = c->in_dev;
    if (c->act_dt == CUDNN_DATA_HALF)
        CU(cudaMalloc((void **)&c->out_dev, c->out_size));
    TRY(search_algos(b));
    CU(cudaMalloc(&c->workspace, c->ws_size ? c->ws_size : 1));
    TRY(make_summary(b));
fail:
    return rc;
}

/* ---- run ------------------------------------------------------------------------------------ */

/* Re-set every descriptor for batches of n, and the convolution algorithms that would need
 * more workspace than there is at that size. */
static vf_status set_batch(vf_backend *b, int n)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    for (int i = 0; i < c->n_steps; i++) {
        step *s = &c->steps[i];
        for (int k = 0; k < MAX_VIEWS; k++) {
            if (s->v[k].d && s->v[k].batched)
                TRY(set_view(b, &s->v[k], n));
        }
        if (s->kind == ST_CONV) {
            size_t ws = 0;
            s->algo = s->algo_full;
            if (cudnnGetConvolutionForwardWorkspaceSize(c->dnn, s->v[0].d, s->wd, s->cd, s->v[2].d,
                                                        s->algo, &ws) != CUDNN_STATUS_SUCCESS ||
                ws > c->ws_size)
                s->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        }
    }
    c->cur_batch = n;
fail:
    return rc;
}

static vf_status run_step(vf_backend *b, const step *s, int n)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    const float one = 1.0f, zero = 0.0f;
    char *x = s->x >= 0 ? (char *)buf_ptr(c, s->x) + s->x_off : NULL;
    char *x2 = s->x2 >= 0 ? (char *)buf_ptr(c, s->x2) + s->x2_off : NULL;
    const void *x3 = s->x3 >= 0 ? buf_ptr(c, s->x3) : NULL;
    char *y = s->y >= 0 ? (char *)buf_ptr(c, s->y) + s->y_off : NULL;
    void *w = s->w >= 0 ? buf_ptr(c, s->w) : NULL;
    void *bias = s->bias >= 0 ? buf_ptr(c, s->bias) : NULL;
    switch (s->kind) {
    case ST_CONV:
        if (s->ad)
            DN(cudnnConvolutionBiasActivationForward(
                c->dnn, &one, s->v[0].d, x, s->wd, w, s->cd, s->algo, c->workspace, c->ws_size,
                &zero, s->v[2].d, y, s->v[1].d, bias, s->ad, s->v[2].d, y));
        else
            DN(cudnnConvolutionForward(c->dnn, &one, s->v[0].d, x, s->wd, w, s->cd, s->algo,
                                       c->workspace, c->ws_size, &zero, s->v[2].d, y));
        break;
    case ST_GEMM: {
        cudaDataType_t dt = c->es == 2 ? CUDA_R_16F : CUDA_R_32F;
        cublasComputeType_t ct =
            c->precision == VF_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        BL(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, s->m, n, s->k, &one, w, dt, s->k, x, dt,
                        s->k, &zero, y, dt, s->m, ct, CUBLAS_GEMM_DEFAULT));
        break;
    }
    case ST_BIAS:
        DN(cudnnAddTensor(c->dnn, &one, s->v[1].d, bias, &one, s->v[2].d, y));
        break;
    case ST_ACT:
        DN(cudnnActivationForward(c->dnn, s->ad, &one, s->v[0].d, x, &zero, s->v[0].d, y));
        break;
    case ST_OPTENSOR:
        DN(cudnnOpTensor(c->dnn, s->od, &s->alpha1, s->v[0].d, x, &s->alpha2, s->v[1].d, x2, &zero,
                         s->v[2].d, y));
        break;
    case ST_POOL:
        DN(cudnnPoolingForward(c->dnn, s->pd, &one, s->v[0].d, x, &zero, s->v[2].d, y));
        break;
    case ST_COPY:
        DN(cudnnTransformTensor(c->dnn, &one, s->v[0].d, x, &zero, s->v[1].d, y));
        break;
    case ST_FILL:
        if (s->v[0].dt == CUDNN_DATA_HALF) {
            uint16_t h = vfi_f32_to_f16(s->fill);
            DN(cudnnSetTensor(c->dnn, s->v[0].d, y, &h));
        } else {
            DN(cudnnSetTensor(c->dnn, s->v[0].d, y, &s->fill));
        }
        break;
    case ST_SOFTMAX:
        DN(cudnnSoftmaxForward(c->dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one,
                               s->v[0].d, x, &zero, s->v[0].d, y));
        break;
    case ST_LRN:
        DN(cudnnLRNCrossChannelForward(c->dnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, s->v[0].d,
                                       x, &zero, s->v[0].d, y));
        break;
    case ST_REDUCE:
        DN(cudnnReduceTensor(c->dnn, s->rd, NULL, 0, c->workspace, c->ws_size, &one, s->v[0].d, x,
                             &zero, s->v[2].d, y));
        break;
    case ST_CONVERT:
        if (s->to_half)
            CU(vfk_f32_to_f16((const float *)x, y, (size_t)(s->per_sample * n), c->stream));
        else
            CU(vfk_f16_to_f32(x, (float *)y, (size_t)(s->per_sample * n), c->stream));
        break;
    case ST_MEMCPY2D:
        CU(cudaMemcpy2DAsync(y, s->dpitch, x, s->spitch, s->width, (size_t)(s->rows_per_sample * n),
                             cudaMemcpyDeviceToDevice, c->stream));
        break;
    case ST_ACTK:
        CU(vfk_act(s->act, c->es == 2, x, y, (size_t)(s->per_sample * n), c->stream));
        break;
    case ST_KERNEL:
        TRY(vfi_cuda_kernel_run(b, s, n, x, x2, x3, w, bias, y));
        break;
    }
fail:
    return rc;
}

/* Run the network on n images: from host memory (in) through the staging buffer, or straight
 * from a batch input on the device (dev_in). */
static vf_status run_batch(vf_backend *b, const float *in, const void *dev_in, float *out, int n)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    if (n < 1 || n > c->max_batch)
        return vfi_fail(&b->err, VF_ERR_INVALID, "batch of %d (prepared for 1..%d)", n,
                        c->max_batch);
    CU(cudaSetDevice(c->device));
    if (n != c->cur_batch)
        TRY(set_batch(b, n));
    size_t in_bytes = c->in_size / (size_t)c->max_batch * (size_t)n;
    size_t out_bytes = c->out_size / (size_t)c->max_batch * (size_t)n;
    c->in_cur = dev_in ? dev_in : c->in_dev;
    if (!dev_in)
        CU(cudaMemcpyAsync(c->in_dev, in, in_bytes, cudaMemcpyHostToDevice, c->stream));
    if (c->bad_dev)
        CU(cudaMemsetAsync(c->bad_dev, 0, sizeof(int), c->stream));
    for (int i = 0; i < c->n_steps; i++) {
        if (b->cancel && atomic_load(b->cancel)) {
            cudaStreamSynchronize(c->stream);
            return vfi_fail(&b->err, VF_ERR_CANCELLED, "cancelled");
        }
        const step *s = &c->steps[i];
        c->node = s->node >= 0 ? c->g->nodes[s->node].name : NULL;
        TRY(run_step(b, s, n));
    }
    c->node = NULL;
    CU(cudaMemcpyAsync(out, buf_ptr(c, c->result), out_bytes, cudaMemcpyDeviceToHost, c->stream));
    int bad = 0;
    if (c->bad_dev)
        CU(cudaMemcpyAsync(&bad, c->bad_dev, sizeof(int), cudaMemcpyDeviceToHost, c->stream));
    CU(cudaStreamSynchronize(c->stream));
    if (bad)
        rc = vfi_fail(&b->err, VF_ERR_INVALID,
                      "a token id or index outside its table (a Lookup or Take of the network)");
fail:
    c->node = NULL;
    return rc;
}

static vf_status cuda_run(vf_backend *b, const void *in, float *out, int n)
{
    return run_batch(b, in, NULL, out, n);
}

static vf_status cuda_run_input(vf_backend *b, const void *input, float *out, int n)
{
    return run_batch(b, NULL, input, out, n);
}

/* ---- batch inputs and frame conversion on the device ----------------------------------------- */

/* Batch inputs are plain device memory. Frames are converted by vfk_yuv_to_slot on the
 * converter's stream, which is a blocking stream: it waits for work FFmpeg queued on the legacy
 * default stream (NVDEC's copy of a decoded picture into its frame), while the network's own
 * non-blocking stream runs on undisturbed. */
struct vf_converter {
    int device;
    cudaStream_t stream;
    uint8_t *pinned, *staging; /* a CPU-decoded picture's planes: host copy, device copy */
    size_t cap;
};

/* Errors of the converter entries: into *err, which belongs to the calling thread. */
static vf_status conv_fail(vf_err *err, cudaError_t e, const char *what)
{
    return vfi_fail(err, e == cudaErrorMemoryAllocation ? VF_ERR_NOMEM : VF_ERR_BACKEND,
                    "CUDA: %s failed: %s (error %d)", what, cudaGetErrorString(e), (int)e);
}

#define CV(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return conv_fail(err, e_, what);                                                       \
    } while (0)

static void *cuda_input_alloc(vf_backend *b, size_t size)
{
    cuda_ctx *c = b->ctx;
    void *p = NULL;
    if (cudaSetDevice(c->device) != cudaSuccess || cudaMalloc(&p, size ? size : 1) != cudaSuccess)
        return NULL;
    /* zeroed before anyone reads it: the memset runs on the legacy stream, the readers don't */
    if (cudaMemset(p, 0, size) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_input_free(vf_backend *b, void *input)
{
    cuda_ctx *c = b->ctx;
    cudaSetDevice(c->device);
    cudaFree(input);
}

static vf_status cuda_copy(vf_backend *b, vf_converter *cv, void *dst, const void *src, size_t size,
                           int from_host, vf_err *err)
{
    cuda_ctx *c = b->ctx;
    enum cudaMemcpyKind kind = from_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
    CV(cudaSetDevice(c->device), "cudaSetDevice");
    if (cv) {
        CV(cudaMemcpyAsync(dst, src, size, kind, cv->stream), "cudaMemcpyAsync");
        CV(cudaStreamSynchronize(cv->stream), "cudaStreamSynchronize");
    } else {
        /* a device-to-device cudaMemcpy returns before the copy is done */
        CV(cudaMemcpy(dst, src, size, kind), "cudaMemcpy");
        CV(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
    }
    return VF_OK;
}

static void cuda_converter_free(vf_backend *b, vf_converter *cv)
{
    (void)b;
    if (!cv)
        return;
    cudaSetDevice(cv->device);
    if (cv->stream)
        cudaStreamSynchronize(cv->stream);
    cudaFreeHost(cv->pinned);
    cudaFree(cv->staging);
    if (cv->stream)
        cudaStreamDestroy(cv->stream);
    vfi_free(cv);
}

static vf_status cuda_converter_new(vf_backend *b, vf_converter **out, vf_err *err)
{
    cuda_ctx *c = b->ctx;
    vf_converter *cv = vfi_calloc(1, sizeof(*cv));
    if (!cv)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    cv->device = c->device;
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&cv->stream, cudaStreamDefault);
    if (e != cudaSuccess) {
        cuda_converter_free(b, cv);
        return conv_fail(err, e, "creating a conversion stream");
    }
    *out = cv;
    return VF_OK;
}

/* Bytes of each plane's lines that the conversion can read (the picture, not the padding). */
static int plane_extents(const vf_yuv_params *q, size_t row[3], size_t rows[3])
{
    const size_t bytes = q->wide ? 2 : 1;
    const int n_planes = q->interleaved ? 2 : 3;
    for (int i = 0; i < n_planes; i++) {
        const vf_yuv_axis *ax = i ? &q->chroma_x : &q->luma_x, *ay = i ? &q->chroma_y : &q->luma_y;
        row[i] = (size_t)(ax->last + 1) * bytes * (i && q->interleaved ? 2 : 1);
        rows[i] = (size_t)(ay->last + 1);
    }
    return n_planes;
}

/* A CPU-decoded picture: its lines packed into pinned memory, one asynchronous copy to the
 * device; *dev describes the device copy. */
static vf_status stage_planes(vf_converter *cv, const vf_yuv_params *q, const vf_yuv_planes *host,
                              vf_yuv_planes *dev, vf_err *err)
{
    size_t row[3], rows[3], total = 0;
    int n_planes = plane_extents(q, row, rows);
    for (int i = 0; i < n_planes; i++) {
        if (host->pitch[i] < (int)row[i])
            return vfi_fail(err, VF_ERR_UNSUPPORTED, "plane %d: pitch %d", i, host->pitch[i]);
        total += row[i] * rows[i];
    }
    if (total > cv->cap) {
        cudaFreeHost(cv->pinned);
        cudaFree(cv->staging);
        cv->pinned = cv->staging = NULL;
        cv->cap = 0;
        CV(cudaHostAlloc((void **)&cv->pinned, total, cudaHostAllocPortable), "cudaHostAlloc");
        CV(cudaMalloc((void **)&cv->staging, total), "cudaMalloc");
        cv->cap = total;
    }
    memset(dev, 0, sizeof(*dev));
    size_t at = 0;
    for (int i = 0; i < n_planes; i++) {
        if ((size_t)host->pitch[i] == row[i])
            memcpy(cv->pinned + at, host->data[i], row[i] * rows[i]);
        else
            for (size_t y = 0; y < rows[i]; y++)
                memcpy(cv->pinned + at + y * row[i], host->data[i] + y * (size_t)host->pitch[i],
                       row[i]);
        dev->data[i] = cv->staging + at;
        dev->pitch[i] = (int)row[i];
        at += row[i] * rows[i];
    }
    CV(cudaMemcpyAsync(cv->staging, cv->pinned, total, cudaMemcpyHostToDevice, cv->stream),
       "cudaMemcpyAsync");
    return VF_OK;
}

static vf_status cuda_convert(vf_backend *b, vf_converter *cv, const vf_yuv_params *q,
                              const vf_yuv_planes *planes, int on_device, float *slot, vf_err *err)
{
    (void)b;
    vf_yuv_planes staged;
    CV(cudaSetDevice(cv->device), "cudaSetDevice");
    if (!on_device) {
        vf_status rc = stage_planes(cv, q, planes, &staged, err);
        if (rc < 0)
            return rc;
        planes = &staged;
    }
    CV(vfk_yuv_to_slot(q, planes, slot, cv->stream), "the frame conversion kernel");
    /* the picture stays readable until here: NVDEC's frame goes back to its pool after */
    CV(cudaStreamSynchronize(cv->stream), "cudaStreamSynchronize");
    return VF_OK;
}

static const char *cuda_describe(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    return c ? c->summary : NULL;
}

static void *cuda_host_alloc(vf_backend *b, size_t size)
{
    cuda_ctx *c = b->ctx;
    void *p = NULL;
    if (cudaSetDevice(c->device) != cudaSuccess ||
        cudaHostAlloc(&p, size ? size : 1, cudaHostAllocPortable) != cudaSuccess)
        return NULL;
    return p;
}

static void cuda_host_free(vf_backend *b, void *ptr)
{
    (void)b;
    cudaFreeHost(ptr);
}

static const char *cuda_device_name(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    return c && c->name[0] ? c->name : NULL;
}

static void cuda_library_version(char *buf, size_t size)
{
    int rt = 0, blas_major = 0, blas_minor = 0;
    cudaRuntimeGetVersion(&rt);
    cublasGetProperty(MAJOR_VERSION, &blas_major);
    cublasGetProperty(MINOR_VERSION, &blas_minor);
    size_t dnn = cudnnGetVersion();
    snprintf(buf, size, "CUDA runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d", rt / 1000,
             rt % 1000 / 10, dnn / 10000, dnn % 10000 / 100, dnn % 100, blas_major, blas_minor);
}

static const vf_backend_ops cuda_ops = {
    .name = "cuda",
    .description = "NVIDIA GPU: cuDNN and cuBLAS",
    .is_gpu = 1,
    .probe = cuda_probe,
    .init = cuda_init,
    .prepare = cuda_prepare,
    .run = cuda_run,
    .input_alloc = cuda_input_alloc,
    .input_free = cuda_input_free,
    .run_input = cuda_run_input,
    .copy = cuda_copy,
    .converter_new = cuda_converter_new,
    .converter_free = cuda_converter_free,
    .convert = cuda_convert,
    .describe = cuda_describe,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .device_name = cuda_device_name,
    .library_version = cuda_library_version,
    .destroy = cuda_destroy,
};

/* The module's one exported symbol (module.map hides the rest): backend.c loads the module and
 * checks that it was built with the library it is loaded into. */
__attribute__((visibility("default"))) const vf_backend_module *vfi_backend_module(void);

const vf_backend_module *vfi_backend_module(void)
{
    static const vf_backend_module m = {
        .abi = VF_BACKEND_ABI,
        .version = VF_VERSION_STRING,
        .sizes = VF_BACKEND_SIZES,
        .ops = &cuda_ops,
    };
    return &m;
}
