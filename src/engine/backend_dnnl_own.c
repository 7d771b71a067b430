/*
 * backend_dnnl_own.c - vidfeat's own convolutions (kernels/conv.h) in the oneDNN plan: which
 * implementation runs a convolution (oneDNN's, or one of vidfeat's, timed once on this machine
 * and kept in the plan cache: engine/plan_cache.h), and the host step that runs vidfeat's.
 * Only where the instructions in use are AVX2's (docs/ARCHITECTURE.md says why).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "engine/plan_cache.h"
#include "kernels/conv.h"
#define VF_DNNL_FILE "backend_dnnl_own.c"
#include "engine/backend_dnnl_int.h"

/* The fused activation a as the clamp vidfeat's kernels apply to their outputs, lo..hi (none,
 * ReLU, a clip); 0 when it is another (oneDNN runs the node). */
static int act_bounds(const vf_act *a, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (a->kind == VF_ACT_RELU && a->alpha == 0.0f)
        *lo = 0.0f;
    else if (a->kind == VF_ACT_CLIP)
        *lo = a->alpha, *hi = a->beta;
    else if (a->kind != VF_ACT_NONE)
        return 0;
    return 1;
}

/* Node nd as one of vidfeat's convolutions: f32, 2-D, one group, an activation they apply (none,
 * ReLU, a clip); 0 when it is not (oneDNN runs it). */
static int as_vfk(const dnnl_ctx *c, const vf_node *nd, const vf_conv_window *cw, vfk_conv *k)
{
    const vf_value *xv = &c->g->values[nd->inputs[0]], *yv = &c->g->values[nd->output];
    const vf_value *wv = &c->g->values[nd->inputs[1]];
    const vf_act *a = &cw->act;
    if (nd->op != VF_OP_CONV || cw->group != 1 || c->act_dt != dnnl_f32 ||
        (c->vdt && vfi_dnnl_runs_int8(c, nd)) || xv->rank != 4 || wv->rank != 4)
        return 0;
    float lo, hi;
    if (!act_bounds(a, &lo, &hi))
        return 0;
    *k = (vfk_conv){.ic = (int)xv->dims[1],
                    .oc = (int)yv->dims[1],
                    .ih = (int)xv->dims[2],
                    .iw = (int)xv->dims[3],
                    .oh = (int)yv->dims[2],
                    .ow = (int)yv->dims[3],
                    .kh = (int)cw->ax.kernel[0],
                    .kw = (int)cw->ax.kernel[1],
                    .sh = (int)cw->ax.stride[0],
                    .sw = (int)cw->ax.stride[1],
                    .dh = (int)cw->ax.dilation[0],
                    .dw = (int)cw->ax.dilation[1],
                    .ph = (int)cw->ax.pad_begin[0],
                    .pw = (int)cw->ax.pad_begin[1],
                    .lo = lo,
                    .hi = hi};
    return 1;
}

/* nChw8c, the layout vidfeat's convolutions read and write, of value v at the plan's batch. */
static vf_status blocked_md(vf_backend *b, const vf_value *v, dnnl_memory_desc_t *md)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    dnnl_dims_t d;
    vfi_dnnl_value_dims(c, v, d);
    CHECK(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_aBcd8b));
fail:
    return rc;
}

/* The names the plan cache and VIDFEAT_CONV give the candidates: oneDNN's, then vfk_algo's. */
static const char *const conv_impls[] = {"dnnl", "direct", "winograd"};
enum { IMPL_DNNL = 0, IMPL_VFK = 1 }; /* IMPL_VFK + vfk_algo */
#define N_IMPLS ((int)(sizeof(conv_impls) / sizeof(conv_impls[0])))
/* Images a candidate is timed on (its runs per image, not per batch, are compared). */
#define TIMING_IMAGES 2
#define TIMING_RUNS   2

/* Seconds oneDNN's primitive pd takes, the fastest of TIMING_RUNS after a first run, on buffers
 * of zeros (no denormals). */
