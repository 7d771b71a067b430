/*
 * backend_cuda.h - the GPU backend's plan, shared by its files: backend_cuda.c (the backend:
 * planning, the CNN operators on cuDNN, precision and layout, running) and backend_cuda_ops.c
 * (the operators of transformers and text towers, and any operator on tensors whose batch is
 * not their first dimension alone, on vidfeat's kernels and cuBLAS). Internal to the module
 * libvidfeat-cuda.so; the rest of vidfeat sees the backend through backend.h's ops table only.
 *
 * A plan is a flat list of steps over buffers (see backend_cuda.c): an operator's lowering
 * function reads its node, finds its inputs' buffers in c->vbuf, adds buffers and steps with
 * the helpers below, and records its output's buffer in c->vbuf.
 */
#ifndef VIDFEAT_BACKEND_CUDA_H
#define VIDFEAT_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph.h"

#define MAXD          8 /* cuDNN's tensor rank limit; our graphs have at most VF_MAX_DIMS */
#define MIN_ND        4
#define WORKSPACE_CAP ((size_t)1 << 30) /* most a convolution may ask for */

enum buf_kind {
    BUF_ARENA = 0, /* activation: a range of the arena */
    BUF_CONST,     /* weights and other constants: their own allocation */
    BUF_INPUT,     /* the f32 input staging buffer */
    BUF_OUTPUT,    /* the f32 output staging buffer */
    BUF_VIEW,      /* the memory of `parent` from byte `view_offset` on */
};

typedef struct cbuf {
    enum buf_kind kind;
    int parent;
    size_t view_offset;
    size_t size;     /* bytes for a full batch */
    int first, last; /* steps that touch it */
    size_t offset;   /* BUF_ARENA: place in the arena */
    void *dev;       /* BUF_CONST: owned allocation */
} cbuf;

/* A tensor as cuDNN sees it: dims and strides (elements), the batch in dims[0] when batched. */
typedef struct tview {
    cudnnTensorDescriptor_t d;
    cudnnDataType_t dt;
    int nd, batched;
    int dims[MAXD], strides[MAXD];
} tview;

enum step_kind {
    ST_CONV,     /* convolution (+ bias + ReLU fused when it can) */
    ST_GEMM,     /* fully connected: cuBLAS */
    ST_BIAS,     /* y += bias (broadcast) */
    ST_ACT,      /* cuDNN activation */
    ST_OPTENSOR, /* y = op(a1 * A, a2 * B) */
    ST_POOL,     /* cuDNN pooling */
    ST_COPY,     /* cudnnTransformTensor: layout change, padding interior, dtype change */
    ST_FILL,     /* cudnnSetTensor */
    ST_SOFTMAX,  /* along the C of a [outer, D, inner, 1] view */
    ST_LRN,      /* across channels */
    ST_REDUCE,   /* mean over some dims */
    ST_MEMCPY2D, /* rows of bytes: concat slices, gathers */
    ST_CONVERT,  /* f32 <-> f16 (cuda_kernels.cu): an f16 network's input and output */
    ST_ACTK,     /* an elementwise function cuDNN lacks (cuda_kernels.cu: GELU, Erf, ...) */
    ST_KERNEL,   /* node `node` on vidfeat's kernels (and cuBLAS), shapes made at run time */
};

#define MAX_VIEWS 3

typedef struct step {
    enum step_kind kind;
    int node;                    /* graph node index for messages, -1 for edge steps */
    int x, x2, x3, y, w, bias;   /* buffers (-1: none) */
    size_t x_off, x2_off, y_off; /* byte offsets into those buffers */
    tview v[MAX_VIEWS];          /* x, x2/bias, y as the call needs them */
    int n_views;
    float alpha1, alpha2;
    /* convolution */
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo, algo_full;
    cudnnActivationDescriptor_t ad; /* also ST_ACT; NULL: no fused activation */
    /* others */
    cudnnPoolingDescriptor_t pd;
    cudnnOpTensorDescriptor_t od;
    cudnnLRNDescriptor_t ld;
    cudnnReduceTensorDescriptor_t rd;
    float fill;
    /* ST_GEMM: y[n, m] = x[n, k] w[m, k]^T */
    int m, k;
    /* ST_MEMCPY2D: rows_per_sample rows of width bytes */
    size_t width, spitch, dpitch;
    int64_t rows_per_sample;
    /* ST_CONVERT, ST_ACTK: elements per sample; direction */
    int64_t per_sample;
    int to_half;
    vf_act act; /* ST_ACTK */
    int part;   /* ST_KERNEL: which input of a Concat this step copies */
} step;

