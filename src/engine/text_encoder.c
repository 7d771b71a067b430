/*
 * text_encoder.c - vf_text_encoder of vidfeat.h: a CLIP model's text side behind one handle. The
 * manifest's "text" section names the tower and the vocabulary; the tokenizer (text/) turns texts
 * into ids, the tower (an ONNX graph whose input is token ids) runs on a backend like an image
 * model. Used by one thread at a time; owns its manifest, tokenizer, graph and backend.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/digest.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/utf8.h"
#include "engine/backend.h"
#include "engine/graph.h"
#include "text/unicode.h"
#include "engine/manifest.h"
#include "engine/onnx.h"
#include "engine/passes.h"
#include "text/tokenizer.h"
#include "vidfeat.h"

#define MAX_BATCH 4096

struct vf_text_encoder {
    vf_manifest *manifest; /* NULL for a tower file no manifest names */
    char *name, *path, *vocab_path;
    vf_tokenizer *tok;
    vf_graph *graph;
    vf_backend *backend;
    int context, dim;
    int64_t *batch; /* batch_size x context ids */
    int32_t *ids32; /* one text's ids from the tokenizer */
    vf_text_info info;
    vf_err err;
};

static int looks_like_file(const char *model)
{
    size_t n = strlen(model);
    struct stat st;
    return strchr(model, '/') || (n > 5 && !strcmp(model + n - 5, ".onnx")) ||
           stat(model, &st) == 0;
}

/* A manifest that names base as its text tower or its image tower; NULL when none does. */
typedef struct pair_search {
    const char *base;
    vf_manifest *found;
} pair_search;

static vf_status match_pair(void *user, vf_manifest *m)
{
    pair_search *p = user;
    if (!p->found && m->text && (!strcmp(m->text->file, p->base) || !strcmp(m->file, p->base))) {
        p->found = m;
        return VF_EOF;
    }
    vfi_manifest_free(&m);
    return VF_OK;
}

/* The manifest and the tower's path from cfg->model. */
static vf_status resolve(vf_text_encoder *te, const vf_config *cfg)
{
    vf_err *err = &te->err;
    const char *model = cfg->model;
    if (looks_like_file(model)) {
        const char *base = strrchr(model, '/');
        base = base ? base + 1 : model;
        pair_search p = {base, NULL};
        if (vfi_manifest_foreach(cfg->models_dir, match_pair, &p) == VF_ERR_NOMEM)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        te->manifest = p.found;
        int is_image = te->manifest && !strcmp(te->manifest->file, base);
        /* the image tower's file stands for its pair: the tower beside it */
        te->path =
            is_image ? vfi_manifest_locate(cfg->models_dir, te->manifest, te->manifest->text->file)
                     : vfi_strdup(model);
        te->name = vfi_strdup(te->manifest ? te->manifest->name : base);
        if (!te->name)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        if (!te->manifest) {
            char *dot = strrchr(te->name, '.');
            if (dot && !strcmp(dot, ".onnx"))
                *dot = '\0';
        }
    } else {
        vf_status rc = vfi_manifest_find(cfg->models_dir, model, &te->manifest, err);
        if (rc < 0)
            return rc;
        if (!te->manifest->text)
            return vfi_fail(err, VF_ERR_INVALID,
                            "model '%s' has no text tower (words are searched with a CLIP "
                            "model, whose manifest names one: clip_vit_b32)",
                            model);
        te->name = vfi_strdup(te->manifest->name);
        if (!te->name)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        te->path = vfi_manifest_locate(cfg->models_dir, te->manifest, te->manifest->text->file);
    }
    if (!te->path) {
        const vf_manifest *m = te->manifest;
        return vfi_fail(err, VF_ERR_IO,
                        "model '%s': its text tower %s not found (looked in --models-dir, "
                        "$VIDFEAT_MODELS, ./models and %s); make it with: scripts/export-clip.py",
                        m->name, m->text->file, m->dir);
    }
    return VF_OK;
}

