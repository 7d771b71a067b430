/*
 * passes.c - rewrites of a loaded graph, each keeping the network's function: choose the output
 * (and cut everything after it), cancel transposes that undo each other, find GELU in its
 * exported pieces, fold zero padding and BatchNorm into convolutions, fuse activations into the
 * producing Conv/Gemm. Single-threaded.
 *
 * A rewrite that makes a node unnecessary redirects that node's users and leaves the node in
 * place; the final prune removes it with its constants. Node order stays topological throughout
 * because nodes are only ever appended after their inputs.
 */
#include "engine/passes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/mem.h"

static void replace_uses(vf_graph *g, int from, int to)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] == from)
                n->inputs[j] = to;
        }
    }
    if (g->output == from)
        g->output = to;
}

/* The node producing value v if it is a live node of kind op, else NULL. */
static vf_node *producer_of(vf_graph *g, int v, vf_op op)
{
    int p = g->values[v].producer;
    if (p < 0 || g->nodes[p].op != op)
        return NULL;
    return &g->nodes[p];
}

vf_status vfi_pass_set_output(vf_graph *g, int v, int pool_maps, int *pooled, vf_err *err)
{
    char name[600];
    vf_status rc;
    *pooled = 0;
    if (v < 0 || v >= g->n_values || !g->values[v].is_batched)
        return vfi_fail(err, VF_ERR_INVALID, "'%s' is not computed from the input",
                        v >= 0 && v < g->n_values ? g->values[v].name : "?");
    const vf_value *x = &g->values[v];
    /* a map ([N, C, H, W], or a clip model's [N, C, T, H, W]): its global average */
    int map = pool_maps && vfi_value_batch_first(x) && (x->rank == 4 || x->rank == 5) &&
              vfi_value_sample_numel(x) > x->dims[1];
    if (map) {
        vf_node p;
        memset(&p, 0, sizeof(p));
        int op = x->rank == 4 ? VF_OP_POOL : VF_OP_POOL3D;
        if (op == VF_OP_POOL) {
            p.p.pool.kind = VF_POOL_AVG;
            p.p.pool.global = 1;
        } else {
            p.p.pool3d.kind = VF_POOL_AVG;
            p.p.pool3d.global = 1;
        }
        snprintf(name, sizeof(name), "%s/vidfeat_global_avg", x->name);
        rc = vfi_graph_add_node(g, op, name, &v, 1, &p.p, name, &v, err);
        if (rc < 0)
            return rc;
        *pooled = 1;
        x = &g->values[v];
    }
    if (x->rank != 2 || !vfi_value_batch_first(x)) {
        /* [N, D]: each image's features a row (refused where the images are not outermost) */
        vf_value t;
        memset(&t, 0, sizeof(t));
        t.rank = 2;
        t.dims[0] = 1;
        t.dims[1] = vfi_value_sample_numel(x);
        t.batch_outer = 1;
        snprintf(name, sizeof(name), "%s/vidfeat_flatten", x->name);
        rc = vfi_graph_add_node(g, VF_OP_RESHAPE, name, &v, 1, &t, name, &v, err);
        if (rc < 0)
            return rc;
    }
    g->output = v;
    return vfi_graph_prune(g, err);
}

/* Transpose(Transpose(x)) that composes to the identity -> x. */
static void cancel_transposes(vf_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *t2 = &g->nodes[i];
        if (t2->op != VF_OP_TRANSPOSE)
            continue;
        vf_node *t1 = producer_of(g, t2->inputs[0], VF_OP_TRANSPOSE);
        if (!t1)
            continue;
        int rank = g->values[t2->output].rank, identity = 1;
        for (int d = 0; d < rank; d++)
            identity &= t1->p.perm[t2->p.perm[d]] == d;
        if (identity)
            replace_uses(g, t2->output, t1->inputs[0]);
    }
}

