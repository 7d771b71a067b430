/*
 * backend_dnnl_plan.c - building a oneDNN plan (backend_dnnl_int.h): buffers and views, steps of
 * primitives, fills and host steps, descriptors of values, reorders (cached: a tensor read by
 * four Inception branches is reordered once), weights uploaded in the layout their primitive
 * chose, post-op attributes. Below every operator's lowering; knows nothing of operators but
 * the convolution's primitive descriptor, which its two lowerings share (backend_dnnl_cnn.c's
 * and backend_dnnl_own.c's timing of oneDNN's candidate).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#define VF_DNNL_FILE "backend_dnnl_plan.c"
#include "engine/backend_dnnl_int.h"

static const char *dnnl_status_text(dnnl_status_t s)
{
    switch (s) {
    case dnnl_success:
        return "success";
    case dnnl_out_of_memory:
        return "out of memory";
    case dnnl_invalid_arguments:
        return "invalid arguments";
    case dnnl_unimplemented:
        return "no implementation";
    case dnnl_iterator_ends:
        return "iterator ends";
    case dnnl_runtime_error:
        return "runtime error";
    case dnnl_not_required:
        return "not required";
    }
    return "unknown status";
}

/* "[1, 64, 56, 56]" of value v (the batch as N), into buf. */
static void dims_text(const vf_value *v, char *buf, size_t size)
{
    int n = snprintf(buf, size, "[");
    for (int d = 0; d < v->rank && n >= 0 && (size_t)n < size; d++) {
        int batch = v->is_batched && d == v->batch_axis;
        if (batch)
            n += snprintf(buf + n, size - (size_t)n, "%sN", d ? ", " : "");
        else
            n +=
                snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)v->dims[d]);
    }
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

vf_status vfi_dnnl_fail(vf_backend *b, dnnl_status_t s, const char *what, const char *file,
                        int line)
{
    dnnl_ctx *c = b->ctx;
    vfi_log(VF_LOG_DEBUG, "dnnl", "%s: %s (%s:%d)", what, dnnl_status_text(s), file, line);
    char node[640] = "";
    if (c && c->node) {
        const vf_node *nd = c->node;
        char in[96] = "", out[96] = "";
        dims_text(&c->g->values[nd->inputs[0]], in, sizeof(in));
        dims_text(&c->g->values[nd->output], out, sizeof(out));
        snprintf(node, sizeof(node), "node '%.200s' (%.40s, %s -> %s): ", nd->name,
                 vfi_op_name(nd->op), in, out);
    }
    const char *prec = c && c->int8 ? "int8" : c && c->act_dt == dnnl_bf16 ? "bf16" : "f32";
    char isa[96] = "this CPU";
    if (c)
        vfi_isa_describe(&c->isa, isa, sizeof(isa));
    switch (s) {
    case dnnl_out_of_memory:
        return vfi_fail(&b->err, VF_ERR_NOMEM,
                        "%sout of memory planning the network: run smaller batches (--batch)",
                        node);
    case dnnl_unimplemented:
        if (strcmp(prec, "f32"))
            return vfi_fail(
                &b->err, VF_ERR_UNSUPPORTED,
                "%sthe CPU backend has no %s kernel for this layer on this CPU (%s): run in f32 "
                "(--precision f32)",
                node, prec, isa);
        return vfi_fail(
            &b->err, VF_ERR_UNSUPPORTED,
            "%sthe CPU backend has no kernel for this layer's form on this CPU (%s): the "
            "reference backend (--backend ref) runs it, slowly",
            node, isa);
    case dnnl_invalid_arguments:
        return vfi_fail(&b->err, VF_ERR_MODEL,
                        "%sthe CPU backend cannot take this layer's sizes (its window, strides or "
                        "padding against its input): the model file may be damaged; the "
                        "reference backend (--backend ref) tells whether it runs at all",
                        node);
    default:
        return vfi_fail(&b->err, VF_ERR_BACKEND,
                        "%sthe CPU backend failed inside its library: run again with -v -v "
                        "and report the lines it prints",
                        node);
    }
}

/* ---- buffers and steps ---------------------------------------------------------------------- */

