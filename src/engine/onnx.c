/*
 * onnx.c - loads an ONNX model into a vf_graph: the file read and checked, the operator table,
 * the graph's input, the nodes converted in order. With onnx_node.c (the node being converted,
 * the API of the handlers) the only file that sees the protobuf-c code generated from the
 * system's onnx.proto (through onnx_loader.h). Single-threaded; owns nothing after it returns.
 *
 * Every byte of the file is untrusted. Before protobuf-c sees the file, a walk over the wire
 * format checks the framing and bounds message nesting (protobuf-c's own unpacker recurses
 * without limit). Afterwards every count, dimension, size and name is checked before it is used:
 * tensor sizes against VF_MAX_NUMEL, data lengths against the declared shape, names against the
 * values defined so far, and the node list is sorted topologically so cycles and dangling names
 * are reported rather than followed.
 *
 * Conversion walks the nodes in topological order, each through its operator's handler
 * (onnx_handlers.h; by family in onnx_math.c, onnx_layout.c, onnx_consts.c, onnx_cnn.c and
 * onnx_ops.c). Shape arithmetic (Shape, Gather, Concat, Unsqueeze, ... on constants) is
 * evaluated as it is loaded (onnx_fold.c), with the batch size kept symbolic
 * (VF_DIM_BATCH), so that models exported with a fixed batch of 1, or computing a flatten from
 * x.size(0), run at any batch size. Identity and Dropout become aliases. Initializers are turned
 * into graph constants only when a node uses them; a FLOAT initializer's raw bytes are taken over
 * from the decoded message rather than copied.
 */
#include "engine/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/mem.h"
#include "engine/onnx_loader.h"

/* ---- protobuf-c allocator through mem.c --------------------------------------------------- */

/* allocator_data points to an int set when an allocation fails, so that a failed unpack can be
 * told apart from a malformed file. */
static void *pb_alloc(void *data, size_t size)
{
    void *p = vfi_malloc(size);
    if (!p)
        *(int *)data = 1;
    return p;
}

static void pb_free(void *data, void *ptr)
{
    (void)data;
    vfi_free(ptr);
}

/* ---- wire-format pre-check ------------------------------------------------------------------- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Walk one message's fields; descend into known sub-messages up to VF_ONNX_MAX_DEPTH. */
static vf_status check_wire(const uint8_t *p, const uint8_t *end,
                            const ProtobufCMessageDescriptor *desc, int depth, vf_err *err)
{
    if (depth > VF_ONNX_MAX_DEPTH)
        return vfi_fail(err, VF_ERR_MODEL, "messages nested deeper than %d levels",
                        VF_ONNX_MAX_DEPTH);
    while (p < end) {
        uint64_t tag, len;
        if (read_varint(&p, end, &tag) < 0)
            return vfi_fail(err, VF_ERR_MODEL, "truncated or malformed protobuf (bad tag)");
        unsigned field = (unsigned)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (read_varint(&p, end, &len) < 0)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (varint)");
            break;
        case 1:
            if (end - p < 8)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (fixed64)");
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (fixed32)");
            p += 4;
            break;
        case 2: {
            if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
                return vfi_fail(err, VF_ERR_MODEL,
                                "truncated protobuf: a field claims more bytes than the file has");
            const ProtobufCFieldDescriptor *f =
                desc ? protobuf_c_message_descriptor_get_field(desc, field) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                vf_status rc = check_wire(p, p + len, f->descriptor, depth + 1, err);
                if (rc < 0)
                    return rc;
            }
            p += len;
            break;
        }
        default:
            return vfi_fail(err, VF_ERR_MODEL, "malformed protobuf (wire type %u)",
                            (unsigned)(tag & 7));
        }
        if (field == 0)
            return vfi_fail(err, VF_ERR_MODEL, "malformed protobuf (field 0)");
    }
    return VF_OK;
}

/* The ONNX operators vidfeat loads (default domain), each with its handler: the next operator is
 * one entry here and its handler. */
typedef struct onnx_op {
    const char *name;
    vf_status (*load)(loader *L);
} onnx_op;