/* The zero Pad feeding node c when its padding can join c's window of n axes (kernel, dilation
 * and pads per axis, pads the n beginnings then the n ends): it pads those axes only (the shape
 * rule keeps a Pad's amounts >= 0 and off the batch) and every window still sees an element. */
static vf_node *foldable_pad(vf_graph *g, const vf_node *c, int n, const int *kernel,
                             const int *dilation, const int *pads)
{
    vf_node *pad = producer_of(g, c->inputs[0], VF_OP_PAD);
    if (!pad || pad->p.pad.value != 0.0f || g->values[pad->output].rank != n + 2 ||
        pad->p.pad.begin[1] || pad->p.pad.end[1] || vfi_graph_count_uses(g, pad->output) != 1)
        return NULL;
    for (int a = 0; a < n; a++) {
        int64_t eff = (int64_t)(kernel[a] - 1) * dilation[a] + 1;
        if (pads[a] + pad->p.pad.begin[2 + a] >= eff || pads[a + n] + pad->p.pad.end[2 + a] >= eff)
            return NULL;
    }
    return pad;
}

/* Pad(value 0, spatial only) followed by Conv or Conv3D -> the convolution with larger padding
 * (I3D's "same" padding is a Pad before each 3-D convolution); followed by an average pool that
 * has no padding of its own -> a pool counting the padding (what PyTorch's
 * avg_pool2d(padding=1) exports as). */
static vf_status fold_pads(vf_graph *g, vf_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *c = &g->nodes[i];
        int n, *kernel, *dilation, *pads;
        if (c->op == VF_OP_CONV3D) {
            n = 3, kernel = c->p.conv3d.kernel, dilation = c->p.conv3d.dilation;
            pads = c->p.conv3d.pads;
        } else if (c->op == VF_OP_CONV ||
                   (c->op == VF_OP_POOL && c->p.pool.kind == VF_POOL_AVG && !c->p.pool.global)) {
            vf_window *w = c->op == VF_OP_CONV ? &c->p.conv.win : &c->p.pool.win;
            if (c->op == VF_OP_POOL && (w->pads[0] || w->pads[1] || w->pads[2] || w->pads[3]))
                continue;
            n = 2, kernel = w->kernel, dilation = w->dilation, pads = w->pads;
        } else {
            continue;
        }
        vf_node *pad = foldable_pad(g, c, n, kernel, dilation, pads);
        if (!pad)
            continue;
        for (int a = 0; a < n; a++) {
            pads[a] += (int)pad->p.pad.begin[2 + a];
            pads[a + n] += (int)pad->p.pad.end[2 + a];
        }
        if (c->op == VF_OP_POOL)
            c->p.pool.count_include_pad = 1; /* the zeros were real elements */
        c->inputs[0] = pad->inputs[0];
        vf_status rc = vfi_graph_infer_node(g, i, err);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

/* A convolution of images or of clips (CONV, CONV3D). */
static int is_conv(const vf_node *n)
{
    return n->op == VF_OP_CONV || n->op == VF_OP_CONV3D;
}

/* A per-channel affine conv (what BatchNormalization became): depthwise, 1x1 (x1), no padding. */
static int is_channel_affine(const vf_graph *g, const vf_node *n)
{
    if (!is_conv(n) || n->n_inputs != 3)
        return 0;
    vf_conv_window w;
    vfi_conv_window(g, n, &w);
    const vf_value *wv = &g->values[n->inputs[1]];
    int affine = w.act.kind == VF_ACT_NONE && w.group == wv->dims[0] && wv->dims[1] == 1;
    for (int a = 0; a < w.ax.n; a++)
        affine &=
            w.ax.kernel[a] == 1 && w.ax.stride[a] == 1 && !w.ax.pad_begin[a] && !w.ax.pad_end[a];
    return affine;
}

/* A convolution's fused activation (none: VF_ACT_NONE). */
static vf_act_kind conv_act(const vf_graph *g, const vf_node *n)
{
    vf_conv_window w;
    vfi_conv_window(g, n, &w);
    return w.act.kind;
}

/* Conv followed by a channel affine -> one Conv with scaled weights and shifted bias (Conv3D and
 * a 5-D channel affine alike). */
static vf_status fold_affine(vf_graph *g, vf_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *bn = &g->nodes[i];
        if (!is_channel_affine(g, bn))
            continue;
        int ci = g->values[bn->inputs[0]].producer;
        if (ci < 0 || g->nodes[ci].op != bn->op || conv_act(g, &g->nodes[ci]) != VF_ACT_NONE ||
            vfi_graph_count_uses(g, bn->inputs[0]) != 1)
            continue;
        vf_node *c = &g->nodes[ci];
        int w_idx = c->inputs[1];
        if (vfi_graph_count_uses(g, w_idx) != 1 ||
            (c->n_inputs == 3 && vfi_graph_count_uses(g, c->inputs[2]) != 1))
            continue; /* shared weights: leave them alone */
        vf_value *w = &g->values[w_idx];
        int64_t oc = w->dims[0], per = vfi_value_numel(w) / oc;
        const float *a = g->values[bn->inputs[1]].data;
        const float *s = g->values[bn->inputs[2]].data;
        if (c->n_inputs == 2) {
            /* Give the conv a zero bias to shift. */
            float *zero = vfi_calloc((size_t)oc, sizeof(float));
            if (!zero)
                return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            int *inputs = vfi_realloc(c->inputs, 3 * sizeof(int));
            if (!inputs) {
                vfi_free(zero);
                return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            }
            c->inputs = inputs;
            char name[600];
            snprintf(name, sizeof(name), "%s/vidfeat_folded_bias", c->name);
            int b_idx;
            vf_status rc = vfi_graph_add_const(g, name, VF_DTYPE_F32, 1, &oc, zero, &b_idx, err);
            if (rc < 0) {
                vfi_free(zero);
                return rc;
            }
            c = &g->nodes[ci];
            bn = &g->nodes[i];
            c->inputs[2] = b_idx;
            c->n_inputs = 3;
            w = &g->values[w_idx];
            a = g->values[bn->inputs[1]].data;
            s = g->values[bn->inputs[2]].data;
        }
        float *wd = w->data;
        float *bd = g->values[c->inputs[2]].data;
        for (int64_t o = 0; o < oc; o++) {
            for (int64_t k = 0; k < per; k++)
                wd[o * per + k] *= a[o];
            bd[o] = bd[o] * a[o] + s[o];
        }
        replace_uses(g, bn->output, c->output);
    }
    return VF_OK;
}

