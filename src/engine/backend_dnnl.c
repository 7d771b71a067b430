/*
 * backend_dnnl.c - the CPU backend on oneDNN 2.6 (the 2.x C API): the lowering table, planning
 * and running (the lowerings are in backend_dnnl_cnn.c and backend_dnnl_ops.c, the plan's
 * helpers in backend_dnnl_plan.c). prepare() and run() are called on the inference thread;
 * oneDNN's OpenMP threads do the work underneath.
 *
 * prepare() turns the graph into a flat list of steps, each one oneDNN primitive (or a fill)
 * with its arguments bound: each node through its operator's lowering, one primitive per node,
 * activations in whatever blocked layout oneDNN prefers for convolutions (format_tag any),
 * activations fused as post-ops, and a reorder only where a consumer wants another layout than its
 * producer made (cached, so a tensor read by four Inception branches is reordered once). Weights
 * are reordered once into the layout their primitive chose. Every activation is a "buffer" with a
 * lifetime [first step, last step]; all buffers are then packed into one arena by a first-fit on
 * address ranges among buffers whose lifetimes overlap, so the arena is close to the peak of
 * simultaneously live activations rather than their sum. Scratchpads are user-managed and share one
 * allocation.
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
#include "core/clock.h"
#include "core/cpus.h"
#include "core/json.h"
#include "core/path.h"
#include "engine/backend.h"
#include "engine/plan_cache.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/status.h"
#define VF_DNNL_FILE "backend_dnnl.c"
#include "engine/backend_dnnl_int.h"

/* ---- probe / init / destroy ---------------------------------------------------------------- */

static vf_status dnnl_probe(vf_err *err)
{
    (void)err;
    return VF_OK; /* oneDNN runs on any x86-64 CPU; it picks its kernels at run time */
}

/* The instructions this backend may use: the CPU's under VIDFEAT_ISA's cap (isa.h), handed to
 * oneDNN before its first kernel is made (it keeps the first cap a process sets: later ones
 * must agree), then lowered to what oneDNN says it uses, which ONEDNN_MAX_CPU_ISA may cap on
 * its own. Into c->isa. */
static vf_status use_isa(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = vfi_isa_get(&c->isa, &b->err);
    if (rc < 0)
        return rc;
    if (c->isa.cap && !strncmp(c->isa.cap, "VIDFEAT_ISA", 11)) { /* oneDNN reads its own */
        dnnl_cpu_isa_t cap = c->isa.level >= VF_ISA_AVX512 ? dnnl_cpu_isa_avx512_core_bf16
                             : c->isa.level == VF_ISA_AVX2 ? dnnl_cpu_isa_avx2
                                                           : dnnl_cpu_isa_sse41;
        dnnl_set_max_cpu_isa(cap); /* refused when already set: checked below */
    }
    unsigned eff = (unsigned)dnnl_get_effective_cpu_isa();
#define HAS_(isa) ((eff & (unsigned)(isa)) == (unsigned)(isa))
    vf_isa_level dl = HAS_(dnnl_cpu_isa_avx512_core_amx) ? VF_ISA_AMX
                      : HAS_(dnnl_cpu_isa_avx512_core)   ? VF_ISA_AVX512
                      : HAS_(dnnl_cpu_isa_avx2)          ? VF_ISA_AVX2
                                                         : VF_ISA_GENERIC;
    if (!HAS_(dnnl_cpu_isa_avx512_core_bf16))
        c->isa.features &= ~(unsigned)VF_ISA_F_AVX512_BF16;
    if (!HAS_(dnnl_cpu_isa_avx512_core_vnni))
        c->isa.features &= ~(unsigned)VF_ISA_F_AVX512_VNNI;
#undef HAS_
    if (dl < VF_ISA_AMX)
        c->isa.features &= ~(unsigned)(VF_ISA_F_AMX_BF16 | VF_ISA_F_AMX_INT8);
    if (dl > c->isa.level && c->isa.cap)
        vfi_log(VF_LOG_WARNING, "dnnl",
                "%s came after this process's first oneDNN kernel: oneDNN goes on with %s",
                c->isa.cap, vfi_isa_name(dl));
    else if (dl < c->isa.level)
        c->isa.level = dl;
    char desc[96];
    vfi_isa_describe(&c->isa, desc, sizeof(desc));
    vfi_log(VF_LOG_INFO, "dnnl", "%s: %s%s%s", c->isa.cpu, desc, c->isa.cap ? ", capped by " : "",
            c->isa.cap ? c->isa.cap : "");
    return VF_OK;
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
    if ((rc = use_isa(b)) < 0)
        return rc;
    if (opts->precision == VF_PRECISION_BF16 && !vfi_isa_has_bf16(&c->isa)) {
        if (c->isa.cap)
            return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                            "bf16 needs AVX512-BF16 or AMX, which %s leaves out: run in f32 "
                            "(--precision f32), or without that cap",
                            c->isa.cap);
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED,
                        "bf16 needs a CPU with AVX512-BF16 or AMX, and this one (%s) has "
                        "neither: run in f32 (--precision f32)",
                        c->isa.cpu);
    }
    c->act_dt = opts->precision == VF_PRECISION_BF16 ? dnnl_bf16 : dnnl_f32;
    const char *prof = getenv("VIDFEAT_PROFILE");
    if (prof && prof[0] && !(c->profile_path = vfi_strdup(prof)))
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    const char *wino = getenv("VIDFEAT_DNNL_WINOGRAD");
    c->winograd = opts->precision == VF_PRECISION_F32 && !(wino && !strcmp(wino, "0"));
    CHECK(dnnl_engine_create(&c->engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags));
