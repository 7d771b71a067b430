/*
 * query.c - frames of a file the database does not hold, extracted now with the stored vectors'
 * model, and the vectors that model gives images (or sounds) showing nothing (query.h).
 */
#include "pipeline/query.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/digest.h"
#include "core/mem.h"
#include "engine/manifest.h"
#include "engine/extractor.h"
#include "media/logmel.h"
#include "pipeline/index.h"
#include "pipeline/stages.h"
#include "store/record.h"

/* Grey levels and colours whose uniform images are no evidence of anything: black to white in
 * 16 steps, and every colour of channels at 0, 128 and 255 (greys among them again). */
#define GREY_STEPS 17
#define N_COLOURS  27
#define N_REFS     (GREY_STEPS + N_COLOURS)
/* Sounds that are no evidence of anything: digital silence, and hiss (white noise) at -70, -60,
 * -50 and -40 dB of full scale (RMS), as silent stretches of two unrelated recordings hold. */
#define N_SOUND_REFS 5

void vfi_query_frames_free(vfi_query_frames *q)
{
    vfi_free(q->vec);
    vfi_free(q->frame_index);
    vfi_free(q->t);
    memset(q, 0, sizeof(*q));
}

/* Is info's model the one row's vectors came from (file, preprocessing, vector size)? */
static vf_status check_model(const vf_model_info *info, const vf_audio_spec *audio,
                             const vfi_held_model *row, vf_err *err)
{
    char sha[65], prep[256];
    vf_store_model m;
    vf_status rc = vfi_record_model(info, audio, row->f16, &m, sha, prep, sizeof(prep), err);
    if (rc < 0)
        return rc;
    if (strcmp(sha, row->sha) || strcmp(prep, row->prep) || m.dim != row->dim)
        return vfi_fail(err, VF_ERR_MODEL, "%s does not make the stored %s vectors: its %s differs",
                        info->path, row->name,
                        strcmp(sha, row->sha)     ? "file (sha256)"
                        : strcmp(prep, row->prep) ? "preprocessing"
                                                  : "vector size");
    return VF_OK;
}

/* The model's configuration: the row's model and layer, in cfg's backend and precision. */
static vf_config row_config(const vf_config *cfg, const vfi_held_model *row)
{
    vf_config c = *cfg;
    c.model = cfg->model ? cfg->model : row->name;
    c.layer = row->layer;
    c.db_path = NULL;
    c.store_f16 = row->f16;
    return c;
}

/* What the run gives back: the frames, and how the file ended. */
typedef struct capture {
    vfi_query_frames *out;
    int64_t max;
    int nomem;
    vf_status status;
    char error[VF_ERRMSG_SIZE];
} capture;

static int capture_batch(void *user, const vf_batch_view *b)
{
    capture *c = user;
    vfi_query_frames *q = c->out;
    if (b->dim != q->dim)
        return 0;
    for (int i = 0; i < b->n && (!c->max || q->n < c->max); i++) {
        if (q->n == q->cap) {
            int64_t cap = q->cap ? 2 * q->cap : 256;
            float *v = vfi_realloc(q->vec, (size_t)cap * (size_t)q->dim * sizeof(float));
            if (v)
                q->vec = v;
            int64_t *fi = vfi_realloc(q->frame_index, (size_t)cap * sizeof(int64_t));
            if (fi)
                q->frame_index = fi;
            double *t = vfi_realloc(q->t, (size_t)cap * sizeof(double));
            if (t)
                q->t = t;
            if (!v || !fi || !t) {
                c->nomem = 1;
                return 1;
            }
            q->cap = cap;
        }
        memcpy(q->vec + q->n * q->dim, b->features + (size_t)i * (size_t)b->dim,
               (size_t)q->dim * sizeof(float));
        q->frame_index[q->n] = b->frame_index[i];
        q->t[q->n++] = b->t[i];
    }
    return 0;
}

static void capture_file(void *user, int file, const vf_file_result *r)
{
    capture *c = user;
    (void)file;
    if (r->status < 0) {
        c->status = r->status;
        snprintf(c->error, sizeof(c->error), "%s", r->error);
    }
}

