/*
 * precision_auto.c - --precision auto: f32 or bf16, measured once per model and machine (see
 * precision_auto.h). The measure: both precisions prepared from the same graph, a batch of
 * PROBE_IMAGES generated inputs (smooth patterns with some noise, in the range normalised
 * pictures and log-mel patches have) run through each, the faster of a few runs timed after one
 * to warm up, and every image's features compared.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/precision_auto.h"
#include "engine/plan_cache.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/digest.h"
#include "core/isa.h"
#include "core/log.h"
#include "core/mem.h"

#define PROBE_IMAGES 4
#define TIMED_RUNS   3
/* bf16 is chosen when its worst feature cosine to f32 is at least this (the bf16 check)... */
#define MIN_COSINE 0.999
/* ...and it takes at most this share of f32's time: a gain within timing noise would let two
 * measures of one machine disagree, and their workers redo each other's files. */
#define MAX_TIME_SHARE 0.9

/* Deterministic inputs for n images of the graph's input: per plane (every index before the
 * last two dimensions) a different smooth pattern, plus a little hashed noise. */
static void fill_probe(const vf_value *iv, float *x, int n)
{
    int64_t w = iv->dims[iv->rank - 1], h = iv->rank >= 2 ? iv->dims[iv->rank - 2] : 1;
    int64_t planes = (int64_t)n * vfi_value_sample_numel(iv) / (w * h);
    uint32_t state = 0x9e3779b9u;
    for (int64_t p = 0; p < planes; p++) {
        double fx = 0.05 + 0.03 * (double)(p % 5), fy = 0.04 + 0.02 * (double)(p % 3);
        for (int64_t y = 0; y < h; y++) {
            for (int64_t xx = 0; xx < w; xx++) {
                state = state * 1664525u + 1013904223u;
                double noise = (double)(state >> 8) / (double)(1u << 24) - 0.5;
                double v = 1.2 * sin(fx * (double)xx + 0.7 * (double)p) * cos(fy * (double)y) +
                           0.3 * noise;
                x[(p * h + y) * w + xx] = (float)v;
            }
        }
    }
}

/* Seconds the fastest of TIMED_RUNS runs of n images took (one run first, untimed); -1 when a
 * run fails. */
static double time_runs(vf_backend *b, const float *in, float *out, int n)
{
    if (b->ops->run(b, in, out, n) < 0)
        return -1.0;
    double best = -1.0;
    for (int r = 0; r < TIMED_RUNS; r++) {
        double t0 = vfi_now_s();
        if (b->ops->run(b, in, out, n) < 0)
            return -1.0;
        double t = vfi_now_s() - t0;
        if (best < 0 || t < best)
            best = t;
    }
    return best;
}

/* The worst cosine between rows of a and b (n rows of d); 0 when a row is not finite. */
static double worst_cosine(const float *a, const float *b, int n, int64_t d)
{
    double worst = 1.0;
    for (int i = 0; i < n; i++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t k = 0; k < d; k++) {
            double x = a[i * d + k], y = b[i * d + k];
            ab += x * y;
            aa += x * x;
            bb += y * y;
        }
        double c = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : aa == bb ? 1.0 : 0.0;
        if (!isfinite(c))
            c = 0.0;
        if (c < worst)
            worst = c;
    }
    return worst;
}

/* A prepared backend of g in precision p for n images (weights kept in g); NULL when it cannot
 * be made (why: debug log). */
static vf_backend *prepared(vf_graph *g, const vfi_auto_model *m, vf_precision p, int n)
{
    vf_backend_opts o = {.n_threads = m->n_threads, .precision = p};
    vf_backend *b = NULL;
    vf_err err = {0};
    if (vfi_backend_open("dnnl", &o, &b, &err) < 0 || b->ops->prepare(b, g, n) < 0) {
        vfi_log(VF_LOG_DEBUG, "engine", "precision auto: %s cannot be measured: %s",
                vf_precision_str(p), b ? b->err.msg : err.msg);
        vfi_backend_free(&b);
    }
    return b;
}

/* Measure g in f32 and in bf16: *choice, and what was seen into detail. -1: it could not be
 * measured (f32 then, not kept). */