/* The value of a one-element float constant, or NAN. */
static float scalar_of(const vf_graph *g, int v)
{
    const vf_value *c = &g->values[v];
    if (!c->data || c->is_batched || c->dtype != VF_DTYPE_F32 || vfi_value_numel(c) != 1)
        return NAN;
    return *(const float *)c->data;
}

static int near(float x, float want)
{
    return fabsf(x - want) <= 1e-4f * fabsf(want);
}

/* Whether node i is dead: a rewrite redirected its output's users (the prune removes it). */
static int is_dead(const vf_graph *g, int i)
{
    return vfi_graph_count_uses(g, g->nodes[i].output) == 0;
}

/* The one live node reading value v (and v not the output), or NULL. */
static vf_node *sole_user(vf_graph *g, int v)
{
    vf_node *found = NULL;
    if (g->output == v)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            if (g->nodes[i].inputs[j] != v || is_dead(g, i))
                continue;
            if (found && found != &g->nodes[i])
                return NULL;
            found = &g->nodes[i];
        }
    }
    return found;
}

/* A binary node of kind k with value v as one operand and a scalar constant as the other: that
 * constant, else NAN. */
static float with_scalar(const vf_graph *g, const vf_node *n, vf_binary_kind k, int v)
{
    if (!n || n->op != VF_OP_BINARY || n->p.binary != k || n->n_inputs != 2)
        return NAN;
    if (n->inputs[0] == v)
        return scalar_of(g, n->inputs[1]);
    if (n->inputs[1] == v && k != VF_BIN_DIV && k != VF_BIN_SUB)
        return scalar_of(g, n->inputs[0]);
    return NAN;
}

