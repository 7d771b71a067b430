/*
 * graph.c - the network IR: value and node storage, the name table, shape inference and pruning.
 * Single-threaded: a graph is built by one thread and afterwards only read.
 *
 * Every value a node produces gets its shape here, from its inputs and the node's parameters, and
 * every check that a model file could violate is made here too (a dimension that does not match,
 * a kernel larger than its padded input, an axis out of range). The loader therefore needs no
 * shape logic of its own, and the passes can re-run inference after rewriting a node.
 */
#include "engine/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "core/strmap.h"

/* ---- basics ---------------------------------------------------------------------------------- */

vf_status vfi_graph_create(vf_graph **out)
{
    vf_graph *g = vfi_calloc(1, sizeof(*g));
    if (!g)
        return VF_ERR_NOMEM;
    if (vfi_strmap_create(&g->names) < 0) {
        vfi_graph_free(&g);
        return VF_ERR_NOMEM;
    }
    g->input = -1;
    g->output = -1;
    *out = g;
    return VF_OK;
}

static void node_clear(vf_node *n)
{
    vfi_free(n->name);
    vfi_free(n->inputs);
    if (n->op == VF_OP_GATHER)
        vfi_free(n->p.gather.indices);
}

void vfi_graph_free(vf_graph **pg)
{
    vf_graph *g = pg ? *pg : NULL;
    if (!g)
        return;
    for (int i = 0; i < g->n_values; i++) {
        vfi_free(g->values[i].name);
        vfi_free(g->values[i].data);
    }
    for (int i = 0; i < g->n_nodes; i++)
        node_clear(&g->nodes[i]);
    vfi_free(g->values);
    vfi_free(g->nodes);
    vfi_strmap_free(&g->names);
    vfi_free(g);
    *pg = NULL;
}

size_t vfi_dtype_size(vf_dtype dtype)
{
    return dtype == VF_DTYPE_I64 ? 8 : 4;
}

int64_t vfi_value_numel(const vf_value *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= v->dims[i];
    return n;
}

int64_t vfi_value_sample_numel(const vf_value *v)
{
    return vfi_value_numel(v);
}

void vfi_value_dims_at(const vf_value *v, int64_t n, int64_t *out)
{
    for (int i = 0; i < v->rank; i++)
        out[i] = v->dims[i] * (v->is_batched && i == v->batch_axis ? n : 1);
}

int vfi_value_batch_first(const vf_value *v)
{
    return v->is_batched && v->batch_axis == 0 && v->rank > 0 && v->dims[0] == 1;
}

int64_t vfi_dims_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > 0 && n > INT64_MAX / dims[i])
            return INT64_MAX;
        n *= dims[i];
    }
    return n;
}

void vfi_dims_next(int rank, const int64_t *dims, int64_t *idx)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < dims[i])
            return;
        idx[i] = 0;
    }
}

void vfi_dims_broadcast_strides(int out_rank, int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = out_rank - 1; i >= 0; i--) {
        int j = i - (out_rank - rank);
        int64_t d = j >= 0 ? dims[j] : 1;
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

void vfi_dims_strides(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

void vfi_dims_split(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *len,
                    int64_t *inner)
{
    *outer = vfi_dims_numel(axis, dims);
    *len = dims[axis];
    *inner = vfi_dims_numel(rank - axis - 1, dims + axis + 1);
}

int64_t vfi_dims_offset(int rank, const int64_t *idx, const int64_t *st)
{
    int64_t off = 0;
    for (int i = 0; i < rank; i++)
        off += idx[i] * st[i];
    return off;
}

int64_t vfi_dim_batch(int64_t m)
{
    return VF_DIM_BATCH + (m - 1);
}

int64_t vfi_dim_batch_multiple(int64_t v)
{
    return v >= VF_DIM_BATCH && v < VF_DIM_BATCH + VF_MAX_DIM ? v - VF_DIM_BATCH + 1 : 0;
}

const char *vfi_value_shape_str(const vf_value *v, char *buf, size_t size)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < v->rank && len < size; i++) {
        const char *sep = i ? "," : "";
        if (v->is_batched && i == v->batch_axis && v->dims[i] == 1)
            len += (size_t)snprintf(buf + len, size - len, "%sN", sep);
        else if (v->is_batched && i == v->batch_axis)
            len += (size_t)snprintf(buf + len, size - len, "%sNx%lld", sep, (long long)v->dims[i]);
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%lld", sep, (long long)v->dims[i]);
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

const char *vfi_op_name(vf_op op)
{
    static const char *const names[VF_OP_COUNT_] = {
        [VF_OP_CONV] = "Conv",
        [VF_OP_FC] = "Gemm",
        [VF_OP_ACT] = "Activation",
        [VF_OP_POOL] = "Pool",
        [VF_OP_BINARY] = "Binary",
        [VF_OP_CONCAT] = "Concat",
        [VF_OP_SOFTMAX] = "Softmax",
        [VF_OP_LRN] = "LRN",
        [VF_OP_PAD] = "Pad",
        [VF_OP_REDUCE_MEAN] = "ReduceMean",
        [VF_OP_TRANSPOSE] = "Transpose",
        [VF_OP_RESHAPE] = "Reshape",
        [VF_OP_GATHER] = "Gather",
        [VF_OP_MATMUL] = "MatMul",
        [VF_OP_LAYERNORM] = "LayerNormalization",
        [VF_OP_SLICE] = "Slice",
        [VF_OP_EXPAND] = "Expand",
        [VF_OP_LOOKUP] = "Lookup",
        [VF_OP_ARGMAX] = "ArgMax",
        [VF_OP_TAKE] = "Take",
    };
    return (unsigned)op < VF_OP_COUNT_ ? names[op] : "?";
}

void vfi_matmul_dims(const vf_graph *g, const vf_node *nd, int64_t n, int64_t *lead, int64_t *m,
                     int64_t *k, int64_t *cols)
{
    const vf_value *av = &g->values[nd->inputs[0]], *bv = &g->values[nd->inputs[1]];
    int64_t ad[VF_MAX_DIMS], bd[VF_MAX_DIMS];
    vfi_value_dims_at(av, n, ad);
    vfi_value_dims_at(bv, n, bd);
    int r = av->rank;
    *k = ad[r - 1];
    *cols = bd[bv->rank - 1];
    *m = bv->is_batched ? ad[r - 2] : vfi_dims_numel(r - 1, ad);
    *lead = bv->is_batched ? vfi_dims_numel(r - 2, ad) : 1;
}

float vfi_act_apply(const vf_act *act, float x)
{
    return vf_act_math((int)act->kind, act->alpha, act->beta, x);
}

int vfi_graph_find(const vf_graph *g, const char *name)
{
    return vfi_strmap_get(g->names, name, -1);
}

/* Append a value with a fresh, unique name. */
static vf_status new_value(vf_graph *g, const char *name, int *out, vf_err *err)
{
    if (!name || !*name)
        return vfi_fail(err, VF_ERR_MODEL, "a tensor has an empty name");
    if (vfi_graph_find(g, name) >= 0)
        return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' is defined twice", name);
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        vf_value *v = vfi_realloc(g->values, (size_t)cap * sizeof(*v));
        if (!v)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        g->values = v;
        g->cap_values = cap;
    }
    vf_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof(*v));
    v->producer = -1;
    v->name = vfi_strdup(name);
    if (!v->name)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (vfi_strmap_put(g->names, name, g->n_values) < 0) {
        vfi_free(v->name);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    *out = g->n_values++;
    return VF_OK;
}

static vf_status check_dims(int rank, const int64_t *dims, const char *name, vf_err *err)
{
    if (rank < 0 || rank > VF_MAX_DIMS)
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "tensor '%s' has rank %d (at most %d supported)",
                        name, rank, VF_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || dims[i] > VF_MAX_DIM)
            return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' has invalid dimension %lld", name,
                            (long long)dims[i]);
        if (dims[i] && n > VF_MAX_NUMEL / dims[i])
            return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' is too large", name);
        n *= dims[i];
    }
    return VF_OK;
}