static const onnx_op onnx_ops[] = {
    {"Add", vfi_onnx_add},
    {"ArgMax", vfi_onnx_argmax},
    {"AveragePool", vfi_onnx_average_pool},
    {"BatchNormalization", vfi_onnx_batchnorm},
    {"Cast", vfi_onnx_cast},
    {"Clip", vfi_onnx_clip},
    {"Concat", vfi_onnx_concat},
    {"Constant", vfi_onnx_constant},
    {"ConstantOfShape", vfi_onnx_constant_of_shape},
    {"Conv", vfi_onnx_conv},
    {"Div", vfi_onnx_div},
    {"Dropout", vfi_onnx_alias},
    {"Equal", vfi_onnx_equal},
    {"Erf", vfi_onnx_erf},
    {"Exp", vfi_onnx_exp},
    {"Expand", vfi_onnx_expand},
    {"Flatten", vfi_onnx_flatten},
    {"Gather", vfi_onnx_gather},
    {"Gemm", vfi_onnx_gemm},
    {"GlobalAveragePool", vfi_onnx_global_average_pool},
    {"GlobalMaxPool", vfi_onnx_global_max_pool},
    {"HardSigmoid", vfi_onnx_hard_sigmoid},
    {"HardSwish", vfi_onnx_hard_swish},
    {"Identity", vfi_onnx_alias},
    {"LRN", vfi_onnx_lrn},
    {"LayerNormalization", vfi_onnx_layernorm},
    {"LeakyRelu", vfi_onnx_leaky_relu},
    {"MatMul", vfi_onnx_matmul},
    {"MaxPool", vfi_onnx_max_pool},
    {"Mod", vfi_onnx_mod},
    {"Mul", vfi_onnx_mul},
    {"Neg", vfi_onnx_neg},
    {"Not", vfi_onnx_not},
    {"Pad", vfi_onnx_pad},
    {"PRelu", vfi_onnx_prelu},
    {"Pow", vfi_onnx_pow},
    {"Range", vfi_onnx_range},
    {"Reciprocal", vfi_onnx_reciprocal},
    {"ReduceMean", vfi_onnx_reduce_mean},
    {"Relu", vfi_onnx_relu},
    {"Reshape", vfi_onnx_reshape},
    {"ScatterND", vfi_onnx_scatter_nd},
    {"Shape", vfi_onnx_shape},
    {"Sigmoid", vfi_onnx_sigmoid},
    {"Slice", vfi_onnx_slice},
    {"Softmax", vfi_onnx_softmax},
    {"Split", vfi_onnx_split},
    {"Sqrt", vfi_onnx_sqrt},
    {"Squeeze", vfi_onnx_squeeze},
    {"Sub", vfi_onnx_sub},
    {"Sum", vfi_onnx_add},
    {"Tanh", vfi_onnx_tanh},
    {"Transpose", vfi_onnx_transpose},
    {"Unsqueeze", vfi_onnx_unsqueeze},
    {"Where", vfi_onnx_where},
};

/* The table's entry for a node, or NULL when vidfeat does not load its operator. */
static const onnx_op *find_op(const Onnx__NodeProto *n)
{
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
        return NULL;
    const char *op = n->op_type ? n->op_type : "";
    for (size_t i = 0; i < sizeof(onnx_ops) / sizeof(onnx_ops[0]); i++) {
        if (!strcmp(onnx_ops[i].name, op))
            return &onnx_ops[i];
    }
    return NULL;
}

static vf_status convert_node(loader *L)
{
    const Onnx__NodeProto *n = L->node;
    const char *op = n->op_type ? n->op_type : "";
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return NFAIL(L, VF_ERR_MODEL, "node has no output");
    /* Every op but Constant reads its first input; the handlers rely on it being there. */
    if (strcmp(op, "Constant") != 0 && (n->n_input < 1 || !n->input[0] || !*n->input[0]))
        return NFAIL(L, VF_ERR_MODEL, "the first input is missing");
    const onnx_op *e = find_op(n);
    if (!e)
        return n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0
                   ? NFAIL(L, VF_ERR_UNSUPPORTED, "operator domain '%s' is not supported",
                           n->domain)
                   : NFAIL(L, VF_ERR_UNSUPPORTED, "unsupported operator '%s'", op);
    return e->load(L);
}

/* Before any node is converted: every operator the table lacks, named at once with the first
 * node using it and how many others do ("unsupported operators: Erf (node '/mlp/Erf' and 11
 * others), LayerNormalization (node '/ln_1/LayerNormalization' and 24 others)"), so that a model
 * needing several is not refused one operator at a time. */
