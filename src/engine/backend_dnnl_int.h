/*
 * backend_dnnl_int.h - the oneDNN backend's plan, shared by its files: backend_dnnl.c (the backend:
 * the lowering table, planning, running), backend_dnnl_plan.c (the helpers below that build a
 * plan), backend_dnnl_cnn.c and backend_dnnl_ops.c (the operators' lowerings: the CNN ones, and
 * those transformers and text towers brought) and backend_dnnl_precision.c (int8 and bf16
 * choices). Internal to those; the rest of vidfeat sees the backend through backend.h's ops
 * table only. Files call downwards only: backend_dnnl.c -> the lowerings -> the plan helpers.
 *
 * A plan is a flat list of steps, each one oneDNN primitive (or a fill, or a host step: an
 * operator oneDNN lacks, run by our own loop over plain buffers) over buffers: an
 * operator's lowering function reads its node, finds its inputs' buffers in c->p->vbuf, adds
 * buffers and steps with the helpers below, and records its output's buffer in c->p->vbuf.
 */
#ifndef VIDFEAT_BACKEND_DNNL_INT_H
#define VIDFEAT_BACKEND_DNNL_INT_H

#include <stddef.h>

#include <dnnl.h>

#include "core/isa.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph.h"

#define MAX_ARGS 8

enum dbuf_kind {
    BUF_ARENA = 0, /* activation: a range of the arena */
    BUF_INPUT,     /* the input staging buffer */
    BUF_OUTPUT,    /* the output staging buffer */
    BUF_CONST,     /* persistent: weights in their chosen layout, constants */
    BUF_VIEW,      /* another descriptor over a parent buffer's memory */
};

typedef struct dbuf {
    dnnl_memory_desc_t md;
    dnnl_memory_t mem;
    enum dbuf_kind kind;
    int parent;      /* BUF_VIEW: the buffer whose memory this describes */
    int first, last; /* steps that touch it */
    size_t size, offset;
    size_t view_offset; /* BUF_VIEW: bytes into the parent's memory */
    void *owned;        /* BUF_CONST: storage we allocated (NULL when borrowing the graph's) */
    int value;          /* BUF_CONST: the graph value it holds; -1 otherwise */
} dbuf;

typedef struct dstep dstep;
/* A host step's work: node nd on the step's buffers (data: the memory of s->arg_buf, in order)
 * for the first n of the plan's `batch` inputs. The lowering that adds the step names it. */
typedef vf_status (*vfi_dnnl_host_fn)(vf_backend *b, const vf_node *nd, const dstep *s,
                                      void *const *data, int n, int64_t batch);

struct dstep {
    dnnl_primitive_t prim; /* NULL: a fill dstep */
    int n_args;
    int arg_kind[MAX_ARGS];
    int arg_buf[MAX_ARGS];
    dnnl_exec_arg_t args[MAX_ARGS + 1]; /* bound at the end of prepare (+1: scratchpad) */
    dnnl_memory_t scratch;              /* over the shared scratchpad, or NULL */
    const char *impl;                   /* borrowed from the primitive descriptor */
    int host; /* a host step: 1 + the index of the node it runs (its buffers in arg_buf); 0 */
    vfi_dnnl_host_fn run_host; /* a host step's work */
    int fill_buf;
    float fill_value;
    int value;  /* the graph value this step finishes (the last step of its node), or -1 */
    int node;   /* the node whose lowering added it, or -1 (the plan's edges) */
    int kernel; /* a host step of vidfeat's convolution: its vfk_algo (kernels/conv.h) */
};

typedef struct cache_entry {
    int src, dst;
} cache_entry;

/* One compiled network for one batch size. The plans of a backend share the weights (where
 * their layouts agree), the arena, the scratchpad and the staging buffers: runs never overlap. */
typedef struct dplan {
    int batch;
    int *vbuf; /* value -> buffer */
    dbuf *bufs;
    int n_bufs, cap_bufs;
    dstep *steps;
    int n_steps, cap_steps;
    cache_entry *cache; /* reorders already made: (src buffer, dst buffer) */
    int n_cache, cap_cache;
    size_t arena_size;
    int in_buf, out_buf;
    size_t in_size, out_size; /* bytes for a full batch */
    int wino_chunked;         /* Winograd convolutions run in chunks of images (conv_op) */
} dplan;

