/*
 * backend_cuda_int.h - the GPU backend's plan, shared by its files: backend_cuda.c (the backend:
 * the lowering table, planning, precision and layout, running, frame conversion),
 * backend_cuda_plan.c (the helpers that build steps), backend_cuda_cnn.c (the CNN operators on
 * cuDNN) and backend_cuda_ops.c (the operators of transformers and text towers, and any
 * operator on tensors whose batch is not their first dimension alone, on vidfeat's kernels and
 * cuBLAS). Internal to the module
 * libvidfeat-cuda.so; the rest of vidfeat sees the backend through backend.h's ops table only.
 *
 * A plan is a flat list of steps over buffers (see backend_cuda.c): an operator's lowering
 * function reads its node, finds its inputs' buffers in c->vbuf, adds buffers and steps with
 * the helpers below, and records its output's buffer in c->vbuf.
 */
#ifndef VIDFEAT_BACKEND_CUDA_INT_H
#define VIDFEAT_BACKEND_CUDA_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph.h"

#define MAXD          8  /* cuDNN's tensor rank limit; our graphs have at most VF_MAX_DIMS */
#define CONV_KEY      32 /* ints that tell convolutions apart for their algorithms (conv_key) */
#define MIN_ND        4
#define WORKSPACE_CAP ((size_t)1 << 30) /* most a convolution may ask for */

enum cbuf_kind {
    BUF_ARENA = 0, /* activation: a range of the arena */
    BUF_CONST,     /* weights and other constants: their own allocation */
    BUF_INPUT,     /* the f32 input staging buffer */
    BUF_OUTPUT,    /* the f32 output staging buffer */
    BUF_VIEW,      /* the memory of `parent` from byte `view_offset` on */
};

