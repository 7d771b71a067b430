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
#include "engine/int8_file.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "engine/graph.h"
#include "core/log.h"
#include "engine/manifest.h"
#include "core/mem.h"
#include "core/path.h"
#include "engine/onnx.h"
#include "engine/passes.h"
#include "engine/precision_auto.h"

#define MAX_BATCH                  4096
#define DEFAULT_CALIBRATION_FRAMES 32

struct vf_extractor {
    char *model_name;
    char *model_path;
    char *text_tower; /* a CLIP model's, where found; or NULL */
    char *layer;
    vf_manifest *manifest; /* NULL for a plain ONNX file without one */
    vf_graph *graph;
    vf_backend *backend;
    vf_model_info info;
    vf_err err;
    vf_int8_file *int8;      /* int8 with a calibration file: where its scales come from and go */
    int calibrating;         /* int8: the backend has not quantized yet */
    vf_preproc *pre;         /* vf_extractor_infer_rgb's conversion, made on its first call */
    float *rgb_batch;        /* and its batch of converted images (batch_size slots) */
    char precision_why[160]; /* VF_PRECISION_AUTO: why it runs the precision it does */
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
    c.lease_s = 60.0;
    c.max_attempts = 3;
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
        if (!m->url && m->export_hint) /* no download address: made by an export script */
            return vfi_fail(err, VF_ERR_IO,
                            "model '%s': %s not found (looked in --models-dir, $VIDFEAT_MODELS, "
                            "./models and %s); make it with: %s",
                            m->name, m->file, m->dir, m->export_hint);
        if (!m->url) /* neither downloaded nor exported: a file the user has */
            return vfi_fail(err, VF_ERR_IO,
                            "model '%s': %s not found (looked in --models-dir, $VIDFEAT_MODELS, "
                            "./models and %s); it has no download address: put your copy "
                            "(sha256 %s) in ./models or --models-dir",
                            m->name, m->file, m->dir, m->sha256 ? m->sha256 : "not given");
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
        /* Another exporter's names: "pool", "logits" and "cls" are found by the graph's
         * structure; a ViT's "mean" (of its patch tokens) is made from the tokens "cls" is
         * taken from */
        int by_structure = *value < 0 ? vfi_graph_layer_by_structure(ex->graph, want) : -1;
        int tokens = *value < 0 && !strcmp(want, "mean")
                         ? vfi_graph_layer_by_structure(ex->graph, "tokens")
                         : -1;
        if (tokens >= 0) {
            vf_status rc = vfi_graph_token_mean(ex->graph, tokens, &by_structure, &ex->err);
            if (rc < 0)
                return rc;
        }
        if (by_structure >= 0) {
            *value = by_structure;
            vfi_log(VF_LOG_INFO, "engine", "%s: no tensor '%s'; layer '%s' is '%s' by structure",
                    ex->model_path, tensor, want, ex->graph->values[by_structure].name);
        }
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

/* Whose weights the file has, said once when they are not what a user would expect: random
 * ones (made for tests), or another file under a manifest's name. */
static void report_weights(vf_extractor *ex)
{
    ex->info.weights = vfi_model_weights(ex->manifest, ex->model_path);
    if (ex->info.weights == VF_WEIGHTS_RANDOM) {
        /* where real ones come from: the download, else the export script given them (a file
         * named without a manifest: its maker knows) */
        const vf_manifest *m = ex->manifest;
        const char *get = !m               ? "from whoever made this file"
                          : m->url         ? m->name
                          : m->export_hint ? m->export_hint
                                           : "not known for this model";
        vfi_log(VF_LOG_WARNING, "model",
                "%s: random weights, made for tests: its vectors are for tests and benchmarks, "
                "not for search; real ones: %s%s",
                ex->model_path, m && m->url ? "scripts/fetch-models.sh " : "", get);
    } else if (ex->info.weights == VF_WEIGHTS_OTHER)
        vfi_log(VF_LOG_WARNING, "model",
                "%s is not the official %s file (its size or sha256 differs from %s): its "
                "features will not match other users'",
                ex->model_path, ex->manifest->name, ex->manifest->path);
}

/* The least the backend holds for a batch (its input and largest activation, a batch of each)
 * against the memory this process may use: a batch too large is refused before any of it is
 * allocated, rather than committed (the machine swapping) and failed. */
#define ACTIVATION_MEMORY_SHARE 0.5

static vf_status check_batch_memory(vf_extractor *ex, int batch)
{
    const vf_graph *g = ex->graph;
    double largest = 0.0;
    for (int i = 0; i < g->n_values; i++) {
        if (g->values[i].data)
            continue; /* a weight: not per image */
        double n = (double)vfi_value_sample_numel(&g->values[i]);
        largest = n > largest ? n : largest;
    }
    double per = ((double)vfi_value_sample_numel(&g->values[g->input]) + largest) * sizeof(float);
    double usable = vfi_mem_usable();
    if (usable <= 0.0 || batch * per <= ACTIVATION_MEMORY_SHARE * usable)
        return VF_OK;
    return vfi_fail(&ex->err, VF_ERR_NOMEM,
                    "%s: a batch of %d takes at least %.1f GB of activations, more than half of "
                    "the %.1f GB this process may use: a smaller batch is needed (--batch)",
                    ex->model_path, batch, batch * per / 1e9, usable / 1e9);
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
    if ((unsigned)cfg->precision > VF_PRECISION_AUTO)
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
    in->precision = ex->backend->opts.precision;
    in->precision_why = cfg->precision == VF_PRECISION_AUTO ? ex->precision_why : NULL;
    in->batch_size = cfg->batch_size;
    if (m && m->audio) { /* [N, 1, frames, bands] */
        in->audio_frames = (int)iv->dims[2];
        in->audio_bands = (int)iv->dims[3];
        in->sample_rate = m->audio->front.sample_rate;
    } else {
        in->input_size = (int)iv->dims[iv->rank - 1];
        in->frames = iv->rank == 5 ? (int)iv->dims[2] : 0;
    }
    in->feature_dim = (int)vfi_value_sample_numel(&g->values[g->output]);
    in->pooled = pooled;
    in->channel_order = m ? m->channel_order : VF_CHANNELS_RGB;
    in->resize = m ? m->resize : VF_RESIZE_STRETCH;
    in->resize_short = m ? m->resize_short : 0;
    in->resize_to[0] = m ? m->resize_to[0] : 0;
    in->resize_to[1] = m ? m->resize_to[1] : 0;
    resolve_norm(ex, cfg, in->mean, in->std);
    in->int8_scales = vfi_int8_file_path(ex->int8);
    in->text_tower = ex->text_tower;
}

/* ---- int8 calibration ----------------------------------------------------------------------- */

/* int8: a calibration file that fits gives the backend its ranges (*ranges, the caller's to
 * free); without one, the backend calibrates and ex->int8 saves what it observes. */
static vf_status setup_int8(vf_extractor *ex, const vf_config *cfg, float **ranges)
{
    const vf_value *in = &ex->graph->values[ex->graph->input];
    *ranges = NULL;
    if (cfg->precision != VF_PRECISION_INT8 || (cfg->int8_scales && !*cfg->int8_scales))
        return VF_OK; /* not int8, or no file wanted */
    vf_int8_source src = {.model_path = ex->model_path,
                          .model_name = ex->model_name,
                          .requested = cfg->int8_scales,
                          .recalibrate = cfg->recalibrate,
                          .input_size = (int)in->dims[in->rank - 1]};
    resolve_norm(ex, cfg, src.mean, src.std);
    vf_status rc = vfi_int8_file_open(&src, ex->graph, &ex->int8, ranges, &ex->err);
    ex->info.calibration_frames = vfi_int8_file_frames(ex->int8);
    return rc;
}

/* Save what the backend observed while calibrating: when it has quantized (final), or at the
 * end of a pipeline run (the frames seen so far). */
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
    if (!ex->int8)
        return;
    vfi_int8_file_save(ex->int8, ex->graph, r, n, complete);
    if (vfi_int8_file_path(ex->int8)) {
        ex->info.int8_scales = vfi_int8_file_path(ex->int8);
        ex->info.calibration_frames = vfi_int8_file_frames(ex->int8);
    }
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

