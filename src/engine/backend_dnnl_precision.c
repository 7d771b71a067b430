/*
 * backend_dnnl_precision.c - the oneDNN backend's choices of precision per layer: in an int8
 * plan, which convolutions and inner products run in int8 and how every value is stored and
 * scaled, from the ranges observed while calibrating; in a bf16 plan, the few convolutions
 * that compute in f32 because bf16 costs them most. The plan and its helpers are
 * backend_dnnl.c's (backend_dnnl_int.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"
#define VF_DNNL_FILE "backend_dnnl_precision.c"
#include "engine/backend_dnnl_int.h"

int vfi_dnnl_runs_int8(const dnnl_ctx *c, const vf_node *nd)
{
    return c->i8node && c->i8node[nd - c->g->nodes];
}

#define MIN_INT8_PRODUCTS 256 /* see wants_int8; vf_backend_opts.int8_min_products */

/* Which convolutions and inner products run in int8: those whose input cannot be negative (it
 * comes out of a ReLU), quantized to u8 with all 256 levels, and that sum at least
 * MIN_INT8_PRODUCTS products per output. Inputs that can be negative (the image, the sums of
 * residual blocks, linear bottlenecks) would get s8's 127 levels per sign; with few products
 * (depthwise and other grouped convolutions, 1x1 convolutions of few channels) the rounding of
 * inputs and weights does not average out. Both cost accuracy for little time, so they stay
 * f32. Measured on MobileNetV2 (real weights, the 30 s VP8 clip's dark frames): its first
 * projection (32 products) in int8 takes the worst cosine to f32 from 0.981 to 0.963; the next
 * four (96 to 192 products) from 0.991 to 0.981; VGG19 and Inception v3 have no such layer
 * after their stems. */
static int wants_int8(const vf_backend *b, const vf_node *nd, const int *nonneg)
{
    const vf_graph *g = ((const dnnl_ctx *)b->ctx)->g;
    int64_t min_products =
        b->opts.int8_min_products > 0 ? b->opts.int8_min_products : MIN_INT8_PRODUCTS;
    if ((nd->op != VF_OP_CONV || nd->p.conv.group != 1) && nd->op != VF_OP_FC)
        return 0;
    const vf_value *w = &g->values[nd->inputs[1]];
    int64_t products = 1;
    for (int d = 1; d < w->rank; d++)
        products *= w->dims[d];
    return nonneg[nd->inputs[0]] && products >= min_products;
}

/* Can node nd take int8 activations (and so let its input stay int8)? */
static int takes_int8(const dnnl_ctx *c, const vf_node *nd)
{
    return vfi_dnnl_runs_int8(c, nd) || nd->op == VF_OP_POOL || nd->op == VF_OP_CONCAT ||
           nd->op == VF_OP_RESHAPE;
}

/* Ops whose output keeps its input's scale (and, in int8, its type). */
static int passes_scale(const vf_node *nd)
{
    return nd->op == VF_OP_POOL || nd->op == VF_OP_CONCAT || nd->op == VF_OP_RESHAPE;
}

static int act_nonneg(const vf_act *a)
{
    return (a->kind == VF_ACT_RELU && a->alpha == 0.0f) ||
           (a->kind == VF_ACT_CLIP && a->alpha >= 0.0f);
}

/* An activation the int8 output scale commutes with (ReLU, Clip with scaled bounds, none). */
static int act_linear_enough(const vf_act *a)
{
    return a->kind == VF_ACT_NONE || act_nonneg(a);
}

static int uf_find(int *parent, int v)
{
    while (parent[v] != v)
        v = parent[v] = parent[parent[v]];
    return v;
}

/* From the observed ranges (vmax), decide for every value how the int8 plans store it and its
 * scale (vfi_dnnl_plan_int8). Stored int8: outputs of convolutions / inner products / pools /
 * concats / reshapes all of whose consumers take int8 (never the graph output). Values joined by a
 * pool, concat or reshape share one scale (the largest range among them), so those ops move bytes
 * unchanged. u8 where the value cannot be negative by construction (after ReLU), s8 otherwise. */