/* The manifest's vocabulary, found and checked, into te->tok. */
static vf_status open_tokenizer(vf_text_encoder *te, const vf_config *cfg)
{
    const vf_text_spec *t = te->manifest->text;
    te->vocab_path = vfi_manifest_locate(cfg->models_dir, te->manifest, t->vocab);
    if (!te->vocab_path)
        return vfi_fail(&te->err, VF_ERR_IO,
                        "model '%s': its tokenizer's vocabulary %s not found (looked in "
                        "--models-dir, $VIDFEAT_MODELS, ./models, %s and beside the installed "
                        "manifests); get it with: scripts/fetch-models.sh --vocab %s",
                        te->name, t->vocab, te->manifest->dir, te->name);
    if (t->vocab_sha256) {
        char hex[65];
        vf_status rc = vfi_sha256_file_cached(te->vocab_path, hex, &te->err);
        if (rc < 0)
            return rc;
        if (strcasecmp(hex, t->vocab_sha256))
            return vfi_fail(&te->err, VF_ERR_MODEL,
                            "%s is not the vocabulary %s names (sha256 %.12s..., expected "
                            "%.12s...)",
                            te->vocab_path, te->manifest->path, hex, t->vocab_sha256);
    }
    return vfi_tokenizer_create(te->vocab_path, t->vocab_size, &te->tok, &te->err);
}

/* The tower's token table (the lookup reading the input) must have a row per id. */
static vf_status check_tower(vf_text_encoder *te)
{
    const vf_graph *g = te->graph;
    const vf_value *in = &g->values[g->input];
    if (in->dtype != VF_DTYPE_I64 || in->rank != 2)
        return vfi_fail(&te->err, VF_ERR_MODEL,
                        "%s is not a text tower (its input is not token ids [N, context])",
                        te->path);
    te->context = (int)in->dims[1];
    if (te->manifest && te->context != te->manifest->text->context)
        return vfi_fail(&te->err, VF_ERR_MODEL,
                        "%s reads %d token ids a text; %s says the context is %d", te->path,
                        te->context, te->manifest->path, te->manifest->text->context);
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        if (nd->op != VF_OP_LOOKUP || nd->inputs[0] != g->input)
            continue;
        int64_t rows = g->values[nd->inputs[1]].dims[0];
        int want = te->tok ? vfi_tokenizer_vocab_size(te->tok) : 0;
        if (want && rows != want)
            return vfi_fail(&te->err, VF_ERR_MODEL,
                            "%s's token table has %lld rows; the tokenizer's vocabulary (%s) "
                            "has %d ids: the tower was not made for it",
                            te->path, (long long)rows, te->vocab_path, want);
        te->info.vocab_size = (int)rows;
        return VF_OK;
    }
    return vfi_fail(&te->err, VF_ERR_MODEL,
                    "%s is not a text tower (no embedding table reads its token ids)", te->path);
}

