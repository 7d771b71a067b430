/*
 * onnx_handlers.h - the one API of the ONNX loader's operator handlers (implemented in
 * onnx_node.c), so that each operator family lives in a file of its own without seeing protobuf-c:
 * the node being converted (its inputs, outputs, attributes), the graph being built, and node-named
 * failures; then the handlers themselves, by family.
 *
 * Handlers take the loader, convert its current node into graph nodes or folded constants, and
 * return a status; a failure's message names the node. onnx.c's table lists each handler
 * against its operator's name: a new ONNX operator is a row there and a handler here.
 */
#ifndef VIDFEAT_ONNX_HANDLERS_H
#define VIDFEAT_ONNX_HANDLERS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/graph.h"

typedef struct loader vfi_onnx_loader;

/* ONNX TensorProto.DataType values vidfeat reads. */
enum {
    VF_ONNX_DT_FLOAT = 1,
    VF_ONNX_DT_UINT8 = 2,
    VF_ONNX_DT_INT8 = 3,
    VF_ONNX_DT_INT32 = 6,
    VF_ONNX_DT_INT64 = 7,
    VF_ONNX_DT_BOOL = 9,
    VF_ONNX_DT_FLOAT16 = 10,
    VF_ONNX_DT_DOUBLE = 11,
};

/* ---- the node being converted ---- */
int64_t vfi_onnx_opset(const vfi_onnx_loader *L);
size_t vfi_onnx_n_inputs(const vfi_onnx_loader *L);
size_t vfi_onnx_n_outputs(const vfi_onnx_loader *L);
/* Is input i given (named: an optional input may be left empty)? */
int vfi_onnx_has_input(const vfi_onnx_loader *L, size_t i);
/* The node's operator ("Sum", ...). */
const char *vfi_onnx_op_type(const vfi_onnx_loader *L);
/* Output i's name ("" when unnamed). */
const char *vfi_onnx_output_name(const vfi_onnx_loader *L, size_t i);
/* Input i as a value index; -1 for an absent (optional) input. */
vf_status vfi_onnx_input(vfi_onnx_loader *L, size_t i, int *out);
/* A value of the graph being built (borrowed until the next value is added). */
vf_value *vfi_onnx_value(vfi_onnx_loader *L, int idx);
/* Attributes, with a default when absent; ints: the count read, -1 absent, -2 too many. */
int64_t vfi_onnx_attr_int(const vfi_onnx_loader *L, const char *name, int64_t def);
float vfi_onnx_attr_float(const vfi_onnx_loader *L, const char *name, float def);
int vfi_onnx_attr_ints(const vfi_onnx_loader *L, const char *name, int64_t *out, int max);
/* A constant int64 list input (shapes, axes, splits): at most max entries. */
vf_status vfi_onnx_const_ints(vfi_onnx_loader *L, size_t i, int64_t *out, int max, int *n);
/* An axis in -rank..rank-1 made 0..rank-1. */
vf_status vfi_onnx_axis(vfi_onnx_loader *L, int64_t axis, int rank, int *out);
/* A constant held in an attribute, as a Constant node holds it: the first of the node's
 * attributes "value" (a tensor), "value_float", "value_int", "value_floats", "value_ints", or
 * only the one named `only`, decoded into *data (vfi_onnx_alloc'd, the caller's); *data NULL
 * when there is none. label names the tensor in messages. */
vf_status vfi_onnx_attr_value(vfi_onnx_loader *L, const char *only, const char *label,
                              vf_dtype *dtype, int *rank, int64_t *dims, void **data);