vf_status vfi_dnnl_new_buf(vf_backend *b, const dnnl_memory_desc_t *md_in, enum dbuf_kind kind,
                           int *out)
{
    dnnl_ctx *c = b->ctx;
    /* md may point into the buffers themselves (a new buffer like another), which growing
     * moves: copied first */
    const dnnl_memory_desc_t md_copy = *md_in, *md = &md_copy;
    void *grown = vfi_grow(c->p->bufs, &c->p->cap_bufs, c->p->n_bufs + 1, sizeof(dbuf));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->p->bufs = grown;
    dbuf *d = &c->p->bufs[c->p->n_bufs];
    memset(d, 0, sizeof(*d));
    d->md = *md;
    d->kind = kind;
    d->parent = -1;
    d->value = -1;
    d->first = INT32_MAX;
    d->last = -1;
    d->size = dnnl_memory_desc_get_size(md);
    *out = c->p->n_bufs++;
    return VF_OK;
}

vf_status vfi_dnnl_new_view(vf_backend *b, int parent, const dnnl_memory_desc_t *md, int *out)
{
    vf_status rc = vfi_dnnl_new_buf(b, md, BUF_VIEW, out);
    if (rc >= 0)
        ((dnnl_ctx *)b->ctx)->p->bufs[*out].parent = parent;
    return rc;
}

static void touch(dnnl_ctx *c, int buf, int at)
{
    for (; buf >= 0; buf = c->p->bufs[buf].parent) {
        dbuf *d = &c->p->bufs[buf];
        d->first = at < d->first ? at : d->first;
        d->last = at > d->last ? at : d->last;
        if (d->kind != BUF_VIEW)
            break;
    }
}

/* Append a step running pd's primitive with (arg kind, buffer) pairs; takes over nothing. */
vf_status vfi_dnnl_add_step(vf_backend *b, const_dnnl_primitive_desc_t pd, int n_args,
                            const int *kinds, const int *bufs)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    void *grown = vfi_grow(c->p->steps, &c->p->cap_steps, c->p->n_steps + 1, sizeof(dstep));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->p->steps = grown;
    dstep *s = &c->p->steps[c->p->n_steps];
    memset(s, 0, sizeof(*s));
    s->fill_buf = -1;
    s->value = -1;
    s->node = c->node ? (int)(c->node - c->g->nodes) : -1;
    if (pd) {
        CHECK(dnnl_primitive_create(&s->prim, pd));
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success)
            s->impl = impl;
        const dnnl_memory_desc_t *smd =
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        size_t ss = smd ? dnnl_memory_desc_get_size(smd) : 0;
        if (ss) {
            CHECK(dnnl_memory_create(&s->scratch, smd, c->engine, DNNL_MEMORY_NONE));
            if (ss > c->scratch_size)
                c->scratch_size = ss;
        }
    }
    s->n_args = n_args;
    for (int i = 0; i < n_args; i++) {
        s->arg_kind[i] = kinds[i];
        s->arg_buf[i] = bufs[i];
        touch(c, bufs[i], c->p->n_steps);
    }
    c->p->n_steps++;
fail:
    return rc;
}

/* Fill a buffer with a constant before something writes part of it (Pad). */
vf_status vfi_dnnl_add_fill(vf_backend *b, int buf, float value)
{
    vf_status rc = vfi_dnnl_add_step(b, NULL, 0, NULL, NULL);
    if (rc < 0)
        return rc;
    dnnl_ctx *c = b->ctx;
    dstep *s = &c->p->steps[c->p->n_steps - 1];
    s->fill_buf = buf;
    s->fill_value = value;
    touch(c, buf, c->p->n_steps - 1);
    return VF_OK;
}

vf_status vfi_dnnl_add_host(vf_backend *b, const vf_node *nd, vfi_dnnl_host_fn run, int n,
                            const int *bufs)
{
    dnnl_ctx *c = b->ctx;
    if (n > MAX_ARGS)
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "a host step of %d buffers", n);
    int kinds[MAX_ARGS] = {0};
    vf_status rc = vfi_dnnl_add_step(b, NULL, n, kinds, bufs);
    if (rc >= 0) {
        dstep *s = &c->p->steps[c->p->n_steps - 1];
        s->host = 1 + (int)(nd - c->g->nodes);
        s->run_host = run;
    }
    return rc;
}

