/*
 * backend_dnnl.c - the CPU backend on oneDNN 2.6 (the 2.x C API). The only file that sees
 * dnnl_status_t. prepare() and run() are called on the inference thread; oneDNN's OpenMP threads
 * do the work underneath.
 *
 * prepare() turns the graph into a flat list of steps, each one oneDNN primitive (or a fill)
 * with its arguments bound: one primitive per node, activations in whatever blocked layout
 * oneDNN prefers for convolutions (format_tag any), activations fused as post-ops, and a reorder
 * only where a consumer wants another layout than its producer made (cached, so a tensor read by
 * four Inception branches is reordered once). Weights are reordered once into the layout their
 * primitive chose. Every activation is a "buffer" with a lifetime [first step, last step]; all
 * buffers are then packed into one arena by a first-fit on address ranges among buffers whose
 * lifetimes overlap, so the arena is close to the peak of simultaneously live activations rather
 * than their sum. Scratchpads are user-managed and share one allocation.
 *
 * Precision: f32 runs f32 everywhere and uses oneDNN's Winograd kernel for 3x3 stride-1
 * convolutions where it has one (2-3x the direct kernel on this class of CPU, ~1e-6 relative
 * error per layer; VIDFEAT_DNNL_WINOGRAD=0 turns it off). bf16 keeps activations and weights in
 * bf16 (biases f32), which oneDNN runs on AMX where the CPU has it; input and output stay f32,
 * and the few convolutions that lose most in bf16 compute in f32. Which layers run in int8 and
 * which stay f32 in bf16 is decided in backend_dnnl_precision.c.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/cpus.h"
#include "engine/backend.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/status.h"
#define VF_DNNL_FILE "backend_dnnl.c"
#include "engine/backend_dnnl.h"

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

/* Translate a oneDNN failure into b->err, naming the node being prepared. */
vf_status vfi_dnnl_fail(vf_backend *b, dnnl_status_t s, const char *what, const char *file,
                        int line)
{
    dnnl_ctx *c = b->ctx;
    vf_status code = s == dnnl_out_of_memory   ? VF_ERR_NOMEM
                     : s == dnnl_unimplemented ? VF_ERR_UNSUPPORTED
                                               : VF_ERR_BACKEND;
    if (c && c->node)
        return vfi_fail(&b->err, code, "node '%s': oneDNN %s: %s (%s:%d)", c->node, what,
                        dnnl_status_text(s), file, line);
    return vfi_fail(&b->err, code, "oneDNN %s: %s (%s:%d)", what, dnnl_status_text(s), file, line);
}

/* ---- probe / init / destroy ---------------------------------------------------------------- */

static vf_status dnnl_probe(vf_err *err)
{
    (void)err;
    return VF_OK; /* oneDNN runs on any x86-64 CPU; it picks its kernels at run time */
}

static vf_status dnnl_init(vf_backend *b, const vf_backend_opts *opts)
{
    vf_status rc = VF_OK;
    dnnl_ctx *c = vfi_calloc(1, sizeof(*c));
    if (!c)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    b->ctx = c;
    if (opts->precision != VF_PRECISION_F32 && opts->precision != VF_PRECISION_BF16 &&
        opts->precision != VF_PRECISION_INT8)
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                        "the CPU backend runs f32, bf16 or int8, not %s (f16 and tf32 are for the "
                        "GPU)",
                        vf_precision_str(opts->precision));
    c->int8 = opts->precision == VF_PRECISION_INT8;
    /* one compute thread per CPU this process may use (affinity, cgroup quota), not per CPU
     * the machine has: a container or job given 2 of 64 cores starts 2 */
    c->n_threads = opts->n_threads;
    if (c->n_threads <= 0) {
        vf_cpu_budget cpus;
        vfi_cpu_budget(&cpus);
        c->n_threads = cpus.cpus;
        vfi_log(VF_LOG_INFO, "dnnl", "%d compute thread%s (%s)", c->n_threads,
                c->n_threads == 1 ? "" : "s", cpus.limit);
    }
    c->act_dt = opts->precision == VF_PRECISION_BF16 ? dnnl_bf16 : dnnl_f32;
    const char *wino = getenv("VIDFEAT_DNNL_WINOGRAD");
    c->winograd = opts->precision == VF_PRECISION_F32 && !(wino && !strcmp(wino, "0"));
    CHECK(dnnl_engine_create(&c->engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags));
fail:
    return rc;
}

static void destroy_plan(plan *p)
{
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].prim)
            dnnl_primitive_destroy(p->steps[i].prim);
        if (p->steps[i].scratch)
            dnnl_memory_destroy(p->steps[i].scratch);
    }
    for (int i = 0; i < p->n_bufs; i++) {
        if (p->bufs[i].mem)
            dnnl_memory_destroy(p->bufs[i].mem);
        vfi_free(p->bufs[i].owned);
    }
    vfi_free(p->steps);
    vfi_free(p->bufs);
    vfi_free(p->cache);
    vfi_free(p->vbuf);
}

static void dnnl_destroy(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    if (!c)
        return;
    for (int i = 0; i < MAX_PLANS; i++)
        destroy_plan(&c->plans[i]);
    vfi_free(c->arena);
    vfi_free(c->scratch);
    vfi_free(c->stage_in);
    vfi_free(c->stage_out);
    vfi_free(c->summary);
    vfi_free(c->vmax);
    vfi_free(c->vdt);
    vfi_free(c->qdt);
    vfi_free(c->vscale);
    vfi_free(c->i8node);
    vfi_free(c->f32node);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    vfi_free(c);
    b->ctx = NULL;
}

/* ---- buffers and steps ---------------------------------------------------------------------- */

vf_status vfi_dnnl_new_buf(vf_backend *b, const dnnl_memory_desc_t *md_in, enum buf_kind kind,
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
    void *grown = vfi_grow(c->p->steps, &c->p->cap_steps, c->p->n_steps + 1, sizeof(step));
    if (!grown)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    c->p->steps = grown;
    step *s = &c->p->steps[c->p->n_steps];
    memset(s, 0, sizeof(*s));
    s->fill_buf = -1;
    s->value = -1;
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
    step *s = &c->p->steps[c->p->n_steps - 1];
    s->fill_buf = buf;
    s->fill_value = value;
    touch(c, buf, c->p->n_steps - 1);
    return VF_OK;
}

vf_status vfi_dnnl_add_host(vf_backend *b, const vf_node *nd, int n, const int *bufs)
{
    dnnl_ctx *c = b->ctx;
    if (n > MAX_ARGS)
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "a host step of %d buffers", n);
    int kinds[MAX_ARGS] = {0};
    vf_status rc = vfi_dnnl_add_step(b, NULL, n, kinds, bufs);
    if (rc >= 0)
        c->p->steps[c->p->n_steps - 1].host = 1 + (int)(nd - c->g->nodes);
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
/* The oneDNN elementwise operations an activation is, in order, into op: how many (0 for none),
 * or -1 where oneDNN has no kernel for it (Erf). */
typedef struct eltwise_op {
    dnnl_alg_kind_t alg;
    float alpha, beta;
} eltwise_op;