static vf_status time_dnnl(vf_backend *b, const_dnnl_primitive_desc_t pd, double *secs)
{
    dnnl_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    static const dnnl_query_t q[5] = {dnnl_query_src_md, dnnl_query_weights_md,
                                      dnnl_query_weights_md, dnnl_query_dst_md,
                                      dnnl_query_scratchpad_md};
    static const int index[5] = {0, 0, 1, 0, 0}; /* the second weights are the bias */
    static const int kinds[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST,
                                 DNNL_ARG_SCRATCHPAD};
    dnnl_memory_t mem[5] = {NULL, NULL, NULL, NULL, NULL};
    void *data[5] = {NULL, NULL, NULL, NULL, NULL};
    dnnl_primitive_t prim = NULL;
    dnnl_exec_arg_t args[5];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q[i], index[i]);
        size_t size = md ? dnnl_memory_desc_get_size(md) : 0;
        if (!size)
            continue;
        if (!(data[i] = vfi_aligned_alloc(64, size))) {
            rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory timing a layer");
            goto fail;
        }
        memset(data[i], 0, size);
        CHECK(dnnl_memory_create(&mem[i], md, c->engine, data[i]));
        args[n++] = (dnnl_exec_arg_t){kinds[i], mem[i]};
    }
    CHECK(dnnl_primitive_create(&prim, pd));
    *secs = INFINITY;
    for (int r = 0; r <= TIMING_RUNS; r++) {
        double t0 = vfi_now_s();
        CHECK(dnnl_primitive_execute(prim, c->stream, n, args));
        CHECK(dnnl_stream_wait(c->stream));
        if (r > 0 && vfi_now_s() - t0 < *secs)
            *secs = vfi_now_s() - t0;
    }
fail:
    if (prim)
        dnnl_primitive_destroy(prim);
    for (int i = 0; i < 5; i++) {
        if (mem[i])
            dnnl_memory_destroy(mem[i]);
        vfi_free(data[i]);
    }
    return rc;
}

/* Seconds vidfeat's algo takes on n images of zeros, as time_dnnl. */
static vf_status time_vfk(vf_backend *b, const vfk_conv *k, vfk_algo algo, int n, double *secs)
{
    dnnl_ctx *c = b->ctx;
    size_t xs = (size_t)n * vfk_padded(k->ic) * k->ih * k->iw,
           ys = (size_t)n * vfk_padded(k->oc) * k->oh * k->ow, ws = vfk_conv_packed_size(k, algo),
           ss = vfk_conv_scratch_size(k, algo, n, c->n_threads);
    float *x = vfi_aligned_alloc(64, xs * 4), *y = vfi_aligned_alloc(64, ys * 4);
    float *w = vfi_aligned_alloc(64, ws * 4), *s = vfi_aligned_alloc(64, ss * 4 + 64);
    vf_status rc = VF_OK;
    if (!x || !y || !w || !s) {
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory timing a layer");
    } else {
        memset(x, 0, xs * 4);
        memset(w, 0, ws * 4);
        *secs = INFINITY;
        for (int r = 0; r <= TIMING_RUNS; r++) {
            double t0 = vfi_now_s();
            vfk_conv_run(k, algo, &c->isa, n, x, w, NULL, s, y);
            if (r > 0 && vfi_now_s() - t0 < *secs)
                *secs = vfi_now_s() - t0;
        }
    }
    vfi_free(x);
    vfi_free(y);
    vfi_free(w);
    vfi_free(s);
    return rc;
}

/* Which implementation runs node nd (IMPL_DNNL, or IMPL_VFK + algo): VIDFEAT_CONV's when it names
 * one that can; else the plan cache's; else each candidate timed on this machine (oneDNN as the
 * plan would run it: Winograd where asked and it has one), the fastest kept in the cache. Only
 * where the instructions in use are AVX2's: there oneDNN's and vidfeat's layouts agree (nChw8c)
 * and oneDNN 2.6 is weak; on AVX-512 its own kernels are the faster. */