vf_status vfi_dnnl_bytes_md(vf_backend *b, const vf_value *v, dnnl_memory_desc_t *md)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    int64_t dims[VF_MAX_DIMS];
    vfi_value_dims_at(v, c->p->batch, dims);
    dnnl_dims_t bytes = {vfi_dims_numel(v->rank, dims) * (int64_t)vfi_dtype_size(v->dtype)};
    CHECK(dnnl_memory_desc_init_by_tag(md, 1, bytes, dnnl_u8, dnnl_a));
fail:
    return rc;
}

/* Create pd, add it as a step, destroy pd. */
vf_status vfi_dnnl_add_prim(vf_backend *b, const_dnnl_op_desc_t desc,
                            const_dnnl_primitive_attr_t attr, int n_args, const int *kinds,
                            const int *bufs, dnnl_primitive_desc_t *keep)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_desc_t pd = NULL;
    CHECK(dnnl_primitive_desc_create(&pd, desc, attr, c->engine, NULL));
    TRY(vfi_dnnl_add_step(b, pd, n_args, kinds, bufs));
fail:
    if (keep && rc >= 0)
        *keep = pd;
    else if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* An attr with a user scratchpad (and post-ops when given). */
int vfi_dnnl_act_eltwise(const vf_act *a, vfi_dnnl_eltwise op[2])
{
    switch (a->kind) {
    case VF_ACT_NONE:
        return 0;
    case VF_ACT_RELU:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_relu, a->alpha, 0.0f};
        return 1;
    case VF_ACT_CLIP:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_clip_v2, a->alpha, a->beta};
        return 1;
    case VF_ACT_SIGMOID:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_logistic, 0.0f, 0.0f};
        return 1;
    case VF_ACT_TANH:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_tanh, 0.0f, 0.0f};
        return 1;
    case VF_ACT_HARD_SWISH:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_hardswish, 0.0f, 0.0f};
        return 1;
    case VF_ACT_HARD_SIGMOID:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_linear, a->alpha, a->beta};
        op[1] = (vfi_dnnl_eltwise){dnnl_eltwise_clip_v2, 0.0f, 1.0f};
        return 2;
    case VF_ACT_GELU:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_gelu_erf, 0.0f, 0.0f};
        return 1;
    case VF_ACT_SQRT:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_sqrt, 0.0f, 0.0f};
        return 1;
    case VF_ACT_RECIPROCAL:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_pow, 1.0f, -1.0f};
        return 1;
    case VF_ACT_POW:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_pow, 1.0f, a->alpha};
        return 1;
    case VF_ACT_EXP:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_exp, 0.0f, 0.0f};
        return 1;
    case VF_ACT_LINEAR:
        op[0] = (vfi_dnnl_eltwise){dnnl_eltwise_linear, a->alpha, a->beta};
        return 1;
    case VF_ACT_ERF:
        break;
    }
    return -1;
}

vf_status vfi_dnnl_append_act(vf_backend *b, dnnl_post_ops_t po, const vf_act *act)
{
    vf_status rc = VF_OK;
    vfi_dnnl_eltwise op[2];
    int n = vfi_dnnl_act_eltwise(act, op);
    if (n < 0)
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "Erf as a fused activation");
    for (int i = 0; i < n; i++)
        CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, op[i].alg, op[i].alpha, op[i].beta));
fail:
    return rc;
}

