/*
 * graph.h - the backend-neutral network IR.
 *
 * A vf_graph is a list of values (tensors) and nodes (operations), in topological order. Values
 * are either constants (weights, with data owned by the graph) or activations. An activation
 * holds the batch in one of its dimensions, batch_axis: that dimension's size is the batch size
 * times dims[batch_axis] (1 for the input and a CNN's activations, where the batch is dimension
 * 0), so a graph runs at any batch size. Transformers move the batch (a sequence-first
 * attention is [tokens, N, width]) and fold other dimensions into it ([N x heads, tokens, 64],
 * [tokens x N, width]); batch_outer records how the batched dimension is made: of its
 * dims[batch_axis] x N entries, the images are the middle factor of batch_outer x N x
 * (dims[batch_axis] / batch_outer), row-major. Each node has exactly one output.
 *
 * The loader (onnx.c) builds a graph through vfi_graph_add_*; shapes are inferred and checked as
 * each node is added, so an inconsistent model fails at the node that breaks it. The passes
 * (passes.c) rewrite the graph; backends only read it.
 */
#ifndef VIDFEAT_GRAPH_H
#define VIDFEAT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/act_math.h"
#include "engine/op_list.h"

#define VF_MAX_DIMS 6
/* Frames a clip model may take at once (its input [N, 3, T, H, W]: T). */
#define VF_MAX_WINDOW 512
/* In an int64 constant computed from a Shape, this element stands for the batch size; the
 * VF_MAX_DIM elements from it stand for multiples of it (vfi_dim_batch). */
#define VF_DIM_BATCH INT64_MIN
/* Largest tensor we accept, in elements (16 Gi floats = 64 GiB): beyond that a model is hostile. */
#define VF_MAX_NUMEL (INT64_C(1) << 34)
/* Largest single dimension we accept. */
#define VF_MAX_DIM (INT64_C(1) << 24)

typedef enum vf_dtype {
    VF_DTYPE_F32 = 0,
    VF_DTYPE_I64 = 1, /* constants (shapes, indices); activations: a text tower's token ids */
} vf_dtype;

typedef struct vf_value {
    char *name; /* owned; unique within the graph */
    vf_dtype dtype;
    int rank; /* 0..VF_MAX_DIMS */
    int64_t dims[VF_MAX_DIMS];
    int is_batched;      /* an activation: it holds the batch (see above) */
    int batch_axis;      /* activations: the dimension holding the batch */
    int64_t batch_outer; /* activations: how many entries of that dimension enclose the batch */
    void *data;          /* constants only: owned, rank-major dense, NULL for activations */
    int producer;        /* index of the producing node, -1 for the input and constants */
} vf_value;

/* The operators, from op_list.h (which says what each one's inputs are). */
/* clang-format off */
typedef enum vf_op {
#define VF_OP_ENUM_(id, name, params, shape, flags) VF_OP_##id,
    VF_OP_LIST(VF_OP_ENUM_)
#undef VF_OP_ENUM_
    VF_OP_COUNT_
} vf_op;
/* clang-format on */

/* What an operator's inputs may be and what its parameters hold (op_list.h's flags column).
 * Unless a flag says otherwise, every input is a float32 value and the first an activation. */
enum {
    VF_OPF_IMAGE = 1 << 0,        /* the first input is images, the batch its dimension 0 alone */
    VF_OPF_CONST_IN0 = 1 << 1,    /* the first input may be a constant */
    VF_OPF_IDS_IN0 = 1 << 2,      /* the first input is int64 (token ids) */
    VF_OPF_IDS_IN1 = 1 << 3,      /* the second input is int64 (an index an image) */
    VF_OPF_IDS_ANY = 1 << 4,      /* an input may be float32 or an int64 activation */
    VF_OPF_SHAPE_PARAM = 1 << 5,  /* vfi_graph_add_node's params: the output's shape */
    VF_OPF_OWNS_INDICES = 1 << 6, /* its parameters own an index array (GATHER) */
};

typedef enum vf_binary_kind { VF_BIN_ADD = 0, VF_BIN_SUB, VF_BIN_MUL, VF_BIN_DIV } vf_binary_kind;

typedef enum vf_pool_kind { VF_POOL_MAX = 0, VF_POOL_AVG } vf_pool_kind;

typedef enum vf_auto_pad {
    VF_PAD_EXPLICIT = 0,
    VF_PAD_SAME_UPPER, /* extra padding at the end (TF "SAME") */
    VF_PAD_SAME_LOWER,
    VF_PAD_VALID,
} vf_auto_pad;