static int act_eltwise(const vf_act *a, eltwise_op op[2])
{
    switch (a->kind) {
    case VF_ACT_NONE:
        return 0;
    case VF_ACT_RELU:
        op[0] = (eltwise_op){dnnl_eltwise_relu, a->alpha, 0.0f};
        return 1;
    case VF_ACT_CLIP:
        op[0] = (eltwise_op){dnnl_eltwise_clip_v2, a->alpha, a->beta};
        return 1;
    case VF_ACT_SIGMOID:
        op[0] = (eltwise_op){dnnl_eltwise_logistic, 0.0f, 0.0f};
        return 1;
    case VF_ACT_TANH:
        op[0] = (eltwise_op){dnnl_eltwise_tanh, 0.0f, 0.0f};
        return 1;
    case VF_ACT_HARD_SWISH:
        op[0] = (eltwise_op){dnnl_eltwise_hardswish, 0.0f, 0.0f};
        return 1;
    case VF_ACT_HARD_SIGMOID:
        op[0] = (eltwise_op){dnnl_eltwise_linear, a->alpha, a->beta};
        op[1] = (eltwise_op){dnnl_eltwise_clip_v2, 0.0f, 1.0f};
        return 2;
    case VF_ACT_GELU:
        op[0] = (eltwise_op){dnnl_eltwise_gelu_erf, 0.0f, 0.0f};
        return 1;
    case VF_ACT_SQRT:
        op[0] = (eltwise_op){dnnl_eltwise_sqrt, 0.0f, 0.0f};
        return 1;
    case VF_ACT_RECIPROCAL:
        op[0] = (eltwise_op){dnnl_eltwise_pow, 1.0f, -1.0f};
        return 1;
    case VF_ACT_POW:
        op[0] = (eltwise_op){dnnl_eltwise_pow, 1.0f, a->alpha};
        return 1;
    case VF_ACT_EXP:
        op[0] = (eltwise_op){dnnl_eltwise_exp, 0.0f, 0.0f};
        return 1;
    case VF_ACT_LINEAR:
        op[0] = (eltwise_op){dnnl_eltwise_linear, a->alpha, a->beta};
        return 1;
    case VF_ACT_ERF:
        break;
    }
    return -1;
}

vf_status vfi_dnnl_append_act(vf_backend *b, dnnl_post_ops_t po, const vf_act *act)
{
    vf_status rc = VF_OK;
    eltwise_op op[2];
    int n = act_eltwise(act, op);
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

/* The value's dims with the batch filled in. */
/* How value vi is stored: its int8 type in an int8 plan where it is quantized, else the
 * activation type. */
dnnl_data_type_t vfi_dnnl_dt_of(const dnnl_ctx *c, int vi)
{
    return c->vdt ? c->vdt[vi] : c->act_dt;
}

static int is_int8(dnnl_data_type_t dt)
{
    return dt == dnnl_u8 || dt == dnnl_s8;
}

void vfi_dnnl_value_dims(const dnnl_ctx *c, const vf_value *v, dnnl_dims_t dims)
{
    vfi_value_dims_at(v, c->p->batch, dims);
}

/* A buffer holding buffer src's data in layout `want`: src itself, a cached copy, or a new
 * buffer filled by a reorder step. */
/* Buffer src in layout `want` (a reorder, cached per source, when it is not already); with a
 * non-zero scale the reorder multiplies by it: quantization into an int8 type. */
static vf_status ensure_md_scaled(vf_backend *b, int src, const dnnl_memory_desc_t *want_in,
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
    return ensure_md_scaled(b, src, want, 0.0f, out);
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

/* A persistent buffer holding a graph constant in layout `want`: shared with a plan built
 * before that holds it in that layout, else reordered once now from the graph's copy. */
/* Constant v (its data, or `data` in its place: quantized weights, scaled biases) in layout
 * `want`, shared with another plan that has it in the same layout. */
static vf_status upload_data(vf_backend *b, const vf_value *v, const void *data,
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
        const plan *q = &c->plans[k];
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
    return upload_data(b, v, v->data, user_md, want, out);
}

/* ---- one function per op -------------------------------------------------------------------- */

static int f32_flags(const dnnl_ctx *c, const vf_node *nd)
{
    return c->f32node ? c->f32node[nd - c->g->nodes] : 0;
}

/* The primitive descriptor of convolution node nd for `batch` images, activations and weights
 * in whatever layout oneDNN prefers: Winograd when `wino` and oneDNN has it for the shape, else
 * direct; in int8 when plan_int8 chose it for nd. The weights' and bias' user layouts go to
 * *w_user, *b_md. */
static vf_status conv_pd(vf_backend *b, const vf_node *nd, int64_t batch, int wino,
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
    const vf_conv_params *p = &nd->p.conv;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t src_md, w_md, dst_md;
    dnnl_dims_t xd, yd, wd, bd, strides, dil, pl, pr;
    vfi_dnnl_value_dims(c, xv, xd);
    vfi_dnnl_value_dims(c, yv, yd);
    xd[0] = yd[0] = batch;
    int grouped = p->group > 1;
    int64_t oc = wv->dims[0];
    if (grouped) {
        wd[0] = p->group;
        wd[1] = oc / p->group;
        wd[2] = wv->dims[1];
        wd[3] = wv->dims[2];
        wd[4] = wv->dims[3];
    } else {
        memcpy(wd, wv->dims, 4 * sizeof(int64_t));
    }
    bd[0] = oc;
    for (int a = 0; a < 2; a++) {
        strides[a] = p->win.stride[a];
        dil[a] = p->win.dilation[a] - 1;
        pl[a] = p->win.pads[a];
        pr[a] = p->win.pads[a + 2];
    }
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, xd, sdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&w_md, grouped ? 5 : 4, wd, wdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(w_user, grouped ? 5 : 4, wd,
                                       wdt == dnnl_s8 ? dnnl_s8 : dnnl_f32,
                                       grouped ? dnnl_goihw : dnnl_oihw));
    CHECK(dnnl_memory_desc_init_by_tag(b_md, 1, bd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, yd, ddt, dnnl_format_tag_any));
    dnnl_status_t s = dnnl_unimplemented;
    for (int attempt = wino ? 0 : 1; attempt < 2 && s != dnnl_success; attempt++) {
        dnnl_convolution_desc_t cd;
        dnnl_alg_kind_t alg = attempt == 0 ? dnnl_convolution_winograd : dnnl_convolution_direct;
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, &src_md,
                                                       &w_md, nd->n_inputs > 2 ? b_md : NULL,
                                                       &dst_md, strides, dil, pl, pr);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(out, &cd, attr, c->engine, NULL);
    }
    CHECK(s);
fail:
    return rc;
}

static size_t scratch_bytes(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* md for `batch` images in the layout md has for fewer (vfi_dnnl_batch_outermost(md) holds). */
static dnnl_memory_desc_t with_batch(const dnnl_memory_desc_t *md, int64_t batch)
{
    dnnl_memory_desc_t m = *md;
    m.dims[0] = m.padded_dims[0] = batch;
    return m;
}

/* A convolution in chunks of `sub` images: one primitive for `sub` images, executed over
 * consecutive slices of the input and output (views at byte offsets), its scratchpad that much
 * smaller. The layouts must keep the batch outermost; *done = 0 when they do not. */
static vf_status conv_chunked(vf_backend *b, const vf_node *nd, const_dnnl_primitive_desc_t pd,
                              const dnnl_memory_desc_t *w_user, const dnnl_memory_desc_t *b_md,
                              int *done)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    vf_status rc = VF_OK;
    const dnnl_memory_desc_t *sub_src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *sub_dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *want_w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    *done = 0;
    if (!vfi_dnnl_batch_outermost(sub_src) || !vfi_dnnl_batch_outermost(sub_dst))
        return VF_OK;
    int64_t sub = sub_src->dims[0], n = c->p->batch / sub;
    dnnl_memory_desc_t full_src = with_batch(sub_src, c->p->batch);
    dnnl_memory_desc_t full_dst = with_batch(sub_dst, c->p->batch);
    int x_buf, w_buf, b_buf = -1, y_buf;
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &full_src, &x_buf));
    TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[1]], w_user, want_w, &w_buf));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], b_md, b_md, &b_buf));
    TRY(vfi_dnnl_new_buf(b, &full_dst, BUF_ARENA, &y_buf));
    size_t src_bytes = dnnl_memory_desc_get_size(sub_src);
    size_t dst_bytes = dnnl_memory_desc_get_size(sub_dst);
    for (int64_t k = 0; k < n; k++) {
        int xs, ys;
        TRY(vfi_dnnl_new_view(b, x_buf, sub_src, &xs));
        c->p->bufs[xs].view_offset = (size_t)k * src_bytes;
        TRY(vfi_dnnl_new_view(b, y_buf, sub_dst, &ys));
        c->p->bufs[ys].view_offset = (size_t)k * dst_bytes;
        int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
        int bufs[4] = {xs, w_buf, ys, b_buf};
        TRY(vfi_dnnl_add_step(b, pd, b_buf >= 0 ? 4 : 3, kinds, bufs));
    }
    c->p->vbuf[nd->output] = y_buf;
    c->p->wino_chunked++;
    *done = 1;