vf_status vfi_graph_add_input(vf_graph *g, const char *name, vf_dtype dtype, int rank,
                              const int64_t *dims, int *out_index, vf_err *err)
{
    int64_t d[VF_MAX_DIMS];
    vf_status rc = VF_OK;
    if (rank < 1 || rank > VF_MAX_DIMS)
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "input '%s' has rank %d", name, rank);
    memcpy(d, dims, (size_t)rank * sizeof(*d));
    d[0] = 1;
    for (int i = 1; i < rank; i++) {
        if (d[i] < 1)
            return vfi_fail(err, VF_ERR_UNSUPPORTED,
                            "input '%s' has a dynamic or empty dimension %d (only the batch may "
                            "vary)",
                            name, i);
    }
    rc = check_dims(rank, d, name, err);
    if (rc < 0)
        return rc;
    int idx;
    rc = new_value(g, name, &idx, err);
    if (rc < 0)
        return rc;
    vf_value *v = &g->values[idx];
    v->dtype = dtype;
    v->rank = rank;
    memcpy(v->dims, d, sizeof(d));
    v->is_batched = 1;
    v->batch_axis = 0;
    v->batch_outer = 1;
    g->input = idx;
    *out_index = idx;
    return VF_OK;
}

vf_status vfi_graph_add_const(vf_graph *g, const char *name, vf_dtype dtype, int rank,
                              const int64_t *dims, void *data, int *out_index, vf_err *err)
{
    vf_status rc = check_dims(rank, dims, name, err);
    if (rc < 0)
        return rc;
    int idx;
    rc = new_value(g, name, &idx, err);
    if (rc < 0)
        return rc;
    vf_value *v = &g->values[idx];
    v->dtype = dtype;
    v->rank = rank;
    memcpy(v->dims, dims, (size_t)rank * sizeof(*dims));
    v->data = data;
    *out_index = idx;
    return VF_OK;
}

vf_status vfi_graph_add_alias(vf_graph *g, const char *alias, int index, vf_err *err)
{
    if (!alias || !*alias)
        return vfi_fail(err, VF_ERR_MODEL, "a tensor has an empty name");
    vf_status rc = vfi_strmap_put(g->names, alias, index);
    if (rc == VF_ERR_INVALID)
        return vfi_fail(err, VF_ERR_MODEL, "tensor '%s' is defined twice", alias);
    if (rc < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    return VF_OK;
}

/* ---- shape inference ------------------------------------------------------------------------ */

#define NODE_FAIL(code, ...) vfi_fail(err, code, __VA_ARGS__)

/* Resolve auto_pad / ceil_mode against the input plane and compute the output plane size.
 * Idempotent: once resolved, the window is explicit. */
static vf_status window_out(vf_window *w, int ceil_mode, int avg_include_pad, const int64_t *in_hw,
                            int64_t *out_hw, const vf_node *n, vf_err *err)
{
    for (int a = 0; a < 2; a++) {
        int64_t in = in_hw[a];
        int k = w->kernel[a], s = w->stride[a], d = w->dilation[a];
        if (k < 1 || s < 1 || d < 1 || k > VF_MAX_DIM || s > VF_MAX_DIM || d > VF_MAX_DIM)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': invalid kernel/stride/dilation", n->name);
        int64_t eff = (int64_t)(k - 1) * d + 1;
        if (w->auto_pad == VF_PAD_SAME_UPPER || w->auto_pad == VF_PAD_SAME_LOWER) {
            int64_t out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + eff - in;
            if (total < 0)
                total = 0;
            int64_t small = total / 2;
            w->pads[a] = (int)(w->auto_pad == VF_PAD_SAME_UPPER ? small : total - small);
            w->pads[a + 2] = (int)(total - w->pads[a]);
        } else if (w->auto_pad == VF_PAD_VALID) {
            w->pads[a] = w->pads[a + 2] = 0;
        }
        if (w->pads[a] < 0 || w->pads[a + 2] < 0 || w->pads[a] >= eff || w->pads[a + 2] >= eff)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': padding %d/%d not smaller than the "
                             "kernel extent %lld",
                             n->name, w->pads[a], w->pads[a + 2], (long long)eff);
        int64_t span = in + w->pads[a] + w->pads[a + 2] - eff;
        if (span < 0)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': kernel %lld larger than padded input %lld",
                             n->name, (long long)eff,
                             (long long)(in + w->pads[a] + w->pads[a + 2]));
        int64_t out = span / s + 1;
        if (ceil_mode) {
            int64_t out_c = (span + s - 1) / s + 1;
            if ((out_c - 1) * s >= in + w->pads[a]) /* last window must start inside */
                out_c--;
            if (out_c > out) {
                if (avg_include_pad)
                    return NODE_FAIL(VF_ERR_UNSUPPORTED,
                                     "node '%s': ceil_mode with "
                                     "count_include_pad changes the output size",
                                     n->name);
                /* Grow the end padding so the floor formula gives the ceil size. */
                w->pads[a + 2] += (int)((out_c - 1) * s + eff - (in + w->pads[a] + w->pads[a + 2]));
                out = out_c;
            }
        }
        out_hw[a] = out;
    }
    w->auto_pad = VF_PAD_EXPLICIT;
    return VF_OK;
}

