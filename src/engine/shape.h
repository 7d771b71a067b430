/*
 * shape.h - the operators' shape rules (graph.h's vf_op_desc.shape), by family:
 * shape_image.c (windows over images: Conv, Pool, LRN, Pad), shape_linear.c (Gemm, MatMul,
 * LayerNormalization), shape_tensor.c (elementwise, broadcasting and relayout operators) and
 * shape_ids.c (a text tower's token ids). Private to the engine's graph: graph.c runs a rule
 * through the descriptor table after the checks every operator shares (input types, a constant
 * first input, images' batch), see vf_op_desc.
 */
#ifndef VIDFEAT_SHAPE_H
#define VIDFEAT_SHAPE_H

#include "engine/graph.h"

/* A failure of the node being inferred (err is the rule's argument). */
#define NODE_FAIL(code, ...) vfi_fail(err, code, __VA_ARGS__)

/* One rule per row of op_list.h: vfi_shape_<shape>. */
#define VF_SHAPE_DECL_(id, name, params, shape, flags)                                             \
    vf_status vfi_shape_##shape(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err);
VF_OP_LIST(VF_SHAPE_DECL_)
#undef VF_SHAPE_DECL_

/* y takes x's batch placement. */
static inline void vfi_same_batch(vf_value *y, const vf_value *x)
{
    y->batch_axis = x->batch_axis;
    y->batch_outer = x->batch_outer;
}

/* The dimension of a rank-`rank` broadcast result that dimension i of v (rank v->rank, aligned
 * to the right) lands in. */
static inline int vfi_aligned(const vf_value *v, int rank, int i)
{
    return i + (rank - v->rank);
}

/* y keeps x's dimensions, dropping the axes set in `drop` (bit d: dimension d), or keeping
 * them as 1 when keepdims; the batch's dimension follows. */
static inline void vfi_shape_drop_axes(const vf_value *x, vf_value *y, uint32_t drop, int keepdims)
{
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d == x->batch_axis)
            y->batch_axis = y->rank;
        if (!(drop & (1u << d)))
            y->dims[y->rank++] = x->dims[d];
        else if (keepdims)
            y->dims[y->rank++] = 1;
    }
}

#endif /* VIDFEAT_SHAPE_H */