vf_status vfi_query_extract(const vf_config *cfg, const vfi_held_model *row, const char *path,
                            double at, int64_t max_frames, vfi_query_frames *out, vf_err *err)
{
    memset(out, 0, sizeof(*out));
    out->dim = row->dim;
    vf_config c = row_config(cfg, row);
    int sound = vfi_record_is_sound(row->prep); /* an audio model's: patches of the sound */
    if (sound) {                                /* the frame sampling does not apply */
        c.sample_fps = 0.0;
        c.every = c.keyframes = c.window = c.window_stride = 0;
    }
    if (max_frames == 1 && row->frames > 0 && !sound) {
        /* a clip model's one vector: the window of frames from `at`, sampled as asked */
        c.batch_size = 1;
        max_frames = row->frames;
    } else if (max_frames == 1) { /* one frame: the first at `at`, whatever the sampling */
        c.batch_size = 1;
        c.sample_fps = 0.0;
        c.every = 0;
        c.keyframes = 0;
    }
    c.start = at;
    c.duration = 0.0;
    c.max_frames = max_frames;
    c.decoders = 1;
    c.no_overlap = 0;
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(&c, &p);
    if (rc < 0) {
        if (cfg->model)
            vfi_fail(err, rc, "%s", vf_pipeline_errmsg(p));
        else
            vfi_fail(err, rc, "%s (the stored vectors came from model %s: name its file)",
                     vf_pipeline_errmsg(p), row->name);
        goto done;
    }
    vf_model_info info;
    vf_pipeline_info(p, &info);
    if ((rc = check_model(&info, vfi_pl_audio(p), row, err)) < 0)
        goto done;
    capture cap = {.out = out, .max = max_frames};
    vf_run_hooks hooks = {.user = &cap, .file_done = capture_file, .batch = capture_batch};
    rc = vf_pipeline_run(p, &path, 1, &hooks);
    if (cap.nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    else if (rc < 0)
        vfi_fail(err, rc, "%s", vf_pipeline_errmsg(p));
    else if (cap.status < 0)
        rc = vfi_fail(err, cap.status, "%s: %s", path, cap.error);
    else if (!out->n)
        rc = at > 0.0 ? vfi_fail(err, VF_ERR_DECODE, "%s: no frame at %g s or after", path, at)
                      : vfi_fail(err, VF_ERR_DECODE, "%s: no frame", path);
done:
    vf_pipeline_free(&p);
    if (rc < 0)
        vfi_query_frames_free(out);
    return rc;
}

/* Does te's text tower pair with row's vectors? */
static vf_status check_pair(const vf_config *cfg, const vfi_held_model *row, const char *db,
                            const vf_text_info *ti, vf_err *err)
{
    char hex[65];
    vf_status rc;
    if (ti->dim != row->dim)
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s gives %d values a text; %s's %s vectors (layer %s) have %d: words are "
                        "compared with a CLIP model's image embeddings",
                        ti->path, ti->dim, db, row->name, row->layer, row->dim);
    if (row->text_sha) { /* the tower recorded beside the vectors when they were made */
        if ((rc = vfi_sha256_file_cached(ti->path, hex, err)) < 0)
            return rc;
        if (strcmp(hex, row->text_sha))
            return vfi_fail(err, VF_ERR_MODEL,
                            "%s is not the text tower of %s's %s vectors (sha256 %.12s..., they "
                            "were made beside %.12s...)",
                            ti->path, db, row->name, hex, row->text_sha);
        return VF_OK;
    }
    /* none recorded: the image tower beside this text tower must be the vectors' */
    vf_manifest *m = NULL;
    char *image = NULL;
    rc = vfi_manifest_find(cfg->models_dir, ti->name, &m, err);
    if (rc >= 0 && !(image = vfi_manifest_locate_file(cfg->models_dir, m)))
        rc = vfi_fail(err, VF_ERR_MODEL,
                      "%s records no text tower for its %s vectors, and the image tower %s is "
                      "not here to tell whether %s pairs with them",
                      db, row->name, m->file, ti->path);
    if (rc >= 0)
        rc = vfi_sha256_file_cached(image, hex, err);
    if (rc >= 0 && strcmp(hex, row->sha))
        rc = vfi_fail(err, VF_ERR_MODEL,
                      "%s does not pair with %s's %s vectors: they came from another image tower "
                      "than %s (sha256 %.12s..., not %.12s...)",
                      ti->path, db, row->name, image, row->sha, hex);
    vfi_free(image);
    vfi_manifest_free(&m);
    return rc;
}

