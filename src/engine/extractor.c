/*
 * extractor.c - vf_extractor of vidfeat.h: argument checks, model resolution (manifest or plain
 * ONNX file), layer selection, the pass pipeline, the backend and int8 calibration files, behind
 * one handle. A vf_extractor is used by one thread at a time; it owns its graph, backend and
 * manifest.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/extractor.h"
#include "engine/backend.h"
#include "engine/calib.h"
#include "media/decode.h"
#include "engine/graph.h"
#include "core/log.h"
#include "engine/manifest.h"
#include "core/mem.h"
#include "core/path.h"
#include "engine/onnx.h"
#include "engine/passes.h"
#include "core/sha256.h"

#define MAX_BATCH                  4096
#define DEFAULT_CALIBRATION_FRAMES 32
#define CALIB_SUFFIX               ".int8"

struct vf_extractor {
    char *model_name;
    char *model_path;
    char *layer;
    vf_manifest *manifest; /* NULL for a plain ONNX file without one */
    vf_graph *graph;
    vf_backend *backend;
    vf_model_info info;
    vf_err err;
    /* int8 calibration (calib.c): while the backend calibrates, the ranges to save (a file's
     * other layers kept) and where; NULL once saved for good or when there is nothing to save */
    vf_calib *calib;
    char *calib_path;    /* the file to write; NULL: beside the model, else the cache */
    int64_t calib_saved; /* images the last file written holds */
    char *scales_path;   /* info.int8_scales */
    int calibrating;     /* int8: the backend has not quantized yet */
};

vf_config vf_config_default(void)
{
    vf_config c;
    memset(&c, 0, sizeof(c));
    c.model = "inception_v3";
    c.backend = "auto";
    c.precision = VF_PRECISION_F32;
    c.batch_size = 32;
    c.stall_timeout = 60.0;
    return c;
}

static int looks_like_path(const char *model)
{
    struct stat st;
    size_t n = strlen(model);
    return strchr(model, '/') || (n > 5 && !strcmp(model + n - 5, ".onnx")) ||
           stat(model, &st) == 0;
}

const char *vfi_model_file_name(const char *model, size_t *len)
{
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    const char *dot = strrchr(base, '.');
    *len = dot && !strcmp(dot, ".onnx") ? (size_t)(dot - base) : strlen(base);
    return base;
}

/* Resolve cfg->model into ex->model_path (+ ex->manifest when one applies). */
static vf_status resolve_model(vf_extractor *ex, const vf_config *cfg)
{
    vf_err *err = &ex->err;
    if (looks_like_path(cfg->model)) {
        ex->model_path = vfi_strdup(cfg->model);
        size_t len;
        const char *base = vfi_model_file_name(cfg->model, &len);
        ex->model_name = vfi_strdup(base);
        if (!ex->model_path || !ex->model_name)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        ex->model_name[len] = '\0';
        /* A file a manifest describes brings its preprocessing and layer names along. */
        vf_status rc = vfi_manifest_find_by_file(cfg->models_dir, base, &ex->manifest, err);
        if (rc == VF_ERR_NOMEM)
            return rc;
        vfi_err_clear(err);
        return VF_OK;
    }
    vf_status rc = vfi_manifest_find(cfg->models_dir, cfg->model, &ex->manifest, err);
    if (rc < 0)
        return rc;
    ex->model_name = vfi_strdup(ex->manifest->name);
    if (!ex->model_name)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    ex->model_path = vfi_manifest_locate_file(cfg->models_dir, ex->manifest);
    if (!ex->model_path) {
        const vf_manifest *m = ex->manifest;
        return vfi_fail(err, VF_ERR_IO,
                        "model '%s': %s not found (looked in --models-dir, $VIDFEAT_MODELS, "
                        "./models and %s); get it with: scripts/fetch-models.sh %s%s%s",
                        m->name, m->file, m->dir, m->name, m->export_hint ? " or: " : "",
                        m->export_hint ? m->export_hint : "");
    }
    return VF_OK;
}