int64_t vfi_value_outer_entries(const vf_value *v)
{
    int64_t n = v->batch_outer;
    for (int i = 0; i < v->batch_axis; i++)
        n *= v->dims[i];
    return n;
}

/* y takes x's batch placement. */
static void same_batch(vf_value *y, const vf_value *x)
{
    y->batch_axis = x->batch_axis;
    y->batch_outer = x->batch_outer;
}

/* The dimension of a rank-`rank` broadcast result that dimension i of v (rank v->rank, aligned
 * to the right) lands in. */
static int aligned(const vf_value *v, int rank, int i)
{
    return i + (rank - v->rank);
}

/* Numpy broadcasting of a and b (either may be a constant) into y, keeping the batch where the
 * batched operand has it: a constant must have 1 (or nothing) over the batch's dimension, and
 * two activations must hold the batch in the same dimension in the same way. */
static vf_status infer_broadcast(const vf_value *a, const vf_value *b, vf_value *y,
                                 const vf_node *n, vf_err *err)
{
    if (!a->is_batched && !b->is_batched)
        return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': %s of two constants", n->name,
                         vfi_op_name(n->op));
    y->rank = a->rank >= b->rank ? a->rank : b->rank;
    for (int i = 0; i < y->rank; i++) {
        int ia = i - (y->rank - a->rank), ib = i - (y->rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return NODE_FAIL(VF_ERR_MODEL,
                             "node '%s': shapes do not broadcast (dim %d: %lld vs "
                             "%lld)",
                             n->name, i, (long long)da, (long long)db);
        y->dims[i] = da > db ? da : db;
    }
    const vf_value *act = a->is_batched ? a : b, *other = a->is_batched ? b : a;
    int ba = aligned(act, y->rank, act->batch_axis);
    y->batch_axis = ba;
    y->batch_outer = act->batch_outer;
    if (y->dims[ba] != act->dims[act->batch_axis])
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': '%s' broadcasts over the batch's dimension %d of '%s'",
                         n->name, other->name, ba, act->name);
    int io = ba - (y->rank - other->rank);
    if (other->is_batched) {
        if (io != other->batch_axis || other->batch_outer != act->batch_outer)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': '%s' and '%s' hold the batch in different dimensions",
                             n->name, a->name, b->name);
    } else if (io >= 0 && other->dims[io] != 1) {
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': constant '%s' varies along the batch's dimension %d", n->name,
                         other->name, ba);
    }
    return VF_OK;
}

static vf_status infer_product(vf_graph *g, vf_node *n, vf_value *y, vf_err *err)
{
    const vf_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
    const vf_matmul_params *p = &n->p.matmul;
    if (n->n_inputs != 2 + (p->has_bias != 0) + (p->has_sum != 0))
        return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul inputs", n->name);
    int r = a->rank;
    if (r < 2 || b->rank < 2)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': MatMul of a vector", n->name);
    if (a->batch_axis >= r - 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': the batch in the reduced dimension",
                         n->name);
    if (a->dims[r - 1] != b->dims[b->rank - 2])
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': inner dimensions %lld and %lld differ", n->name,
                         (long long)a->dims[r - 1], (long long)b->dims[b->rank - 2]);
    memcpy(y->dims, a->dims, sizeof(y->dims));
    y->rank = r;
    y->dims[r - 1] = b->dims[b->rank - 1];
    same_batch(y, a);
    if (!b->is_batched) {
        if (b->rank != 2)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': a constant second operand of rank %d (2 expected)",
                             n->name, b->rank);
        return VF_OK;
    }
    /* two activations: the same leading dimensions, the batch among them in the same way */
    if (b->rank != r || b->batch_axis != a->batch_axis || b->batch_outer != a->batch_outer ||
        a->batch_axis >= r - 2)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': MatMul of activations needs the batch in the same leading "
                         "dimension of both",
                         n->name);
    for (int i = 0; i < r - 2; i++) {
        if (a->dims[i] != b->dims[i])
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': leading dimension %d differs", n->name,
                             i);
    }
    return VF_OK;
}