vf_status vfi_query_text_tower(const vf_config *cfg, const vfi_held_model *row, const char *db,
                               int batch, vf_text_encoder **out, vf_err *err)
{
    *out = NULL;
    vf_config c = *cfg;
    c.model = cfg->model ? cfg->model : row->name;
    c.batch_size = batch < cfg->batch_size ? batch : cfg->batch_size;
    vf_text_encoder *te = NULL;
    /* the stored vectors' model must be a CLIP model: its manifest names a text tower */
    vf_manifest *m = NULL;
    vf_err merr = {0};
    int clip = vfi_manifest_find(cfg->models_dir, row->name, &m, &merr) >= 0 && m->text;
    vfi_manifest_free(&m);
    vf_status rc = clip ? vf_text_encoder_create(&c, &te) : VF_ERR_MODEL;
    if (!clip || (rc == VF_ERR_INVALID && te && strstr(vf_text_encoder_errmsg(te), "no text")))
        rc = vfi_fail(err, VF_ERR_MODEL,
                      "%s holds %s vectors (layer %s); words are searched in a CLIP model's image "
                      "embeddings (such as clip_vit_b32's embed), and %s has no text tower",
                      db, row->name, row->layer, row->name);
    else if (rc < 0)
        vfi_fail(err, rc, "%s", te ? vf_text_encoder_errmsg(te) : "out of memory");
    if (rc >= 0) {
        vf_text_info ti;
        vf_text_encoder_info(te, &ti);
        rc = check_pair(cfg, row, db, &ti, err);
    }
    if (rc < 0)
        vf_text_encoder_free(&te);
    *out = te;
    return rc;
}

vf_status vfi_query_encode(vf_text_encoder *te, const vfi_held_model *row, const char *const *texts,
                           int n, float **out, double *ms, vf_err *err)
{
    *out = NULL;
    vf_text_info ti;
    vf_text_encoder_info(te, &ti);
    float *vecs = vfi_mallocarray((size_t)n * (size_t)row->dim, sizeof(float));
    vf_status rc = vecs ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    /* a text that is not UTF-8, or holds no words: no query (the ids are made again below) */
    for (int i = 0; rc >= 0 && i < n; i++) {
        int64_t ids[4096];
        int n_ids = 0;
        if (ti.context > (int)(sizeof(ids) / sizeof(ids[0])))
            break;
        if ((rc = vf_text_tokenize(te, texts[i], ids, &n_ids, NULL)) < 0)
            vfi_fail(err, rc, "text %d: %s", i + 1, vf_text_encoder_errmsg(te));
        else if (n_ids <= 2)
            rc = vfi_fail(err, VF_ERR_INVALID, "text %d (\"%.40s\") holds no words", i + 1,
                          texts[i]);
    }
    double t0 = vfi_now_s();
    if (rc >= 0 && (rc = vf_text_encode(te, texts, n, vecs)) < 0)
        vfi_fail(err, rc, "%s", vf_text_encoder_errmsg(te));
    *ms = (vfi_now_s() - t0) * 1e3;
    if (rc < 0) {
        vfi_free(vecs);
        return rc;
    }
    *out = vecs;
    return VF_OK;
}

/* Uniform pictures into images (n_refs of the model's inputs): greys, then colours. */
static void picture_refs(const vf_model_info *info, float *images)
{
    /* a clip model's input is a window: the same picture in each of its frames */
    size_t plane = (size_t)info->input_size * (size_t)info->input_size *
                   (size_t)(info->frames > 0 ? info->frames : 1);
    for (int i = 0; i < N_REFS; i++) {
        float rgb[3];
        if (i < GREY_STEPS) {
            float g = i == GREY_STEPS - 1 ? 255.0f : 16.0f * (float)i;
            rgb[0] = rgb[1] = rgb[2] = g;
        } else {
            int k = i - GREY_STEPS;
            rgb[0] = 127.5f * (float)(k % 3);
            rgb[1] = 127.5f * (float)(k / 3 % 3);
            rgb[2] = 127.5f * (float)(k / 9);
        }
        for (int ch = 0; ch < 3; ch++) {
            float pixel = rgb[info->channel_order == VF_CHANNELS_BGR ? 2 - ch : ch];
            float value = (pixel - info->mean[ch]) / info->std[ch];
            float *p = images + ((size_t)i * 3 + (size_t)ch) * plane;
            for (size_t j = 0; j < plane; j++)
                p[j] = value;
        }
    }
}