vf_status vfi_dnnl_make_attr(vf_backend *b, const vf_act *act, dnnl_primitive_attr_t *out)
{
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    CHECK(dnnl_primitive_attr_create(&attr));
    CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (act && act->kind != VF_ACT_NONE) {
        CHECK(dnnl_post_ops_create(&po));
        TRY(vfi_dnnl_append_act(b, po, act));
        CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    *out = attr;
    attr = NULL;
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* A primitive from buffer x to buffer y (SRC -> DST, the usual user scratchpad attr). */
vf_status vfi_dnnl_src_dst_step(vf_backend *b, int x, int y, const_dnnl_op_desc_t desc)
{
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, bufs[2] = {x, y};
    TRY(vfi_dnnl_add_prim(b, desc, attr, 2, kinds, bufs, NULL));
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Row-major ("plain") descriptor over dims with the batch set to c->p->batch. */
vf_status vfi_dnnl_plain_md(vf_backend *b, const vf_value *v, dnnl_data_type_t dt,
                            dnnl_memory_desc_t *md)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_dims_t dims, strides;
    int64_t s = 1;
    vfi_value_dims_at(v, c->p->batch, dims);
    for (int i = v->rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
    CHECK(dnnl_memory_desc_init_by_strides(md, v->rank, dims, dt, strides));
fail:
    return rc;
}

/* How value vi is stored: its int8 type in an int8 plan where it is quantized, else the
 * activation type. */
dnnl_data_type_t vfi_dnnl_dt_of(const dnnl_ctx *c, int vi)
{
    return c->vdt ? c->vdt[vi] : c->act_dt;
}

/* The value's dims with the plan's batch filled in. */
void vfi_dnnl_value_dims(const dnnl_ctx *c, const vf_value *v, dnnl_dims_t dims)
{
    vfi_value_dims_at(v, c->p->batch, dims);
}

vf_status vfi_dnnl_ensure_md_scaled(vf_backend *b, int src, const dnnl_memory_desc_t *want_in,
                                    float scale, int *out)
{
    dnnl_ctx *c = b->ctx;
    /* want may point into the buffers, which a new buffer moves */
    const dnnl_memory_desc_t want_copy = *want_in, *want = &want_copy;
    vf_status rc = VF_OK;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_equal(&c->p->bufs[src].md, want)) {
        *out = src;
        return VF_OK;
    }
    for (int i = 0; i < c->p->n_cache; i++) {
        if (c->p->cache[i].src == src &&
            dnnl_memory_desc_equal(&c->p->bufs[c->p->cache[i].dst].md, want)) {
            *out = c->p->cache[i].dst;
            return VF_OK;
        }
    }
    int dst;
    TRY(vfi_dnnl_new_buf(b, want, BUF_ARENA, &dst));
    dnnl_primitive_attr_t attr = NULL;
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    dnnl_status_t s =
        scale != 0.0f ? dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale) : dnnl_success;
    if (s == dnnl_success)
        s = dnnl_reorder_primitive_desc_create(&pd, &c->p->bufs[src].md, c->engine, want, c->engine,
                                               attr);
    dnnl_primitive_attr_destroy(attr);
    CHECK(s);
    int kinds[2] = {DNNL_ARG_FROM, DNNL_ARG_TO}, bufs[2] = {src, dst};
    TRY(vfi_dnnl_add_step(b, pd, 2, kinds, bufs));
    void *grown = vfi_grow(c->p->cache, &c->p->cap_cache, c->p->n_cache + 1, sizeof(cache_entry));
    if (!grown) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    c->p->cache = grown;
    c->p->cache[c->p->n_cache].src = src;
    c->p->cache[c->p->n_cache++].dst = dst;
    *out = dst;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Reorder src into dst (a buffer or a view) as a step. */
vf_status vfi_dnnl_ensure_md(vf_backend *b, int src, const dnnl_memory_desc_t *want, int *out)
{
    return vfi_dnnl_ensure_md_scaled(b, src, want, 0.0f, out);
}

vf_status vfi_dnnl_add_reorder(vf_backend *b, int src, int dst)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_reorder_primitive_desc_create(&pd, &c->p->bufs[src].md, c->engine,
                                             &c->p->bufs[dst].md, c->engine, attr));
    int kinds[2] = {DNNL_ARG_FROM, DNNL_ARG_TO}, bufs[2] = {src, dst};
    TRY(vfi_dnnl_add_step(b, pd, 2, kinds, bufs));
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The graph's copy of constant vi can go once the last plan holds it (release_weights), unless
 * another node of the graph still reads it. */
static void maybe_release(dnnl_ctx *c, int vi)
{
    if (c->release_weights && c->last_plan && vfi_graph_count_uses(c->g, vi) == 1) {
        vfi_free(c->owner_view->values[vi].data);
        c->owner_view->values[vi].data = NULL;
    }
}

vf_status vfi_dnnl_upload_data(vf_backend *b, const vf_value *v, const void *data,
                               const dnnl_memory_desc_t *user_in, const dnnl_memory_desc_t *want_in,
                               int *out)
{
    dnnl_ctx *c = b->ctx;
    /* either may point into the buffers, which a new buffer moves */
    const dnnl_memory_desc_t user_copy = *user_in, want_copy = *want_in;
    const dnnl_memory_desc_t *user_md = &user_copy, *want = &want_copy;
    vf_status rc = VF_OK;
    dnnl_memory_t src = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    int idx, vi = (int)(v - c->g->values);
    TRY(vfi_dnnl_new_buf(b, want, BUF_CONST, &idx));
    dbuf *d = &c->p->bufs[idx];
    d->value = vi;
    for (int k = 0; k < MAX_PLANS; k++) {
        const dplan *q = &c->plans[k];
        for (int i = 0; q != c->p && i < q->n_bufs; i++) {
            const dbuf *o = &q->bufs[i];
            void *handle = NULL;
            if (o->kind != BUF_CONST || o->value != vi || !dnnl_memory_desc_equal(&o->md, want))
                continue;
            CHECK(dnnl_memory_get_data_handle(o->mem, &handle));
            CHECK(dnnl_memory_create(&d->mem, want, c->engine, handle));
            *out = idx;
            maybe_release(c, vi);
            return VF_OK;
        }
    }
    if (!data) /* cannot happen: a plan's constants are all read before any is released */
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "constant '%s' was released", v->name);
    if (data == v->data && dnnl_memory_desc_equal(user_md, want) && !c->release_weights) {
        /* Same layout: use the graph's storage in place (the graph outlives the backend). */
        CHECK(dnnl_memory_create(&d->mem, want, c->engine, v->data));
        *out = idx;
        return VF_OK;
    }
    d->owned = vfi_aligned_alloc(VF_TENSOR_ALIGN, d->size);
    if (!d->owned)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for '%s'", v->name);
    CHECK(dnnl_memory_create(&d->mem, want, c->engine, d->owned));
    CHECK(dnnl_memory_create(&src, user_md, c->engine, (void *)data));
    CHECK(dnnl_reorder_primitive_desc_create(&pd, user_md, c->engine, want, c->engine, NULL));
    CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, d->mem}};
    CHECK(dnnl_primitive_execute(prim, c->stream, 2, args));
    CHECK(dnnl_stream_wait(c->stream));
    *out = idx;
    maybe_release(c, vi);