/* Which graph value the features come from. */
static vf_status resolve_layer(vf_extractor *ex, const vf_config *cfg, int *value,
                               const vf_layer_spec **spec)
{
    const vf_manifest *m = ex->manifest;
    const char *want = cfg->layer && *cfg->layer ? cfg->layer : NULL;
    const char *tensor = NULL;
    *spec = NULL;
    if (m) {
        for (int i = 0; i < m->n_layers; i++) {
            if (!want || !strcmp(want, m->layers[i].name)) {
                *spec = &m->layers[i];
                tensor = m->layers[i].tensor;
                want = m->layers[i].name;
                break;
            }
        }
    }
    if (!tensor)
        tensor = want;
    if (!tensor) {
        *value = ex->graph->output;
        tensor = ex->graph->values[*value].name;
        want = tensor;
    } else {
        *value = vfi_graph_find(ex->graph, tensor);
    }
    ex->layer = vfi_strdup(want);
    if (!ex->layer)
        return vfi_fail(&ex->err, VF_ERR_NOMEM, "out of memory");
    if (*value < 0) {
        char names[256] = "";
        size_t len = 0;
        for (int i = 0; m && i < m->n_layers && len < sizeof(names); i++)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                                    m->layers[i].name);
        return vfi_fail(&ex->err, VF_ERR_INVALID, "%s: no layer or tensor named '%s'%s%s%s",
                        ex->model_path, tensor, *names ? " (layers: " : "", names,
                        *names ? "; or any tensor name)" : "");
    }
    return VF_OK;
}

static vf_status check_config(const vf_config *cfg, vf_err *err)
{
    if (!cfg->model || !*cfg->model)
        return vfi_fail(err, VF_ERR_INVALID, "no model given");
    if (cfg->batch_size < 1 || cfg->batch_size > MAX_BATCH)
        return vfi_fail(err, VF_ERR_INVALID, "batch size %d is not in 1..%d", cfg->batch_size,
                        MAX_BATCH);
    if (cfg->n_threads < 0 || cfg->n_threads > 1024)
        return vfi_fail(err, VF_ERR_INVALID, "thread count %d is not in 0..1024", cfg->n_threads);
    if ((unsigned)cfg->precision > VF_PRECISION_INT8)
        return vfi_fail(err, VF_ERR_INVALID, "unknown precision %d", (int)cfg->precision);
    if (cfg->input_size < 0 || cfg->input_size > 8192)
        return vfi_fail(err, VF_ERR_INVALID, "input size %d is not in 1..8192", cfg->input_size);
    if (cfg->std[0] != 0.0f) {
        for (int i = 0; i < 3; i++) {
            if (!(cfg->std[i] > 0.0f))
                return vfi_fail(err, VF_ERR_INVALID, "std must be positive");
        }
    }
    return VF_OK;
}

/* The normalisation the frames get: the config's when it sets std, else the manifest's. */
static void resolve_norm(const vf_extractor *ex, const vf_config *cfg, float mean[3], float std[3])
{
    const vf_manifest *m = ex->manifest;
    for (int i = 0; i < 3; i++) {
        mean[i] = cfg->std[0] != 0.0f ? cfg->mean[i] : m ? m->mean[i] : cfg->mean[i];
        std[i] = cfg->std[0] != 0.0f ? cfg->std[i] : m ? m->std[i] : 1.0f;
    }
}

static void fill_info(vf_extractor *ex, const vf_config *cfg, int pooled)
{
    vf_model_info *in = &ex->info;
    const vf_manifest *m = ex->manifest;
    const vf_graph *g = ex->graph;
    const vf_value *iv = &g->values[g->input];
    in->name = ex->model_name;
    in->path = ex->model_path;
    in->layer = ex->layer;
    in->backend = ex->backend->ops->name;
    in->device = ex->backend->ops->device_name ? ex->backend->ops->device_name(ex->backend) : NULL;
    in->precision = cfg->precision;
    in->batch_size = cfg->batch_size;
    in->input_size = (int)iv->dims[2];
    in->feature_dim = (int)vfi_value_sample_numel(&g->values[g->output]);
    in->pooled = pooled;
    in->channel_order = m ? m->channel_order : VF_CHANNELS_RGB;
    in->resize = m ? m->resize : VF_RESIZE_STRETCH;
    in->resize_short = m ? m->resize_short : 0;
    resolve_norm(ex, cfg, in->mean, in->std);
    in->int8_scales = ex->scales_path;
}

/* ---- int8 calibration file ----------------------------------------------------------------- */

/* Where a model's calibration file goes by default: beside the model file, and in the user's
 * cache directory (for a read-only models directory), named with the model's fingerprint so
 * that two model files of the same name do not share it. Either may come back NULL. */