static int measure(vf_graph *g, const vfi_auto_model *m, vf_precision *choice, char *detail,
                   size_t size)
{
    int n = m->batch < PROBE_IMAGES ? m->batch : PROBE_IMAGES;
    const vf_value *iv = &g->values[g->input];
    int64_t in_per = vfi_value_sample_numel(iv),
            out_per = vfi_value_sample_numel(&g->values[g->output]);
    float *in = vfi_aligned_alloc(VF_TENSOR_ALIGN, (size_t)(n * in_per) * sizeof(float));
    float *o32 = vfi_mallocarray((size_t)(n * out_per), sizeof(float));
    float *o16 = vfi_mallocarray((size_t)(n * out_per), sizeof(float));
    vf_backend *b32 = NULL, *b16 = NULL;
    int ok = -1;
    snprintf(detail, size, "f32: bf16 could not be measured");
    if (!in || !o32 || !o16 || iv->dtype != VF_DTYPE_F32)
        goto done;
    fill_probe(iv, in, n);
    if (!(b32 = prepared(g, m, VF_PRECISION_F32, n)) ||
        !(b16 = prepared(g, m, VF_PRECISION_BF16, n)))
        goto done;
    double t32 = time_runs(b32, in, o32, n), t16 = time_runs(b16, in, o16, n);
    if (t32 <= 0 || t16 <= 0)
        goto done;
    double cosine = worst_cosine(o32, o16, n, out_per);
    int faster = t16 <= MAX_TIME_SHARE * t32, holds = cosine >= MIN_COSINE;
    *choice = faster && holds ? VF_PRECISION_BF16 : VF_PRECISION_F32;
    snprintf(detail, size, "%s (an image: bf16 %.3g ms, f32 %.3g ms; worst cosine %.5f%s)",
             vf_precision_str(*choice), t16 * 1e3 / n, t32 * 1e3 / n, cosine,
             !holds    ? ", below 0.999"
             : !faster ? "; bf16 not 10% faster"
                       : "");
    ok = 0;
done:
    vfi_backend_free(&b16);
    vfi_backend_free(&b32);
    vfi_free(in);
    vfi_free(o32);
    vfi_free(o16);
    return ok;
}

vf_status vfi_precision_auto(vf_graph *g, const vfi_auto_model *m, vf_precision *out, char *detail,
                             size_t size, vf_err *err)
{
    *out = VF_PRECISION_F32;
    snprintf(detail, size, "f32");
    /* which backend the name means here: only the CPU's runs bf16 */
    vf_backend_opts o = {.n_threads = m->n_threads, .precision = VF_PRECISION_F32};
    vf_backend *b = NULL;
    vf_status rc = vfi_backend_open(m->backend ? m->backend : "auto", &o, &b, err);
    if (rc < 0)
        return rc;
    int cpu = b->ops == &vfi_backend_dnnl;
    snprintf(detail, size, "f32: the %s backend runs f32", b->ops->name);
    vfi_backend_free(&b);
    if (!cpu)
        return VF_OK;
    vf_isa isa;
    if (vfi_isa_get(&isa, NULL) < 0 || !vfi_isa_has_bf16(&isa)) {
        snprintf(detail, size, "f32: this CPU%s has no bf16 instructions",
                 isa.cap ? ", under its instruction cap," : "");
        return VF_OK;
    }

    char fp[65];
    vf_err ferr = {0};
    if (vfi_sha256_file_sampled(m->path, fp, &ferr) < 0)
        snprintf(fp, sizeof(fp), "unreadable");
    vf_cpu_budget cpus;
    vfi_cpu_budget(&cpus);
    const vf_value *iv = &g->values[g->input];
    char key[512], shape[96];
    vfi_value_shape_str(iv, shape, sizeof(shape));
    snprintf(key, sizeof(key),
             "%s|%s|%d threads|precision auto|model %s input %s output '%s'|batch %d", isa.cpu_key,
             vfi_isa_name(isa.level), m->n_threads > 0 ? m->n_threads : cpus.cpus, fp, shape,
             g->values[g->output].name ? g->values[g->output].name : "?", m->batch);
    vfi_plan_cache *pc = vfi_plan_cache_open();
    if (!pc)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    const char *known = vfi_plan_cache_get(pc, key);
    if (known && (!strcmp(known, "f32") || !strcmp(known, "bf16"))) {
        *out = strcmp(known, "f32") ? VF_PRECISION_BF16 : VF_PRECISION_F32;
        snprintf(detail, size, "%s (as measured before on this machine)", known);
        return vfi_plan_cache_close(&pc, err);
    }
    if (measure(g, m, out, detail, size) == 0 &&
        vfi_plan_cache_put(pc, key, vf_precision_str(*out), detail) < 0) {
        vfi_plan_cache_close(&pc, err);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    return vfi_plan_cache_close(&pc, err);
}