/* plans[0] runs full batches; plans[1], when there is one, runs short batches (the end of a
 * run) for a quarter of the cost instead of a full batch's worth of padding. */
#define MAX_PLANS 2

typedef struct dnnl_ctx {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_data_type_t act_dt; /* activations (f32 for int8 too: only stored int8 values differ) */
    /* int8: without ranges given (a calibration file's), prepare builds f32 plans; the first
     * runs observe every value's range (vmax) on them, then the plans are rebuilt with
     * convolutions and inner products in int8. */
    int int8, calibrating;
    int64_t calib_seen, calib_target; /* images observed, and how many to observe */
    float *vmax;                      /* per graph value: max |x| (observed or given) */
    dnnl_data_type_t *vdt;            /* per value, int8 plans: how it is stored (u8, s8 or f32) */
    dnnl_data_type_t *qdt;            /* per value: the int8 type it is quantized to (u8 if >= 0) */
    float *vscale;                    /* per value: quantized = real x vscale */
    int *i8node;                      /* per node: runs in int8 */
    int *f32node; /* bf16: per node, F32_COMPUTE / F32_OUTPUT of a convolution (plan_bf16) */
    int winograd;
    vf_isa isa; /* the instructions it may use, oneDNN's included (use_isa) */
    int n_threads;
    const vf_graph *g;
    vf_graph *owner_view; /* the same graph, for releasing weights (release_weights) */
    int release_weights;
    int last_plan; /* the plan being built is the last: graph constants may go */
    dplan plans[MAX_PLANS];
    int n_plans;
    dplan *p; /* the plan being built or run */
    void *arena;
    size_t arena_size; /* the largest plan's */
    void *scratch;
    size_t scratch_size;
    float *stage_in, *stage_out; /* the plans' input and output memory */
    const vf_node *node;         /* node being prepared, for messages */
    /* while preparing: the measured choices (plan_cache.h), read when a layer first asks */
    struct vfi_plan_cache *plans_cache;
    /* VIDFEAT_PROFILE=FILE: the full plan's time per step, written there as JSON when the
     * backend is freed (write_profile) */
    char *profile_path;
    double *step_s;      /* per step of plans[0]: seconds */
    int64_t *step_calls; /* and runs */
    char *summary;
} dnnl_ctx;

/* A oneDNN failure as b->err, in the user's words: the node being prepared (its name, operator
 * and shapes), what failed and what to do. oneDNN's call, status and our file:line go to the
 * debug log only. */
vf_status vfi_dnnl_fail(vf_backend *b, dnnl_status_t s, const char *what, const char *file,
                        int line);