/* ---- building ---- */
/* vfi_fail with "node 'NAME' (OP): " before the message. */
vf_status vfi_onnx_fail(vfi_onnx_loader *L, vf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A graph node computing output `out` (0 for the first) of the current node. A GATHER's indices
 * are the graph's once its node exists, and freed here when it could not be made. */
vf_status vfi_onnx_add_node(vfi_onnx_loader *L, vf_op op, const int *inputs, int n_inputs,
                            const void *params, size_t out);
/* A graph node the current node needs besides its outputs, named after its first output
 * ("OUT/suffix"); its value into *out. */
vf_status vfi_onnx_add_named_node(vfi_onnx_loader *L, vf_op op, const char *suffix,
                                  const int *inputs, int n_inputs, const void *params, int *out);
/* Storage for a constant of numel elements (aligned as graph constants are), or NULL. */
void *vfi_onnx_alloc(int64_t numel, vf_dtype dtype);
/* A constant as output `out` of the current node; data (vfi_malloc'd, rank-major) becomes the
 * graph's on success, is freed on failure. */
vf_status vfi_onnx_add_const(vfi_onnx_loader *L, size_t out, vf_dtype dtype, int rank,
                             const int64_t *dims, void *data);
/* A constant the node needs besides its outputs (weights rearranged, a bias), named after its
 * first output ("OUT/suffix"); data is the graph's on success, freed on failure. */
vf_status vfi_onnx_add_named_const(vfi_onnx_loader *L, const char *suffix, vf_dtype dtype, int rank,
                                   const int64_t *dims, void *data, int *out);
/* Input i, which must be a constant of dtype. */
vf_status vfi_onnx_const_input(vfi_onnx_loader *L, size_t i, vf_dtype dtype, const vf_value **out);
/* Is string attribute name value (def_match when it is absent)? */
int vfi_onnx_attr_str_is(const vfi_onnx_loader *L, const char *name, const char *value,
                         int def_match);
/* Output `out` of the current node is value idx under another name. */
vf_status vfi_onnx_add_alias(vfi_onnx_loader *L, size_t out, int idx);

/* ---- the numbers of the images ---- */
/* Image index arithmetic the loader keeps to itself: Range(0, N) over the batch size gives image
 * i the number i; that times mult, plus an int64 activation k ([N]), is i x mult + k[i], the
 * index of image i's row k[i] among rows that come mult to an image - which a Gather of those
 * rows turns into TAKE (x[arange(N), k] as PyTorch exports it). No graph value stands for such a
 * number (it is not a function of each image alone); any other use of one is refused. */
typedef struct vf_onnx_ramp {
    int64_t mult; /* i x mult */
    int base;     /* the activation k added, or -1 */
} vf_onnx_ramp;
/* Input i as one of those numbers, or NULL. */
const vf_onnx_ramp *vfi_onnx_ramp_input(vfi_onnx_loader *L, size_t i);
/* Output `out` of the current node is r. */
vf_status vfi_onnx_add_ramp(vfi_onnx_loader *L, size_t out, vf_onnx_ramp r);

/* ---- constants folded at load (onnx_fold.c): each makes output 0 of the current node ---- */
/* Row-major strides of dims. */
void vfi_onnx_strides(int rank, const int64_t *dims, int64_t *strides);
/* src's data under other dims (Reshape, Flatten, Squeeze, Unsqueeze of a constant). */
vf_status vfi_onnx_fold_reshape(vfi_onnx_loader *L, const vf_value *src, int rank,
                                const int64_t *dims);
/* a op b with numpy broadcasting, op 'a', 's', 'm' or 'd'; int64 shape arithmetic keeps the
 * batch size's stand-ins where that is defined (a multiple times a number, ...). */
vf_status vfi_onnx_fold_binary(vfi_onnx_loader *L, const vf_value *a, const vf_value *b, int op);
/* Gather of d's entries ind along axis. */
vf_status vfi_onnx_fold_gather(vfi_onnx_loader *L, const vf_value *d, const vf_value *ind,
                               int axis);
/* Concat along axis of the node's inputs, constants of one rank and type. */
vf_status vfi_onnx_fold_concat(vfi_onnx_loader *L, int axis, int rank);
/* x transposed by perm. */
vf_status vfi_onnx_fold_transpose(vfi_onnx_loader *L, const vf_value *x, const int *perm);

/* ---- convolutional networks (onnx_cnn.c): handlers for onnx.c's table ---- */
vf_status vfi_onnx_conv(vfi_onnx_loader *L);
vf_status vfi_onnx_max_pool(vfi_onnx_loader *L);
vf_status vfi_onnx_average_pool(vfi_onnx_loader *L);
vf_status vfi_onnx_global_average_pool(vfi_onnx_loader *L);
vf_status vfi_onnx_global_max_pool(vfi_onnx_loader *L);
vf_status vfi_onnx_gemm(vfi_onnx_loader *L);
vf_status vfi_onnx_matmul(vfi_onnx_loader *L);
vf_status vfi_onnx_batchnorm(vfi_onnx_loader *L);

/* ---- operator families (onnx_ops.c): handlers for onnx.c's table ---- */
vf_status vfi_onnx_layernorm(vfi_onnx_loader *L);
vf_status vfi_onnx_erf(vfi_onnx_loader *L);
vf_status vfi_onnx_sqrt(vfi_onnx_loader *L);
vf_status vfi_onnx_reciprocal(vfi_onnx_loader *L);
vf_status vfi_onnx_exp(vfi_onnx_loader *L);
vf_status vfi_onnx_neg(vfi_onnx_loader *L);
vf_status vfi_onnx_pow(vfi_onnx_loader *L);
vf_status vfi_onnx_split(vfi_onnx_loader *L);
vf_status vfi_onnx_slice_activation(vfi_onnx_loader *L, int x, const int64_t *start,
                                    const int64_t *step, const int64_t *count);
vf_status vfi_onnx_expand(vfi_onnx_loader *L);
vf_status vfi_onnx_equal(vfi_onnx_loader *L);
vf_status vfi_onnx_where(vfi_onnx_loader *L);
vf_status vfi_onnx_not(vfi_onnx_loader *L);
vf_status vfi_onnx_range(vfi_onnx_loader *L);
vf_status vfi_onnx_mod(vfi_onnx_loader *L);
vf_status vfi_onnx_scatter_nd(vfi_onnx_loader *L);
/* text towers: the end token's position, and the numbers of the images in a row pick */
vf_status vfi_onnx_argmax(vfi_onnx_loader *L);
vf_status vfi_onnx_ramp_binary(vfi_onnx_loader *L, vf_binary_kind kind);
vf_status vfi_onnx_take(vfi_onnx_loader *L);

/* ---- elementwise and along one axis (onnx_math.c) ---- */
vf_status vfi_onnx_relu(vfi_onnx_loader *L);
vf_status vfi_onnx_leaky_relu(vfi_onnx_loader *L);
vf_status vfi_onnx_prelu(vfi_onnx_loader *L);
vf_status vfi_onnx_sigmoid(vfi_onnx_loader *L);
vf_status vfi_onnx_tanh(vfi_onnx_loader *L);
vf_status vfi_onnx_hard_sigmoid(vfi_onnx_loader *L);
vf_status vfi_onnx_hard_swish(vfi_onnx_loader *L);
vf_status vfi_onnx_clip(vfi_onnx_loader *L);
vf_status vfi_onnx_add(vfi_onnx_loader *L); /* Add, and Sum of two */
vf_status vfi_onnx_sub(vfi_onnx_loader *L);
vf_status vfi_onnx_mul(vfi_onnx_loader *L);
vf_status vfi_onnx_div(vfi_onnx_loader *L);
vf_status vfi_onnx_softmax(vfi_onnx_loader *L);
vf_status vfi_onnx_lrn(vfi_onnx_loader *L);
vf_status vfi_onnx_reduce_mean(vfi_onnx_loader *L);

/* ---- moving elements (onnx_layout.c) ---- */
vf_status vfi_onnx_reshape(vfi_onnx_loader *L);
vf_status vfi_onnx_flatten(vfi_onnx_loader *L);
vf_status vfi_onnx_squeeze(vfi_onnx_loader *L);
vf_status vfi_onnx_unsqueeze(vfi_onnx_loader *L);
vf_status vfi_onnx_transpose(vfi_onnx_loader *L);
vf_status vfi_onnx_gather(vfi_onnx_loader *L);
vf_status vfi_onnx_concat(vfi_onnx_loader *L);
vf_status vfi_onnx_pad(vfi_onnx_loader *L);
vf_status vfi_onnx_slice(vfi_onnx_loader *L);

/* ---- making constants (onnx_consts.c) ---- */
vf_status vfi_onnx_shape(vfi_onnx_loader *L);
vf_status vfi_onnx_constant(vfi_onnx_loader *L);
vf_status vfi_onnx_constant_of_shape(vfi_onnx_loader *L);
vf_status vfi_onnx_cast(vfi_onnx_loader *L);
vf_status vfi_onnx_alias(vfi_onnx_loader *L); /* Identity, Dropout */

#endif /* VIDFEAT_ONNX_HANDLERS_H */
