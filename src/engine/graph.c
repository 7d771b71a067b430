/*
 * graph.c - the network IR: value and node storage, the name table, shape inference and pruning.
 * Single-threaded: a graph is built by one thread and afterwards only read.
 *
 * Every value a node produces gets its shape as the node is added, from its inputs and the node's
 * parameters: the checks all operators share are made here, then the operator's own shape rule
 * (shape.h, found through its descriptor in ops.c) makes the rest, every check that a model file
 * could violate included (a dimension that does not match, a kernel larger than its padded
 * input, an axis out of range). The loader therefore needs no shape logic of its own, and the
 * passes can re-run inference after rewriting a node.
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
    const vf_op_desc *d = vfi_op_desc(n->op);
    if (d && (d->flags & VF_OPF_OWNS_INDICES))
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

int vfi_matmul_flat(const vf_graph *g, const vf_node *nd)
{
    const vf_value *bv = &g->values[nd->inputs[1]];
    return !bv->is_batched && bv->rank == 2;
}

void vfi_matmul_dims(const vf_graph *g, const vf_node *nd, int64_t n, int64_t *lead, int64_t *m,
                     int64_t *k, int64_t *cols, int64_t *b_mats)
{
    const vf_value *av = &g->values[nd->inputs[0]], *bv = &g->values[nd->inputs[1]];
    int64_t ad[VF_MAX_DIMS], bd[VF_MAX_DIMS];
    vfi_value_dims_at(av, n, ad);
    vfi_value_dims_at(bv, n, bd);
    int r = av->rank;
    *k = ad[r - 1];
    *cols = bd[bv->rank - 1];
    int flat = vfi_matmul_flat(g, nd);
    *m = flat ? vfi_dims_numel(r - 1, ad) : ad[r - 2];
    *lead = flat ? 1 : vfi_dims_numel(r - 2, ad);
    *b_mats = bv->is_batched ? *lead : vfi_dims_numel(bv->rank - 2, bd);
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
    rc = vfi_dims_check(rank, d, name, err);
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
    vf_status rc = vfi_dims_check(rank, dims, name, err);
    if (rc < 0)
        return rc;
    int idx = -1;
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

/* The checks every operator shares (its descriptor's flags), then its shape rule. */
static vf_status infer(vf_graph *g, vf_node *n, vf_err *err)
{
    const vf_op_desc *d = vfi_op_desc(n->op);
    vf_value *x = &g->values[n->inputs[0]];
    vf_value *y = &g->values[n->output];
    y->dtype = VF_DTYPE_F32;
    y->is_batched = 1;
    if (!(d->flags & VF_OPF_SHAPE_PARAM)) { /* x's batch placement, unless the shape is given */
        y->batch_axis = x->batch_axis;
        y->batch_outer = x->batch_outer;
    }

    for (int i = 0; i < n->n_inputs; i++) {
        const vf_value *v = &g->values[n->inputs[i]];
        /* Token ids: the ids of a lookup and the indices of a take must be int64
         * activations; an argmax reads either type. */
        int need_ids =
            (i == 0 && (d->flags & VF_OPF_IDS_IN0)) || (i == 1 && (d->flags & VF_OPF_IDS_IN1));
        int ids_ok = need_ids || (d->flags & VF_OPF_IDS_ANY);
        if (v->dtype != VF_DTYPE_F32 && !(ids_ok && v->dtype == VF_DTYPE_I64 && v->is_batched))
            return vfi_fail(err, VF_ERR_UNSUPPORTED, "node '%s' (%s): input '%s' is not float32",
                            n->name, d->name, v->name);
        if (need_ids && v->dtype != VF_DTYPE_I64)
            return vfi_fail(err, VF_ERR_UNSUPPORTED, "node '%s' (%s): indices '%s' are not int64",
                            n->name, d->name, v->name);
    }
    if (!x->is_batched && !(d->flags & VF_OPF_CONST_IN0))
        return vfi_fail(err, VF_ERR_UNSUPPORTED,
                        "node '%s' (%s): first input '%s' is a constant "
                        "(constant subgraphs of this op are not folded)",
                        n->name, d->name, x->name);
    /* The image operators want the batch as dimension 0 alone ([N, C, H, W]). */
    if ((d->flags & VF_OPF_IMAGE) && !vfi_value_batch_first(x))
        return vfi_fail(err, VF_ERR_UNSUPPORTED,
                        "node '%s' (%s): the input's batch is not its first dimension alone",
                        n->name, d->name);
    vf_status rc = d->shape(g, n, x, y, err);
    if (rc < 0)
        return rc;
    if (y->rank < 1)
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "node '%s': output would lose the batch dimension",
                        n->name);
    return vfi_dims_check(y->rank, y->dims, y->name, err);
}