fail:
    return rc;
}

/* ---- int8 ---------------------------------------------------------------------------------- */

/* The int8 form of a convolution or inner product's constants: weights to s8 with one scale per
 * output channel (127 / its largest |w|), the bias into the s32 accumulator's units (bias x
 * x_scale x w_scale), and the output scales that take the accumulator to the output's units
 * (y_scale / (x_scale x w_scale); y_scale 1 for an f32 output). Arrays are allocated here. */
typedef struct qparams {
    int8_t *w;
    float *bias, *oscale;
    int64_t oc;
} qparams;

static void qparams_free(qparams *q)
{
    vfi_free(q->w);
    vfi_free(q->bias);
    vfi_free(q->oscale);
}

static vf_status quantize_wb(vf_backend *b, const vf_node *nd, float x_scale, float y_scale,
                             qparams *q)
{
    dnnl_ctx *c = b->ctx;
    const vf_value *wv = &c->g->values[nd->inputs[1]];
    const vf_value *bv = nd->n_inputs > 2 ? &c->g->values[nd->inputs[2]] : NULL;
    const float *w = wv->data, *bias = bv ? bv->data : NULL;
    memset(q, 0, sizeof(*q));
    q->oc = wv->dims[0];
    int64_t per = vfi_value_numel(wv) / q->oc;
    q->w = vfi_mallocarray((size_t)(per * q->oc), 1);
    q->oscale = vfi_mallocarray((size_t)q->oc, sizeof(float));
    q->bias = bias ? vfi_mallocarray((size_t)q->oc, sizeof(float)) : NULL;
    if (!w || (bv && !bias))
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': weights already released", nd->name);
    if (!q->w || !q->oscale || (bias && !q->bias))
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < q->oc; o++) {
        const float *row = w + o * per;
        float m = 0.0f;
        for (int64_t k = 0; k < per; k++)
            m = fmaxf(m, fabsf(row[k]));
        float ws = m > 0.0f ? 127.0f / m : 1.0f;
        for (int64_t k = 0; k < per; k++)
            q->w[o * per + k] = (int8_t)lrintf(fminf(127.0f, fmaxf(-127.0f, row[k] * ws)));
        if (bias)
            q->bias[o] = bias[o] * x_scale * ws;
        q->oscale[o] = y_scale / (x_scale * ws);
    }
    return VF_OK;
}

/* The attr of an int8 convolution or inner product: per-channel output scales, then the
 * activation in the output's units. */
static vf_status int8_attr(vf_backend *b, const vf_act *act, float y_scale, const qparams *q,
                           dnnl_primitive_attr_t *out)
{
    vf_status rc = VF_OK;
    vf_act scaled = *act;
    if (act->kind == VF_ACT_CLIP) { /* bounds in the quantized output's units */
        scaled.alpha *= y_scale;
        scaled.beta *= y_scale;
    }
    TRY(vfi_dnnl_make_attr(b, &scaled, out));
    CHECK(dnnl_primitive_attr_set_output_scales(*out, q->oc, 1 << 1, q->oscale));
fail:
    return rc;
}

/* The step of a convolution or inner product whose primitive is pd: its source in the layout
 * pd wants (quantized by x_scale when non-zero), the weights and bias from w_data / b_data (the
 * graph's, or their int8 forms) in theirs. */
static vf_status weighted_step(vf_backend *b, const vf_node *nd, const_dnnl_primitive_desc_t pd,
                               const void *w_data, const void *b_data,
                               const dnnl_memory_desc_t *w_user, float x_scale)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    vf_status rc = VF_OK;
    int x_buf, w_buf, b_buf = -1, y_buf;
    TRY(ensure_md_scaled(b, c->p->vbuf[nd->inputs[0]],
                         dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), x_scale, &x_buf));
    TRY(upload_data(b, &g->values[nd->inputs[1]], w_data, w_user,
                    dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &w_buf));
    if (nd->n_inputs > 2) {
        dnnl_memory_desc_t b_md;
        dnnl_dims_t bd = {g->values[nd->inputs[1]].dims[0]};
        CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
        TRY(upload_data(b, &g->values[nd->inputs[2]], b_data, &b_md, &b_md, &b_buf));
    }
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA,
                         &y_buf));
    int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int bufs[4] = {x_buf, w_buf, y_buf, b_buf};
    TRY(vfi_dnnl_add_step(b, pd, b_buf >= 0 ? 4 : 3, kinds, bufs));
    c->p->vbuf[nd->output] = y_buf;
fail:
    return rc;
}

/* The scale an int8 layer's source gets quantized by: none when it is stored int8 already. */
static float src_scale(const dnnl_ctx *c, int xi)
{
    return is_int8(vfi_dnnl_dt_of(c, xi)) ? 0.0f : c->vscale[xi];
}

static float out_scale(const dnnl_ctx *c, int vi)
{
    return is_int8(c->vdt[vi]) ? c->vscale[vi] : 1.0f;
}

static vf_status conv_int8(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t w_user, b_md;
    qparams q;
    float ys = out_scale(c, nd->output);
    TRY(quantize_wb(b, nd, c->vscale[nd->inputs[0]], ys, &q));
    TRY(int8_attr(b, &nd->p.conv.act, ys, &q, &attr));
    TRY(conv_pd(b, nd, c->p->batch, 0, attr, &pd, &w_user, &b_md));
    TRY(weighted_step(b, nd, pd, q.w, q.bias, &w_user, src_scale(c, nd->inputs[0])));
fail:
    qparams_free(&q);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Winograd keeps the transformed tiles of the whole batch in its scratchpad: for VGG19's
 * 224x224 layers at batch 32 that is 1.1 GB, more than the layer's own output (411 MB). Such a
 * layer runs in the fewest equal chunks (halving) whose scratchpad fits in a quarter of the
 * layer's output, so that the activations, not the scratchpad, set the peak memory: VGG19 at
 * batch 32 peaks at 1.67 GB instead of 2.72 GB (scratchpad 49 MB), at the same speed. */
static vf_status conv_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    if (c->vdt && vfi_dnnl_runs_int8(c, nd))
        return conv_int8(b, nd);
    const vf_graph *g = c->g;
    const vf_conv_params *p = &nd->p.conv;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL, sub_pd = NULL;
    dnnl_memory_desc_t w_user, b_md;
    TRY(vfi_dnnl_make_attr(b, &p->act, &attr));
    int try_wino = c->winograd && p->group == 1 && wv->dims[2] == 3 && wv->dims[3] == 3 &&
                   p->win.stride[0] == 1 && p->win.stride[1] == 1 && p->win.dilation[0] == 1 &&
                   p->win.dilation[1] == 1;
    TRY(conv_pd(b, nd, c->p->batch, try_wino, attr, &pd, &w_user, &b_md));
    const dnnl_memory_desc_t *got_dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    size_t budget = dnnl_memory_desc_get_size(got_dst) / 4;
    if (try_wino && scratch_bytes(pd) > budget) {
        for (int64_t k = 2; k <= c->p->batch && c->p->batch % k == 0; k *= 2) {
            if (sub_pd)
                dnnl_primitive_desc_destroy(sub_pd);
            sub_pd = NULL;
            TRY(conv_pd(b, nd, c->p->batch / k, 1, attr, &sub_pd, &w_user, &b_md));
            if (scratch_bytes(sub_pd) <= budget)
                break;
        }
        if (sub_pd && scratch_bytes(sub_pd) < scratch_bytes(pd)) {
            int done = 0;
            TRY(conv_chunked(b, nd, sub_pd, &w_user, &b_md, &done));
            if (done)
                goto fail; /* finished: only the cleanup is left */
        }
    }
    TRY(weighted_step(b, nd, pd, wv->data, nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL,
                      &w_user, 0.0f));
fail:
    if (sub_pd)
        dnnl_primitive_desc_destroy(sub_pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* An inner product, in f32 / bf16, or in int8 when plan_int8 chose it. */
static vf_status fc_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t src_md, w_md, b_md, dst_md, w_user;
    /* the rows: the batch times the rows per image ([N x tokens, K] in a transformer) */
    int64_t rows = c->p->batch * c->g->values[nd->inputs[0]].dims[0];
    dnnl_dims_t xd = {rows, wv->dims[1]}, yd = {rows, wv->dims[0]}, bd = {wv->dims[0]},
                wd = {wv->dims[0], wv->dims[1]};
    int i8 = c->vdt && vfi_dnnl_runs_int8(c, nd);
    qparams q;
    memset(&q, 0, sizeof(q));
    dnnl_data_type_t sdt = c->act_dt, wdt = c->act_dt, ddt = c->act_dt;
    if (i8) {
        float ys = out_scale(c, nd->output);
        TRY(quantize_wb(b, nd, c->vscale[nd->inputs[0]], ys, &q));
        TRY(int8_attr(b, &nd->p.fc.act, ys, &q, &attr));
        sdt = c->qdt[nd->inputs[0]];
        wdt = dnnl_s8;
        ddt = c->vdt[nd->output];
    } else {
        TRY(vfi_dnnl_make_attr(b, &nd->p.fc.act, &attr));
    }
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 2, xd, sdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&w_md, 2, wd, wdt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&w_user, 2, wd, i8 ? dnnl_s8 : dnnl_f32, dnnl_oi));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 2, yd, ddt, dnnl_format_tag_any));
    dnnl_inner_product_desc_t ipd;
    CHECK(dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src_md, &w_md,
                                               nd->n_inputs > 2 ? &b_md : NULL, &dst_md));
    CHECK(dnnl_primitive_desc_create(&pd, &ipd, attr, c->engine, NULL));
    if (i8)
        TRY(weighted_step(b, nd, pd, q.w, q.bias, &w_user, src_scale(c, nd->inputs[0])));
    else
        TRY(weighted_step(b, nd, pd, wv->data,
                          nd->n_inputs > 2 ? g->values[nd->inputs[2]].data : NULL, &w_user, 0.0f));