vf_status vf_text_encoder_create(const vf_config *cfg, vf_text_encoder **out)
{
    if (!out)
        return VF_ERR_INVALID;
    *out = NULL;
    if (!cfg)
        return VF_ERR_INVALID;
    vf_text_encoder *te = vfi_calloc(1, sizeof(*te));
    if (!te)
        return VF_ERR_NOMEM;
    *out = te;
    vf_err *err = &te->err;
    if (!cfg->model || !*cfg->model)
        return vfi_fail(err, VF_ERR_INVALID, "no model given");
    if (cfg->batch_size < 1 || cfg->batch_size > MAX_BATCH)
        return vfi_fail(err, VF_ERR_INVALID, "batch size %d is not in 1..%d", cfg->batch_size,
                        MAX_BATCH);
    if (cfg->n_threads < 0 || cfg->n_threads > 1024)
        return vfi_fail(err, VF_ERR_INVALID, "thread count %d is not in 0..1024", cfg->n_threads);
    if (cfg->precision != VF_PRECISION_F32 && cfg->precision != VF_PRECISION_BF16 &&
        cfg->precision != VF_PRECISION_AUTO)
        return vfi_fail(err, VF_ERR_INVALID, "a text tower runs in f32 or bf16, not %s",
                        vf_precision_str(cfg->precision));
    vf_status rc = resolve(te, cfg);
    if (rc >= 0 && te->manifest)
        rc = open_tokenizer(te, cfg);
    if (rc >= 0)
        rc = vfi_onnx_load(te->path, &(vf_onnx_opts){0}, &te->graph, err);
    if (rc >= 0)
        rc = check_tower(te);
    if (rc < 0)
        return rc;

    const char *tensor = te->manifest ? te->manifest->text->tensor : NULL;
    int value = tensor ? vfi_graph_find(te->graph, tensor) : te->graph->output;
    if (value < 0)
        return vfi_fail(err, VF_ERR_MODEL, "%s: no tensor '%s' (the manifest's text.tensor)",
                        te->path, tensor);
    int pooled;
    rc = vfi_pass_set_output(te->graph, value, 0, &pooled, err);
    if (rc >= 0)
        rc = vfi_pass_optimize(te->graph, err);
    if (rc < 0) {
        vfi_err_prefix(err, "%s", te->path);
        return rc;
    }
    te->dim = (int)vfi_value_sample_numel(&te->graph->values[te->graph->output]);
    if (te->manifest && te->manifest->text->dim && te->manifest->text->dim != te->dim)
        return vfi_fail(err, VF_ERR_MODEL, "%s gives %d values; %s says text.dim is %d", te->path,
                        te->dim, te->manifest->path, te->manifest->text->dim);

    vf_backend_opts bo = {.release_weights = 1,
                          .n_threads = cfg->n_threads,
                          /* a few words a query: auto runs them in f32, not worth a measure */
                          .precision = cfg->precision == VF_PRECISION_AUTO ? VF_PRECISION_F32
                                                                           : cfg->precision};
    rc = vfi_backend_open(cfg->backend ? cfg->backend : "auto", &bo, &te->backend, err);
    if (rc < 0)
        return rc;
    rc = te->backend->ops->prepare(te->backend, te->graph, cfg->batch_size);
    if (rc < 0) {
        te->err = te->backend->err;
        vfi_err_prefix(err, "%s", te->path);
        return rc;
    }
    te->batch = vfi_calloc((size_t)cfg->batch_size * (size_t)te->context, sizeof(int64_t));
    te->ids32 = vfi_mallocarray((size_t)te->context, sizeof(int32_t));
    if (!te->batch || !te->ids32)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");

    char value_buf[64];
    vf_err merr = {0};
    if (vfi_onnx_metadata(te->path, VFI_WEIGHTS_KEY, value_buf, sizeof(value_buf), &merr) ==
            VF_OK &&
        !strncmp(value_buf, "random", 6)) {
        te->info.weights = VF_WEIGHTS_RANDOM;
        vfi_log(VF_LOG_WARNING, "model",
                "%s: random weights (scripts/export-clip.py without --checkpoint): its "
                "embeddings are for tests and benchmarks, not for search",
                te->path);
    }
    te->info.name = te->name;
    te->info.path = te->path;
    te->info.vocab = te->vocab_path;
    te->info.backend = te->backend->ops->name;
    te->info.precision = cfg->precision;
    te->info.batch_size = cfg->batch_size;
    te->info.context = te->context;
    te->info.dim = te->dim;
    return VF_OK;
}

vf_status vf_text_encoder_info(const vf_text_encoder *te, vf_text_info *info)
{
    if (!te || !info || !te->backend)
        return VF_ERR_INVALID;
    *info = te->info;
    return VF_OK;
}