fail:
    return rc;
}

static void destroy_plan(dplan *p)
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

/* VIDFEAT_PROFILE: the full plan's steps, each with its node, operator, implementation, runs,
 * milliseconds in all and the node's arithmetic per run (GFLOP, as written: vfi_node_flops), as
 * JSON to c->profile_path (scripts/profile-layers.py reads it). A failure to write is logged. */
static void write_profile(const dnnl_ctx *c)
{
    const dplan *q = &c->plans[0];
    vf_json *doc = vfi_json_new_object(), *steps = vfi_json_new_array();
    char isa[96];
    vfi_isa_describe(&c->isa, isa, sizeof(isa));
    int bad = vfi_json_add(doc, "steps", steps) < 0; /* taken over, also on failure */
    bad = bad || vfi_json_add_str(doc, "cpu", c->isa.cpu) < 0 ||
          vfi_json_add_str(doc, "isa", isa) < 0 || vfi_json_add_str(doc, "cap", c->isa.cap) < 0 ||
          vfi_json_add_int(doc, "threads", c->n_threads) < 0 ||
          vfi_json_add_int(doc, "batch", q->batch) < 0 ||
          vfi_json_add_str(doc, "precision",
                           c->int8                  ? "int8"
                           : c->act_dt == dnnl_bf16 ? "bf16"
                                                    : "f32") < 0;
    for (int i = 0; !bad && i < q->n_steps; i++) {
        const dstep *st = &q->steps[i];
        const vf_node *nd = st->node >= 0 ? &c->g->nodes[st->node] : NULL;
        vf_json *o = vfi_json_new_object();
        const char *impl = st->impl ? st->impl : st->host ? "vidfeat" : st->prim ? "?" : "fill";
        bad |= !o || vfi_json_add_str(o, "node", nd ? nd->name : NULL) < 0 ||
               vfi_json_add_str(o, "op", nd ? vfi_op_name(nd->op) : NULL) < 0 ||
               vfi_json_add_str(o, "impl", impl) < 0 ||
               vfi_json_add_bool(o, "last", st->value >= 0) < 0 ||
               vfi_json_add_int(o, "calls", c->step_calls[i]) < 0 ||
               vfi_json_add_real(o, "ms", c->step_s[i] * 1e3, 4) < 0 ||
               vfi_json_add_real(
                   o, "gflop",
                   nd && st->value >= 0 ? vfi_node_flops(c->g, nd) * q->batch / 1e9 : 0.0, 6) < 0 ||
               vfi_json_push(steps, o) < 0;
    }
    FILE *f = NULL;
    char *tmp = NULL;
    vf_err err = {VF_OK, ""};
    if (bad || vfi_replace_open(c->profile_path, &f, &tmp, &err) < 0) {
        bad = 1;
    } else {
        vfi_json_write(f, doc, 1); /* a write error shows in ferror(f): the file is not kept */
        bad = vfi_replace_close(f, tmp, c->profile_path, &err) < 0;
    }
    if (bad)
        vfi_log(VF_LOG_WARNING, "dnnl", "VIDFEAT_PROFILE=%s: not written%s%s", c->profile_path,
                err.msg[0] ? ": " : "", err.msg);
    vfi_json_free(&doc);
}