fail:
    qparams_free(&q);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* One eltwise step on buffer x into buffer y (in place when y == x). */
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

static vf_status act_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    int x = c->p->vbuf[nd->inputs[0]], y;
    vf_status rc = vfi_dnnl_new_buf(b, &c->p->bufs[x].md, BUF_ARENA, &y);
    if (rc < 0)
        return rc;
    eltwise_op op[2];
    int n = act_eltwise(&nd->p.act, op);
    if (n < 0) /* no erf kernel: Erf outside GELU's pattern is not run here */
        rc = vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                      "node '%s': Erf outside the GELU pattern (the reference backend runs it)",
                      nd->name);
    else if (n == 0)
        rc = vfi_dnnl_add_reorder(b, x, y);
    for (int i = 0; i < n && rc >= 0; i++) /* the first into y, the others in place */
        rc = vfi_dnnl_eltwise_step(b, i ? y : x, y, op[i].alg, op[i].alpha, op[i].beta);
    c->p->vbuf[nd->output] = y;
    return rc;
}

static vf_status pool_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_pool_params *p = &nd->p.pool;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t dst_md;
    dnnl_dims_t yd, kernel, strides, dil, pl, pr;
    vfi_dnnl_value_dims(c, yv, yd);
    for (int a = 0; a < 2; a++) {
        kernel[a] = p->global ? xv->dims[2 + a] : p->win.kernel[a];
        strides[a] = p->global ? 1 : p->win.stride[a];
        dil[a] = p->global ? 0 : p->win.dilation[a] - 1;
        pl[a] = p->global ? 0 : p->win.pads[a];
        pr[a] = p->global ? 0 : p->win.pads[a + 2];
    }
    dnnl_alg_kind_t alg = p->kind == VF_POOL_MAX ? dnnl_pooling_max
                          : p->count_include_pad ? dnnl_pooling_avg_include_padding
                                                 : dnnl_pooling_avg_exclude_padding;
    int x = c->p->vbuf[nd->inputs[0]], y;
    dnnl_data_type_t ydt = c->vdt ? vfi_dnnl_dt_of(c, nd->output) : c->p->bufs[x].md.data_type;
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, yd, ydt, dnnl_format_tag_any));
    dnnl_pooling_v2_desc_t pdsc;
    CHECK(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &c->p->bufs[x].md,
                                            &dst_md, strides, kernel, dil, pl, pr));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_primitive_desc_create(&pd, &pdsc, attr, c->engine, NULL));
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA, &y));
    int kinds[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, bufs[2] = {x, y};
    TRY(vfi_dnnl_add_step(b, pd, 2, kinds, bufs));
    c->p->vbuf[nd->output] = y;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Does constant b broadcast over a dimension of y other than the batch's first one, in a
 * tensor whose images are outermost? (Swin's window mask [1, 64, 1, 49, 49] over [N, 64, 3, 49,
 * 49]: oneDNN runs such a broadcast with its reference kernel, 0.9 s a batch of 32.) */
static int spreads(const vf_value *a, const vf_value *b, const vf_value *y)
{
    if (y->rank == 4 || a->batch_axis != 0 || a->batch_outer != 1)
        return 0;
    for (int i = 1; i < y->rank; i++) {
        int j = i - (y->rank - b->rank);
        if ((j < 0 ? 1 : b->dims[j]) != y->dims[i])
            return 1;
    }
    return 0;
}

/* x op b with b spread over an image's elements once, at planning: [N, per image] op [1, per
 * image], which oneDNN's kernel broadcasts fast. */
static vf_status binary_spread(vf_backend *b, const vf_node *nd, int i1, int x0)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *bv = &g->values[i1], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    int64_t per = vfi_value_numel(yv), st[VF_MAX_DIMS], idx[VF_MAX_DIMS] = {0};
    float *spread = vfi_mallocarray((size_t)per, sizeof(float));
    if (!spread)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    vfi_dims_broadcast_strides(yv->rank, bv->rank, bv->dims, st);
    for (int64_t k = 0; k < per; k++) {
        spread[k] = ((const float *)bv->data)[vfi_dims_offset(yv->rank, idx, st)];
        vfi_dims_next(yv->rank, yv->dims, idx);
    }
    dnnl_memory_desc_t user, want, md2;
    dnnl_dims_t cd = {1, per}, xd = {c->p->batch, per};
    int x1, y, xv, yv2;
    dnnl_data_type_t dt = c->p->bufs[x0].md.data_type;
    CHECK(dnnl_memory_desc_init_by_tag(&user, 2, cd, dnnl_f32, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&want, 2, cd, dt, dnnl_ab));
    TRY(upload_data(b, bv, spread, &user, &want, &x1));
    CHECK(dnnl_memory_desc_init_by_tag(&md2, 2, xd, dt, dnnl_ab));
    TRY(vfi_dnnl_new_view(b, x0, &md2, &xv));
    TRY(vfi_dnnl_new_buf(b, &c->p->bufs[x0].md, BUF_ARENA, &y));
    TRY(vfi_dnnl_new_view(b, y, &md2, &yv2));
    static const dnnl_alg_kind_t algs[] = {dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
                                           dnnl_binary_div};
    dnnl_binary_desc_t bd;
    CHECK(dnnl_binary_desc_init(&bd, algs[nd->p.binary], &md2, &want, &md2));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, bufs[3] = {xv, x1, yv2};
    TRY(vfi_dnnl_add_prim(b, &bd, attr, 3, kinds, bufs, NULL));
    c->p->vbuf[nd->output] = y;
fail:
    vfi_free(spread);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