/* The domain of a node's operator as a prefix ("" for the default domain). */
static const char *op_domain(const Onnx__NodeProto *n)
{
    return n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "";
}

static int same_op(const Onnx__NodeProto *m, const char *op, const char *dom)
{
    return m->op_type && !strcmp(m->op_type, op) && !strcmp(op_domain(m), dom);
}

/* What torch.onnx.export writes for a model's Python control flow (torchvision's MViT has
 * some): operators that have a better answer than "unsupported". */
static const char *const control_ops[] = {"Loop",
                                          "If",
                                          "Scan",
                                          "SequenceEmpty",
                                          "SequenceInsert",
                                          "SequenceAt",
                                          "SequenceConstruct",
                                          "ConcatFromSequence",
                                          "SplitToSequence"};
#define CONTROL_HINT                                                                               \
    "; loops and sequences are Python control flow that torch.onnx.export kept: a model vidfeat "  \
    "knows has an export script that writes it without them (MViT: "                               \
    "scripts/export-torchvision.py mvit_v2_s)"

static vf_status check_operators(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    size_t kinds = 0, listed = 0, len = 0;
    int looped = 0;
    for (size_t i = 0; i < gp->n_node && !looped; i++)
        for (size_t k = 0; k < sizeof(control_ops) / sizeof(control_ops[0]) && !looped; k++)
            looped = same_op(gp->node[i], control_ops[k], "");
    char *msg = L->err->msg;
    /* room for ", and N more" (and the hint) */
    const size_t cap = sizeof(L->err->msg), tail = 32 + (looped ? sizeof(CONTROL_HINT) : 0);
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (find_op(n))
            continue;
        const char *op = n->op_type ? n->op_type : "", *dom = op_domain(n);
        int first = 1; /* each operator is named at its first node */
        for (size_t j = 0; j < i && first; j++)
            first = !same_op(gp->node[j], op, dom);
        if (!first)
            continue;
        size_t others = 0;
        for (size_t j = i + 1; j < gp->n_node; j++)
            others += (size_t)same_op(gp->node[j], op, dom);
        kinds++;
        char piece[VF_ERRMSG_SIZE];
        L->node = n;
        int plen = others ? snprintf(piece, sizeof(piece), "%s%s%s (node '%s' and %zu other%s)",
                                     dom, *dom ? "." : "", op, vfi_onnx_node_label(L), others,
                                     others > 1 ? "s" : "")
                          : snprintf(piece, sizeof(piece), "%s%s%s (node '%s')", dom,
                                     *dom ? "." : "", op, vfi_onnx_node_label(L));
        if (kinds == 1)
            len = (size_t)snprintf(msg, cap, "unsupported operators: ");
        if (listed == kinds - 1 && plen > 0 && len + 2 + (size_t)plen + tail < cap) {
            len += (size_t)snprintf(msg + len, cap - len, "%s%s", listed ? ", " : "", piece);
            listed++;
        }
    }
    L->node = NULL;
    if (!kinds)
        return VF_OK;
    if (listed < kinds)
        len += (size_t)snprintf(msg + len, cap - len, ", and %zu more", kinds - listed);
    if (looped && len < cap)
        snprintf(msg + len, cap - len, "%s", CONTROL_HINT);
    L->err->code = VF_ERR_UNSUPPORTED;
    return VF_ERR_UNSUPPORTED;
}

/* ---- graph-level steps ----------------------------------------------------------------------- */