fail:
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (src)
        dnnl_memory_destroy(src);
    return rc;
}

vf_status vfi_dnnl_upload_const(vf_backend *b, const vf_value *v, const dnnl_memory_desc_t *user_md,
                                const dnnl_memory_desc_t *want, int *out)
{
    return vfi_dnnl_upload_data(b, v, v->data, user_md, want, out);
}

/* ---- elementwise steps ---------------------------------------------------------------------- */

vf_status vfi_dnnl_eltwise_step(vf_backend *b, int x, int y, dnnl_alg_kind_t alg, float alpha,
                                float beta)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_eltwise_desc_t ed;
    CHECK(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &c->p->bufs[x].md, alpha,
                                         beta));
    rc = vfi_dnnl_src_dst_step(b, x, y, &ed);
fail:
    return rc;
}

/* ---- convolutions' primitive descriptors (backend_dnnl_cnn.c's, backend_dnnl_own.c's) ---- */

static int f32_flags(const dnnl_ctx *c, const vf_node *nd)
{
    return c->f32node ? c->f32node[nd - c->g->nodes] : 0;
}

/* Output tiles (4x4) of a picture a Winograd convolution is asked for with, at least
 * (conv_pd). */
#define WINO_MIN_TILES 4

vf_status vfi_dnnl_conv_pd(vf_backend *b, const vf_node *nd, int64_t batch, int wino,
                           const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out,
                           dnnl_memory_desc_t *w_user, dnnl_memory_desc_t *b_md)
{
    dnnl_ctx *c = b->ctx;
    dnnl_data_type_t sdt = c->act_dt, wdt = c->act_dt, ddt = c->act_dt;
    if (f32_flags(c, nd) & F32_COMPUTE)
        sdt = wdt = ddt = dnnl_f32; /* oneDNN has no f32 convolution writing bf16 */
    if (f32_flags(c, nd) & F32_OUTPUT)
        ddt = dnnl_f32;
    if (c->vdt &&
        vfi_dnnl_runs_int8(c, nd)) { /* quantized source, s8 weights, the output as wanted */
        sdt = c->qdt[nd->inputs[0]];
        wdt = dnnl_s8;
        ddt = c->vdt[nd->output];
    }
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    vf_conv_window cw;
    vfi_conv_window(g, nd, &cw);
    int rank = 2 + cw.ax.n; /* [N, C, (T,) H, W] */
    dnnl_memory_desc_t src_md, w_md, dst_md;
    dnnl_dims_t xd, yd, wd, bd, strides, dil, pl, pr;
    vfi_dnnl_value_dims(c, xv, xd);
    vfi_dnnl_value_dims(c, yv, yd);
    xd[0] = yd[0] = batch;
    int grouped = cw.group > 1;
    int64_t oc = wv->dims[0];
    if (grouped) { /* [G, OC / G, IC / G, (KT,) KH, KW] */
        wd[0] = cw.group;
        wd[1] = oc / cw.group;
        memcpy(wd + 2, wv->dims + 1, (size_t)(rank - 1) * sizeof(int64_t));
    } else {
        memcpy(wd, wv->dims, (size_t)rank * sizeof(int64_t));
    }
    bd[0] = oc;
    for (int a = 0; a < cw.ax.n; a++) {
        strides[a] = cw.ax.stride[a];
        dil[a] = cw.ax.dilation[a] - 1;
        pl[a] = cw.ax.pad_begin[a];
        pr[a] = cw.ax.pad_end[a];
    }
    dnnl_format_tag_t user_tag =
        cw.ax.n == 3 ? (grouped ? dnnl_goidhw : dnnl_oidhw) : (grouped ? dnnl_goihw : dnnl_oihw);
    if (wino == CONV_FRAMES_WINO) { /* [N, C, T, H, W] as [N x T, C, H, W]; KT is 1 */
        dnnl_dims_t x2 = {xd[0] * xd[2], xd[1], xd[3], xd[4]},
                    y2 = {yd[0] * yd[2], yd[1], yd[3], yd[4]}, w2 = {wd[0], wd[1], wd[3], wd[4]};
        memcpy(xd, x2, sizeof(x2));
        memcpy(yd, y2, sizeof(y2));
        memcpy(wd, w2, sizeof(w2));
        for (int a = 0; a < 2; a++) {
            strides[a] = strides[a + 1];
            dil[a] = dil[a + 1];
            pl[a] = pl[a + 1];
            pr[a] = pr[a + 1];
        }
        rank = 4;
        user_tag = dnnl_oihw;
    }
    CHECK(dnnl_memory_desc_init_by_tag(&w_md, rank + grouped, wd, wdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(w_user, rank + grouped, wd,
                                       wdt == dnnl_s8 ? dnnl_s8 : dnnl_f32, user_tag));
    CHECK(dnnl_memory_desc_init_by_tag(b_md, 1, bd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, rank, xd, sdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, rank, yd, ddt, dnnl_format_tag_any));
    /* oneDNN 2.6's Winograd divides by zero planning a convolution of one or two 4x4 output
     * tiles and many channels (2048 -> 2048 on CNN14's 3x2 map: SIGFPE), and a plan may run a
     * Winograd layer an image at a time (conv_op's chunks): a map of fewer tiles a picture is
     * convolved directly at every batch, so that a picture's vector never depends on the batch
     * it came in (so few tiles gain little from Winograd anyway) */
    int64_t tiles = ((yd[rank - 2] + 3) / 4) * ((yd[rank - 1] + 3) / 4);
    if (wino == CONV_FRAMES_WINO && tiles < WINO_MIN_TILES)
        return VF_ERR_UNSUPPORTED;
    if (tiles < WINO_MIN_TILES)
        wino = CONV_DIRECT;
    dnnl_status_t s = dnnl_unimplemented;
    int last = wino == CONV_FRAMES_WINO ? 1 : 2;
    for (int attempt = wino != CONV_DIRECT ? 0 : 1; attempt < last && s != dnnl_success;
         attempt++) {
        dnnl_convolution_desc_t cd;
        dnnl_alg_kind_t alg = attempt == 0 ? dnnl_convolution_winograd : dnnl_convolution_direct;
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, &src_md,
                                                       &w_md, nd->n_inputs > 2 ? b_md : NULL,
                                                       &dst_md, strides, dil, pl, pr);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(out, &cd, attr, c->engine, NULL);
    }
    if (s != dnnl_success && wino == CONV_FRAMES_WINO)
        return VF_ERR_UNSUPPORTED; /* not an error: the caller convolves the clip directly */
    CHECK(s);
fail:
    return rc;
}