static vf_status binary_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    int i0 = nd->inputs[0], i1 = nd->inputs[1];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    /* oneDNN broadcasts only src1: the full-size operand goes first (add/mul commute). */
    if (vfi_value_numel(&g->values[i0]) < vfi_value_numel(yv) && g->values[i1].is_batched) {
        if (nd->p.binary == VF_BIN_SUB || nd->p.binary == VF_BIN_DIV)
            return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                            "node '%s': broadcasting the first operand of a sub/div", nd->name);
        int t = i0;
        i0 = i1;
        i1 = t;
    }
    const vf_value *av = &g->values[i0], *bv = &g->values[i1];
    if (vfi_value_numel(av) != vfi_value_numel(yv))
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s': both operands broadcast",
                        nd->name);
    int x0 = c->p->vbuf[i0], x1, y;
    if (av->rank != 4) {
        /* outside the image operators' blocked layouts, row-major (oneDNN's binary kernel
         * for other orders of dimensions is its slow reference one) */
        dnnl_memory_desc_t pmd;
        TRY(vfi_dnnl_plain_md(b, av, c->p->bufs[x0].md.data_type, &pmd));
        TRY(vfi_dnnl_ensure_md(b, x0, &pmd, &x0));
    }
    if (!bv->is_batched && spreads(av, bv, yv))
        return binary_spread(b, nd, i1, x0);
    if (bv->is_batched) {
        x1 = c->p->vbuf[i1];
        if (vfi_value_numel(bv) == vfi_value_numel(av))
            TRY(vfi_dnnl_ensure_md(b, x1, &c->p->bufs[x0].md, &x1));
    } else {
        /* A constant, aligned to the output's rank with leading 1s, in the activation type. */
        vf_value aligned = *bv;
        aligned.rank = yv->rank;
        aligned.is_batched = 0;
        for (int i = 0; i < yv->rank; i++) {
            int j = i - (yv->rank - bv->rank);
            aligned.dims[i] = j >= 0 ? bv->dims[j] : 1;
        }
        dnnl_memory_desc_t user, want;
        TRY(vfi_dnnl_plain_md(b, &aligned, dnnl_f32, &user));
        TRY(vfi_dnnl_plain_md(b, &aligned, c->p->bufs[x0].md.data_type, &want));
        TRY(vfi_dnnl_upload_const(b, bv, &user, &want, &x1));
    }
    static const dnnl_alg_kind_t algs[] = {dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
                                           dnnl_binary_div};
    TRY(vfi_dnnl_new_buf(b, &c->p->bufs[x0].md, BUF_ARENA, &y));
    dnnl_binary_desc_t bd;
    CHECK(dnnl_binary_desc_init(&bd, algs[nd->p.binary], &c->p->bufs[x0].md, &c->p->bufs[x1].md,
                                &c->p->bufs[y].md));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, bufs[3] = {x0, x1, y};
    TRY(vfi_dnnl_add_prim(b, &bd, attr, 3, kinds, bufs, NULL));
    c->p->vbuf[nd->output] = y;
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Is md exactly the layout `tag` for its dims and data type? */
static int has_tag(const dnnl_memory_desc_t *md, dnnl_format_tag_t tag)
{
    dnnl_memory_desc_t t;
    if (dnnl_memory_desc_init_by_tag(&t, md->ndims, md->dims, md->data_type, tag) != dnnl_success)
        return 0;
    return dnnl_memory_desc_equal(md, &t);
}

static vf_status concat_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int n = nd->n_inputs;
    dnnl_memory_desc_t *mds = vfi_mallocarray((size_t)n, sizeof(*mds));
    int *kinds = vfi_mallocarray((size_t)n + 1, sizeof(int));
    int *bufs = vfi_mallocarray((size_t)n + 1, sizeof(int));
    if (!mds || !kinds || !bufs) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (n + 1 > MAX_ARGS) {
        /* Many inputs (DenseNet): concatenate pairwise into plain buffers instead. */
        rc = vfi_fail(&b->err, VF_ERR_INTERNAL, "concat_op called with %d inputs", n);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        bufs[i] = c->p->vbuf[nd->inputs[i]];
        kinds[i] = DNNL_ARG_MULTIPLE_SRC + i;
        mds[i] = c->p->bufs[bufs[i]].md;
    }
    /* Inputs in different layouts send oneDNN to its slow reference concat: bring 4-D inputs
     * to channels-last (what its convolutions use on this class of CPU) when they differ. */
    static const dnnl_format_tag_t layouts[] = {dnnl_acdb, dnnl_aBcd16b, dnnl_abcd};
    int uniform = mds[0].ndims != 4;
    for (size_t t = 0; !uniform && t < sizeof(layouts) / sizeof(layouts[0]); t++) {
        uniform = 1;
        for (int i = 0; i < n && uniform; i++)
            uniform = has_tag(&mds[i], layouts[t]);
    }
    /* one data type too: a bf16 plan's f32 layers give f32 inputs (dt_of is bf16 there) */
    for (int i = 1; i < n && uniform; i++)
        uniform = mds[i].data_type == mds[0].data_type;
    for (int i = 0; !uniform && i < n; i++) {
        dnnl_memory_desc_t want;
        if (mds[i].ndims == 4)
            CHECK(dnnl_memory_desc_init_by_tag(&want, 4, mds[i].dims,
                                               vfi_dnnl_dt_of(c, nd->inputs[i]), dnnl_acdb));
        else
            TRY(vfi_dnnl_plain_md(b, &c->g->values[nd->inputs[i]], vfi_dnnl_dt_of(c, nd->inputs[i]),
                                  &want));
        TRY(vfi_dnnl_ensure_md(b, bufs[i], &want, &bufs[i]));
        mds[i] = want;
    }
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    CHECK(dnnl_concat_primitive_desc_create(&pd, NULL, n, nd->p.axis, mds, attr, c->engine));
    int y;
    TRY(vfi_dnnl_new_buf(b, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), BUF_ARENA, &y));
    kinds[n] = DNNL_ARG_DST;
    bufs[n] = y;
    TRY(vfi_dnnl_add_step(b, pd, n + 1, kinds, bufs));
    c->p->vbuf[nd->output] = y;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    vfi_free(mds);
    vfi_free(kinds);
    vfi_free(bufs);
    return rc;
}

/* Concat with more inputs than a step has argument slots: each input is reordered into its
 * slice (a view) of one plain output buffer. */
static vf_status concat_wide_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd;
    int y;
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    dnnl_dims_t offsets = {0};
    for (int i = 0; i < nd->n_inputs; i++) {
        const vf_value *xv = &g->values[nd->inputs[i]];
        dnnl_dims_t xd;
        vfi_dnnl_value_dims(c, xv, xd);
        dnnl_memory_desc_t sub;
        int view;
        CHECK(dnnl_memory_desc_init_submemory(&sub, &ymd, xd, offsets));
        TRY(vfi_dnnl_new_view(b, y, &sub, &view));
        TRY(vfi_dnnl_add_reorder(b, c->p->vbuf[nd->inputs[i]], view));
        offsets[nd->p.axis] += xv->dims[nd->p.axis];
    }
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

/* Softmax and LRN: the output keeps the input's layout. */
static vf_status softmax_lrn_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    int x = c->p->vbuf[nd->inputs[0]], y;
    const dnnl_memory_desc_t *md = &c->p->bufs[x].md;
    dnnl_softmax_desc_t sd;
    dnnl_lrn_desc_t ld;
    const_dnnl_op_desc_t desc = &sd;
    if (nd->op == VF_OP_SOFTMAX) {
        CHECK(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, md, nd->p.axis));
    } else {
        const vf_lrn_params *p = &nd->p.lrn;
        CHECK(dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, dnnl_lrn_across_channels, md,
                                         p->size, p->alpha, p->beta, p->bias));
        desc = &ld;
    }
    TRY(vfi_dnnl_new_buf(b, md, BUF_ARENA, &y));
    TRY(vfi_dnnl_src_dst_step(b, x, y, desc));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

static vf_status pad_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd, sub;
    dnnl_dims_t xd, offsets;
    int y, view;
    vfi_dnnl_value_dims(c, xv, xd);
    for (int i = 0; i < xv->rank; i++)
        offsets[i] = nd->p.pad.begin[i];
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    TRY(vfi_dnnl_add_fill(b, y, nd->p.pad.value));
    CHECK(dnnl_memory_desc_init_submemory(&sub, &ymd, xd, offsets));
    TRY(vfi_dnnl_new_view(b, y, &sub, &view));
    TRY(vfi_dnnl_add_reorder(b, c->p->vbuf[nd->inputs[0]], view));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