/* Order the nodes so that every input is produced before it is used (Kahn). */
static vf_status sort_nodes(loader *L, size_t **order_out)
{
    Onnx__GraphProto *gp = L->gp;
    size_t n = gp->n_node;
    vf_status rc = VF_OK;
    vf_strmap *producer = NULL;
    size_t *order = vfi_mallocarray(n ? n : 1, sizeof(size_t));
    size_t *pending = vfi_calloc(n ? n : 1, sizeof(size_t));
    size_t *queue = vfi_mallocarray(n ? n : 1, sizeof(size_t));
    size_t *edge_start = vfi_calloc(n + 1, sizeof(size_t));
    size_t *edges = NULL;
    size_t n_edges = 0, head = 0, tail = 0, done = 0;
    if (!order || !pending || !queue || !edge_start || vfi_strmap_create(&producer) < 0) {
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t j = 0; j < nd->n_output; j++) {
            if (!nd->output[j] || !*nd->output[j])
                continue;
            vf_status put = vfi_strmap_put(producer, nd->output[j], (int)i);
            if (put == VF_ERR_INVALID) {
                rc = vfi_fail(L->err, VF_ERR_MODEL, "tensor '%s' is produced twice", nd->output[j]);
                goto fail;
            }
            if (put < 0) {
                rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
                goto fail;
            }
        }
        if (nd->n_input > SIZE_MAX / 2 - n_edges) {
            rc = vfi_fail(L->err, VF_ERR_MODEL, "too many edges");
            goto fail;
        }
        n_edges += nd->n_input;
    }
    /* Edges producer -> consumer, grouped by producer (CSR). */
    edges = vfi_mallocarray(n_edges ? n_edges : 1, sizeof(size_t));
    if (!edges) {
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t j = 0; j < nd->n_input; j++) {
            int p = nd->input[j] && *nd->input[j] ? vfi_strmap_get(producer, nd->input[j], -1) : -1;
            if (p >= 0) {
                edge_start[p + 1]++;
                pending[i]++;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        edge_start[i + 1] += edge_start[i];
    {
        size_t *fill = queue; /* reuse as a cursor array before the queue is needed */
        for (size_t i = 0; i < n; i++)
            fill[i] = edge_start[i];
        for (size_t i = 0; i < n; i++) {
            const Onnx__NodeProto *nd = gp->node[i];
            for (size_t j = 0; j < nd->n_input; j++) {
                int p =
                    nd->input[j] && *nd->input[j] ? vfi_strmap_get(producer, nd->input[j], -1) : -1;
                if (p >= 0)
                    edges[fill[p]++] = i;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (pending[i] == 0)
            queue[tail++] = i;
    }
    while (head < tail) {
        size_t i = queue[head++];
        order[done++] = i;
        for (size_t e = edge_start[i]; e < edge_start[i + 1]; e++) {
            if (--pending[edges[e]] == 0)
                queue[tail++] = edges[e];
        }
    }
    if (done != n) {
        for (size_t i = 0; i < n; i++) {
            if (pending[i]) {
                const Onnx__NodeProto *nd = gp->node[i];
                rc = vfi_fail(L->err, VF_ERR_MODEL, "the graph has a cycle through node '%s'",
                              nd->name && *nd->name ? nd->name
                              : nd->n_output        ? nd->output[0]
                                                    : "?");
                break;
            }
        }
        goto fail;
    }
    *order_out = order;
    order = NULL;
fail:
    vfi_free(order);
    vfi_free(pending);
    vfi_free(queue);
    vfi_free(edge_start);
    vfi_free(edges);
    vfi_strmap_free(&producer);
    return rc;
}

/* Find the image input (the one graph input that is not an initializer) and add it. */
/* A text tower's input: token ids [N, context]. */
static vf_status add_ids_input(loader *L, const char *name, const Onnx__TensorShapeProto *sh)
{
    if (sh->n_dim != 2)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' of token ids has rank %zu ([N, context] is expected)", name,
                        sh->n_dim);
    const Onnx__TensorShapeProto__Dimension *dim = sh->dim[1];
    if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
        dim->dim_value < 1 || dim->dim_value > VF_MAX_DIM)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' of token ids has no fixed context length", name);
    int64_t dims[2] = {1, dim->dim_value};
    int idx;
    return vfi_graph_add_input(L->g, name, VF_DTYPE_I64, 2, dims, &idx, L->err);
}

/* The input's height and width (hw[0], hw[1]; -1 where dynamic) as they will run: a dynamic one
 * takes the size asked for, a fixed one other than it is run at that size (fixed_hw remembers
 * the file's, for the message when a node only fits it). */
static vf_status input_plane(loader *L, const char *name, int64_t hw[2])
{
    for (int i = 0; i < 2; i++) {
        if (hw[i] < 1) {
            if (L->input_size < 1)
                return vfi_fail(L->err, VF_ERR_INVALID,
                                "input '%s' has a dynamic size: give the input size "
                                "(--input-size)",
                                name);
            hw[i] = L->input_size;
        } else if (L->input_size > 0 && hw[i] != L->input_size) {
            /* Exported with a fixed plane (the zoo's Inception v3 at 224): run it at the size
             * asked for; every shape after the input is inferred again from it, and a node
             * whose constants only fit the exported size fails, named (convert_graph). */
            L->fixed_hw[0] = hw[0];
            L->fixed_hw[1] = hw[1];
        }
    }
    if (L->fixed_hw[0]) {
        vfi_log(VF_LOG_INFO, "onnx", "input '%s' is fixed at %lldx%lld in the file; run at %dx%d",
                name, (long long)L->fixed_hw[0], (long long)L->fixed_hw[1], L->input_size,
                L->input_size);
        hw[0] = hw[1] = L->input_size;
    }
    return VF_OK;
}

/* A clip model's input [N, C, T, H, W]: 3 colours, T frames (fixed in the file: the window). */
static vf_status add_clip_input(loader *L, const char *name, int64_t d[5])
{
    if (d[1] != 3)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' of a clip model has %lld channels (3 are expected: [N, 3, "
                        "frames, height, width])",
                        name, (long long)d[1]);
    if (d[2] < 1)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' has a dynamic frame count: export the clip model with its "
                        "window's frames fixed",
                        name);
    if (d[2] > VF_MAX_WINDOW)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' takes %lld frames at once (at most %d)", name, (long long)d[2],
                        VF_MAX_WINDOW);
    vf_status rc = input_plane(L, name, &d[3]);
    if (rc < 0)
        return rc;
    int64_t dims[5] = {1, 3, d[2], d[3], d[4]};
    int idx;
    return vfi_graph_add_input(L->g, name, VF_DTYPE_F32, 5, dims, &idx, L->err);
}