/* GELU as exporters write it, x * 0.5 * (1 + erf(x / sqrt 2)) in either order of the products,
 * -> one GELU activation (oneDNN has it as a kernel and a post-op; it has no Erf). */
static vf_status fuse_gelu(vf_graph *g, vf_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *e = &g->nodes[i];
        if (e->op != VF_OP_ACT || e->p.act.kind != VF_ACT_ERF)
            continue;
        int di = g->values[e->inputs[0]].producer;
        if (di < 0)
            continue;
        const vf_node *d = &g->nodes[di];
        if (d->op != VF_OP_BINARY || d->n_inputs != 2)
            continue;
        int x = d->inputs[0];
        if (!(near(with_scalar(g, d, VF_BIN_DIV, x), 1.41421356f) ||
              near(with_scalar(g, d, VF_BIN_MUL, x), 0.70710678f)) &&
            !near(with_scalar(g, d, VF_BIN_MUL, x = d->inputs[1]), 0.70710678f))
            continue;
        vf_node *a = sole_user(g, e->output);
        if (!near(with_scalar(g, a, VF_BIN_ADD, e->output), 1.0f))
            continue;
        vf_node *m = sole_user(g, a->output);
        if (!m || m->op != VF_OP_BINARY || m->p.binary != VF_BIN_MUL)
            continue;
        int other = m->inputs[0] == a->output ? m->inputs[1] : m->inputs[0];
        vf_node *last = NULL;
        if (other == x) { /* (x * (1 + erf)) * 0.5 */
            vf_node *h = sole_user(g, m->output);
            if (near(with_scalar(g, h, VF_BIN_MUL, m->output), 0.5f))
                last = h;
        } else { /* (x * 0.5) * (1 + erf) */
            int hi = g->values[other].producer;
            if (hi >= 0 && near(with_scalar(g, &g->nodes[hi], VF_BIN_MUL, x), 0.5f))
                last = m;
        }
        if (!last)
            continue;
        last->op = VF_OP_ACT;
        last->n_inputs = 1;
        last->inputs[0] = x;
        memset(&last->p, 0, sizeof(last->p));
        last->p.act.kind = VF_ACT_GELU;
        vf_status rc = vfi_graph_infer_node(g, (int)(last - g->nodes), err);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

/* Append value v to node n's inputs. */
static vf_status add_input(vf_node *n, int v, vf_err *err)
{
    int *in = vfi_realloc(n->inputs, (size_t)(n->n_inputs + 1) * sizeof(int));
    if (!in)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    in[n->n_inputs++] = v;
    n->inputs = in;
    return VF_OK;
}

/* What follows a MatMul, into it (oneDNN runs them as the product's post-ops, one pass over the
 * output instead of one each): a scale of its first operand (attention's q / sqrt(d)), then
 * the bias added to its rows, an activation (GELU), and a residual sum of the same shape. */
static vf_status fuse_matmul(vf_graph *g, vf_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *m = &g->nodes[i];
        if (m->op != VF_OP_MATMUL || m->p.matmul.has_bias || m->p.matmul.has_sum ||
            m->p.matmul.act.kind != VF_ACT_NONE)
            continue;
        vf_matmul_params *p = &m->p.matmul;
        /* (x / c) b or (x c) b -> (x b) / c */
        int si = g->values[m->inputs[0]].producer;
        if (si >= 0 && sole_user(g, m->inputs[0]) == m) {
            const vf_node *sn = &g->nodes[si];
            float c = with_scalar(g, sn, VF_BIN_DIV, sn->inputs[0]);
            float k =
                !isnan(c) && c != 0.0f ? 1.0f / c : with_scalar(g, sn, VF_BIN_MUL, sn->inputs[0]);
            int x = sn->inputs[0];
            if (isnan(k) && sn->n_inputs == 2) { /* c x */
                k = with_scalar(g, sn, VF_BIN_MUL, sn->inputs[1]);
                x = sn->inputs[1];
            }
            if (!isnan(k) && g->values[x].is_batched) {
                m->inputs[0] = x;
                p->scale *= k;
            }
        }
        vf_node *u = sole_user(g, m->output);
        /* + bias over the last dimension (not after a scale: oneDNN adds its bias first) */
        if (u && p->scale == 1.0f && u->op == VF_OP_BINARY && u->p.binary == VF_BIN_ADD) {
            int other = u->inputs[0] == m->output ? u->inputs[1] : u->inputs[0];
            const vf_value *bv = &g->values[other], *yv = &g->values[m->output];
            int last_only = bv->data && bv->rank >= 1 &&
                            bv->dims[bv->rank - 1] == yv->dims[yv->rank - 1] &&
                            vfi_value_numel(bv) == bv->dims[bv->rank - 1];
            if (last_only) {
                vf_status rc = add_input(m, other, err);
                if (rc < 0)
                    return rc;
                p->has_bias = 1;
                replace_uses(g, u->output, m->output);
                u = sole_user(g, m->output);
            }
        }
        /* an activation oneDNN has as a post-op */
        if (u && u->op == VF_OP_ACT && u->p.act.kind != VF_ACT_ERF) {
            p->act = u->p.act;
            replace_uses(g, u->output, m->output);
            u = sole_user(g, m->output);
        }
        /* + a residual computed before the product */
        if (u && u->op == VF_OP_BINARY && u->p.binary == VF_BIN_ADD) {
            int other = u->inputs[0] == m->output ? u->inputs[1] : u->inputs[0];
            const vf_value *ov = &g->values[other], *yv = &g->values[m->output];
            int same = ov->is_batched && ov->rank == yv->rank && ov->batch_axis == yv->batch_axis &&
                       ov->batch_outer == yv->batch_outer &&
                       !memcmp(ov->dims, yv->dims, (size_t)yv->rank * sizeof(yv->dims[0]));
            if (other != m->output && same && ov->producer < i) {
                vf_status rc = add_input(m, other, err);
                if (rc < 0)
                    return rc;
                p->has_sum = 1;
                replace_uses(g, u->output, m->output);
            }
        }
        vf_status rc = vfi_graph_infer_node(g, i, err);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

/* Conv/Conv3D/Gemm followed by an activation -> the activation fused into it. */
static void fuse_activations(vf_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        vf_node *a = &g->nodes[i];
        if (a->op != VF_OP_ACT)
            continue;
        int pi = g->values[a->inputs[0]].producer;
        if (pi < 0 || vfi_graph_count_uses(g, a->inputs[0]) != 1)
            continue;
        vf_node *p = &g->nodes[pi];
        /* not into another Act, nor a MatMul (its own pass fuses what it takes) */
        vf_act *slot = p->op == VF_OP_ACT || p->op == VF_OP_MATMUL ? NULL : vfi_node_act(p);
        if (!slot || slot->kind != VF_ACT_NONE)
            continue;
        *slot = a->p.act;
        replace_uses(g, a->output, p->output);
    }
}

vf_status vfi_pass_optimize(vf_graph *g, vf_err *err)
{
    cancel_transposes(g);
    vf_status rc = fuse_gelu(g, err);
    if (rc >= 0)
        rc = fold_pads(g, err);
    if (rc >= 0)
        rc = vfi_graph_prune(g, err);
    if (rc >= 0)
        rc = fold_affine(g, err);
    if (rc >= 0)
        rc = vfi_graph_prune(g, err);
    if (rc >= 0)
        fuse_activations(g);
    if (rc >= 0)
        rc = fuse_matmul(g, err);
    if (rc >= 0)
        rc = vfi_graph_prune(g, err);
    return rc;
}