static void default_calib_paths(const vf_extractor *ex, const char *fingerprint, char **beside,
                                char **cached)
{
    size_t len = strlen(ex->model_path) + sizeof(CALIB_SUFFIX);
    *beside = vfi_malloc(len);
    if (*beside)
        snprintf(*beside, len, "%s%s", ex->model_path, CALIB_SUFFIX);
    const char *base = strrchr(ex->model_path, '/');
    base = base ? base + 1 : ex->model_path;
    len = strlen(base) + 16 + sizeof("-" CALIB_SUFFIX);
    char *name = vfi_malloc(len);
    *cached = NULL;
    if (name) {
        snprintf(name, len, "%s-%.16s%s", base, fingerprint, CALIB_SUFFIX);
        *cached = vfi_cache_path(name);
        vfi_free(name);
    }
}

/* int8: a calibration file that fits this model file, preprocessing and graph gives the
 * backend its ranges (*ranges, the caller's to free); without one, ex->calib gets ready to
 * receive what the backend will observe (a same-model file's other ranges kept). */
static vf_status setup_int8(vf_extractor *ex, const vf_config *cfg, float **ranges)
{
    *ranges = NULL;
    if (cfg->precision != VF_PRECISION_INT8 || (cfg->int8_scales && !*cfg->int8_scales))
        return VF_OK; /* not int8, or no file wanted */
    char fp[65];
    vf_status rc = vfi_sha256_file_sampled(ex->model_path, fp, &ex->err);
    if (rc < 0)
        return rc;
    float mean[3], std[3];
    resolve_norm(ex, cfg, mean, std);
    ex->calib = vfi_calib_create(fp, (int)ex->graph->values[ex->graph->input].dims[2], mean, std);
    char *beside = NULL, *cached = NULL;
    if (!cfg->int8_scales)
        default_calib_paths(ex, fp, &beside, &cached);
    const char *paths[2] = {cfg->int8_scales ? cfg->int8_scales : beside, cached};
    for (int i = 0; i < 2 && ex->calib && !*ranges && !cfg->recalibrate; i++) {
        vf_calib *file = NULL;
        vf_err e;
        struct stat st;
        if (!paths[i] || stat(paths[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (vfi_calib_read(paths[i], &file, &e) < 0) {
            vfi_log(VF_LOG_WARNING, "engine", "int8: %s; calibrating again", e.msg);
            continue;
        }
        if (!vfi_calib_same_source(file, ex->calib)) {
            vfi_log(VF_LOG_INFO, "engine",
                    "int8: %s is for another model file or preprocessing; calibrating again",
                    paths[i]);
        } else if (vfi_calib_ranges(file, ex->graph, ranges, &e) >= 0) {
            ex->scales_path = vfi_strdup(paths[i]);
            ex->info.calibration_frames = file->images;
            vfi_calib_free(&ex->calib);
            vfi_log(VF_LOG_INFO, "engine", "int8: scales from %s (calibrated on %lld frames)",
                    paths[i], (long long)file->images);
        } else if (e.code == VF_ERR_MODEL) { /* another layer's: keep those, add these */
            vfi_log(VF_LOG_INFO, "engine", "int8: %s: %s; calibrating this layer", paths[i], e.msg);
            vfi_calib_free(&ex->calib);
            ex->calib = file;
            file = NULL;
            vfi_free(ex->calib_path);
            ex->calib_path = vfi_strdup(paths[i]);
        }
        vfi_calib_free(&file);
    }
    if (ex->calib && !ex->calib_path && cfg->int8_scales)
        ex->calib_path = vfi_strdup(cfg->int8_scales);
    vfi_free(beside);
    vfi_free(cached);
    if ((!ex->calib && !*ranges) || (*ranges && !ex->scales_path) ||
        (ex->calib && cfg->int8_scales && !ex->calib_path))
        return vfi_fail(&ex->err, VF_ERR_NOMEM, "out of memory");
    return VF_OK;
}

/* Save what the backend observed while calibrating: when it has quantized (final), or at the
 * end of a pipeline run (the frames seen so far). Failing to write is a warning: the next run
 * calibrates again. */
static void save_calibration(vf_extractor *ex, int at_end)
{
    vf_backend *b = ex->backend;
    int64_t n = 0;
    int complete = 0;
    const float *r = b->ops->int8_ranges ? b->ops->int8_ranges(b, &n, &complete) : NULL;
    if (!r || (!complete && !at_end))
        return;
    if (complete) {
        ex->calibrating = 0;
        ex->info.calibration_frames = n;
    }
    if (!ex->calib || n == ex->calib_saved)
        return;
    char *beside = NULL, *cached = NULL;
    if (!ex->calib_path)
        default_calib_paths(ex, ex->calib->fingerprint, &beside, &cached);
    const char *paths[2] = {ex->calib_path ? ex->calib_path : beside, cached};
    const char *saved = NULL;
    vf_err errs[2] = {{VF_OK, "no file name"}, {VF_OK, "no cache directory ($HOME unset)"}};
    int updated = vfi_calib_update(ex->calib, ex->graph, r, n) >= 0;
    if (!updated)
        snprintf(errs[0].msg, sizeof(errs[0].msg), "out of memory");
    for (int i = 0; updated && i < 2 && !saved; i++) {
        if (!paths[i])
            continue;
        if (i == 1)
            vfi_make_parent_dirs(paths[i]);
        if (vfi_calib_write(ex->calib, ex->model_name, paths[i], &errs[i]) >= 0)
            saved = paths[i];
    }
    if (saved) {
        char *path = vfi_strdup(saved);
        if (path) {
            vfi_free(ex->scales_path);
            ex->scales_path = path;
            ex->info.int8_scales = path;
            if (!ex->calib_path)
                ex->calib_path = vfi_strdup(saved); /* a later save goes to the same place */
        }
        ex->calib_saved = n;
        ex->info.calibration_frames = n;
        vfi_log(VF_LOG_INFO, "engine", "int8: scales calibrated on %lld frames saved to %s",
                (long long)n, saved);
    } else {
        vfi_log(VF_LOG_WARNING, "engine",
                "int8: the calibration could not be saved (%s%s%s); the next run calibrates again",
                errs[0].msg, paths[1] ? "; " : "", paths[1] ? errs[1].msg : "");
    }
    if (complete)
        vfi_calib_free(&ex->calib); /* the backend's ranges are final */
    vfi_free(beside);
    vfi_free(cached);
}

vf_status vf_extractor_create(const vf_config *cfg, vf_extractor **out)
{
    if (!out)
        return VF_ERR_INVALID;
    *out = NULL;
    if (!cfg)
        return VF_ERR_INVALID;
    vf_extractor *ex = vfi_calloc(1, sizeof(*ex));
    if (!ex)
        return VF_ERR_NOMEM;
    *out = ex;
    vf_status rc = check_config(cfg, &ex->err);
    if (rc < 0)
        return rc;
    rc = resolve_model(ex, cfg);
    if (rc < 0)
        return rc;

    vf_onnx_opts oo = {cfg->input_size ? cfg->input_size
                       : ex->manifest  ? ex->manifest->input_size
                                       : 0};
    rc = vfi_onnx_load(ex->model_path, &oo, &ex->graph, &ex->err);
    if (rc < 0)
        return rc;
    const vf_value *iv = &ex->graph->values[ex->graph->input];
    if (iv->dims[1] != 3 || iv->dims[2] != iv->dims[3])
        return vfi_fail(&ex->err, VF_ERR_UNSUPPORTED,
                        "%s: the input is %lldx%lldx%lld; an image model takes 3 x S x S",
                        ex->model_path, (long long)iv->dims[1], (long long)iv->dims[2],
                        (long long)iv->dims[3]);

    int value, pooled;
    const vf_layer_spec *spec;
    rc = resolve_layer(ex, cfg, &value, &spec);
    if (rc >= 0)
        rc = vfi_pass_set_output(ex->graph, value, 1, &pooled, &ex->err);
    if (rc >= 0)
        rc = vfi_pass_optimize(ex->graph, &ex->err);
    if (rc < 0) {
        vfi_err_prefix(&ex->err, "%s", ex->model_path);
        return rc;
    }
    int64_t dim = vfi_value_sample_numel(&ex->graph->values[ex->graph->output]);
    if (spec && spec->dim && spec->dim != dim)
        return vfi_fail(&ex->err, VF_ERR_MODEL,
                        "%s: layer '%s' gives %lld values, the manifest says %d", ex->model_path,
                        spec->name, (long long)dim, spec->dim);

    float *ranges = NULL;
    rc = setup_int8(ex, cfg, &ranges);
    if (rc < 0)
        return rc;
    int64_t calib_frames = cfg->calibration_frames;
    if (calib_frames <= 0)
        calib_frames = cfg->batch_size > DEFAULT_CALIBRATION_FRAMES ? cfg->batch_size
                                                                    : DEFAULT_CALIBRATION_FRAMES;
    vf_backend_opts bo = {.release_weights = 1, /* the graph is this extractor's alone */
                          .n_threads = cfg->n_threads,
                          .precision = cfg->precision,
                          .int8_ranges = ranges,
                          .calibration_images = calib_frames};
    rc = vfi_backend_open(cfg->backend ? cfg->backend : "auto", &bo, &ex->backend, &ex->err);
    if (rc < 0) {
        vfi_free(ranges);
        return rc;
    }
    rc = ex->backend->ops->prepare(ex->backend, ex->graph, cfg->batch_size);
    ex->backend->opts.int8_ranges = NULL; /* read by prepare only */
    vfi_free(ranges);
    if (rc < 0) {
        ex->err = ex->backend->err;
        vfi_err_prefix(&ex->err, "%s", ex->model_path);
        return rc;
    }
    if (ex->backend->ops->describe && ex->backend->ops->describe(ex->backend))
        vfi_log(VF_LOG_DEBUG, "engine", "%s", ex->backend->ops->describe(ex->backend));
    fill_info(ex, cfg, pooled);
    ex->calibrating = cfg->precision == VF_PRECISION_INT8 && !ex->scales_path;
    return VF_OK;
}

vf_status vf_extractor_info(const vf_extractor *ex, vf_model_info *info)
{
    if (!ex || !info || !ex->backend)
        return VF_ERR_INVALID;
    *info = ex->info;
    return VF_OK;
}

/* n images through the backend, from host memory (in) or from a batch input (input): run() or
 * run_input() (on failure the message is in the backend's err); then, for int8, the
 * calibration saved once the backend has made it final. */
static vf_status run_batch(vf_extractor *ex, const float *in, const void *input, float *out, int n)
{
    vf_status rc = input ? vfi_backend_run_input(ex->backend, input, out, n)
                         : ex->backend->ops->run(ex->backend, in, out, n);
    if (rc >= 0 && ex->calibrating)
        save_calibration(ex, 0);
    return rc;
}

vf_status vf_extractor_infer(vf_extractor *ex, const float *images, int n, float *features)
{
    if (!ex || !ex->backend || !images || !features || n < 1)
        return ex ? vfi_fail(&ex->err, VF_ERR_INVALID, "invalid arguments") : VF_ERR_INVALID;
    size_t in_per = (size_t)3 * ex->info.input_size * ex->info.input_size;
    size_t out_per = (size_t)ex->info.feature_dim;
    for (int done = 0; done < n;) {
        int count = n - done < ex->info.batch_size ? n - done : ex->info.batch_size;
        vf_status rc = run_batch(ex, images + (size_t)done * in_per, NULL,
                                 features + (size_t)done * out_per, count);
        if (rc < 0) {
            ex->err = ex->backend->err;
            return rc;
        }
        done += count;
    }
    return VF_OK;
}

vf_backend *vfi_extractor_backend(vf_extractor *ex)
{
    return ex->backend;
}

vf_status vfi_extractor_run_input(vf_extractor *ex, const void *input, float *out, int n)
{
    return run_batch(ex, NULL, input, out, n);
}

void vfi_extractor_end_run(vf_extractor *ex)
{
    if (ex->calibrating)
        save_calibration(ex, 1);
}

const char *vf_extractor_errmsg(const vf_extractor *ex)
{
    return ex ? ex->err.msg : "out of memory";
}

void vf_extractor_free(vf_extractor **pex)
{
    vf_extractor *ex = pex ? *pex : NULL;
    if (!ex)
        return;
    vfi_backend_free(&ex->backend);
    vfi_graph_free(&ex->graph);
    vfi_manifest_free(&ex->manifest);
    vfi_free(ex->model_name);
    vfi_free(ex->model_path);
    vfi_free(ex->layer);
    vfi_calib_free(&ex->calib);
    vfi_free(ex->calib_path);
    vfi_free(ex->scales_path);
    vfi_free(ex);
    *pex = NULL;
}