static vf_status add_image_input(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        if (!v->name || vfi_strmap_get(L->inits, v->name, -1) >= 0)
            continue;
        if (in)
            return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                            "the model has more than one input ('%s' and '%s')", in->name, v->name);
        in = v;
    }
    if (!in)
        return vfi_fail(L->err, VF_ERR_MODEL, "the model has no input");
    const Onnx__TypeProto *tp = in->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->shape)
        return vfi_fail(L->err, VF_ERR_MODEL, "input '%s' has no tensor shape", in->name);
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (tp->tensor_type->elem_type == VF_ONNX_DT_INT64)
        return add_ids_input(L, in->name, sh);
    if (tp->tensor_type->elem_type != VF_ONNX_DT_FLOAT)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' is neither float32 (images) nor int64 (token ids)", in->name);
    if (sh->n_dim != 4 && sh->n_dim != 5)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' has rank %zu (an image batch [N, C, H, W] or [N, H, W, C], "
                        "or a clip batch [N, C, T, H, W], is expected)",
                        in->name, sh->n_dim);
    int64_t d[5];
    for (size_t i = 0; i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[i];
        d[i] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                   ? dim->dim_value
                   : -1;
    }
    if (sh->n_dim == 5)
        return add_clip_input(L, in->name, d);
    /* NHWC when the last dimension holds the colours and the second does not. */
    int nhwc = (d[3] == 3 || d[3] == 1) && d[1] != 3 && d[1] != 1;
    int64_t c = nhwc ? d[3] : d[1];
    int64_t *hw = nhwc ? &d[1] : &d[2];
    if (c < 1)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "input '%s' has a dynamic channel count",
                        in->name);
    vf_status rc = input_plane(L, in->name, hw);
    if (rc < 0)
        return rc;
    int64_t nchw[4] = {1, c, hw[0], hw[1]};
    int idx;
    if (!nhwc)
        return vfi_graph_add_input(L->g, in->name, VF_DTYPE_F32, 4, nchw, &idx, L->err);
    /* Keep the engine's input planar: NCHW in, one transpose to the model's NHWC. */
    rc = vfi_graph_add_input(L->g, "vidfeat_input_nchw", VF_DTYPE_F32, 4, nchw, &idx, L->err);
    if (rc < 0)
        return rc;
    vf_node tmp;
    int perm[VF_MAX_DIMS] = {0, 2, 3, 1};
    memcpy(tmp.p.perm, perm, sizeof(perm));
    int out;
    return vfi_graph_add_node(L->g, VF_OP_TRANSPOSE, "vidfeat_to_nhwc", &idx, 1, tmp.p.perm,
                              in->name, &out, L->err);
}