static vf_status choose_conv(vf_backend *b, const vf_node *nd, const vf_conv_window *cw,
                             const_dnnl_primitive_attr_t attr, int try_wino, vfk_conv *k, int *impl)
{
    dnnl_ctx *c = b->ctx;
    *impl = IMPL_DNNL;
    if (c->isa.level != VF_ISA_AVX2 || !as_vfk(c, nd, cw, k) || !c->g->values[nd->inputs[1]].data)
        return VF_OK;
    int can[N_IMPLS] = {1, 0, 0};
    int any = 0;
    for (int a = 0; a < VFK_N_ALGOS; a++)
        any |= can[IMPL_VFK + a] = vfk_conv_supported(k, (vfk_algo)a, &c->isa, NULL);
    if (!any)
        return VF_OK;
    const char *forced = getenv("VIDFEAT_CONV");
    for (int i = 0; forced && i < N_IMPLS; i++) {
        if (!strcmp(forced, conv_impls[i]) && can[i]) {
            *impl = i;
            return VF_OK;
        }
    }
    char key[400];
    snprintf(key, sizeof(key),
             "%s|%s|%d threads|conv %dx%d stride %dx%d dilation %dx%d pad %d,%d in %dx%dx%d out "
             "%dx%dx%d|f32|kernels %d",
             c->isa.cpu_key, vfi_isa_name(c->isa.level), c->n_threads, k->kh, k->kw, k->sh, k->sw,
             k->dh, k->dw, k->ph, k->pw, k->ic, k->ih, k->iw, k->oc, k->oh, k->ow, VFK_REVISION);
    if (!c->plans_cache && !(c->plans_cache = vfi_plan_cache_open())) /* the first to ask */
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
    const char *known = vfi_plan_cache_get(c->plans_cache, key);
    for (int i = 0; known && i < N_IMPLS; i++) {
        if (!strcmp(known, conv_impls[i]) && can[i]) {
            *impl = i;
            return VF_OK;
        }
    }
    vf_status rc = VF_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t w_user, b_md;
    int n = c->p->batch < TIMING_IMAGES ? c->p->batch : TIMING_IMAGES;
    double secs[N_IMPLS];
    TRY(vfi_dnnl_conv_pd(b, nd, n, try_wino ? CONV_WINO : CONV_DIRECT, attr, &pd, &w_user, &b_md));
    TRY(time_dnnl(b, pd, &secs[IMPL_DNNL]));
    char detail[256];
    int len = snprintf(detail, sizeof(detail), "%s %.3f ms", conv_impls[IMPL_DNNL],
                       secs[IMPL_DNNL] * 1e3 / n);
    for (int i = IMPL_VFK; i < N_IMPLS; i++) {
        if (!can[i])
            continue;
        TRY(time_vfk(b, k, (vfk_algo)(i - IMPL_VFK), n, &secs[i]));
        if (len >= 0 && (size_t)len < sizeof(detail))
            len += snprintf(detail + len, sizeof(detail) - (size_t)len, ", %s %.3f ms",
                            conv_impls[i], secs[i] * 1e3 / n);
        if (secs[i] < secs[*impl])
            *impl = i;
    }
    vfi_log(VF_LOG_DEBUG, "dnnl", "node '%s': %s (an image: %s)", nd->name, conv_impls[*impl],
            detail);
    if (vfi_plan_cache_put(c->plans_cache, key, conv_impls[*impl], detail) < 0)
        rc = vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory");
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* A host step's work: vidfeat's convolution algo (s->kernel) of node nd on its first n images,
 * over the buffers input, packed weights, output, bias (when the node has one). */
static vf_status run_own(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data, int n,
                         int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)batch;
    vf_conv_window cw;
    vfk_conv k;
    vfi_conv_window(c->g, nd, &cw);
    if (!as_vfk(c, nd, &cw, &k))
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': not one of vidfeat's convolutions",
                        nd->name);
    vfk_conv_run(&k, (vfk_algo)s->kernel, &c->isa, n, data[0], data[1],
                 nd->n_inputs > 2 ? data[3] : NULL, c->scratch, data[2]);
    return VF_OK;
}

/* Node nd by vidfeat's convolution algo (a host step): its input in nChw8c (a reorder where its
 * producer wrote another layout), its output in nChw8c, the weights packed once, the scratch in
 * the plan's shared scratchpad. */