/* Silence and hiss through the model's own front end into patches (N_SOUND_REFS of them,
 * patch x bands each). The noise is the same on every run (a fixed LCG), uniform, so that its
 * RMS is its peak / sqrt(3). VF_ERR_NOMEM. */
static vf_status sound_refs(const vf_audio_spec *a, float *patches, vf_err *err)
{
    enum { BLOCK = 4096 };
    float block[BLOCK];
    const size_t per = (size_t)a->patch * (size_t)a->front.n_mels;
    for (int i = 0; i < N_SOUND_REFS; i++) {
        /* peak: the RMS -70 .. -40 dB of full scale x sqrt(3) */
        double peak = i ? pow(10.0, (-80.0 + 10.0 * i) / 20.0) * sqrt(3.0) : 0.0;
        uint32_t lcg = 12345u;
        vf_logmel *m = NULL;
        vf_status rc = vfi_logmel_new(&a->front, &m, err);
        if (rc < 0)
            return rc;
        float *out = patches + (size_t)i * per;
        int got = 0;
        while (got < a->patch) {
            if (vfi_logmel_next(m, out + (size_t)got * (size_t)a->front.n_mels)) {
                got++;
                continue;
            }
            for (int j = 0; j < BLOCK; j++) {
                lcg = lcg * 1664525u + 1013904223u;
                double u = (double)(lcg >> 8) / (double)(1u << 24) * 2.0 - 1.0; /* [-1, 1) */
                block[j] = (float)(u * peak);
            }
            if ((rc = vfi_logmel_push(m, block, BLOCK, err)) < 0) {
                vfi_logmel_free(&m);
                return rc;
            }
        }
        vfi_logmel_free(&m);
    }
    return VF_OK;
}

vf_status vfi_query_flat_refs(const vf_config *cfg, const vfi_held_model *row, float **refs, int *n,
                              vf_err *err)
{
    *refs = NULL;
    *n = 0;
    vf_config c = row_config(cfg, row);
    c.batch_size = N_REFS;
    vf_extractor *ex = NULL;
    float *images = NULL, *out = NULL;
    vf_status rc = vf_extractor_create(&c, &ex);
    if (rc < 0) {
        vfi_fail(err, rc, "%s", ex ? vf_extractor_errmsg(ex) : "out of memory");
        goto done;
    }
    vf_model_info info;
    vf_extractor_info(ex, &info);
    const vf_audio_spec *audio = vfi_extractor_audio(ex);
    if ((rc = check_model(&info, audio, row, err)) < 0)
        goto done;
    int n_refs = audio ? N_SOUND_REFS : N_REFS;
    images = vfi_mallocarray((size_t)n_refs, vfi_extractor_input_floats(&info) * sizeof(float));
    out = vfi_mallocarray((size_t)n_refs * (size_t)row->dim, sizeof(float));
    if (!images || !out) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (audio)
        rc = sound_refs(audio, images, err);
    else
        picture_refs(&info, images);
    if (rc < 0)
        goto done;
    if ((rc = vf_extractor_infer(ex, images, n_refs, out)) < 0) {
        vfi_fail(err, rc, "%s", vf_extractor_errmsg(ex));
        goto done;
    }
    for (int i = 0; i < n_refs; i++)
        vfi_index_unit(out + (size_t)i * (size_t)row->dim, row->dim,
                       out + (size_t)i * (size_t)row->dim);
    *refs = out;
    *n = n_refs;
    out = NULL;
done:
    vfi_free(images);
    vfi_free(out);
    vf_extractor_free(&ex);
    return rc;
}