static vf_status convert_graph(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    vf_status rc = vfi_strmap_create(&L->inits);
    if (rc < 0)
        return vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
    if (gp->n_initializer > INT_MAX || gp->n_node > INT_MAX)
        return vfi_fail(L->err, VF_ERR_MODEL, "too many nodes or initializers");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *name = gp->initializer[i]->name;
        if (!name || !*name)
            return vfi_fail(L->err, VF_ERR_MODEL, "an initializer has no name");
        rc = vfi_strmap_put(L->inits, name, (int)i);
        if (rc == VF_ERR_INVALID)
            return vfi_fail(L->err, VF_ERR_MODEL, "initializer '%s' is defined twice", name);
        if (rc < 0)
            return vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
    }
    rc = check_operators(L);
    if (rc >= 0)
        rc = add_image_input(L);
    if (rc < 0)
        return rc;

    size_t *order = NULL;
    rc = sort_nodes(L, &order);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < gp->n_node && rc >= 0; k++) {
        L->node = gp->node[order[k]];
        rc = convert_node(L);
    }
    vfi_free(order);
    L->node = NULL;
    if (rc < 0 && L->fixed_hw[0] && rc != VF_ERR_NOMEM) {
        /* Most likely a shape the exporter wrote down for its own size (a flatten feeding a
         * Gemm, a Reshape of constants): say so after the node's own message. */
        size_t len = strlen(L->err->msg);
        snprintf(L->err->msg + len, sizeof(L->err->msg) - len,
                 " (the model was exported for a fixed %lldx%lld input and cannot run at %dx%d)",
                 (long long)L->fixed_hw[0], (long long)L->fixed_hw[1], L->input_size,
                 L->input_size);
    }
    if (rc < 0)
        return rc;

    if (gp->n_output < 1 || !gp->output[0]->name)
        return vfi_fail(L->err, VF_ERR_MODEL, "the model has no output");
    int out = vfi_graph_find(L->g, gp->output[0]->name);
    if (out < 0)
        return vfi_fail(L->err, VF_ERR_MODEL, "output '%s' is not produced by any node",
                        gp->output[0]->name);
    if (!L->g->values[out].is_batched)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "output '%s' does not depend on the input",
                        gp->output[0]->name);
    L->g->output = out;
    return VF_OK;
}

vf_status vfi_onnx_load_mem(const void *data, size_t size, const char *base_dir,
                            const vf_onnx_opts *opts, vf_graph **out, vf_err *err)
{
    int alloc_failed = 0;
    ProtobufCAllocator alloc = {pb_alloc, pb_free, &alloc_failed};
    Onnx__ModelProto *model = NULL;
    loader L;
    memset(&L, 0, sizeof(L));
    L.err = err;
    L.base_dir = base_dir;
    L.input_size = opts ? opts->input_size : 0;

    if (size == 0)
        return vfi_fail(err, VF_ERR_MODEL, "empty file");
    if (size > VF_ONNX_MAX_FILE)
        return vfi_fail(err, VF_ERR_MODEL, "larger than 2 GiB (not a protobuf model)");
    vf_status rc =
        check_wire(data, (const uint8_t *)data + size, &onnx__model_proto__descriptor, 0, err);
    if (rc < 0)
        return rc;
    model = onnx__model_proto__unpack(&alloc, size, data);
    if (!model && alloc_failed)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory decoding the model");
    if (!model)
        return vfi_fail(err, VF_ERR_MODEL, "not an ONNX model (protobuf decoding failed)");
    if (!model->graph) {
        rc = vfi_fail(err, VF_ERR_MODEL, "not an ONNX model (no graph)");
        goto fail;
    }
    L.opset = -1;
    for (size_t i = 0; i < model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = model->opset_import[i];
        if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            L.opset = o->version;
    }
    if (L.opset < 0)
        L.opset = 1; /* IR version 3 and earlier */
    if (L.opset > 22)
        vfi_log(VF_LOG_WARNING, "onnx", "opset %lld is newer than the 22 this loader knows",
                (long long)L.opset);
    L.gp = model->graph;
    rc = vfi_graph_create(&L.g);
    if (rc < 0) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    rc = convert_graph(&L);
    if (rc < 0)
        goto fail;
    *out = L.g;
    L.g = NULL;
fail:
    vfi_graph_free(&L.g);
    vfi_strmap_free(&L.inits);
    vfi_strmap_free(&L.ramp_names);
    vfi_free(L.ramps);
    if (model)
        onnx__model_proto__free_unpacked(model, &alloc);
    return rc;
}