/* The product, then what the passes fused into it: a bias of N values, a sum of y's shape. */
static vf_status infer_matmul(vf_graph *g, vf_node *n, vf_value *y, vf_err *err)
{
    vf_status rc = infer_product(g, n, y, err);
    if (rc < 0)
        return rc;
    const vf_matmul_params *p = &n->p.matmul;
    int k = 2;
    if (p->has_bias) {
        const vf_value *bias = &g->values[n->inputs[k++]];
        if (!bias->data || vfi_value_numel(bias) != y->dims[y->rank - 1])
            return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul bias", n->name);
    }
    if (p->has_sum) {
        const vf_value *sum = &g->values[n->inputs[k]];
        if (!sum->is_batched || sum->rank != y->rank || sum->batch_axis != y->batch_axis ||
            sum->batch_outer != y->batch_outer ||
            memcmp(sum->dims, y->dims, (size_t)y->rank * sizeof(y->dims[0])))
            return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': MatMul sum", n->name);
    }
    return VF_OK;
}

static vf_status infer_layernorm(vf_graph *g, vf_node *n, vf_value *x, vf_value *y, vf_err *err)
{
    int axis = n->p.layernorm.axis;
    if (n->n_inputs < 2 || n->n_inputs > 3)
        return NODE_FAIL(VF_ERR_MODEL, "node '%s': LayerNormalization needs 2 or 3 inputs",
                         n->name);
    if (axis <= x->batch_axis || axis >= x->rank)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': normalising over axis %d of %s", n->name,
                         axis, x->name);
    int64_t count = 1;
    for (int d = axis; d < x->rank; d++)
        count *= x->dims[d];
    for (int i = 1; i < n->n_inputs; i++) {
        const vf_value *c = &g->values[n->inputs[i]];
        if (!c->data || vfi_value_numel(c) != count)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': %s must be a constant of %lld values",
                             n->name, i == 1 ? "scale" : "bias", (long long)count);
    }
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof(y->dims));
    same_batch(y, x);
    return VF_OK;
}

static vf_status infer_slice(vf_node *n, const vf_value *x, vf_value *y, vf_err *err)
{
    const vf_slice_params *p = &n->p.slice;
    y->rank = x->rank;
    same_batch(y, x);
    for (int d = 0; d < x->rank; d++) {
        int64_t len = x->dims[d], c = p->count[d], s = p->start[d], st = p->step[d];
        if (d == x->batch_axis && (s != 0 || st != 1 || c != len))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': slicing the batch's dimension %d",
                             n->name, d);
        if (c < 0 || c > len || st == 0 || st > VF_MAX_DIM || st < -VF_MAX_DIM ||
            (c > 0 && (s < 0 || s >= len || s + (c - 1) * st < 0 || s + (c - 1) * st >= len)))
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': slice out of range in dimension %d", n->name,
                             d);
        y->dims[d] = c;
    }
    return VF_OK;
}

static vf_status infer_expand(vf_node *n, const vf_value *x, vf_value *y, vf_err *err)
{
    /* y's shape was set from the target; x broadcasts to it */
    if (y->rank < x->rank || y->batch_axis < 0 || y->batch_axis >= y->rank || y->batch_outer < 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': expand to a lower rank", n->name);
    for (int i = 0; i < x->rank; i++) {
        int j = aligned(x, y->rank, i);
        if (x->dims[i] != 1 && x->dims[i] != y->dims[j])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': dim %d of size %lld does not expand to %lld",
                             n->name, i, (long long)x->dims[i], (long long)y->dims[j]);
    }
    int ix = y->batch_axis - (y->rank - x->rank);
    if (x->is_batched && (ix != x->batch_axis || x->dims[ix] != y->dims[y->batch_axis] ||
                          x->batch_outer != y->batch_outer))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': expanding over the batch of '%s'", n->name,
                         x->name);
    if (!x->is_batched && ix >= 0 && x->dims[ix] != 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': constant '%s' varies along the batch's dimension", n->name,
                         x->name);
    return VF_OK;
}

/* The operators of token ids (a text tower): LOOKUP, ARGMAX, TAKE. */
static vf_status infer_ids(vf_graph *g, vf_node *n, const vf_value *x, vf_value *y, vf_err *err)
{
    if (n->op == VF_OP_LOOKUP) {
        const vf_value *t = n->n_inputs == 2 ? &g->values[n->inputs[1]] : NULL;
        if (!t || !t->data || t->rank < 2 || x->rank + t->rank - 1 > VF_MAX_DIMS)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': a lookup needs a constant table [rows, ...] whose "
                             "rows fit the ids' dimensions",
                             n->name);
        y->rank = x->rank + t->rank - 1;
        memcpy(y->dims, x->dims, (size_t)x->rank * sizeof(int64_t));
        memcpy(y->dims + x->rank, t->dims + 1, (size_t)(t->rank - 1) * sizeof(int64_t));
        return VF_OK;
    }
    if (n->op == VF_OP_ARGMAX) {
        const vf_argmax_params *p = &n->p.argmax;
        if (n->n_inputs != 1 || p->axis < 0 || p->axis >= x->rank || p->axis == x->batch_axis)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': argmax along axis %d", n->name,
                             p->axis);
        y->dtype = VF_DTYPE_I64;
        y->rank = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == x->batch_axis)
                y->batch_axis = y->rank;
            if (d != p->axis)
                y->dims[y->rank++] = x->dims[d];
            else if (p->keepdims)
                y->dims[y->rank++] = 1;
        }
        return VF_OK;
    }
    /* TAKE: x holds each image's part contiguously; k is [N]. */
    const vf_value *k = n->n_inputs == 2 ? &g->values[n->inputs[1]] : NULL;
    int axis = n->p.axis;
    if (!k || k->rank != 1 || !vfi_value_batch_first(k))
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': take needs one index [N] an image",
                         n->name);
    if (x->batch_axis != 0 || x->batch_outer != 1 || axis < 0 || axis >= x->rank ||
        (axis > 0 && x->dims[0] != 1))
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s': take along axis %d of an input whose images are not "
                         "outermost",
                         n->name, axis);
    y->batch_axis = 0;
    y->batch_outer = 1;
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d == 0 && axis == 0)
            y->dims[y->rank++] = 1; /* the images stay, one row each */
        else if (d != axis)
            y->dims[y->rank++] = x->dims[d];
    }
    return VF_OK;
}