typedef struct cbuf {
    enum cbuf_kind kind;
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

typedef struct cstep {
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
} cstep;

typedef struct conv_cache {
    int key[CONV_KEY];
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
    cstep *steps;
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

/* Record a failed CUDA, cuDNN or cuBLAS call in b->err (in the user's words: the node being
 * prepared or run, what to do; not the library's) and return its status. */
vf_status vfi_cuda_fail(vf_backend *b, cudaError_t e, const char *what, const char *file, int line);
vf_status vfi_cuda_dnn_fail(vf_backend *b, cudnnStatus_t s, const char *what, const char *file,
                            int line);
vf_status vfi_cuda_blas_fail(vf_backend *b, cublasStatus_t s, const char *what, const char *file,
                             int line);

/* The file a failure is in, by its name alone (a path of the source tree would be kept in the
 * built module). */
#ifdef __FILE_NAME__
#define VF_CUDA_FILE_ __FILE_NAME__
#else
#define VF_CUDA_FILE_ "backend_cuda"
#endif

/* Each evaluates the call once; on failure records it in b->err and jumps to fail with rc set. */
#define LIB_CHECK(type, ok, fail_fn, call)                                                         \
    do {                                                                                           \
        type v_ = (call);                                                                          \
        if (v_ != (ok)) {                                                                          \
            rc = fail_fn(b, v_, #call, VF_CUDA_FILE_, __LINE__);                                   \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define CU(call) LIB_CHECK(cudaError_t, cudaSuccess, vfi_cuda_fail, call)
#define DN(call) LIB_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, vfi_cuda_dnn_fail, call)
#define BL(call) LIB_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, vfi_cuda_blas_fail, call)

/* "node 'X': the CUDA backend has no WHAT" (VF_ERR_UNSUPPORTED). */
vf_status vfi_cuda_unsupported(vf_backend *b, const char *what);

/* A new buffer of `kind` and `size` bytes (a full batch's) into *out. */
vf_status vfi_cuda_new_buf(vf_backend *b, enum cbuf_kind kind, size_t size, int *out);
/* A new step of `kind` reading buffer x and writing y (-1: none); the caller sets the rest of
 * its operands, then calls vfi_cuda_seal(). */
vf_status vfi_cuda_new_step(vf_backend *b, enum step_kind kind, int x, int y, cstep **out);
/* Record the lifetimes of a finished step's operands. */
void vfi_cuda_seal(cuda_ctx *c, const cstep *s);
/* Graph constant vi on the device in the activation type (reciprocals when invert). */
vf_status vfi_cuda_upload_value(vf_backend *b, int vi, int invert, int *out);
/* Make value vi's buffer hold layout nhwc (1) or NCHW (0). */
vf_status vfi_cuda_to_layout(vf_backend *b, int vi, int nhwc);

/* Buffer buf (or the buffer a view lives in) is used by step `at`: its lifetime grows. */
void vfi_cuda_touch(cuda_ctx *c, int buf, int at);
/* Buffer buf's device address (a view's: its parent's, plus its offset). */
void *vfi_cuda_buf_ptr(const cuda_ctx *c, int buf);
/* A view's cuDNN descriptor released (the view may be destroyed again). */
void vfi_cuda_destroy_view(tview *v);
vf_status vfi_cuda_set_view(vf_backend *b, tview *v, int n);
/* A dense view of `rank` dims (dims[0] = the batch when batched), padded to 4-D with trailing
 * 1s. */
vf_status vfi_cuda_dense_view(vf_backend *b, tview *v, int rank, const int64_t *dims, int batched,
                              cudnnDataType_t dt);
vf_status vfi_cuda_value_view(vf_backend *b, tview *v, const vf_value *val);
/* Give a packed 4-D view [N, C, H, W] the strides of NHWC memory. */
vf_status vfi_cuda_nhwc_view(vf_backend *b, tview *v);
/* The view of value vi's buffer, in the layout it has. */
vf_status vfi_cuda_act_view(vf_backend *b, tview *v, int vi);
/* Are NCHW and NHWC the same bytes for this value, aligned to 4-D by leading 1s (its C, or its
 * H x W, is 1)? */
int vfi_cuda_layout_free(const vf_value *v);
/* A convolution's filter [K, C, R, S] on the device, reordered to [K, R, S, C] for NHWC. */
vf_status vfi_cuda_upload_filter(vf_backend *b, int vi, int nhwc, int *out);
/* y = op(a1 * x, a2 * x2) where x2 is a scalar constant or another tensor (x2_view NULL: the
 * scalar view). */
vf_status vfi_cuda_optensor(vf_backend *b, cudnnOpTensorOp_t op, int x, float a1, int x2, float a2,
                            const tview *x2_view, int y, const tview *shape);
vf_status vfi_cuda_temp_like(vf_backend *b, const tview *shape, int *out);
/* Can act_steps() run this activation in place (x == y)? cuDNN's own modes can; the ones built
 * from cudnnOpTensor calls need a separate output. */
int vfi_cuda_act_in_place(const vf_act *act);
/* y = act(x), elementwise, as one or more steps; x == y only where act_in_place(). */
vf_status vfi_cuda_act_steps(vf_backend *b, const vf_act *act, int x, int y, const tview *shape);
/* y view <- x view (same dims; any strides, dtypes, byte offsets). */
vf_status vfi_cuda_copy_step(vf_backend *b, int x, size_t x_off, const tview *xv, int y,
                             size_t y_off, const tview *yv, cstep **out);
vf_status vfi_cuda_fill_step(vf_backend *b, int y, const tview *yv, float value);
/* A new buffer holding x [N, C, H, W] padded by pads (top, left, bottom, right) with `value`,
 * in x's layout (nhwc); *pv receives its view. */
vf_status vfi_cuda_padded_copy(vf_backend *b, int x, const tview *xv, int nhwc, const int pads[4],
                               float value, int *out, tview *pv);
/* A step converting per_sample elements an image between f32 and half (to_half: f32 -> half). */
vf_status vfi_cuda_convert_step(vf_backend *b, int x, int y, int64_t per_sample, int to_half);

/* backend_cuda_cnn.c: the operators cuDNN runs, each lowering its node to steps, or answering
 * VFI_CUDA_ON_KERNELS for a node cuDNN cannot take (a broadcast it has not, a rank past 5):
 * backend_cuda.c then lowers it on vidfeat's kernels. */
#define VFI_CUDA_ON_KERNELS 2
typedef vf_status (*vfi_cuda_lowering)(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_conv_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_fc_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_act_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_pool_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_pool3d_op(vf_backend *b, const vf_node *nd);
/* Whether cuDNN pools this Pool3D node (VF_ERR_UNSUPPORTED, saying why, when not). */
vf_status vfi_cuda_pool3d_supports(const vf_graph *g, const vf_node *nd, vf_err *err);
/* Conv3D by cuDNN's N-d convolution (NCDHW); what it cannot take (uneven padding) is refused by
 * supports when planned. */
vf_status vfi_cuda_conv3d_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_conv3d_supports(const vf_graph *g, const vf_node *nd, vf_err *err);
vf_status vfi_cuda_binary_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_concat_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_gather_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_transpose_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_pad_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_softmax_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_lrn_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_reduce_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_reshape_op(vf_backend *b, const vf_node *nd);

/* backend_cuda_ops.c: the operator table, one row an operator: everything this backend does for
 * it. A kernel's call (its operands at a batch) is backend_cuda_ops.c's own. */
typedef struct vfi_cuda_kernel_call vfi_cuda_kernel_call;
enum {
    CUDA_OP_KERNELS = 1 << 0,    /* always on vidfeat's kernels (cuDNN has no such operator) */
    CUDA_OP_VIEW = 1 << 1,       /* a view of any tensor: never on the kernels */
    CUDA_OP_ANY_LAYOUT = 1 << 2, /* its cuDNN lowering takes NHWC inputs as they are */
    CUDA_OP_PER_INPUT = 1 << 3,  /* its kernel is a step per input (cstep.part) */
    CUDA_OP_INDICES = 1 << 4,    /* its kernel checks indices (the bad-index flag) */
};
typedef struct vfi_cuda_op {
    vfi_cuda_lowering cudnn; /* its lowering on cuDNN, or NULL */
    /* its kernel step's run at a batch, or NULL: then only cuDNN runs it, and only on tensors
     * whose batch is their first dimension alone */
    vf_status (*kernel)(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k);
    /* (optional) which nodes of it cuDNN runs (VF_ERR_UNSUPPORTED, saying why) */
    vf_status (*supports)(const vf_graph *g, const vf_node *nd, vf_err *err);
    /* (optional) a kernel step's operands beyond the first, from its inputs' buffers ops[]
     * (default: the second as x2) */
    void (*operands)(const vf_node *nd, const int *ops, cstep *s);
    /* (optional) what its kernel cannot take, refused before the step is made */
    vf_status (*check)(vf_backend *b, const vf_node *nd);
    unsigned flags; /* CUDA_OP_* */
} vfi_cuda_op;
extern const vfi_cuda_op vfi_cuda_ops[VF_OP_COUNT_];

/* Whether node nd runs on vidfeat's kernels (an operator cuDNN has not, or tensors cuDNN's steps
 * cannot take), its lowering to ST_KERNEL steps, and such a step's run at batch n on its
 * operands' device memory. */
int vfi_cuda_on_kernels(const cuda_ctx *c, const vf_node *nd);
vf_status vfi_cuda_kernel_op(vf_backend *b, const vf_node *nd);
vf_status vfi_cuda_kernel_run(vf_backend *b, const cstep *s, int n, const void *x, const void *x2,
                              const void *x3, const void *w, const void *bias, void *y);

#endif /* VIDFEAT_BACKEND_CUDA_INT_H */