static void dnnl_destroy(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    if (!c)
        return;
    if (c->profile_path && c->step_s)
        write_profile(c);
    vfi_free(c->profile_path);
    vfi_free(c->step_s);
    vfi_free(c->step_calls);
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

/* Place the plan's arena buffers (arena.h). */
/* ---- the lowering table ------------------------------------------------------------------------
 */

/* Each operator's lowering, indexed by operator: every operator of op_list.h has one here (an
 * operator without one is refused when a graph is prepared, by dnnl_supports). */
static const vfi_dnnl_lowering lowerings[VF_OP_COUNT_] = {
    [VF_OP_CONV] = vfi_dnnl_conv_op,
    [VF_OP_FC] = vfi_dnnl_fc_op,
    [VF_OP_ACT] = vfi_dnnl_act_op,
    [VF_OP_POOL] = vfi_dnnl_pool_op,
    [VF_OP_BINARY] = vfi_dnnl_binary_op,
    [VF_OP_CONCAT] = vfi_dnnl_concat_op,
    [VF_OP_SOFTMAX] = vfi_dnnl_softmax_lrn_op,
    [VF_OP_LRN] = vfi_dnnl_softmax_lrn_op,
    [VF_OP_PAD] = vfi_dnnl_pad_op,
    [VF_OP_REDUCE_MEAN] = vfi_dnnl_reduce_op,
    [VF_OP_TRANSPOSE] = vfi_dnnl_relayout_op,
    [VF_OP_RESHAPE] = vfi_dnnl_relayout_op,
    [VF_OP_GATHER] = vfi_dnnl_gather_op,
    [VF_OP_MATMUL] = vfi_dnnl_matmul_op,
    [VF_OP_LAYERNORM] = vfi_dnnl_layernorm_op,
    [VF_OP_SLICE] = vfi_dnnl_slice_op,
    [VF_OP_EXPAND] = vfi_dnnl_expand_op,
    [VF_OP_LOOKUP] = vfi_dnnl_lookup_op,
    [VF_OP_ARGMAX] = vfi_dnnl_argmax_op,
    [VF_OP_TAKE] = vfi_dnnl_take_op,
    [VF_OP_POOL3D] = vfi_dnnl_pool_op,
    [VF_OP_CONV3D] = vfi_dnnl_conv_op,
    [VF_OP_PRELU] = vfi_dnnl_prelu_op,
};

static vf_status dnnl_supports(vf_backend *b, const vf_graph *g, const vf_node *nd, vf_err *err)
{
    (void)b, (void)g, (void)err;
    return (unsigned)nd->op < VF_OP_COUNT_ && lowerings[nd->op] ? VF_OK : VF_ERR_UNSUPPORTED;
}

/* ---- planning ------------------------------------------------------------------------------- */

static vf_status plan_arena(vf_backend *b)
{
    dnnl_ctx *c = b->ctx;
    dplan *q = c->p;
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
    const dplan *big = &c->plans[0]; /* the largest batch, so the largest staging */
    c->arena = vfi_aligned_alloc(VF_TENSOR_ALIGN, c->arena_size ? c->arena_size : 64);
    c->scratch = vfi_aligned_alloc(VF_TENSOR_ALIGN, c->scratch_size ? c->scratch_size : 64);
    c->stage_in = vfi_aligned_alloc(VF_TENSOR_ALIGN, big->in_size);
    c->stage_out = vfi_aligned_alloc(VF_TENSOR_ALIGN, big->out_size);
    if (!c->arena || !c->scratch || !c->stage_in || !c->stage_out)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for %zu bytes of activations",
                        c->arena_size);
    memset(c->stage_in, 0, big->in_size);
    for (int k = 0; k < c->n_plans; k++) {
        dplan *q = &c->plans[k];
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
            dstep *st = &q->steps[i];
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
        c->node = nd;
        rc = lowerings[nd->op](b, nd);
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
    if (c->profile_path) { /* the full plan's steps, timed from now on */
        vfi_free(c->step_s);
        vfi_free(c->step_calls);
        c->step_s = vfi_calloc((size_t)c->p->n_steps + 1, sizeof(double));
        c->step_calls = vfi_calloc((size_t)c->p->n_steps + 1, sizeof(int64_t));
        if (!c->step_s || !c->step_calls)
            rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    }
fail:
    return rc;
}

static vf_status dnnl_prepare(vf_backend *b, vf_graph *g, int max_batch)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = vfi_backend_check_ops(b, g);
    if (rc < 0)
        return rc;
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
    rc = build_all(b);
    /* opened when a layer first asked it; out of memory writing it fails the plan (as any) */
    if (vfi_plan_cache_close(&c->plans_cache, &b->err) < 0 && rc >= 0)
        rc = VF_ERR_NOMEM;
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
    rc = build_all(b);
    if (vfi_plan_cache_close(&c->plans_cache, &b->err) < 0 && rc >= 0)
        rc = VF_ERR_NOMEM;
    if (rc < 0)
        goto fail;
fail:
    c->node = NULL;
    return rc;
}