static vf_status infer(vf_graph *g, vf_node *n, vf_err *err)
{
    vf_value *x = &g->values[n->inputs[0]];
    vf_value *y = &g->values[n->output];
    y->dtype = VF_DTYPE_F32;
    y->is_batched = 1;
    if (n->op != VF_OP_RESHAPE && n->op != VF_OP_EXPAND)
        same_batch(y, x);

    for (int i = 0; i < n->n_inputs; i++) {
        const vf_value *v = &g->values[n->inputs[i]];
        /* Token ids: the ids of a lookup and the indices of a take must be int64
         * activations; an argmax reads either type. */
        int need_ids = (n->op == VF_OP_LOOKUP && i == 0) || (n->op == VF_OP_TAKE && i == 1);
        int ids_ok = need_ids || n->op == VF_OP_ARGMAX;
        if (v->dtype != VF_DTYPE_F32 && !(ids_ok && v->dtype == VF_DTYPE_I64 && v->is_batched))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s' (%s): input '%s' is not float32",
                             n->name, vfi_op_name(n->op), v->name);
        if (need_ids && v->dtype != VF_DTYPE_I64)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s' (%s): indices '%s' are not int64",
                             n->name, vfi_op_name(n->op), v->name);
    }
    if (!x->is_batched && n->op != VF_OP_BINARY && n->op != VF_OP_EXPAND)
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s' (%s): first input '%s' is a constant "
                         "(constant subgraphs of this op are not folded)",
                         n->name, vfi_op_name(n->op), x->name);
    /* The image operators want the batch as dimension 0 alone ([N, C, H, W]). */
    if ((n->op == VF_OP_CONV || n->op == VF_OP_POOL || n->op == VF_OP_LRN) &&
        !vfi_value_batch_first(x))
        return NODE_FAIL(VF_ERR_UNSUPPORTED,
                         "node '%s' (%s): the input's batch is not its first dimension alone",
                         n->name, vfi_op_name(n->op));

    switch (n->op) {
    case VF_OP_CONV: {
        vf_conv_params *p = &n->p.conv;
        if (n->n_inputs < 2 || n->n_inputs > 3)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': Conv needs 2 or 3 inputs", n->name);
        const vf_value *w = &g->values[n->inputs[1]];
        if (x->rank != 4)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': only 2-D convolution is supported "
                             "(input rank %d)",
                             n->name, x->rank);
        if (!w->data || w->rank != 4)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': weights must be a constant 4-D tensor",
                             n->name);
        if (p->group < 1 || w->dims[0] % p->group || w->dims[1] * p->group != x->dims[1])
            return NODE_FAIL(VF_ERR_MODEL,
                             "node '%s': weights %lldx%lld do not fit %lld input "
                             "channels in %d groups",
                             n->name, (long long)w->dims[0], (long long)w->dims[1],
                             (long long)x->dims[1], p->group);
        if (p->win.kernel[0] != w->dims[2] || p->win.kernel[1] != w->dims[3])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': kernel_shape does not match the weights",
                             n->name);
        if (n->n_inputs == 3) {
            const vf_value *b = &g->values[n->inputs[2]];
            if (!b->data || vfi_value_numel(b) != w->dims[0])
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': bias must be a constant of %lld values",
                                 n->name, (long long)w->dims[0]);
        }
        int64_t hw[2];
        vf_status rc = window_out(&p->win, 0, 0, &x->dims[2], hw, n, err);
        if (rc < 0)
            return rc;
        y->rank = 4;
        y->dims[0] = 1;
        y->dims[1] = w->dims[0];
        y->dims[2] = hw[0];
        y->dims[3] = hw[1];
        break;
    }
    case VF_OP_FC: {
        if (n->n_inputs < 2 || n->n_inputs > 3)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': Gemm needs 2 or 3 inputs", n->name);
        const vf_value *w = &g->values[n->inputs[1]];
        if (x->rank != 2 || x->batch_axis != 0)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': Gemm input must be 2-D [N, K], the batch in N", n->name);
        if (!w->data || w->rank != 2 || w->dims[1] != x->dims[1])
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': weights do not match input width %lld",
                             n->name, (long long)x->dims[1]);
        if (n->n_inputs == 3) {
            const vf_value *b = &g->values[n->inputs[2]];
            if (!b->data || vfi_value_numel(b) != w->dims[0])
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': bias must be a constant of %lld values",
                                 n->name, (long long)w->dims[0]);
        }
        y->rank = 2;
        y->dims[0] = x->dims[0];
        y->dims[1] = w->dims[0];
        break;
    }
    case VF_OP_ACT:
    case VF_OP_SOFTMAX:
        y->rank = x->rank;
        memcpy(y->dims, x->dims, sizeof(y->dims));
        if (n->op == VF_OP_SOFTMAX &&
            (n->p.axis < 0 || n->p.axis >= x->rank || n->p.axis == x->batch_axis))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': softmax axis %d", n->name, n->p.axis);
        break;
    case VF_OP_LRN:
        if (x->rank != 4 || n->p.lrn.size < 1 || n->p.lrn.size > 1024)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': LRN needs a 4-D input and a size "
                             "in 1..1024",
                             n->name);
        y->rank = 4;
        memcpy(y->dims, x->dims, sizeof(y->dims));
        break;
    case VF_OP_POOL: {
        vf_pool_params *p = &n->p.pool;
        if (x->rank != 4)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': only 2-D pooling is supported",
                             n->name);
        y->rank = 4;
        y->dims[0] = 1;
        y->dims[1] = x->dims[1];
        if (p->global) {
            y->dims[2] = y->dims[3] = 1;
            break;
        }
        int64_t hw[2];
        vf_status rc =
            window_out(&p->win, p->ceil_mode, p->kind == VF_POOL_AVG && p->count_include_pad,
                       &x->dims[2], hw, n, err);
        if (rc < 0)
            return rc;
        p->ceil_mode = 0; /* folded into the end padding */
        if (p->kind == VF_POOL_AVG && (p->win.dilation[0] != 1 || p->win.dilation[1] != 1))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': dilated average pooling", n->name);
        y->dims[2] = hw[0];
        y->dims[3] = hw[1];
        break;
    }
    case VF_OP_BINARY: {
        if (n->n_inputs != 2)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': binary op needs 2 inputs", n->name);
        const vf_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
        vf_status rc = infer_broadcast(a, b, y, n, err);
        if (rc < 0)
            return rc;
        if (a->is_batched && b->is_batched && a->rank != b->rank)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': broadcasting between activations of "
                             "rank %d and %d",
                             n->name, a->rank, b->rank);
        const vf_value *act = a->is_batched ? a : b;
        if (act->rank != y->rank)
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': a constant of higher rank than the "
                             "activation",
                             n->name);
        break;
    }
    case VF_OP_CONCAT: {
        int axis = n->p.axis;
        if (axis < 0 || axis >= x->rank || axis == x->batch_axis)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': concat axis %d", n->name, axis);
        y->rank = x->rank;
        memcpy(y->dims, x->dims, sizeof(y->dims));
        y->dims[axis] = 0;
        for (int i = 0; i < n->n_inputs; i++) {
            const vf_value *v = &g->values[n->inputs[i]];
            if (!v->is_batched || v->rank != x->rank || v->batch_axis != x->batch_axis ||
                v->batch_outer != x->batch_outer)
                return NODE_FAIL(VF_ERR_UNSUPPORTED,
                                 "node '%s': concat of '%s' (a constant, another rank or the "
                                 "batch elsewhere)",
                                 n->name, v->name);
            for (int d = 0; d < x->rank; d++) {
                if (d != axis && v->dims[d] != x->dims[d])
                    return NODE_FAIL(VF_ERR_MODEL, "node '%s': concat inputs differ in dim %d",
                                     n->name, d);
            }
            y->dims[axis] += v->dims[axis];
        }
        if (y->dims[axis] > VF_MAX_DIM)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': concat too large", n->name);
        break;
    }
    case VF_OP_PAD: {
        vf_pad_params *p = &n->p.pad;
        y->rank = x->rank;
        for (int d = 0; d < x->rank; d++) {
            if (d == x->batch_axis && (p->begin[d] || p->end[d]))
                return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': padding the batch dimension",
                                 n->name);
            if (p->begin[d] < 0 || p->end[d] < 0 || p->begin[d] > VF_MAX_DIM ||
                p->end[d] > VF_MAX_DIM)
                return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': negative or huge pads", n->name);
            y->dims[d] = x->dims[d] + p->begin[d] + p->end[d];
        }
        if (check_dims(y->rank, y->dims, g->values[n->output].name, err) < 0)
            return err->code;
        break;
    }
    case VF_OP_REDUCE_MEAN: {
        uint32_t axes = n->p.reduce.axes;
        if (axes & (1u << x->batch_axis))
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': reducing over the batch", n->name);
        if (!axes || axes >> x->rank)
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': reduce axes out of range", n->name);
        y->rank = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == x->batch_axis)
                y->batch_axis = y->rank;
            if (!(axes & (1u << d)))
                y->dims[y->rank++] = x->dims[d];
            else if (n->p.reduce.keepdims)
                y->dims[y->rank++] = 1;
        }
        break;
    }
    case VF_OP_TRANSPOSE: {
        uint32_t seen = 0;
        for (int d = 0; d < x->rank; d++) {
            int s = n->p.perm[d];
            if (s < 0 || s >= x->rank || (seen & (1u << s)))
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': invalid perm", n->name);
            seen |= 1u << s;
            y->dims[d] = x->dims[s];
            if (s == x->batch_axis)
                y->batch_axis = d;
        }
        y->rank = x->rank;
        break;
    }
    case VF_OP_RESHAPE: {
        /* The target was stored into y by the loader; check that the images stay where they
         * are: as many entries before them and as many per image. */
        if (y->rank < 1 || y->rank > VF_MAX_DIMS || y->batch_axis < 0 || y->batch_axis >= y->rank)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': reshape to rank %d", n->name, y->rank);
        if (check_dims(y->rank, y->dims, y->name, err) < 0)
            return err->code;
        if (vfi_value_sample_numel(y) != vfi_value_sample_numel(x))
            return NODE_FAIL(VF_ERR_MODEL,
                             "node '%s': reshape changes the element count per "
                             "image (%lld -> %lld)",
                             n->name, (long long)vfi_value_sample_numel(x),
                             (long long)vfi_value_sample_numel(y));
        if (y->batch_outer < 1 || y->dims[y->batch_axis] % y->batch_outer ||
            vfi_value_outer_entries(y) != vfi_value_outer_entries(x))
            return NODE_FAIL(VF_ERR_UNSUPPORTED,
                             "node '%s': reshape mixes the batch into other "
                             "dimensions",
                             n->name);
        break;
    }
    case VF_OP_GATHER: {
        vf_gather_params *p = &n->p.gather;
        if (p->axis < 0 || p->axis >= x->rank || p->axis == x->batch_axis)
            return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': gather along axis %d", n->name,
                             p->axis);
        if (p->n_indices < 1 || (p->scalar && p->n_indices != 1))
            return NODE_FAIL(VF_ERR_MODEL, "node '%s': gather indices", n->name);
        for (int i = 0; i < p->n_indices; i++) {
            if (p->indices[i] < 0 || p->indices[i] >= x->dims[p->axis])
                return NODE_FAIL(VF_ERR_MODEL, "node '%s': gather index out of range", n->name);
        }
        y->rank = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == x->batch_axis)
                y->batch_axis = y->rank;
            if (d != p->axis)
                y->dims[y->rank++] = x->dims[d];
            else if (!p->scalar)
                y->dims[y->rank++] = p->n_indices;
        }
        break;
    }
    case VF_OP_MATMUL: {
        vf_status rc = infer_matmul(g, n, y, err);
        if (rc < 0)
            return rc;
        break;
    }
    case VF_OP_LAYERNORM: {
        vf_status rc = infer_layernorm(g, n, x, y, err);
        if (rc < 0)
            return rc;
        break;
    }
    case VF_OP_SLICE: {
        vf_status rc = infer_slice(n, x, y, err);
        if (rc < 0)
            return rc;
        break;
    }
    case VF_OP_EXPAND: {
        vf_status rc = infer_expand(n, x, y, err);
        if (rc < 0)
            return rc;
        break;
    }
    case VF_OP_LOOKUP:
    case VF_OP_ARGMAX:
    case VF_OP_TAKE: {
        vf_status rc = infer_ids(g, n, x, y, err);
        if (rc < 0)
            return rc;
        break;
    }
    default:
        return NODE_FAIL(VF_ERR_INTERNAL, "node '%s': unknown op %d", n->name, (int)n->op);
    }
    if (y->rank < 1)
        return NODE_FAIL(VF_ERR_UNSUPPORTED, "node '%s': output would lose the batch dimension",
                         n->name);
    return check_dims(y->rank, y->dims, y->name, err);
}