    report_weights(ex);

    vf_onnx_opts oo = {cfg->input_size ? cfg->input_size
                       : ex->manifest  ? ex->manifest->input_size
                                       : 0};
    rc = vfi_onnx_load(ex->model_path, &oo, &ex->graph, &ex->err);
    if (rc < 0)
        return rc;
    const vf_value *iv = &ex->graph->values[ex->graph->input];
    int frames = iv->rank == 5 ? (int)iv->dims[2] : 0;
    if (ex->manifest && ex->manifest->frames != frames)
        return vfi_fail(&ex->err, VF_ERR_MODEL,
                        "%s: the file takes %s%d frames at once, its manifest (%s) says %d",
                        ex->model_path, frames ? "" : "one picture, not ", frames ? frames : 1,
                        ex->manifest->path, ex->manifest->frames);
    if (iv->rank == 5 && iv->dims[3] != iv->dims[4])
        return vfi_fail(&ex->err, VF_ERR_UNSUPPORTED,
                        "%s: the input is %lldx%lld pictures; a clip model takes S x S",
                        ex->model_path, (long long)iv->dims[3], (long long)iv->dims[4]);
    const vf_audio_spec *audio = ex->manifest ? ex->manifest->audio : NULL;
    if (audio && (iv->rank != 4 || iv->dims[1] != 1 || iv->dims[2] != audio->patch ||
                  iv->dims[3] != audio->front.n_mels))
        return vfi_fail(&ex->err, VF_ERR_MODEL,
                        "%s: an audio model takes [N, 1, %d, %d] (its manifest %s: patches of %d "
                        "frames of %d bands); the file's input is not that",
                        ex->model_path, audio->patch, audio->front.n_mels, ex->manifest->path,
                        audio->patch, audio->front.n_mels);
    if (!audio && iv->rank == 4 && (iv->dims[1] != 3 || iv->dims[2] != iv->dims[3]))
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