static vf_status reduce_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_memory_desc_t ymd, kmd;
    int x = c->p->vbuf[nd->inputs[0]], y, view;
    /* in a bf16 plan, an input computed in f32 stays f32 (no f32-to-bf16 reduction kernel) */
    dnnl_data_type_t ydt = c->f32node ? c->p->bufs[x].md.data_type : c->act_dt;
    TRY(vfi_dnnl_plain_md(b, yv, ydt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    /* The same memory seen with the reduced axes kept as 1s. */
    vf_value kept = *xv;
    for (int i = 0; i < xv->rank; i++) {
        if (nd->p.reduce.axes & (1u << i))
            kept.dims[i] = 1;
    }
    TRY(vfi_dnnl_plain_md(b, &kept, ydt, &kmd));
    TRY(vfi_dnnl_new_view(b, y, &kmd, &view));
    dnnl_reduction_desc_t rd;
    CHECK(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &c->p->bufs[x].md, &kmd, 0.0f, 0.0f));
    TRY(vfi_dnnl_make_attr(b, NULL, &attr));
    int kinds[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, bufs[2] = {x, view};
    TRY(vfi_dnnl_add_prim(b, &rd, attr, 2, kinds, bufs, NULL));
    c->p->vbuf[nd->output] = y;
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Transpose and Reshape: a reorder from the input's layout into a plain output buffer, seen
 * through a descriptor over the input's dims (permuted strides for a transpose). */
/* Is value v read only as an operand of products of two activations (which take any
 * strides), and not the graph's output? */
static int only_products_read(const vf_graph *g, int v)
{
    int users = 0;
    if (v == g->output)
        return 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] != v)
                continue;
            if (n->op != VF_OP_MATMUL || j > 1 || !g->values[n->inputs[1]].is_batched)
                return 0;
            users++;
        }
    }
    return users > 0;
}

static vf_status relayout_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t ymd, vmd;
    int y, view, x = c->p->vbuf[nd->inputs[0]];
    if (nd->op == VF_OP_RESHAPE) {
        /* a row-major input is the output already: the same bytes seen with the new dims */
        dnnl_data_type_t dt = c->p->bufs[x].md.data_type;
        TRY(vfi_dnnl_plain_md(b, xv, dt, &vmd));
        if (dnnl_memory_desc_equal(&c->p->bufs[x].md, &vmd)) {
            TRY(vfi_dnnl_plain_md(b, yv, dt, &ymd));
            TRY(vfi_dnnl_new_view(b, x, &ymd, &view));
            c->p->vbuf[nd->output] = view;
            return VF_OK;
        }
    }
    if (nd->op == VF_OP_TRANSPOSE && only_products_read(g, nd->output)) {
        /* attention's q, k and v go to oneDNN's matmul as they lie: the input's bytes seen
         * through permuted strides, no copy */
        dnnl_data_type_t dt = c->p->bufs[x].md.data_type;
        TRY(vfi_dnnl_plain_md(b, xv, dt, &vmd));
        if (dnnl_memory_desc_equal(&c->p->bufs[x].md, &vmd)) {
            dnnl_dims_t yd, st;
            vfi_dnnl_value_dims(c, yv, yd);
            for (int i = 0; i < yv->rank; i++)
                st[i] = vmd.format_desc.blocking.strides[nd->p.perm[i]];
            CHECK(dnnl_memory_desc_init_by_strides(&ymd, yv->rank, yd, dt, st));
            TRY(vfi_dnnl_new_view(b, x, &ymd, &view));
            c->p->vbuf[nd->output] = view;
            return VF_OK;
        }
    }
    TRY(vfi_dnnl_plain_md(b, yv, vfi_dnnl_dt_of(c, nd->output), &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    if (nd->op == VF_OP_TRANSPOSE) {
        dnnl_dims_t xd, st;
        vfi_dnnl_value_dims(c, xv, xd);
        for (int i = 0; i < yv->rank; i++)
            st[nd->p.perm[i]] = ymd.format_desc.blocking.strides[i];
        CHECK(dnnl_memory_desc_init_by_strides(&vmd, xv->rank, xd, c->act_dt, st));
    } else {
        TRY(vfi_dnnl_plain_md(b, xv, vfi_dnnl_dt_of(c, nd->inputs[0]), &vmd));
    }
    TRY(vfi_dnnl_new_view(b, y, &vmd, &view));
    TRY(vfi_dnnl_add_reorder(b, x, view));
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

static vf_status gather_op(vf_backend *b, const vf_node *nd)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_gather_params *p = &nd->p.gather;
    const vf_value *xv = &g->values[nd->inputs[0]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    dnnl_memory_desc_t xmd, ymd, ext_md;
    int x, y;
    TRY(vfi_dnnl_plain_md(b, xv, c->act_dt, &xmd));
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &xmd, &x));
    TRY(vfi_dnnl_plain_md(b, yv, c->act_dt, &ymd));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &y));
    vf_value ext = *xv; /* the output seen with the gathered axis kept */
    ext.dims[p->axis] = p->n_indices;
    TRY(vfi_dnnl_plain_md(b, &ext, c->act_dt, &ext_md));
    dnnl_dims_t slice, src_off = {0}, dst_off = {0};
    vfi_dnnl_value_dims(c, xv, slice);
    slice[p->axis] = 1;
    for (int j = 0; j < p->n_indices; j++) {
        dnnl_memory_desc_t smd, dmd;
        int sv, dv;
        src_off[p->axis] = p->indices[j];
        dst_off[p->axis] = j;
        CHECK(dnnl_memory_desc_init_submemory(&smd, &xmd, slice, src_off));
        CHECK(dnnl_memory_desc_init_submemory(&dmd, &ext_md, slice, dst_off));
        TRY(vfi_dnnl_new_view(b, x, &smd, &sv));
        TRY(vfi_dnnl_new_view(b, y, &dmd, &dv));
        TRY(vfi_dnnl_add_reorder(b, sv, dv));
    }
    c->p->vbuf[nd->output] = y;
fail:
    return rc;
}

/* ---- planning ------------------------------------------------------------------------------- */

/* Place the plan's arena buffers (arena.h). */
static vf_status plan_arena(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    plan *q = c->p;
    vfi_arena_item *items = vfi_mallocarray((size_t)q->n_bufs + 1, sizeof(*items));
    int *which = vfi_mallocarray((size_t)q->n_bufs + 1, sizeof(int));
    vf_status rc = items && which ? VF_OK : VF_ERR_NOMEM;
    int n = 0;
    for (int i = 0; rc == VF_OK && i < q->n_bufs; i++) {
        if (q->bufs[i].kind != BUF_ARENA)
            continue;
        items[n] = (vfi_arena_item){
            .size = q->bufs[i].size, .first = q->bufs[i].first, .last = q->bufs[i].last};
        which[n++] = i;
    }
    if (rc == VF_OK)
        rc = vfi_arena_place(items, n, VF_TENSOR_ALIGN, &q->arena_size);
    for (int k = 0; rc == VF_OK && k < n; k++)
        q->bufs[which[k]].offset = items[k].offset;
    vfi_free(items);
    vfi_free(which);
    return rc == VF_OK ? VF_OK : vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
}

/* Allocate what the plans share, sized for the largest, then create every memory object and
 * bind every step's arguments of every plan. */
static vf_status bind(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    for (int k = 0; k < c->n_plans; k++) {
        c->p = &c->plans[k];
        TRY(plan_arena(b));
        if (c->p->arena_size > c->arena_size)
            c->arena_size = c->p->arena_size;
    }
    const plan *big = &c->plans[0]; /* the largest batch, so the largest staging */
    c->arena = vfi_aligned_alloc(VF_TENSOR_ALIGN, c->arena_size ? c->arena_size : 64);
    c->scratch = vfi_aligned_alloc(VF_TENSOR_ALIGN, c->scratch_size ? c->scratch_size : 64);
    c->stage_in = vfi_aligned_alloc(VF_TENSOR_ALIGN, big->in_size);
    c->stage_out = vfi_aligned_alloc(VF_TENSOR_ALIGN, big->out_size);
    if (!c->arena || !c->scratch || !c->stage_in || !c->stage_out)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for %zu bytes of activations",
                        c->arena_size);
    memset(c->stage_in, 0, big->in_size);
    for (int k = 0; k < c->n_plans; k++) {
        plan *q = &c->plans[k];
        for (int i = 0; i < q->n_bufs; i++) {
            dbuf *d = &q->bufs[i];
            if (d->mem)
                continue; /* constants made theirs already */
            int root = i;
            size_t off = 0;
            while (q->bufs[root].kind == BUF_VIEW) {
                off += q->bufs[root].view_offset;
                root = q->bufs[root].parent;
            }
            void *handle =
                (q->bufs[root].kind == BUF_INPUT    ? (char *)c->stage_in
                 : q->bufs[root].kind == BUF_OUTPUT ? (char *)c->stage_out
                                                    : (char *)c->arena + q->bufs[root].offset) +
                off;
            CHECK(dnnl_memory_create(&d->mem, &d->md, c->engine, handle));
        }
        for (int i = 0; i < q->n_steps; i++) {
            step *st = &q->steps[i];
            for (int j = 0; j < st->n_args; j++) {
                st->args[j].arg = st->arg_kind[j];
                st->args[j].memory = q->bufs[st->arg_buf[j]].mem;
            }
            if (st->scratch) {
                CHECK(dnnl_memory_set_data_handle(st->scratch, c->scratch));
                st->args[st->n_args].arg = DNNL_ARG_SCRATCHPAD;
                st->args[st->n_args].memory = st->scratch;
            }
        }
    }