vf_status vfi_graph_infer_node(vf_graph *g, int i, vf_err *err)
{
    return infer(g, &g->nodes[i], err);
}

vf_status vfi_graph_add_node(vf_graph *g, vf_op op, const char *node_name, const int *inputs,
                             int n_inputs, const void *params, const char *out_name, int *out_index,
                             vf_err *err)
{
    static const size_t param_size[VF_OP_COUNT_] = {
        [VF_OP_CONV] = sizeof(vf_conv_params),
        [VF_OP_FC] = sizeof(vf_fc_params),
        [VF_OP_ACT] = sizeof(vf_act),
        [VF_OP_POOL] = sizeof(vf_pool_params),
        [VF_OP_BINARY] = sizeof(vf_binary_kind),
        [VF_OP_CONCAT] = sizeof(int),
        [VF_OP_SOFTMAX] = sizeof(int),
        [VF_OP_LRN] = sizeof(vf_lrn_params),
        [VF_OP_PAD] = sizeof(vf_pad_params),
        [VF_OP_REDUCE_MEAN] = sizeof(((vf_node *)0)->p.reduce),
        [VF_OP_TRANSPOSE] = sizeof(((vf_node *)0)->p.perm),
        [VF_OP_RESHAPE] = 0,
        [VF_OP_GATHER] = sizeof(vf_gather_params),
        [VF_OP_MATMUL] = sizeof(vf_matmul_params),
        [VF_OP_LAYERNORM] = sizeof(vf_layernorm_params),
        [VF_OP_SLICE] = sizeof(vf_slice_params),
        [VF_OP_EXPAND] = 0,
        [VF_OP_LOOKUP] = 0,
        [VF_OP_ARGMAX] = sizeof(vf_argmax_params),
        [VF_OP_TAKE] = sizeof(int),
    };
    vf_status rc;
    if ((unsigned)op >= VF_OP_COUNT_ || n_inputs < 1)
        return vfi_fail(err, VF_ERR_INTERNAL, "bad node");
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i] < 0 || inputs[i] >= g->n_values)
            return vfi_fail(err, VF_ERR_INTERNAL, "node '%s': bad input index", node_name);
    }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        vf_node *nodes = vfi_realloc(g->nodes, (size_t)cap * sizeof(*nodes));
        if (!nodes)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    vf_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->n_inputs = n_inputs;
    n->name = vfi_strdup(node_name ? node_name : out_name);
    n->inputs = vfi_mallocarray((size_t)n_inputs, sizeof(int));
    if (!n->name || !n->inputs) {
        node_clear(n);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    memcpy(n->inputs, inputs, (size_t)n_inputs * sizeof(int));
    if (params && param_size[op])
        memcpy(&n->p, params, param_size[op]);

    int out;
    rc = new_value(g, out_name, &out, err);
    if (rc < 0) {
        if (op == VF_OP_GATHER)
            n->p.gather.indices = NULL; /* still the caller's */
        node_clear(n);
        return rc;
    }
    n->output = out;
    g->values[out].producer = g->n_nodes;
    if (op == VF_OP_RESHAPE || op == VF_OP_EXPAND) {
        /* params: the output's shape as a vf_value */
        const vf_value *t = params;
        vf_value *y = &g->values[out];
        y->rank = t->rank;
        memcpy(y->dims, t->dims, sizeof(t->dims));
        y->is_batched = 1;
        y->batch_axis = t->batch_axis;
        y->batch_outer = t->batch_outer;
    }
    g->n_nodes++;
    rc = infer(g, n, err);
    if (rc < 0) {
        /* Leave the node in the graph: it is freed with it. Its gather indices are now ours. */
        return rc;
    }
    *out_index = out;
    return VF_OK;
}