static vf_status conv_vfk(vf_backend *b, const vf_node *nd, const vfk_conv *k, vfk_algo algo)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    vf_status rc = VF_OK;
    size_t ws = vfk_conv_packed_size(k, algo);
    float *packed = vfi_aligned_alloc(64, ws * sizeof(float));
    if (!packed)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for '%s'", wv->name);
    vfk_conv_pack(k, algo, wv->data, packed);
    dnnl_memory_desc_t xmd, ymd, pmd, b_md;
    dnnl_dims_t pd = {(int64_t)ws}, bd = {wv->dims[0]};
    int bufs[4], n_bufs = 3;
    TRY(blocked_md(b, &g->values[nd->inputs[0]], &xmd));
    TRY(blocked_md(b, &g->values[nd->output], &ymd));
    CHECK(dnnl_memory_desc_init_by_tag(&pmd, 1, pd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &xmd, &bufs[0]));
    TRY(vfi_dnnl_upload_data(b, wv, packed, &pmd, &pmd, &bufs[1]));
    TRY(vfi_dnnl_new_buf(b, &ymd, BUF_ARENA, &bufs[2]));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &b_md, &b_md, &bufs[n_bufs++]));
    TRY(vfi_dnnl_add_host(b, nd, run_own, n_bufs, bufs));
    c->p->steps[c->p->n_steps - 1].kernel = (int)algo;
    c->p->steps[c->p->n_steps - 1].impl =
        algo == VFK_WINOGRAD ? "vidfeat:winograd_avx2" : "vidfeat:direct_avx2";
    size_t ss = vfk_conv_scratch_size(k, algo, c->p->batch, c->n_threads) * sizeof(float);
    if (ss > c->scratch_size)
        c->scratch_size = ss;
    c->p->vbuf[nd->output] = bufs[2];
fail:
    vfi_free(packed);
    return rc;
}

vf_status vfi_dnnl_conv_own(vf_backend *b, const vf_node *nd, const vf_conv_window *cw,
                            const_dnnl_primitive_attr_t attr, int try_wino, int *own)
{
    vfk_conv k;
    int impl;
    *own = 0;
    vf_status rc = choose_conv(b, nd, cw, attr, try_wino, &k, &impl);
    if (rc < 0 || impl == IMPL_DNNL)
        return rc;
    *own = 1;
    return conv_vfk(b, nd, &k, (vfk_algo)(impl - IMPL_VFK));
}

/* ---- inner products: one order of sums for every row -------------------------------------- */

/* An inner product as vidfeat's direct kernel computes it: a 1x1 convolution over one picture
 * whose pixels are the batch's rows, so every row's sums run in one order whatever the batch
 * and the row's place in it. oneDNN 2.6's AVX2 GEMM rounds a block's last rows another way: a
 * frame's vector changed with its neighbours in the batch (a file extracted alone, or after
 * another, or resumed, gave other bits). */
static int as_fc(const dnnl_ctx *c, const vf_node *nd, int64_t rows, vfk_conv *k)
{
    const vf_value *xv = &c->g->values[nd->inputs[0]], *wv = &c->g->values[nd->inputs[1]];
    const vf_act *a = &nd->p.fc.act;
    if (c->act_dt != dnnl_f32 || (c->vdt && vfi_dnnl_runs_int8(c, nd)) || xv->rank != 2 ||
        xv->dims[0] != 1 || wv->rank != 2)
        return 0; /* a transformer's tokens ([N x tokens, K]) stay oneDNN's */
    float lo, hi;
    if (!act_bounds(a, &lo, &hi))
        return 0;
    *k = (vfk_conv){.ic = (int)wv->dims[1],
                    .oc = (int)wv->dims[0],
                    .ih = 1,
                    .iw = (int)rows,
                    .oh = 1,
                    .ow = (int)rows,
                    .kh = 1,
                    .kw = 1,
                    .sh = 1,
                    .sw = 1,
                    .dh = 1,
                    .dw = 1,
                    .lo = lo,
                    .hi = hi};
    return 1;
}