vf_status vf_text_tokenize(vf_text_encoder *te, const char *text, int64_t *ids, int *n_ids,
                           int *truncated)
{
    if (!te || !ids || !te->backend)
        return VF_ERR_INVALID;
    if (!text)
        return vfi_fail(&te->err, VF_ERR_INVALID, "no text");
    if (!te->tok)
        return vfi_fail(&te->err, VF_ERR_INVALID,
                        "%s: no tokenizer (no manifest names this text tower): token ids only",
                        te->path);
    int n = 0, cut = 0;
    vf_status rc = vfi_tokenizer_encode(te->tok, text, te->context, te->ids32, &n, &cut, &te->err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < te->context; i++)
        ids[i] = i < n ? te->ids32[i] : 0;
    if (cut)
        vfi_log(VF_LOG_WARNING, "text",
                "\"%.40s%s\" is longer than the %d tokens the text tower reads: cut to them", text,
                strlen(text) > 40 ? "..." : "", te->context);
    if (n_ids)
        *n_ids = n;
    if (truncated)
        *truncated = cut;
    return VF_OK;
}

/* Run rows of te->batch (m of them) into out. */
static vf_status run_batch(vf_text_encoder *te, const int64_t *ids, int m, float *out)
{
    vf_status rc = te->backend->ops->run(te->backend, ids, out, m);
    if (rc < 0) {
        te->err = te->backend->err;
        vfi_err_prefix(&te->err, "%s", te->path);
    }
    return rc;
}

vf_status vf_text_encode(vf_text_encoder *te, const char *const *texts, int n, float *embeddings)
{
    if (!te || !te->backend || (n > 0 && (!texts || !embeddings)) || n < 0)
        return VF_ERR_INVALID;
    int batch = te->info.batch_size;
    for (int done = 0; done < n; done += batch) {
        int m = n - done < batch ? n - done : batch;
        for (int i = 0; i < m; i++) {
            vf_status rc = vf_text_tokenize(
                te, texts[done + i], te->batch + (size_t)i * (size_t)te->context, NULL, NULL);
            if (rc < 0)
                return rc;
        }
        vf_status rc = run_batch(te, te->batch, m, embeddings + (size_t)done * (size_t)te->dim);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

vf_status vf_text_encode_ids(vf_text_encoder *te, const int64_t *ids, int n, float *embeddings)
{
    if (!te || !te->backend || (n > 0 && (!ids || !embeddings)) || n < 0)
        return VF_ERR_INVALID;
    int batch = te->info.batch_size;
    for (int done = 0; done < n; done += batch) {
        int m = n - done < batch ? n - done : batch;
        vf_status rc = run_batch(te, ids + (size_t)done * (size_t)te->context, m,
                                 embeddings + (size_t)done * (size_t)te->dim);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

const char *vf_text_encoder_errmsg(const vf_text_encoder *te)
{
    return te ? te->err.msg : "";
}

void vf_text_encoder_free(vf_text_encoder **pte)
{
    if (!pte || !*pte)
        return;
    vf_text_encoder *te = *pte;
    vfi_backend_free(&te->backend);
    vfi_graph_free(&te->graph);
    vfi_tokenizer_free(&te->tok);
    vfi_manifest_free(&te->manifest);
    vfi_free(te->name);
    vfi_free(te->path);
    vfi_free(te->vocab_path);
    vfi_free(te->batch);
    vfi_free(te->ids32);
    vfi_free(te);
    *pte = NULL;
}

vf_status vf_text_check(const char *text, char *errbuf, size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    vf_status rc = VF_OK;
    uint32_t *c = NULL;
    size_t n = 0;
    for (size_t i = 0; text && text[i] && rc >= 0;) {
        size_t k = vfi_utf8_len((const unsigned char *)text + i);
        if (!k)
            rc = vfi_fail(&err, VF_ERR_INVALID, "is not UTF-8 (byte %zu, 0x%02x)", i,
                          (unsigned char)text[i]);
        i += k;
    }
    if (rc >= 0 && text)
        rc = vfi_unicode_decode(text, &c, &n, &err);
    int blank = 1;
    for (size_t i = 0; rc >= 0 && i < n && blank; i++)
        blank = vfi_unicode_is_white_space(c[i]) || vfi_unicode_is_py_space(c[i]);
    free(c); /* vfi_unicode_decode's allocation */
    if (rc >= 0 && blank)
        rc = vfi_fail(&err, VF_ERR_INVALID, "is %s: nothing to embed or search for",
                      n ? "only white space" : "empty");
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}