static void fill(dnnl_ctx *c, const dplan *q, const dstep *s)
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

/* Host step s of plan q for its first n inputs (the rest of the batch as padding): its
 * lowering's runner, over its buffers' memory. */
static vf_status run_host(vf_backend *b, const dplan *q, const dstep *s, int n)
{
    dnnl_ctx *c = b->ctx;
    void *data[MAX_ARGS] = {NULL};
    for (int i = 0; i < s->n_args; i++)
        dnnl_memory_get_data_handle(q->bufs[s->arg_buf[i]].mem, &data[i]);
    return s->run_host(b, &c->g->nodes[s->host - 1], s, data, n, q->batch);
}

static vf_status run_plan(vf_backend *b, const dplan *q, const void *in, float *out, int n)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    /* The plan reads and writes fixed staging buffers (views of the input need a fixed
     * address); copying one batch in and the features out costs under 1% of a forward pass. */
    memcpy(c->stage_in, in, q->in_size / (size_t)q->batch * (size_t)n);
    int timed = c->step_s && q == &c->plans[0];
    for (int i = 0; i < q->n_steps; i++) {
        const dstep *s = &q->steps[i];
        if (b->cancel && atomic_load(b->cancel)) {
            dnnl_stream_wait(c->stream);
            return vfi_fail(&b->err, VF_ERR_CANCELLED, "cancelled");
        }
        double t0 = timed ? vfi_now_s() : 0.0;
        if (s->host) {
            CHECK(dnnl_stream_wait(c->stream));
            TRY(run_host(b, q, s, n));
        } else if (!s->prim) {
            fill(c, q, s);
        } else {
            CHECK(dnnl_primitive_execute(s->prim, c->stream, s->n_args + (s->scratch ? 1 : 0),
                                         s->args));
        }
        if (timed) {
            CHECK(dnnl_stream_wait(c->stream));
            c->step_s[i] += vfi_now_s() - t0;
            c->step_calls[i]++;
        }
        if (s->host || !s->prim)
            continue;
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
    const dplan *q = &c->plans[0];
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
    const dplan *full = &c->plans[0];
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
    const dplan *part = c->n_plans > 1 ? &c->plans[1] : NULL;
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
    .supports = dnnl_supports,
    .prepare = dnnl_prepare,
    .run = dnnl_run,
    .describe = dnnl_describe,
    .int8_ranges = dnnl_int8_ranges,
    .library_version = dnnl_library_version,
    .destroy = dnnl_destroy,
};