int vfi_graph_count_uses(const vf_graph *g, int v)
{
    int uses = v == g->output;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            uses += g->nodes[i].inputs[j] == v;
    }
    return uses;
}

/* The one node reading value v, or -1 when none or several do. */
static int sole_consumer(const vf_graph *g, int v)
{
    int found = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            if (g->nodes[i].inputs[j] != v)
                continue;
            if (found >= 0 && found != i)
                return -1;
            found = i;
        }
    }
    return found;
}

/* An average over the whole plane: GlobalAveragePool, an AveragePool leaving 1x1, or a
 * ReduceMean over height and width. */
static int is_global_average(const vf_graph *g, const vf_node *n)
{
    const vf_value *x = &g->values[n->inputs[0]];
    const vf_value *y = &g->values[n->output];
    if (n->op == VF_OP_POOL)
        return n->p.pool.kind == VF_POOL_AVG && x->rank == 4 &&
               (n->p.pool.global || (y->rank == 4 && y->dims[2] == 1 && y->dims[3] == 1));
    return n->op == VF_OP_REDUCE_MEAN && x->rank == 4 && n->p.reduce.axes == (1u << 2 | 1u << 3);
}

int vfi_graph_layer_by_structure(const vf_graph *g, const char *layer)
{
    int logits = -1, fc = -1;
    for (int i = g->n_nodes - 1; i >= 0 && fc < 0; i--) {
        if (g->nodes[i].op == VF_OP_FC && g->values[g->nodes[i].output].is_batched)
            fc = i;
    }
    if (fc < 0)
        return -1;
    logits = g->nodes[fc].output;
    /* A MatMul's bias is a separate Add of a constant. */
    int add = sole_consumer(g, logits);
    if (add >= 0 && g->nodes[add].op == VF_OP_BINARY && g->nodes[add].p.binary == VF_BIN_ADD &&
        g->nodes[add].n_inputs == 2) {
        const vf_node *a = &g->nodes[add];
        int other = a->inputs[0] == logits ? a->inputs[1] : a->inputs[0];
        if (g->values[other].data)
            logits = a->output;
    }
    if (!strcmp(layer, "logits"))
        return logits;
    if (!strcmp(layer, "cls") || !strcmp(layer, "tokens")) {
        /* a vision transformer's class token: the first token taken (Gather of index 0) from
         * the tokens the classifier reads; "tokens": those tokens */
        int v = g->nodes[fc].inputs[0], p = g->values[v].producer;
        if (p >= 0 && g->nodes[p].op == VF_OP_GATHER && g->nodes[p].p.gather.scalar &&
            g->nodes[p].p.gather.indices[0] == 0)
            return layer[0] == 'c' ? v : g->nodes[p].inputs[0];
        return -1;
    }
    if (strcmp(layer, "pool") != 0)
        return -1;
    /* Back from the classifier's input through flatten / reshape / squeeze to the pool. */
    int v = g->nodes[fc].inputs[0];
    for (int steps = 0; steps < g->n_nodes; steps++) {
        int p = g->values[v].producer;
        if (p < 0)
            return -1;
        if (is_global_average(g, &g->nodes[p]))
            return v;
        if (g->nodes[p].op != VF_OP_RESHAPE)
            return -1;
        v = g->nodes[p].inputs[0];
    }
    return -1;
}