typedef struct conv_cache {
    int key[24];
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;
} conv_cache;

typedef struct cuda_ctx {
    int device;
    vf_precision precision;
    cudnnDataType_t act_dt;
    size_t es; /* bytes per activation element */
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    const vf_graph *g;
    vf_graph *owner_view;
    int release_weights;
    int nhwc; /* NHWC convolutions: 0 never, 1 where the channels suit, 2 all (tests) */
    int max_batch, cur_batch;
    int *vbuf;           /* value -> buffer */
    unsigned char *vlay; /* value -> 1 when its buffer holds NHWC */
    int n_nhwc_convs, n_relayouts;
    cbuf *bufs;
    int n_bufs, cap_bufs;
    step *steps;
    int n_steps, cap_steps;
    conv_cache *convs;
    int n_convs, cap_convs;
    void *arena, *workspace;
    size_t arena_size, ws_size, const_bytes;
    float *in_dev, *out_dev; /* f32 staging on the device (out_dev: f16 networks only) */
    const float *in_cur;     /* what the input steps read: in_dev, or a batch input (run_input) */
    size_t in_size, out_size;
    int in_buf;
    int result;       /* the buffer copied back to the host: f32 [n, D] */
    int *bad_dev;     /* set by a Lookup or Take whose index is out of range (device int) */
    const char *node; /* node being prepared, for messages */
    char name[256];   /* GPU name */
    char *summary;
} cuda_ctx;

/* Record a failed CUDA, cuDNN or cuBLAS call in b->err (the library's words, the node being
 * prepared or run, file and line) and return its status. */
vf_status vfi_cuda_fail(vf_backend *b, cudaError_t e, const char *what, const char *file, int line);
vf_status vfi_cuda_dnn_fail(vf_backend *b, cudnnStatus_t s, const char *what, const char *file,
                            int line);
vf_status vfi_cuda_blas_fail(vf_backend *b, cublasStatus_t s, const char *what, const char *file,
                             int line);

/* Each evaluates the call once; on failure records it in b->err and jumps to fail with rc set. */
#define LIB_CHECK(type, ok, fail_fn, call)                                                         \
    do {                                                                                           \
        type v_ = (call);                                                                          \
        if (v_ != (ok)) {                                                                          \
            rc = fail_fn(b, v_, #call, __FILE__, __LINE__);                                        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define CU(call) LIB_CHECK(cudaError_t, cudaSuccess, vfi_cuda_fail, call)
#define DN(call) LIB_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, vfi_cuda_dnn_fail, call)
#define BL(call) LIB_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, vfi_cuda_blas_fail, call)

/* "node 'X': the CUDA backend has no WHAT" (VF_ERR_UNSUPPORTED). */
vf_status vfi_cuda_unsupported(vf_backend *b, const char *what);

/* A new buffer of `kind` and `size` bytes (a full batch's) into *out. */
vf_status vfi_cuda_new_buf(vf_backend *b, enum buf_kind kind, size_t size, int *out);
/* A new step of `kind` reading buffer x and writing y (-1: none); the caller sets the rest of
 * its operands, then calls vfi_cuda_seal(). */
vf_status vfi_cuda_new_step(vf_backend *b, enum step_kind kind, int x, int y, step **out);
/* Record the lifetimes of a finished step's operands. */
void vfi_cuda_seal(cuda_ctx *c, const step *s);
/* Graph constant vi on the device in the activation type (reciprocals when invert). */
vf_status vfi_cuda_upload_value(vf_backend *b, int vi, int invert, int *out);
/* Make value vi's buffer hold layout nhwc (1) or NCHW (0). */
vf_status vfi_cuda_to_layout(vf_backend *b, int vi, int nhwc);

/* backend_cuda_ops.c: whether node nd runs on vidfeat's kernels (an operator cuDNN has not, or
 * tensors cuDNN's steps cannot take), its lowering to an ST_KERNEL step, and that step's run at
 * batch n on its operands' device memory. */
int vfi_cuda_on_kernels(const cuda_ctx *c, const vf_node *nd);
vf_status vfi_cuda_kernel_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_kernel_run(vf_backend *b, const step *s, int n, const void *x, const void *x2,
                              const void *x3, const void *w, const void *bias, void *y);

#endif /* VIDFEAT_BACKEND_CUDA_H */
