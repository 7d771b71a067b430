/*
 * backend_cuda.c - the GPU backend: plain C against the CUDA runtime, cuDNN (its classic
 * descriptor API, still complete in cuDNN 9) and cuBLAS: the lowering table, planning, running,
 * frame conversion; the lowerings are in backend_cuda_cnn.c (cuDNN's operators) and
 * backend_cuda_ops.c (vidfeat's kernels), the helpers that build steps in backend_cuda_plan.c.
 * Built as the run-time module libvidfeat-cuda.so (with its
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
#include "engine/backend_cuda_int.h"
#include "engine/cuda_kernels.h"

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

static void cuda_destroy(vf_backend *b)
{
    cuda_ctx *c = b->ctx;
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (int i = 0; i < c->n_steps; i++) {
        cstep *s = &c->steps[i];
        for (int k = 0; k < MAX_VIEWS; k++)
            vfi_cuda_destroy_view(&s->v[k]);
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

/* ---- prepare -------------------------------------------------------------------------------- */

/* Every operator runs on cuDNN or on the kernels; what either cannot do in a given node is
 * refused here when this says so (a Pool3D or Conv3D window cuDNN cannot take), else as the node is
 * lowered. */
static vf_status cuda_supports(vf_backend *b, const vf_graph *g, const vf_node *nd, vf_err *err)
{
    (void)b;
    if ((unsigned)nd->op >= VF_OP_COUNT_)
        return VF_ERR_UNSUPPORTED;
    const vfi_cuda_op *row = &vfi_cuda_ops[nd->op];
    if (row->supports) /* what cuDNN's N-d pooling and convolution take */
        return row->supports(g, nd, err);
    return row->cudnn || row->kernel ? VF_OK : VF_ERR_UNSUPPORTED;
}

static vf_status add_node(vf_backend *b, const vf_node *nd)
{
    if (vfi_cuda_on_kernels(b->ctx, nd))
        return vfi_cuda_kernel_op(b, nd);
    const vfi_cuda_op *row = &vfi_cuda_ops[nd->op];
    /* the operators that read NHWC choose their layout; the others get NCHW inputs */
    for (int i = 0; i < nd->n_inputs && !(row->flags & CUDA_OP_ANY_LAYOUT); i++) {
        vf_status rc = vfi_cuda_to_layout(b, nd->inputs[i], 0);
        if (rc < 0)
            return rc;
    }
    if (!row->cudnn)
        return vfi_cuda_unsupported(b, "operator of this kind");
    vf_status rc = row->cudnn(b, nd);
    return rc == VFI_CUDA_ON_KERNELS ? vfi_cuda_kernel_op(b, nd) : rc;
}

/* The shape key of a convolution for the algorithm cache. */
/* What a convolution's algorithm depends on, 2-D or 3-D: its views, filter and window. */
static void conv_key(const cstep *s, int key[CONV_KEY])
{
    memset(key, 0, CONV_KEY * sizeof(int));
    for (int i = 0; i < 5; i++) {
        key[i] = s->v[0].dims[i];
        key[5 + i] = s->v[0].strides[i];
        key[10 + i] = s->v[2].dims[i];
    }
    cudnnDataType_t dt, cdt;
    cudnnTensorFormat_t fmt;
    cudnnConvolutionMode_t mode;
    int nd = 0, axes = 0, group = 1;
    cudnnGetFilterNdDescriptor(s->wd, 5, &dt, &fmt, &nd, key + 15); /* 15..19 */
    cudnnGetConvolutionNdDescriptor(s->cd, 3, &axes, key + 20, key + 23, key + 26, &mode, &cdt);
    cudnnGetConvolutionGroupCount(s->cd, &group);
    key[29] = group;
    key[30] = (int)fmt;
    key[31] = nd * 8 + axes;
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
        cstep *s = &c->steps[i];
        if (s->kind != ST_CONV)
            continue;
        c->node = s->node >= 0 ? c->g->nodes[s->node].name : NULL;
        int key[CONV_KEY], hit = -1;
        conv_key(s, key);
        for (int j = 0; j < c->n_convs && hit < 0; j++) {
            if (!memcmp(c->convs[j].key, key, sizeof(key)))
                hit = j;
        }
        if (hit < 0) {
            cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            int got = 0;
            DN(cudnnFindConvolutionForwardAlgorithmEx(
                c->dnn, s->v[0].d, vfi_cuda_buf_ptr(c, s->x), s->wd, vfi_cuda_buf_ptr(c, s->w),
                s->cd, s->v[2].d, vfi_cuda_buf_ptr(c, s->y), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                perf, trial, cap));
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
        TRY(vfi_cuda_convert_step(b, c->in_buf, x, vfi_value_sample_numel(in), 1));
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
        TRY(vfi_cuda_convert_step(b, c->vbuf[g->output], c->result, vfi_value_sample_numel(outv),
                                  0));
    } else {
        c->result = c->vbuf[g->output];
        vfi_cuda_touch(c, c->result, c->n_steps); /* alive until the copy back */
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
        cstep *s = &c->steps[i];
        for (int k = 0; k < MAX_VIEWS; k++) {
            if (s->v[k].d && s->v[k].batched)
                TRY(vfi_cuda_set_view(b, &s->v[k], n));
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

static vf_status run_step(vf_backend *b, const cstep *s, int n)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    const float one = 1.0f, zero = 0.0f;
    char *x = s->x >= 0 ? (char *)vfi_cuda_buf_ptr(c, s->x) + s->x_off : NULL;
    char *x2 = s->x2 >= 0 ? (char *)vfi_cuda_buf_ptr(c, s->x2) + s->x2_off : NULL;
    const void *x3 = s->x3 >= 0 ? vfi_cuda_buf_ptr(c, s->x3) : NULL;
    char *y = s->y >= 0 ? (char *)vfi_cuda_buf_ptr(c, s->y) + s->y_off : NULL;
    void *w = s->w >= 0 ? vfi_cuda_buf_ptr(c, s->w) : NULL;
    void *bias = s->bias >= 0 ? vfi_cuda_buf_ptr(c, s->bias) : NULL;
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
        const cstep *s = &c->steps[i];
        c->node = s->node >= 0 ? c->g->nodes[s->node].name : NULL;
        TRY(run_step(b, s, n));
    }
    c->node = NULL;
    CU(cudaMemcpyAsync(out, vfi_cuda_buf_ptr(c, c->result), out_bytes, cudaMemcpyDeviceToHost,
                       c->stream));
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
    .supports = cuda_supports,
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