/* 2-D window parameters shared by CONV and POOL. pads: top, left, bottom, right (resolved from
 * auto_pad by shape inference). */
typedef struct vf_window {
    int kernel[2];
    int stride[2];
    int dilation[2];
    int pads[4];
    vf_auto_pad auto_pad;
} vf_window;

typedef struct vf_conv_params {
    vf_window win;
    int group;
    vf_act act; /* fused activation applied to the output */
} vf_conv_params;

/* MATMUL: y = act(scale x (a b) + bias) + sum. Inputs: a, b, then bias [N] (a constant) when
 * has_bias, then sum (an activation of y's shape) when has_sum. The passes fuse them in; the
 * loader makes a plain product (scale 1). */
typedef struct vf_matmul_params {
    float scale;
    int has_bias, has_sum;
    vf_act act;
} vf_matmul_params;

typedef struct vf_fc_params {
    vf_act act;
} vf_fc_params;

typedef struct vf_pool_params {
    vf_pool_kind kind;
    int global; /* kernel = the whole input plane */
    int ceil_mode;
    int count_include_pad;
    vf_window win;
} vf_pool_params;

/* CONV3D: a convolution over the last three dimensions of [N, C, T, H, W] (a clip's time,
 * height and width); weights [OC, IC / group, KT, KH, KW]. pads: the beginnings of the three,
 * then their ends (resolved from auto_pad by shape inference). */
typedef struct vf_conv3d_params {
    int kernel[3], stride[3], dilation[3], pads[6];
    vf_auto_pad auto_pad;
    int group;
    vf_act act; /* fused activation applied to the output */
} vf_conv3d_params;

/* A window's spatial axes as backends read them (CONV, POOL: H, W; CONV3D, POOL3D: T, H, W),
 * padding explicit; a global pool's kernel the whole axis. */
typedef struct vf_axes {
    int n; /* 2 or 3: the input is [N, C, then these] */
    int64_t kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
} vf_axes;

/* The window of a CONV or CONV3D node as backends read both (vfi_conv_window). */
typedef struct vf_conv_window {
    vf_axes ax;
    int group;
    vf_act act;
} vf_conv_window;

/* POOL3D: a window over the last three dimensions of [N, C, T, H, W] (a clip's time, height and
 * width). pads: the beginnings of the three, then their ends (resolved from auto_pad, and a
 * ceil mode folded into the ends, by shape inference). */
typedef struct vf_pool3d_params {
    vf_pool_kind kind;
    int global; /* kernel = the whole input volume */
    int ceil_mode;
    int count_include_pad;
    int kernel[3], stride[3], dilation[3], pads[6];
    vf_auto_pad auto_pad;
} vf_pool3d_params;

/* The window of a POOL or POOL3D node as backends read both (vfi_pool_window). */
typedef struct vf_pool_window {
    vf_axes ax;
    vf_pool_kind kind;
    int count_include_pad;
} vf_pool_window;

typedef struct vf_lrn_params {
    int size;
    float alpha, beta, bias;
} vf_lrn_params;

typedef struct vf_pad_params {
    int64_t begin[VF_MAX_DIMS];
    int64_t end[VF_MAX_DIMS];
    float value;
} vf_pad_params;

typedef struct vf_layernorm_params {
    int axis; /* normalised over dims[axis..rank-1] */
    float epsilon;
} vf_layernorm_params;

/* SLICE: element i of dimension d is input element start[d] + i * step[d], for count[d]
 * elements (the batch's dimension whole: start 0, step 1, count its dims entry). */
typedef struct vf_slice_params {
    int64_t start[VF_MAX_DIMS];
    int64_t step[VF_MAX_DIMS];
    int64_t count[VF_MAX_DIMS];
} vf_slice_params;

typedef struct vf_argmax_params {
    int axis;
    int keepdims;
} vf_argmax_params;

typedef struct vf_gather_params {
    int axis;
    int n_indices;
    int scalar;       /* indices were a scalar: the axis is removed */
    int64_t *indices; /* owned, already normalised to 0..dim-1 */
} vf_gather_params;

typedef struct vf_node {
    vf_op op;
    char *name; /* owned; the ONNX node name or a generated one */
    int n_inputs;
    int *inputs; /* owned; value indices */
    int output;  /* value index */
    union {
        vf_conv_params conv;
        vf_fc_params fc;
        vf_matmul_params matmul;
        vf_act act;
        vf_pool_params pool;
        vf_pool3d_params pool3d;
        vf_conv3d_params conv3d;
        vf_binary_kind binary;
        int axis; /* CONCAT, SOFTMAX, TAKE */
        vf_lrn_params lrn;
        vf_pad_params pad;
        struct {
            uint32_t axes; /* bit i: reduce dimension i */
            int keepdims;
        } reduce;
        int perm[VF_MAX_DIMS]; /* TRANSPOSE */
        vf_gather_params gather;
        vf_layernorm_params layernorm;
        vf_slice_params slice;
        vf_argmax_params argmax;
        struct {
            char unused;
        } none; /* operators without parameters */
    } p;
} vf_node;