vf_status vfi_dnnl_plan_int8(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    int nv = g->n_values;
    int *nonneg = vfi_calloc((size_t)nv, sizeof(int)), *st = vfi_calloc((size_t)nv, sizeof(int));
    int *parent = vfi_mallocarray((size_t)nv, sizeof(int));
    float *gmax = vfi_calloc((size_t)nv, sizeof(float));
    int *gneg = vfi_calloc((size_t)nv, sizeof(int));
    if (!c->vdt)
        c->vdt = vfi_mallocarray((size_t)nv, sizeof(*c->vdt));
    if (!c->qdt)
        c->qdt = vfi_mallocarray((size_t)nv, sizeof(*c->qdt));
    if (!c->vscale)
        c->vscale = vfi_mallocarray((size_t)nv, sizeof(float));
    if (!c->i8node)
        c->i8node = vfi_calloc((size_t)g->n_nodes, sizeof(int));
    vf_status rc = VF_OK;
    if (!nonneg || !st || !parent || !gmax || !gneg || !c->vdt || !c->qdt || !c->vscale ||
        !c->i8node) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < nv; v++) {
        parent[v] = v;
        /* candidates: node outputs (the input image arrives as f32) */
        st[v] = g->values[v].producer >= 0 && v != g->output && c->vmax[v] > 0.0f;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        int y = nd->output;
        c->i8node[i] = wants_int8(b, nd, nonneg);
        const vf_act *a = vfi_node_act_const(nd);
        if (a) {
            nonneg[y] = act_nonneg(a);
        } else if (passes_scale(nd)) {
            nonneg[y] = 1;
            for (int k = 0; k < nd->n_inputs; k++)
                nonneg[y] = nonneg[y] && nonneg[nd->inputs[k]];
        }
        if (vfi_dnnl_runs_int8(c, nd))
            st[y] = st[y] && act_linear_enough(a);
        else if (!passes_scale(nd))
            st[y] = 0; /* computed in f32 */
        for (int k = 0; k < nd->n_inputs; k++) {
            if (!takes_int8(c, nd))
                st[nd->inputs[k]] = 0;
        }
    }
    /* a pool, concat or reshape is int8 on both sides or on neither */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const vf_node *nd = &g->nodes[i];
            if (!passes_scale(nd))
                continue;
            for (int k = 0; k < nd->n_inputs; k++) {
                int x = nd->inputs[k];
                if (st[x] != st[nd->output] && (st[x] || st[nd->output])) {
                    st[x] = st[nd->output] = 0;
                    changed = 1;
                }
            }
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        if (!passes_scale(nd) || !st[nd->output])
            continue;
        for (int k = 0; k < nd->n_inputs; k++)
            parent[uf_find(parent, nd->inputs[k])] = uf_find(parent, nd->output);
    }
    for (int v = 0; v < nv; v++) {
        int r = uf_find(parent, v);
        gmax[r] = fmaxf(gmax[r], c->vmax[v]);
        gneg[r] |= !nonneg[v];
    }
    for (int v = 0; v < nv; v++) {
        int r = st[v] ? uf_find(parent, v) : v;
        float m = st[v] ? gmax[r] : c->vmax[v];
        int neg = st[v] ? gneg[r] : !nonneg[v];
        c->qdt[v] = neg ? dnnl_s8 : dnnl_u8;
        c->vscale[v] = m > 0.0f ? (neg ? 127.0f : 255.0f) / m : 1.0f;
        c->vdt[v] = st[v] ? c->qdt[v] : dnnl_f32;
    }
done:
    vfi_free(nonneg);
    vfi_free(st);
    vfi_free(parent);
    vfi_free(gmax);
    vfi_free(gneg);
    return rc;
}

/* Largest |x| over the first n images of buffer k (all of it when the batch is not its
 * outermost dimension); non-finite values are ignored. */
float vfi_dnnl_buffer_max(const dplan *q, int k, int n)
{
    const dbuf *d = &q->bufs[k];
    void *h = NULL;
    if (!d->mem || dnnl_memory_get_data_handle(d->mem, &h) != dnnl_success || !h)
        return 0.0f;
    size_t count = d->size / sizeof(float);
    if (vfi_dnnl_batch_outermost(&d->md) && q->batch > 0)
        count = count / (size_t)q->batch * (size_t)n;
    const float *x = h;
    float m = 0.0f;
    for (size_t i = 0; i < count; i++) {
        float a = fabsf(x[i]);
        if (a > m && a < INFINITY)
            m = a;
    }
    return m;
}

/* bf16: which convolutions compute in f32, the ones whose rounding costs most. Errors made
 * early grow through every later layer, and a depthwise convolution sums nine products per
 * output, too few for rounding errors to average out (its bf16 weights alone are about 40% of
 * MobileNetV2's loss): the convolutions reading the image, and the depthwise ones whose input
 * plane is at least a quarter of the image's side, compute in f32; the convolutions feeding
 * them write f32 (no reorder between). On MobileNetV2 with its ImageNet weights, 15 photos,
 * AMX: the worst feature cosine against f32 goes from 0.99924 to 0.99959 (mean 1 - cosine
 * 4.7e-4 -> 2.6e-4) for 65% of the all-bf16 speed (still 1.5x f32); every depthwise layer
 * in f32 gives 0.99972 at 60%, the first convolution with the first depthwise one 0.99939 at
 * no cost, either alone nothing. Networks without depthwise layers keep their first
 * convolution only. VIDFEAT_DNNL_BF16_KEEP=0 runs every layer in bf16. */
vf_status vfi_dnnl_plan_bf16(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const char *env = getenv("VIDFEAT_DNNL_BF16_KEEP");
    if (env && !strcmp(env, "0"))
        return VF_OK;
    int *flags = vfi_calloc((size_t)g->n_nodes, sizeof(int));
    int *after_conv = vfi_calloc((size_t)g->n_values, sizeof(int)); /* per value */
    vf_status rc = VF_OK;
    if (!flags || !after_conv) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    const vf_value *in = &g->values[g->input];
    int64_t side = in->dims[in->rank - 1];
    int any = 0;
    for (int i = 0; i < g->n_nodes; i++) { /* topological order */
        const vf_node *nd = &g->nodes[i];
        int seen = nd->op == VF_OP_CONV;
        for (int k = 0; k < nd->n_inputs; k++)
            seen |= after_conv[nd->inputs[k]];
        after_conv[nd->output] = seen;
        if (nd->op != VF_OP_CONV)
            continue;
        const vf_value *x = &g->values[nd->inputs[0]];
        int depthwise = nd->p.conv.group > 1 && nd->p.conv.group == x->dims[1];
        if (!after_conv[nd->inputs[0]] || (depthwise && x->rank == 4 && 4 * x->dims[2] >= side)) {
            flags[i] |= F32_COMPUTE;
            any = 1;
            int p = x->producer;
            if (p >= 0 && g->nodes[p].op == VF_OP_CONV)
                flags[p] |= F32_OUTPUT;
        }
    }
    if (any) {
        c->f32node = flags;
        flags = NULL;
    }
done:
    vfi_free(flags);
    vfi_free(after_conv);
    return rc;
}