static vf_status run_fc(vf_backend *b, const vf_node *nd, const dstep *s, void *const *data, int n,
                        int64_t batch)
{
    dnnl_ctx *c = b->ctx;
    (void)s, (void)n; /* the plan's rows, all of them: each is computed alone */
    vfk_conv k;
    if (!as_fc(c, nd, batch, &k))
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': not one of vidfeat's products",
                        nd->name);
    vfk_conv_run(&k, VFK_DIRECT, &c->isa, 1, data[0], data[1], nd->n_inputs > 2 ? data[3] : NULL,
                 c->scratch, data[2]);
    return VF_OK;
}

/* The plain [rows][cols] buffer buf seen as one picture of cols channels and rows pixels (a
 * view: *view), and that picture's nChw8c descriptor (blocked). */
static vf_status rows_as_picture(vf_backend *b, int buf, int64_t rows, int64_t cols, int *view,
                                 dnnl_memory_desc_t *blocked)
{
    vf_status rc = VF_OK;
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {1, cols, 1, rows}, st = {rows * cols, 1, rows * cols, cols};
    CHECK(dnnl_memory_desc_init_by_strides(&md, 4, d, dnnl_f32, st));
    CHECK(dnnl_memory_desc_init_by_tag(blocked, 4, d, dnnl_f32, dnnl_aBcd8b));
    TRY(vfi_dnnl_new_view(b, buf, &md, view));
fail:
    return rc;
}

vf_status vfi_dnnl_fc_own(vf_backend *b, const vf_node *nd, int *own)
{
    dnnl_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *wv = &g->values[nd->inputs[1]];
    int64_t rows = c->p->batch;
    vfk_conv k;
    *own = 0;
    if (c->isa.level != VF_ISA_AVX2 || !wv->data || !as_fc(c, nd, rows, &k) ||
        !vfk_conv_supported(&k, VFK_DIRECT, &c->isa, NULL))
        return VF_OK;
    vf_status rc = VF_OK;
    size_t ws = vfk_conv_packed_size(&k, VFK_DIRECT);
    float *packed = vfi_aligned_alloc(64, ws * sizeof(float));
    if (!packed)
        return vfi_fail(&b->err, VF_ERR_NOMEM, "out of memory for '%s'", wv->name);
    vfk_conv_pack(&k, VFK_DIRECT, wv->data, packed); /* [oc][ic] is [oc][ic][1][1] */
    dnnl_memory_desc_t plain_x, plain_y, xb_md, yb_md, pmd, b_md;
    dnnl_dims_t xd = {rows, k.ic}, yd = {rows, k.oc}, pd = {(int64_t)ws}, bd = {k.oc};
    int x, xview, yview, y, bufs[4], n_bufs = 3;
    CHECK(dnnl_memory_desc_init_by_tag(&plain_x, 2, xd, dnnl_f32, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&plain_y, 2, yd, dnnl_f32, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&pmd, 1, pd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    TRY(vfi_dnnl_ensure_md(b, c->p->vbuf[nd->inputs[0]], &plain_x, &x));
    TRY(rows_as_picture(b, x, rows, k.ic, &xview, &xb_md));
    TRY(vfi_dnnl_ensure_md(b, xview, &xb_md, &bufs[0]));
    TRY(vfi_dnnl_upload_data(b, wv, packed, &pmd, &pmd, &bufs[1]));
    TRY(vfi_dnnl_new_buf(b, &plain_y, BUF_ARENA, &y));
    TRY(rows_as_picture(b, y, rows, k.oc, &yview, &yb_md));
    TRY(vfi_dnnl_new_buf(b, &yb_md, BUF_ARENA, &bufs[2]));
    if (nd->n_inputs > 2)
        TRY(vfi_dnnl_upload_const(b, &g->values[nd->inputs[2]], &b_md, &b_md, &bufs[n_bufs++]));
    TRY(vfi_dnnl_add_host(b, nd, run_fc, n_bufs, bufs));
    c->p->steps[c->p->n_steps - 1].kernel = (int)VFK_DIRECT;
    c->p->steps[c->p->n_steps - 1].impl = "vidfeat:direct_avx2";
    TRY(vfi_dnnl_add_reorder(b, bufs[2], yview));
    c->p->vbuf[nd->output] = y;
    *own = 1;
fail:
    vfi_free(packed);
    return rc;
}