/* Run a oneDNN call; on failure record it and jump to the function's fail label (which has a
 * vf_status rc and the backend b in scope). */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            rc = vfi_dnnl_fail(b, s_, #call, VF_DNNL_FILE, __LINE__);                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* A buffer of the plan being built with descriptor md; its index into *out. */
vf_status vfi_dnnl_new_buf(vf_backend *b, const dnnl_memory_desc_t *md, enum dbuf_kind kind,
                           int *out);
/* Another descriptor over buffer parent's memory (a part of it, or the same bytes seen with
 * other dims). */
vf_status vfi_dnnl_new_view(vf_backend *b, int parent, const dnnl_memory_desc_t *md, int *out);
/* A step running pd's primitive over (argument kind, buffer) pairs; pd stays the caller's. */
vf_status vfi_dnnl_add_step(vf_backend *b, const_dnnl_primitive_desc_t pd, int n_args,
                            const int *kinds, const int *bufs);
/* A step filling buffer buf with value. */
vf_status vfi_dnnl_add_fill(vf_backend *b, int buf, float value);
/* A host step running node nd by `run` over buffers bufs[0..n). */
vf_status vfi_dnnl_add_host(vf_backend *b, const vf_node *nd, vfi_dnnl_host_fn run, int n,
                            const int *bufs);
/* A byte buffer's descriptor for int64 value v at the plan's batch size (oneDNN has no int64
 * type; only host steps read such values). */
vf_status vfi_dnnl_bytes_md(vf_backend *b, const vf_value *v, dnnl_memory_desc_t *md);
/* A step running the primitive of desc with attr over (argument kind, buffer) pairs; keep, when
 * not NULL, receives the primitive descriptor (the caller destroys it). */
vf_status vfi_dnnl_add_prim(vf_backend *b, const_dnnl_op_desc_t desc,
                            const_dnnl_primitive_attr_t attr, int n_args, const int *kinds,
                            const int *bufs, dnnl_primitive_desc_t *keep);
/* act appended to po as the elementwise post-ops it is (VF_ERR_UNSUPPORTED for Erf). */
vf_status vfi_dnnl_append_act(vf_backend *b, dnnl_post_ops_t po, const vf_act *act);
/* An attr with a user scratchpad and act as a post-op (act may be NULL). */
vf_status vfi_dnnl_make_attr(vf_backend *b, const vf_act *act, dnnl_primitive_attr_t *out);
/* A step of desc's primitive from buffer x (SRC) to buffer y (DST). */
vf_status vfi_dnnl_src_dst_step(vf_backend *b, int x, int y, const_dnnl_op_desc_t desc);
/* Row-major descriptor of value v at the plan's batch size, of type dt. */
vf_status vfi_dnnl_plain_md(vf_backend *b, const vf_value *v, dnnl_data_type_t dt,
                            dnnl_memory_desc_t *md);
/* Value v's dims at the plan's batch size. */
void vfi_dnnl_value_dims(const dnnl_ctx *c, const vf_value *v, dnnl_dims_t dims);
/* How value vi is stored in the plan being built. */
dnnl_data_type_t vfi_dnnl_dt_of(const dnnl_ctx *c, int vi);
/* Buffer src in layout `want` (a reorder, cached per source, when it is not already); with a
 * non-zero scale the reorder multiplies by it: quantization into an int8 type. */
vf_status vfi_dnnl_ensure_md_scaled(vf_backend *b, int src, const dnnl_memory_desc_t *want_in,
                                    float scale, int *out);
/* Constant v (its data, or `data` in its place: quantized weights, scaled biases) as a persistent
 * buffer in layout `want`, shared with another plan that has it in the same layout, else
 * reordered once now from user_in. */
vf_status vfi_dnnl_upload_data(vf_backend *b, const vf_value *v, const void *data,
                               const dnnl_memory_desc_t *user_in, const dnnl_memory_desc_t *want_in,
                               int *out);
/* Is dt an int8 type? */
static inline int vfi_dnnl_is_int8(dnnl_data_type_t dt)
{
    return dt == dnnl_u8 || dt == dnnl_s8;
}
/* The oneDNN elementwise operations an activation is, in order, into op: how many (0 for none),
 * or -1 where oneDNN has no kernel for it (Erf). */
typedef struct vfi_dnnl_eltwise {
    dnnl_alg_kind_t alg;
    float alpha, beta;
} vfi_dnnl_eltwise;
int vfi_dnnl_act_eltwise(const vf_act *a, vfi_dnnl_eltwise op[2]);
/* Buffer src in layout want: itself, or a (cached) reorder of it. */
vf_status vfi_dnnl_ensure_md(vf_backend *b, int src, const dnnl_memory_desc_t *want, int *out);
/* A reorder step from buffer src into buffer (or view) dst. */
vf_status vfi_dnnl_add_reorder(vf_backend *b, int src, int dst);
/* Graph constant v, described by user_md, as a persistent buffer in layout want. */
vf_status vfi_dnnl_upload_const(vf_backend *b, const vf_value *v, const dnnl_memory_desc_t *user_md,
                                const dnnl_memory_desc_t *want, int *out);
/* An elementwise step alg(alpha, beta) from buffer x to buffer y. */
vf_status vfi_dnnl_eltwise_step(vf_backend *b, int x, int y, dnnl_alg_kind_t alg, float alpha,
                                float beta);

/* ---- the operators' lowerings: each reads its node and adds its buffers and steps ---- */
typedef vf_status (*vfi_dnnl_lowering)(vf_backend *b, const vf_node *nd);
/* backend_dnnl_cnn.c */
vf_status vfi_dnnl_conv_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_fc_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_act_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_pool_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_binary_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_concat_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_softmax_lrn_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_pad_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_reduce_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_relayout_op(vf_backend *b, const vf_node *nd); /* Transpose, Reshape */
vf_status vfi_dnnl_gather_op(vf_backend *b, const vf_node *nd);
/* backend_dnnl_ops.c */
vf_status vfi_dnnl_matmul_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_layernorm_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_slice_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_expand_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_prelu_op(vf_backend *b, const vf_node *nd);
/* a text tower's: host steps (oneDNN 2.6 has no gather or argmax) */
vf_status vfi_dnnl_lookup_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_argmax_op(vf_backend *b, const vf_node *nd);
vf_status vfi_dnnl_take_op(vf_backend *b, const vf_node *nd);
/* vfi_dnnl_conv_pd's algorithms: direct; Winograd where oneDNN has it for the shape, else
 * direct; a (1, KH, KW) Conv3D as a 2-D Winograd convolution over every frame of the batch's
 * clips ([N x T, C, H, W]), nothing else. */
enum { CONV_DIRECT, CONV_WINO, CONV_FRAMES_WINO };
/* The primitive descriptor of convolution node nd for `batch` images, activations and weights
 * in whatever layout oneDNN prefers, by algorithm `wino` (above); in int8 when plan_int8 chose
 * it for nd. The weights' and bias' user layouts go to *w_user, *b_md. */
vf_status vfi_dnnl_conv_pd(vf_backend *b, const vf_node *nd, int64_t batch, int wino,
                           const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out,
                           dnnl_memory_desc_t *w_user, dnnl_memory_desc_t *b_md);
/* backend_dnnl_own.c. Whether vidfeat's own kernel runs convolution node nd (window cw, oneDNN
 * attributes attr, Winograd tried for oneDNN's candidate when try_wino): *own 1 when it does,
 * its step then added to the plan. */
/* FC node nd on vidfeat's direct kernel where the instructions in use are AVX2's and each
 * image is one row (every row's sums in one order: the same vector at any batch); *own 0 when
 * not, with nothing added. backend_dnnl_own.c. */
vf_status vfi_dnnl_fc_own(vf_backend *b, const vf_node *nd, int *own);
vf_status vfi_dnnl_conv_own(vf_backend *b, const vf_node *nd, const vf_conv_window *cw,
                            const_dnnl_primitive_attr_t attr, int try_wino, int *own);

/* Is the batch the outermost dimension of md's layout, unblocked (nChw16c, nchw, nhwc)? Then
 * images k..k+n-1 are one contiguous slice of it. */
static inline int vfi_dnnl_batch_outermost(const dnnl_memory_desc_t *md)
{
    if (md->format_kind != dnnl_blocked)
        return 0;
    const dnnl_blocking_desc_t *bk = &md->format_desc.blocking;
    for (int i = 0; i < bk->inner_nblks; i++) {
        if (bk->inner_idxs[i] == 0)
            return 0;
    }
    for (int d = 1; d < md->ndims; d++) {
        if (bk->strides[d] > bk->strides[0])
            return 0;
    }
    return 1;
}

/* backend_dnnl_precision.c. In a bf16 plan, per node (c->f32node, vfi_dnnl_plan_bf16): computes
 * in f32 (and writes f32), writes its output in f32 (for a consumer computing in f32). */
enum { F32_COMPUTE = 1, F32_OUTPUT = 2 };
/* Does node nd run in int8 (decided by vfi_dnnl_plan_int8)? */
int vfi_dnnl_runs_int8(const dnnl_ctx *c, const vf_node *nd);
/* From the observed ranges (c->vmax): which nodes run in int8, and every value's stored type
 * and scale (c->i8node, c->vdt, c->qdt, c->vscale). */
vf_status vfi_dnnl_plan_int8(vf_backend *b);
/* Largest |x| over the first n images of buffer k of plan q (all of it when the batch is not
 * its outermost dimension); non-finite values are ignored. */
float vfi_dnnl_buffer_max(const dplan *q, int k, int n);
/* bf16: which convolutions compute in f32 (c->f32node; none with VIDFEAT_DNNL_BF16_KEEP=0). */
vf_status vfi_dnnl_plan_bf16(vf_backend *b);

#endif /* VIDFEAT_BACKEND_DNNL_INT_H */