vf_status vfi_graph_token_mean(vf_graph *g, int tokens, int *out, vf_err *err)
{
    const vf_value *t = &g->values[tokens];
    if (t->rank != 3 || t->batch_axis != 0 || t->dims[1] < 2)
        return vfi_fail(err, VF_ERR_INVALID, "'%s' is not a sequence of tokens [N, T, D]", t->name);
    /* the names made before a node is added: adding one may move the values */
    char name[600], mean_name[600];
    snprintf(mean_name, sizeof(mean_name), "%s/vidfeat_mean", t->name);
    vf_node tmp;
    memset(&tmp, 0, sizeof(tmp));
    vf_slice_params *sp = &tmp.p.slice;
    for (int d = 0; d < 3; d++) {
        sp->step[d] = 1;
        sp->count[d] = t->dims[d];
    }
    sp->start[1] = 1;
    sp->count[1] = t->dims[1] - 1;
    snprintf(name, sizeof(name), "%s/vidfeat_patches", t->name);
    int patches;
    vf_status rc = vfi_graph_add_node(g, VF_OP_SLICE, name, &tokens, 1, sp, name, &patches, err);
    if (rc < 0)
        return rc;
    memset(&tmp, 0, sizeof(tmp));
    tmp.p.reduce.axes = 1u << 1;
    return vfi_graph_add_node(g, VF_OP_REDUCE_MEAN, mean_name, &patches, 1, &tmp.p.reduce,
                              mean_name, out, err);
}

static int remap_index(int v, void *user)
{
    const int *remap = user;
    return v < 0 ? -1 : remap[v];
}

vf_status vfi_graph_prune(vf_graph *g, vf_err *err)
{
    vf_status rc = VF_OK;
    char *keep_value = vfi_calloc((size_t)g->n_values, 1);
    char *keep_node = vfi_calloc((size_t)g->n_nodes + 1, 1);
    int *remap = vfi_mallocarray((size_t)g->n_values, sizeof(int));
    if (!keep_value || !keep_node || !remap) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (g->output < 0 || g->input < 0) {
        rc = vfi_fail(err, VF_ERR_INTERNAL, "prune without input or output");
        goto fail;
    }
    keep_value[g->output] = 1;
    keep_value[g->input] = 1;
    /* Nodes are topologically ordered: one backward sweep marks everything live. */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const vf_node *n = &g->nodes[i];
        if (!keep_value[n->output])
            continue;
        keep_node[i] = 1;
        for (int j = 0; j < n->n_inputs; j++)
            keep_value[n->inputs[j]] = 1;
    }
    int nv = 0;
    for (int i = 0; i < g->n_values; i++) {
        if (keep_value[i]) {
            remap[i] = nv;
            g->values[nv++] = g->values[i];
        } else {
            remap[i] = -1;
            vfi_free(g->values[i].name);
            vfi_free(g->values[i].data);
        }
    }
    g->n_values = nv;
    int nn = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *n = &g->nodes[i];
        if (!keep_node[i]) {
            node_clear(n);
            continue;
        }
        for (int j = 0; j < n->n_inputs; j++)
            n->inputs[j] = remap[n->inputs[j]];
        n->output = remap[n->output];
        g->values[n->output].producer = nn;
        g->nodes[nn++] = *n;
    }
    g->n_nodes = nn;
    g->input = remap[g->input];
    g->output = remap[g->output];
    /* Renumber the name table; names of dropped values now map to -1 (not found). */
    vfi_strmap_update(g->names, remap_index, remap);
fail:
    vfi_free(keep_value);
    vfi_free(keep_node);
    vfi_free(remap);
    return rc;
}
