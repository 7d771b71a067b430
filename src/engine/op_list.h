/*
 * op_list.h - the IR's operators, one row each: the only list of them. graph.h makes the vf_op
 * enum from it and ops.c the descriptor table, so nothing about an operator can be out of step
 * (an operator without a shape rule does not link; a backend without a kernel for it refuses it
 * when it plans, naming it).
 *
 *   X(ID, name, params, shape, flags)
 *     ID      the enum constant VF_OP_<ID>
 *     name    for messages
 *     params  the vf_node.p member holding its parameters (none: it has no parameters)
 *     shape   its shape rule, vfi_shape_<shape> (shape.h), written by operator family in
 *             shape_image.c, shape_linear.c, shape_tensor.c and shape_ids.c
 *     flags   VF_OPF_* (graph.h): what its inputs may be, what its parameters hold
 *
 * Inputs of each (value indices in vf_node.inputs):
 *   CONV        x [N, C, H, W], W [OC, IC/group, KH, KW] (constant), optional B [OC]
 *   FC          x [N, IC], W [OC, IC], optional B [OC]; y = x W^T + B
 *   ACT         x; an elementwise activation
 *   POOL        x [N, C, H, W]; max or average, windowed or global
 *   POOL3D      x [N, C, T, H, W]; the same over a clip's time, height and width
 *   CONV3D      x [N, C, T, H, W], W [OC, IC/group, KT, KH, KW] (constant), optional B [OC]
 *   BINARY      a, b (either may be a constant); add, sub, mul, div with broadcasting
 *   PRELU       x, slope (a constant broadcast to x): x where x >= 0, else x * slope
 *   CONCAT      x1, x2, ... along a non-batch axis
 *   SOFTMAX     x, along a non-batch axis
 *   LRN         x [N, C, H, W], across channels
 *   PAD         x; constant-value padding
 *   REDUCE_MEAN x, over a set of non-batch axes
 *   TRANSPOSE   x
 *   RESHAPE     x; a row-major reinterpretation (Flatten, Reshape, Squeeze, Unsqueeze)
 *   GATHER      x; constant indices along one non-batch axis
 *   MATMUL      a [..., M, K], b [..., K, N] (an activation or a constant), then bias [N] and a
 *               residual sum of y's shape as the passes fuse them (vf_matmul_params)
 *   LAYERNORM   x, scale, optional bias over the dimensions from axis on
 *   SLICE       x; a strided window, not across the batch
 *   EXPAND      x (may be a constant); numpy broadcasting to a shape
 *   LOOKUP      ids (int64 activation), table (constant [V, ...]): the table's rows by id
 *   ARGMAX      x (f32 or int64): the index of the first largest element along a non-batch
 *               axis, int64
 *   TAKE        x (the batch first and outermost), k (int64 [N]): from each image's part of x,
 *               entry k[i] along axis p.axis; axis 0 is the batch's own dimension, each image
 *               holding dims[0] rows (x[arange(N), k] flattened), which stays as the output's
 *               batch; another axis is removed
 */
#ifndef VIDFEAT_OP_LIST_H
#define VIDFEAT_OP_LIST_H

/* clang-format off */
#define VF_OP_LIST(X)                                                                 \
    X(CONV,        "Conv",               conv,      conv,      VF_OPF_IMAGE)          \
    X(FC,          "Gemm",               fc,        fc,        0)                     \
    X(ACT,         "Activation",         act,       act,       0)                     \
    X(POOL,        "Pool",               pool,      pool,      VF_OPF_IMAGE)          \
    X(BINARY,      "Binary",             binary,    binary,    VF_OPF_CONST_IN0)      \
    X(CONCAT,      "Concat",             axis,      concat,    0)                     \
    X(SOFTMAX,     "Softmax",            axis,      softmax,   0)                     \
    X(LRN,         "LRN",                lrn,       lrn,       VF_OPF_IMAGE)          \
    X(PAD,         "Pad",                pad,       pad,       0)                     \
    X(REDUCE_MEAN, "ReduceMean",         reduce,    reduce,    0)                     \
    X(TRANSPOSE,   "Transpose",          perm,      transpose, 0)                     \
    X(RESHAPE,     "Reshape",            none,      reshape,   VF_OPF_SHAPE_PARAM)    \
    X(GATHER,      "Gather",             gather,    gather,    VF_OPF_OWNS_INDICES)   \
    X(MATMUL,      "MatMul",             matmul,    matmul,    0)                     \
    X(LAYERNORM,   "LayerNormalization", layernorm, layernorm, 0)                     \
    X(SLICE,       "Slice",              slice,     slice,     0)                     \
    X(EXPAND,      "Expand",             none,      expand,    VF_OPF_CONST_IN0 |     \
                                                               VF_OPF_SHAPE_PARAM)    \
    X(LOOKUP,      "Lookup",             none,      lookup,    VF_OPF_IDS_IN0)        \
    X(ARGMAX,      "ArgMax",             argmax,    argmax,    VF_OPF_IDS_ANY)        \
    X(TAKE,        "Take",               axis,      take,      VF_OPF_IDS_IN1)        \
    X(POOL3D,      "Pool3D",             pool3d,    pool3d,    VF_OPF_IMAGE)          \
    X(CONV3D,      "Conv3D",             conv3d,    conv3d,    VF_OPF_IMAGE)          \
    X(PRELU,       "PRelu",              none,      binary,    0)
/* clang-format on */

#endif /* VIDFEAT_OP_LIST_H */