fail:
    return rc;
}

static vf_status make_summary(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    size_t cap = 4096, len = 0;
    c->summary = vfi_malloc(cap);
    if (!c->summary)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(c->summary, cap, "dnnl: %d steps, arena %.1f MiB, scratchpad %.1f MiB",
                            c->p->n_steps, c->arena_size / 1048576.0, c->scratch_size / 1048576.0);
    if (c->n_plans > 1)
        len += (size_t)snprintf(c->summary + len, cap - len, ", short batches in %d",
                                c->plans[1].batch);
    if (c->p->wino_chunked)
        len += (size_t)snprintf(c->summary + len, cap - len, ", %d Winograd layers in chunks",
                                c->p->wino_chunked);
    if (c->int8) {
        int n8 = 0;
        for (int i = 0; c->i8node && i < c->g->n_nodes; i++)
            n8 += c->i8node[i];
        len += (size_t)snprintf(c->summary + len, cap - len, ", %s%d layers in int8",
                                c->calibrating ? "calibrating, " : "", n8);
    }
    len += (size_t)snprintf(c->summary + len, cap - len, ";");
    /* distinct implementation names with counts */
    for (int i = 0; i < c->p->n_steps && len < cap - 64; i++) {
        const char *impl = c->p->steps[i].impl;
        if (!impl)
            continue;
        int seen = 0, count = 0;
        for (int j = 0; j < c->p->n_steps; j++) {
            if (c->p->steps[j].impl && !strcmp(c->p->steps[j].impl, impl)) {
                seen |= j < i;
                count++;
            }
        }
        if (!seen)
            len += (size_t)snprintf(c->summary + len, cap - len, " %s x%d", impl, count);
    }
    return VF_OK;
}

/* Build c->p: every node's steps for batches of c->p->batch. */
static vf_status build_plan(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    vf_status rc = VF_OK;
    c->p->vbuf = vfi_mallocarray((size_t)g->n_values, sizeof(int));
    if (!c->p->vbuf)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++)
        c->p->vbuf[i] = -1;

    const vf_value *in = &g->values[g->input], *outv = &g->values[g->output];
    dnnl_memory_desc_t md;
    if (in->dtype == VF_DTYPE_I64)
        TRY(vfi_dnnl_bytes_md(b, in, &md));
    else
        TRY(vfi_dnnl_plain_md(b, in, dnnl_f32, &md));
    TRY(vfi_dnnl_new_buf(b, &md, BUF_INPUT, &c->p->in_buf));
    c->p->in_size = c->p->bufs[c->p->in_buf].size;
    if (c->act_dt != dnnl_f32 && !c->f32node && in->dtype == VF_DTYPE_F32) {
        dnnl_memory_desc_t conv_md;
        TRY(vfi_dnnl_plain_md(b, in, c->act_dt, &conv_md));
        TRY(vfi_dnnl_ensure_md(b, c->p->in_buf, &conv_md, &c->p->vbuf[g->input]));
    } else {
        c->p->vbuf[g->input] = c->p->in_buf;
    }

    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        int first_step = c->p->n_steps;
        c->node = nd->name;
        switch (nd->op) {
        case VF_OP_CONV:
            rc = conv_op(b, nd);
            break;
        case VF_OP_FC:
            rc = fc_op(b, nd);
            break;
        case VF_OP_ACT:
            rc = act_op(b, nd);
            break;
        case VF_OP_POOL:
            rc = pool_op(b, nd);
            break;
        case VF_OP_BINARY:
            rc = binary_op(b, nd);
            break;
        case VF_OP_CONCAT:
            rc = nd->n_inputs + 1 > MAX_ARGS ? concat_wide_op(b, nd) : concat_op(b, nd);
            break;
        case VF_OP_SOFTMAX:
        case VF_OP_LRN:
            rc = softmax_lrn_op(b, nd);
            break;
        case VF_OP_PAD:
            rc = pad_op(b, nd);
            break;
        case VF_OP_REDUCE_MEAN:
            rc = reduce_op(b, nd);
            break;
        case VF_OP_TRANSPOSE:
        case VF_OP_RESHAPE:
            rc = relayout_op(b, nd);
            break;
        case VF_OP_GATHER:
            rc = gather_op(b, nd);
            break;
        case VF_OP_MATMUL:
            rc = vfi_dnnl_matmul_op(b, nd);
            break;
        case VF_OP_LAYERNORM:
            rc = vfi_dnnl_layernorm_op(b, nd);
            break;
        case VF_OP_SLICE:
            rc = vfi_dnnl_slice_op(b, nd);
            break;
        case VF_OP_EXPAND:
            rc = vfi_dnnl_expand_op(b, nd);
            break;
        case VF_OP_LOOKUP:
            rc = vfi_dnnl_lookup_op(b, nd);
            break;
        case VF_OP_ARGMAX:
            rc = vfi_dnnl_argmax_op(b, nd);
            break;
        case VF_OP_TAKE:
            rc = vfi_dnnl_take_op(b, nd);
            break;
        default:
            rc = vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s': op %s not in the dnnl backend",
                          nd->name, vfi_op_name(nd->op));
            break;
        }
        if (rc < 0)
            goto fail;
        if (c->p->n_steps > first_step) /* its last step writes the output */
            c->p->steps[c->p->n_steps - 1].value = nd->output;
    }
    c->node = NULL;
    TRY(vfi_dnnl_plain_md(b, outv, dnnl_f32, &md));
    TRY(vfi_dnnl_new_buf(b, &md, BUF_OUTPUT, &c->p->out_buf));
    c->p->out_size = c->p->bufs[c->p->out_buf].size;
    TRY(vfi_dnnl_add_reorder(b, c->p->vbuf[g->output], c->p->out_buf));
fail:
    c->node = NULL;
    return rc;
}

/* Batches this short or shorter run through the short-batch plan (plans[1]) in chunks when
 * that costs less than one full batch; a plan is only made for batches of 8 and more. */
#define SHORT_PLAN_MIN   8
#define SHORT_PLAN_RATIO 4

/* Build every plan, bind them to shared memory, describe them. The short plan is built first
 * and keeps the graph's weights; the full plan then shares its copies where their layouts agree
 * and releases the graph's as it goes, so at no time are there more than two copies of a
 * weight. */
static vf_status build_all(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    for (int k = c->n_plans - 1; k >= 0; k--) {
        c->p = &c->plans[k];
        c->last_plan = k == 0;
        TRY(build_plan(b));
    }
    TRY(bind(b));
    c->p = &c->plans[0];
    TRY(make_summary(b));
fail:
    return rc;
}