    if ((rc = check_batch_memory(ex, cfg->batch_size)) < 0)
        return rc;
    float *ranges = NULL;
    rc = setup_int8(ex, cfg, &ranges);
    if (rc < 0)
        return rc;
    int64_t calib_frames = cfg->calibration_frames;
    if (calib_frames <= 0)
        calib_frames = cfg->batch_size > DEFAULT_CALIBRATION_FRAMES ? cfg->batch_size
                                                                    : DEFAULT_CALIBRATION_FRAMES;
    vf_precision precision = cfg->precision;
    if (precision == VF_PRECISION_AUTO) {
        vfi_auto_model am = {ex->model_path, cfg->backend, cfg->batch_size, cfg->n_threads};
        rc = vfi_precision_auto(ex->graph, &am, &precision, ex->precision_why,
                                sizeof(ex->precision_why), &ex->err);
        if (rc < 0)
            return rc;
        vfi_log(VF_LOG_INFO, "engine", "%s: precision auto: %s", ex->model_name, ex->precision_why);
    }
    vf_backend_opts bo = {.release_weights = 1, /* the graph is this extractor's alone */
                          .n_threads = cfg->n_threads,
                          .precision = precision,
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
    if (ex->manifest && ex->manifest->text)
        ex->text_tower =
            vfi_manifest_locate(cfg->models_dir, ex->manifest, ex->manifest->text->file);
    fill_info(ex, cfg, pooled);
    ex->calibrating = cfg->precision == VF_PRECISION_INT8 && !vfi_int8_file_path(ex->int8);
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
    size_t in_per = vfi_extractor_input_floats(&ex->info);
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

vf_status vf_extractor_infer_rgb(vf_extractor *ex, const uint8_t *pixels, int n, int height,
                                 int width, float *features)
{
    if (!ex || !ex->backend || !pixels || !features || n < 1)
        return ex ? vfi_fail(&ex->err, VF_ERR_INVALID, "invalid arguments") : VF_ERR_INVALID;
    const vf_model_info *in = &ex->info;
    if (in->audio_frames)
        return vfi_fail(&ex->err, VF_ERR_INVALID,
                        "%s is an audio model: it takes patches of log-mel frames, not pictures",
                        in->name);
    const int frames = in->frames > 0 ? in->frames : 1; /* pictures per input */
    const size_t plane = (size_t)in->input_size * in->input_size, input = 3 * frames * plane;
    if (n % frames)
        return vfi_fail(&ex->err, VF_ERR_INVALID,
                        "%d pictures: %s takes windows of %d frames (give a multiple)", n, in->name,
                        frames);
    if (!ex->pre) {
        vf_preproc_opts po = {.size = in->input_size,
                              .resize = in->resize,
                              .resize_short = in->resize_short,
                              .resize_to = {in->resize_to[0], in->resize_to[1]},
                              .order = in->channel_order};
        memcpy(po.mean, in->mean, sizeof(po.mean));
        memcpy(po.std, in->std, sizeof(po.std));
        vf_status rc = vfi_preproc_create(&po, &ex->pre, &ex->err);
        if (rc < 0)
            return rc;
        /* the batch, then (clip models) one picture converted before it joins its window */
        size_t floats = (size_t)in->batch_size * input + (frames > 1 ? 3 * plane : 0);
        ex->rgb_batch = vfi_aligned_alloc(VF_TENSOR_ALIGN, floats * sizeof(float));
        if (!ex->rgb_batch) {
            vfi_preproc_free(&ex->pre);
            return vfi_fail(&ex->err, VF_ERR_NOMEM, "out of memory");
        }
    }
    if (width < 1 || height < 1 || width > 65536 || height > 65536)
        return vfi_fail(&ex->err, VF_ERR_INVALID, "a %dx%d image", width, height);
    size_t image = (size_t)height * (size_t)width * 3;
    float *picture = ex->rgb_batch + (size_t)in->batch_size * input;
    const int windows = n / frames;
    for (int done = 0; done < windows;) {
        int count = windows - done < in->batch_size ? windows - done : in->batch_size;
        for (int i = 0; i < count; i++) {
            float *row = ex->rgb_batch + (size_t)i * input;
            for (int t = 0; t < frames; t++) {
                const uint8_t *px = pixels + ((size_t)(done + i) * frames + t) * image;
                vf_status rc = vfi_preproc_rgb(ex->pre, px, width, height,
                                               frames > 1 ? picture : row, &ex->err);
                if (rc < 0)
                    return rc;
                if (frames > 1)
                    vfi_window_put(row, frames, t, picture, plane);
            }
        }
        vf_status rc =
            vf_extractor_infer(ex, ex->rgb_batch, count, features + (size_t)done * in->feature_dim);
        if (rc < 0)
            return rc;
        done += count;
    }
    return VF_OK;
}

const vf_audio_spec *vfi_extractor_audio(const vf_extractor *ex)
{
    return ex->info.audio_frames ? ex->manifest->audio : NULL;
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
    vfi_free(ex->text_tower);
    vfi_free(ex->layer);
    vfi_int8_file_free(&ex->int8);
    vfi_preproc_free(&ex->pre);
    vfi_free(ex->rgb_batch);
    vfi_free(ex);
    *pex = NULL;
}