/* A varint from f; -1 at the end of the file or on a malformed one. */
static int read_varint_file(FILE *f, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        int c = getc(f);
        if (c == EOF)
            return -1;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* One metadata_props entry (StringStringEntryProto: key = 1, value = 2): value into buf when
 * its key is `key`. 1 when it was, 0 when not, -1 when malformed. */
static int match_entry(const uint8_t *p, const uint8_t *end, const char *key, char *buf,
                       size_t size)
{
    const uint8_t *k = NULL, *v = NULL;
    uint64_t klen = 0, vlen = 0;
    while (p < end) {
        uint64_t tag, len;
        if (read_varint(&p, end, &tag) < 0 || (tag & 7) != 2 || read_varint(&p, end, &len) < 0 ||
            len > (uint64_t)(end - p))
            return -1;
        if (tag >> 3 == 1) {
            k = p;
            klen = len;
        } else if (tag >> 3 == 2) {
            v = p;
            vlen = len;
        }
        p += len;
    }
    if (!k || klen != strlen(key) || memcmp(k, key, klen) != 0)
        return 0;
    size_t n = v ? (size_t)(vlen < size - 1 ? vlen : size - 1) : 0;
    if (n)
        memcpy(buf, v, n);
    buf[n] = '\0';
    return 1;
}

vf_status vfi_onnx_metadata(const char *path, const char *key, char *buf, size_t size, vf_err *err)
{
    enum { MODEL_METADATA_PROPS = 14, MAX_ENTRY = 1 << 16 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    vf_status rc = VF_EOF;
    uint8_t *entry = NULL;
    uint64_t tag;
    buf[0] = '\0';
    while (rc == VF_EOF && read_varint_file(f, &tag) == 0) {
        uint64_t len = 0;
        int wire = (int)(tag & 7), bad = 0;
        if (wire == 0)
            bad = read_varint_file(f, &len) < 0;
        else if (wire == 1 || wire == 5)
            bad = fseeko(f, wire == 1 ? 8 : 4, SEEK_CUR) != 0;
        else if (wire != 2 || read_varint_file(f, &len) < 0 || len > VF_ONNX_MAX_FILE)
            bad = 1;
        if (!bad && wire == 2 && tag >> 3 == MODEL_METADATA_PROPS && len <= MAX_ENTRY) {
            entry = vfi_malloc(len ? len : 1);
            if (!entry) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                break;
            }
            int m = fread(entry, 1, len, f) == len ? match_entry(entry, entry + len, key, buf, size)
                                                   : -1;
            vfi_free(entry);
            entry = NULL;
            bad = m < 0;
            if (m > 0)
                rc = VF_OK;
        } else if (!bad && wire == 2) {
            bad = fseeko(f, (off_t)len, SEEK_CUR) != 0;
        }
        if (bad)
            rc = vfi_fail(err, VF_ERR_MODEL, "%s: not an ONNX model (malformed protobuf)", path);
    }
    fclose(f);
    return rc;
}

vf_status vfi_onnx_load(const char *path, const vf_onnx_opts *opts, vf_graph **out, vf_err *err)
{
    vf_status rc = VF_OK;
    uint8_t *buf = NULL;
    char *dir = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = vfi_fail(err, VF_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)st.st_size > VF_ONNX_MAX_FILE) {
        rc = vfi_fail(err, VF_ERR_MODEL, "%s: larger than 2 GiB (not a protobuf model)", path);
        goto fail;
    }
    size_t size = (size_t)st.st_size;
    buf = vfi_malloc(size ? size : 1);
    if (!buf) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (fread(buf, 1, size, f) != size) {
        rc = vfi_fail(err, VF_ERR_IO, "%s: read failed", path);
        goto fail;
    }
    fclose(f);
    f = NULL;
    dir = vfi_strdup(path);
    if (!dir) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    rc = vfi_onnx_load_mem(buf, size, dir, opts, out, err);
    if (rc < 0)
        vfi_err_prefix(err, "%s", path);
fail:
    if (f)
        fclose(f);
    vfi_free(buf);
    vfi_free(dir);
    return rc;
}