vf_status vfi_graph_infer_node(vf_graph *g, int i, vf_err *err)
{
    return infer(g, &g->nodes[i], err);
}

vf_status vfi_graph_add_node(vf_graph *g, vf_op op, const char *node_name, const int *inputs,
                             int n_inputs, const void *params, const char *out_name, int *out_index,
                             vf_err *err)
{
    vf_status rc;
    const vf_op_desc *d = vfi_op_desc(op);
    if (!d || n_inputs < 1)
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
    if (params && !(d->flags & VF_OPF_SHAPE_PARAM))
        memcpy(&n->p, params, d->param_size);

    int out;
    rc = new_value(g, out_name, &out, err);
    if (rc < 0) {
        if (d->flags & VF_OPF_OWNS_INDICES)
            n->p.gather.indices = NULL; /* still the caller's */
        node_clear(n);
        return rc;
    }
    n->output = out;
    g->values[out].producer = g->n_nodes;
    if (d->flags & VF_OPF_SHAPE_PARAM) {
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

/* The axes of a window held as per-axis arrays of n entries (a 3-D node's: pads holds the n
 * beginnings, then the n ends). */
static void axes_from(vf_axes *ax, int n, const int *kernel, const int *stride, const int *dilation,
                      const int *pads)
{
    ax->n = n;
    for (int a = 0; a < n; a++) {
        ax->kernel[a] = kernel[a];
        ax->stride[a] = stride[a];
        ax->dilation[a] = dilation[a];
        ax->pad_begin[a] = pads[a];
        ax->pad_end[a] = pads[a + n];
    }
}

/* The 2-D and 3-D nodes' parameters share a union, and their arrays sit at the same offsets:
 * read through one loop with `three ? p3->kernel[a] : p2->win.kernel[a]`, GCC -O3 merged the
 * two loads into one through the int[2] member and, that read being past its end at a = 2,
 * ran the loop twice for a 3-D window too (its third axis left 0: every Conv3D and Pool3D
 * refused when planned). Each kind is read through its own declared arrays, whole. */
void vfi_conv_window(const vf_graph *g, const vf_node *nd, vf_conv_window *w)
{
    (void)g;
    memset(w, 0, sizeof(*w));
    if (nd->op == VF_OP_CONV3D) {
        const vf_conv3d_params *p = &nd->p.conv3d;
        axes_from(&w->ax, 3, p->kernel, p->stride, p->dilation, p->pads);
        w->group = p->group;
        w->act = p->act;
    } else {
        const vf_conv_params *p = &nd->p.conv;
        axes_from(&w->ax, 2, p->win.kernel, p->win.stride, p->win.dilation, p->win.pads);
        w->group = p->group;
        w->act = p->act;
    }
}

void vfi_pool_window(const vf_graph *g, const vf_node *nd, vf_pool_window *w)
{
    const vf_value *x = &g->values[nd->inputs[0]];
    int global;
    memset(w, 0, sizeof(*w));
    if (nd->op == VF_OP_POOL3D) {
        const vf_pool3d_params *p = &nd->p.pool3d;
        axes_from(&w->ax, 3, p->kernel, p->stride, p->dilation, p->pads);
        w->kind = p->kind;
        w->count_include_pad = p->count_include_pad;
        global = p->global;
    } else {
        const vf_pool_params *p = &nd->p.pool;
        axes_from(&w->ax, 2, p->win.kernel, p->win.stride, p->win.dilation, p->win.pads);
        w->kind = p->kind;
        w->count_include_pad = p->count_include_pad;
        global = p->global;
    }
    for (int a = 0; global && a < w->ax.n; a++) { /* the whole plane (volume), unpadded */
        w->ax.kernel[a] = x->dims[2 + a];
        w->ax.stride[a] = w->ax.dilation[a] = 1;
        w->ax.pad_begin[a] = w->ax.pad_end[a] = 0;
    }
}

double vfi_node_flops(const vf_graph *g, const vf_node *nd)
{
    const vf_value *y = &g->values[nd->output], *a = &g->values[nd->inputs[0]];
    double out = (double)vfi_value_sample_numel(y), products = 0.0;
    if (nd->op == VF_OP_CONV || nd->op == VF_OP_CONV3D) { /* a filter's weights */
        const vf_value *w = &g->values[nd->inputs[1]];    /* [OC, IC / group, taps...] */
        products = 1.0;
        for (int d = 1; d < w->rank; d++)
            products *= (double)w->dims[d];
    } else if (nd->op == VF_OP_FC || nd->op == VF_OP_MATMUL) { /* the inner dimension */
        products = (double)a->dims[a->rank - 1];
    }
    return 2.0 * out * products;
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
    int patches = -1;
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