static vf_status dnnl_prepare(vf_backend *b, vf_graph *g, int max_batch)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    omp_set_num_threads(c->n_threads);
    c->g = g;
    c->owner_view = g;
    c->release_weights = b->opts.release_weights;
    c->n_plans = max_batch >= SHORT_PLAN_MIN ? 2 : 1;
    c->plans[0].batch = max_batch;
    c->plans[1].batch = max_batch / SHORT_PLAN_RATIO;
    if (c->int8 && g->values[g->input].dtype != VF_DTYPE_F32)
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                        "int8 for a text tower (token ids in; f32 and bf16 run it)");
    if (c->int8) {
        c->vmax = vfi_calloc((size_t)g->n_values, sizeof(float));
        if (!c->vmax)
            return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
        if (b->opts.int8_ranges) { /* known ranges: int8 plans at once */
            memcpy(c->vmax, b->opts.int8_ranges, (size_t)g->n_values * sizeof(float));
            TRY(vfi_dnnl_plan_int8(b));
        } else {
            /* f32 plans first, to observe the ranges on the first images; the graph keeps its
             * weights until the int8 plans are built from them */
            c->release_weights = 0;
            c->calibrating = 1;
            c->calib_target =
                b->opts.calibration_images > 0 ? b->opts.calibration_images : max_batch;
        }
    }
    if (c->act_dt == dnnl_bf16)
        TRY(vfi_dnnl_plan_bf16(b));
    TRY(build_all(b));
fail:
    c->node = NULL;
    return rc;
}

/* The int8 plans, from the ranges observed: the f32 plans and their memory go, the int8 ones
 * are built and bound in their place. Runs once, inside the first run(): the one time run()
 * allocates. */
static vf_status requantize(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    TRY(vfi_dnnl_plan_int8(b));
    for (int k = 0; k < MAX_PLANS; k++) {
        int batch = c->plans[k].batch;
        destroy_plan(&c->plans[k]);
        memset(&c->plans[k], 0, sizeof(c->plans[k]));
        c->plans[k].batch = batch;
    }
    vfi_free(c->arena);
    vfi_free(c->scratch);
    vfi_free(c->stage_in);
    vfi_free(c->stage_out);
    vfi_free(c->summary);
    c->arena = c->scratch = c->summary = NULL;
    c->stage_in = c->stage_out = NULL;
    c->arena_size = c->scratch_size = 0;
    c->release_weights = b->opts.release_weights;
    c->calibrating = 0;
    TRY(build_all(b));
fail:
    c->node = NULL;
    return rc;
}

static void fill(dnnl_ctx *c, const plan *q, const step *s)
{
    const dbuf *d = &q->bufs[s->fill_buf];
    void *p = (char *)c->arena + d->offset;
    if (s->fill_value == 0.0f) {
        memset(p, 0, d->size);
    } else if (d->md.data_type == dnnl_f32) {
        for (size_t i = 0; i < d->size / 4; i++)
            ((float *)p)[i] = s->fill_value;
    } else {
        uint32_t bits;
        memcpy(&bits, &s->fill_value, 4);
        uint16_t h = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        for (size_t i = 0; i < d->size / 2; i++)
            ((uint16_t *)p)[i] = h;
    }
}

/* Run n <= q->batch images through plan q. */
static vf_status run_plan(vf_backend *b, const plan *q, const void *in, float *out, int n)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    /* The plan reads and writes fixed staging buffers (views of the input need a fixed
     * address); copying one batch in and the features out costs under 1% of a forward pass. */
    memcpy(c->stage_in, in, q->in_size / (size_t)q->batch * (size_t)n);
    for (int i = 0; i < q->n_steps; i++) {
        const step *s = &q->steps[i];
        if (b->cancel && atomic_load(b->cancel)) {
            dnnl_stream_wait(c->stream);
            return vfi_fail(&b->err, VF_ERR_CANCELLED, "cancelled");
        }
        if (s->host) {
            CHECK(dnnl_stream_wait(c->stream));
            TRY(vfi_dnnl_run_host(b, q, s, n));
            continue;
        }
        if (!s->prim) {
            fill(c, q, s);
            continue;
        }
        CHECK(
            dnnl_primitive_execute(s->prim, c->stream, s->n_args + (s->scratch ? 1 : 0), s->args));
        if (c->calibrating && s->value >= 0) { /* int8: record the range of what it wrote */
            CHECK(dnnl_stream_wait(c->stream));
            c->vmax[s->value] =
                fmaxf(c->vmax[s->value], vfi_dnnl_buffer_max(q, q->vbuf[s->value], n));
        }
    }
    CHECK(dnnl_stream_wait(c->stream));
    memcpy(out, c->stage_out, q->out_size / (size_t)q->batch * (size_t)n);
fail:
    return rc;
}

/* int8 calibration: run the f32 full plan on n images, recording every value's range in vmax
 * (run_plan records what each step writes; the input and the reshape views are done here). */
static vf_status observe(vf_backend *b, const float *in, float *out, int n)
{
    dnnl_ctx *c = b->ctx;
    const plan *q = &c->plans[0];
    const vf_graph *g = c->g;
    size_t in_count = q->in_size / sizeof(float) / (size_t)q->batch * (size_t)n;
    for (size_t i = 0; i < in_count; i++) {
        float a = fabsf(in[i]);
        if (a > c->vmax[g->input] && a < INFINITY)
            c->vmax[g->input] = a;
    }
    vf_status rc = run_plan(b, q, in, out, n);
    for (int i = 0; rc >= 0 && i < g->n_nodes; i++) { /* reshapes are views of their input */
        const vf_node *nd = &g->nodes[i];
        if (nd->op == VF_OP_RESHAPE)
            c->vmax[nd->output] = fmaxf(c->vmax[nd->output], c->vmax[nd->inputs[0]]);
    }
    return rc;
}

static vf_status dnnl_run(vf_backend *b, const void *in, float *out, int n)
{
    dnnl_ctx *c = b->ctx;
    const plan *full = &c->plans[0];
    if (n < 1 || n > full->batch)
        return vfi_fail(&b->err, VF_ERR_INVALID, "batch of %d (plan is for up to %d)", n,
                        full->batch);
    omp_set_num_threads(c->n_threads);
    if (c->calibrating) { /* int8: this batch runs in f32 and observes the ranges */
        vf_status rc = observe(b, in, out, n);
        if (rc >= 0)
            c->calib_seen += n;
        if (rc >= 0 && c->calib_seen >= c->calib_target) {
            rc = requantize(b);
            if (rc >= 0)
                vfi_log(VF_LOG_INFO, "dnnl",
                        "int8: scales calibrated on the first %lld image%s; %s",
                        (long long)c->calib_seen, c->calib_seen == 1 ? "" : "s", c->summary);
        }
        return rc;
    }
    const plan *part = c->n_plans > 1 ? &c->plans[1] : NULL;
    int chunks = part ? (n + part->batch - 1) / part->batch : 0;
    if (!part || chunks * part->batch >= full->batch)
        return run_plan(b, full, in, out, n);
    size_t in_row = full->in_size / (size_t)full->batch; /* bytes */
    size_t out_row = full->out_size / (size_t)full->batch / sizeof(float);
    for (int done = 0; done < n; done += part->batch) {
        int m = n - done < part->batch ? n - done : part->batch;
        vf_status rc = run_plan(b, part, (const char *)in + (size_t)done * in_row,
                                out + (size_t)done * out_row, m);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

static const float *dnnl_int8_ranges(vf_backend *b, int64_t *n_images, int *complete)
{
    dnnl_ctx *c = b->ctx;
    if (!c || !c->int8 || c->calib_seen == 0)
        return NULL;
    *n_images = c->calib_seen;
    *complete = !c->calibrating;
    return c->vmax;
}

static const char *dnnl_describe(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    return c ? c->summary : NULL;
}

static void dnnl_library_version(char *buf, size_t size)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, size, "oneDNN %d.%d.%d (%s, %s)", v->major, v->minor, v->patch, v->hash,
             DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP ? "OpenMP" : "other threading");
}

const vf_backend_ops vfi_backend_dnnl = {
    .name = "dnnl",
    .description = "oneDNN CPU (f32, bf16 on AVX512-BF16/AMX)",
    .is_gpu = 0,
    .probe = dnnl_probe,
    .init = dnnl_init,
    .prepare = dnnl_prepare,
    .run = dnnl_run,
    .describe = dnnl_describe,
    .int8_ranges = dnnl_int8_ranges,
    .library_version = dnnl_library_version,
    .destroy = dnnl_destroy,
};