typedef struct vf_strmap vf_strmap;

typedef struct vf_graph {
    vf_value *values;
    int n_values, cap_values;
    vf_node *nodes; /* topological order */
    int n_nodes, cap_nodes;
    int input;        /* the input value (images, or a text tower's token ids), -1 until set */
    int output;       /* the feature output value, -1 until set */
    vf_strmap *names; /* value name (and aliases) -> index */
} vf_graph;

/* An operator's descriptor: its row of op_list.h. */
typedef struct vf_op_desc {
    const char *name;  /* for messages ("Conv", "Pool", ...) */
    size_t param_size; /* bytes of its vf_node.p member */
    unsigned flags;    /* VF_OPF_* */
    /* Its shape rule: y's rank, dims and batch placement from x (the first input), the other
     * inputs and the parameters (which it may resolve: auto padding becomes explicit), every
     * check a model file could violate made here; a failure names the node. y arrives with
     * x's batch placement (unless VF_OPF_SHAPE_PARAM: then y holds the shape asked for), type
     * float32, batched. */
    vf_status (*shape)(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err);
} vf_op_desc;

/* The descriptor of op (ops.c); NULL for a number that is no operator. */
const vf_op_desc *vfi_op_desc(vf_op op);

vf_status vfi_graph_create(vf_graph **out);
void vfi_graph_free(vf_graph **pg);

/* Number of elements of a value (product of dims; for activations: per image). */
int64_t vfi_value_numel(const vf_value *v);
/* Elements per image of an activation (the product of its dims). */
int64_t vfi_value_sample_numel(const vf_value *v);
/* The value's dims at batch size n (dims[batch_axis] x n for an activation) into out. */
void vfi_value_dims_at(const vf_value *v, int64_t n, int64_t *out);
/* Whether the batch is dimension 0 and nothing else: image i is rows i of dimension 0. */
int vfi_value_batch_first(const vf_value *v);
/* Entries of an activation's layout before its images: the dimensions before the batch's and
 * the batch's outer part (a reshape keeps the images in place only if it keeps this). */
int64_t vfi_value_outer_entries(const vf_value *v);

/* Row-major index arithmetic over dims, shared by the folds, the loader and the reference
 * backend: the product of dims (INT64_MAX where it would overflow: a hostile shape, refused by
 * the caller's limit); idx advanced to the next element (last dimension fastest); the strides
 * of a tensor of `rank` dims read as a broadcast over out_rank dims (aligned to the right, 0
 * where it has 1 or nothing) into st[out_rank]. */
int64_t vfi_dims_numel(int rank, const int64_t *dims);
void vfi_dims_next(int rank, const int64_t *dims, int64_t *idx);
void vfi_dims_broadcast_strides(int out_rank, int rank, const int64_t *dims, int64_t *st);
/* The row-major strides of dims into st; the entries before, along and after dimension axis
 * (outer x len x inner). */
void vfi_dims_strides(int rank, const int64_t *dims, int64_t *st);
void vfi_dims_split(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *len,
                    int64_t *inner);
/* The offset, through strides st, of the element at index idx. */
int64_t vfi_dims_offset(int rank, const int64_t *idx, const int64_t *st);

/* Shape arithmetic's stand-in for m times the batch size (m in 1..VF_MAX_DIM), and back: the
 * multiple an element stands for, or 0 for an ordinary number. */
int64_t vfi_dim_batch(int64_t m);
int64_t vfi_dim_batch_multiple(int64_t v);
/* Human-readable shape "[N,3,224,224]" into buf. */
const char *vfi_value_shape_str(const vf_value *v, char *buf, size_t size);

/* Index of the value with that name, or -1. */
int vfi_graph_find(const vf_graph *g, const char *name);

/* Add the batched input: images (F32) or token ids (I64); dims[0] is ignored (the batch). */
vf_status vfi_graph_add_input(vf_graph *g, const char *name, vf_dtype dtype, int rank,
                              const int64_t *dims, int *out_index, vf_err *err);

/* Add a constant. On VF_OK the graph owns data (allocated with vfi_malloc or vfi_aligned_alloc),
 * on failure the caller still does. dims are checked against VF_MAX_DIM / VF_MAX_NUMEL. */
vf_status vfi_graph_add_const(vf_graph *g, const char *name, vf_dtype dtype, int rank,
                              const int64_t *dims, void *data, int *out_index, vf_err *err);

/* Make `alias` another name for value `index` (Identity, Dropout). */
vf_status vfi_graph_add_alias(vf_graph *g, const char *alias, int index, vf_err *err);

/* Append a node computing a new value named out_name from `inputs`; its shape is inferred and
 * checked here. params points to the node's parameters, copied (the vf_node.p member for the op;
 * for RESHAPE and EXPAND a const vf_value * whose rank, dims, batch_axis and batch_outer give
 * the output's shape, checked here).
 * A GATHER's indices belong to the graph once the node is added, even if inference then fails.
 * On failure the message names the node. */
vf_status vfi_graph_add_node(vf_graph *g, vf_op op, const char *node_name, const int *inputs,
                             int n_inputs, const void *params, const char *out_name, int *out_index,
                             vf_err *err);

/* Run shape inference for node i again (after a pass changed its inputs or parameters). */
vf_status vfi_graph_infer_node(vf_graph *g, int i, vf_err *err);

/* A MATMUL node's products at batch n: `lead` products of [m, k] x [k, cols], a's rows and y's
 * consecutive, product l with b's matrix l % *b_mats. b an activation holds one [k, cols] a
 * product (the same leading dimensions as a: b_mats = lead); a constant [k, cols] is one
 * matrix for all of a's rows (lead 1, m every row); a constant [..., k, cols] holds one matrix
 * for each index of a's last leading dimensions, the same for each index of those before
 * (einsum's "b t h w c, h k c -> b t h w k"). */
void vfi_matmul_dims(const vf_graph *g, const vf_node *nd, int64_t n, int64_t *lead, int64_t *m,
                     int64_t *k, int64_t *cols, int64_t *b_mats);

/* Is MATMUL node nd a product of all of a's rows with one constant matrix? */
int vfi_matmul_flat(const vf_graph *g, const vf_node *nd);

/* The window of CONV or CONV3D node nd into *w. */
void vfi_conv_window(const vf_graph *g, const vf_node *nd, vf_conv_window *w);

/* The window of POOL or POOL3D node nd into *w. */
void vfi_pool_window(const vf_graph *g, const vf_node *nd, vf_pool_window *w);
/* The arithmetic of node nd for one sample, in floating-point operations (a multiply-add is 2):
 * convolutions, fully connected layers and matrix products as written (a Winograd kernel does
 * fewer); 0 for the other operators. */
double vfi_node_flops(const vf_graph *g, const vf_node *nd);

/* Number of nodes reading value v, plus one if v is the graph output. */
int vfi_graph_count_uses(const vf_graph *g, int v);

/* The value a layer name stands for by the graph's structure alone, or -1: "logits" is the
 * output of the last fully connected node (Gemm or MatMul, with a MatMul's bias Add), "pool" the
 * global average pool that feeds it (through flatten, reshape or squeeze), "cls" the class
 * token it reads (a Gather of token 0), "tokens" the sequence that token is taken from. Other
 * names: -1. */
int vfi_graph_layer_by_structure(const vf_graph *g, const char *layer);

/* A vision transformer's "mean" layer: the mean of the patch tokens (all but the first, the
 * class token) of tokens [N, T, D], as new nodes; the value into *out. */
vf_status vfi_graph_token_mean(vf_graph *g, int tokens, int *out, vf_err *err);

/* Remove nodes whose outputs nobody uses (walking back from g->output), and the constants only
 * they used. Node order is kept; value indices are renumbered. */
vf_status vfi_graph_prune(vf_graph *g, vf_err *err);

/* Name of an op for messages ("Conv", "Pool", ...); "?" for a number that is no operator. */
const char *vfi_op_name(vf_op op);

/* dims checked against VF_MAX_DIM and VF_MAX_NUMEL (a tensor named name). */
vf_status vfi_dims_check(int rank, const int64_t *dims, const char *name, vf_err *err);

/* Apply a fused activation to one float (shared by the reference backend and the folding code). */
float vfi_act_apply(const vf_act *act, float x);
/* The activation applied to node nd's output: an Act node's own, the one fused into a Conv,
 * Conv3D, fully connected or MatMul node; NULL for any other operator. */
vf_act *vfi_node_act(vf_node *nd);
const vf_act *vfi_node_act_const(const vf_node *nd);

/* Bytes per element of a dtype. */
size_t vfi_dtype_size(vf_dtype dtype);

#endif /* VIDFEAT_GRAPH_H */
