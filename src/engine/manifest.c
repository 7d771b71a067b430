/*
 * manifest.c - reading model manifests and searching the model directories. Stateless apart
 * from reading $VIDFEAT_MODELS; any thread.
 */
#include "engine/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/tree.h"
#include "engine/onnx.h"

#define MAX_MANIFEST_SIZE (1 << 20)

void vfi_manifest_free(vf_manifest **pm)
{
    vf_manifest *m = pm ? *pm : NULL;
    if (!m)
        return;
    vfi_free(m->path);
    vfi_free(m->dir);
    vfi_free(m->name);
    vfi_free(m->description);
    vfi_free(m->file);
    vfi_free(m->sha256);
    vfi_free(m->url);
    vfi_free(m->export_hint);
    for (int i = 0; i < m->n_layers; i++) {
        vfi_free(m->layers[i].name);
        vfi_free(m->layers[i].tensor);
    }
    vfi_free(m->layers);
    if (m->text) {
        vfi_free(m->text->file);
        vfi_free(m->text->tensor);
        vfi_free(m->text->vocab);
        vfi_free(m->text->vocab_sha256);
        vfi_free(m->text->vocab_url);
        vfi_free(m->text->vocab_licence);
        vfi_free(m->text);
    }
    vfi_free(m->audio);
    vfi_free(m);
    *pm = NULL;
}

/* Copy an optional string member; VF_ERR_NOMEM only. */
static vf_status dup_member(const vf_json *j, const char *key, char **out)
{
    const char *s = vfi_json_str(j, key, NULL);
    *out = NULL;
    if (!s)
        return VF_OK;
    *out = vfi_strdup(s);
    return *out ? VF_OK : VF_ERR_NOMEM;
}

static vf_status read_triple(const vf_json *in, const char *key, float *out, const char *path,
                             vf_err *err)
{
    const vf_json *a = vfi_json_get(in, key);
    if (vfi_json_array_len(a) != 3)
        return vfi_fail(err, VF_ERR_MODEL, "%s: input.%s must be an array of 3 numbers", path, key);
    for (int i = 0; i < 3; i++) {
        if (!vfi_json_float(vfi_json_at(a, (size_t)i), &out[i]))
            return vfi_fail(err, VF_ERR_MODEL, "%s: input.%s must hold numbers", path, key);
    }
    return VF_OK;
}

/* An integer member of section in lo..hi (def when absent). */
static vf_status int_member(const vf_json *j, const char *section, const char *key, int def, int lo,
                            int hi, const char *path, int *out, vf_err *err)
{
    double v = vfi_json_num(j, key, def);
    if (!(v >= lo && v <= hi) || v != (double)(int)v)
        return vfi_fail(err, VF_ERR_MODEL, "%s: %s.%s must be an integer in %d..%d", path, section,
                        key, lo, hi);
    *out = (int)v;
    return VF_OK;
}

/* A manifest names bare files: no directory parts. */
static int bare_name(const char *s)
{
    return !s || (*s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."));
}

/* "text": {"file", "vocab", "vocab_sha256", "vocab_url", "vocab_licence", "vocab_size",
 * "context", "dim", "tensor"} */
static vf_status fill_text(const vf_json *j, vf_manifest *m, vf_err *err)
{
    const vf_json *tj = vfi_json_get(j, "text");
    if (!tj)
        return VF_OK;
    if (!vfi_json_is_object(tj))
        return vfi_fail(err, VF_ERR_MODEL, "%s: \"text\" must be an object", m->path);
    vf_text_spec *t = m->text = vfi_calloc(1, sizeof(*t));
    if (!t || dup_member(tj, "file", &t->file) < 0 || dup_member(tj, "tensor", &t->tensor) < 0 ||
        dup_member(tj, "vocab", &t->vocab) < 0 ||
        dup_member(tj, "vocab_sha256", &t->vocab_sha256) < 0 ||
        dup_member(tj, "vocab_url", &t->vocab_url) < 0 ||
        dup_member(tj, "vocab_licence", &t->vocab_licence) < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (!t->file || !t->vocab)
        return vfi_fail(err, VF_ERR_MODEL, "%s: text.file and text.vocab are required", m->path);
    if (!bare_name(t->file) || !bare_name(t->vocab) || !bare_name(t->vocab_licence))
        return vfi_fail(err, VF_ERR_MODEL, "%s: text files must be bare file names", m->path);
    vf_status rc =
        int_member(tj, "text", "vocab_size", 49408, 515, 1 << 20, m->path, &t->vocab_size, err);
    if (rc >= 0)
        rc = int_member(tj, "text", "context", 77, 2, 4096, m->path, &t->context, err);
    if (rc >= 0)
        rc = int_member(tj, "text", "dim", 0, 0, 1 << 24, m->path, &t->dim, err);
    return rc;
}

/* An image or clip model's "input": size, frames, channel order, resize, mean and std. */
static vf_status fill_input(const vf_json *in, vf_manifest *m, vf_err *err)
{
    const char *path = m->path;
    double size = vfi_json_num(in, "size", 0);
    if (!(size >= 1 && size <= 8192)) /* NaN too: the (int) below needs a number in range */
        return vfi_fail(err, VF_ERR_MODEL, "%s: input.size must be 1..8192", path);
    m->input_size = (int)size;
    double frames = vfi_json_num(in, "frames", 0); /* a clip model's window; 0: not one */
    if (!(frames >= 0 && frames <= 4096))
        return vfi_fail(err, VF_ERR_MODEL, "%s: input.frames must be 0..4096", path);
    m->frames = (int)frames;
    const char *order = vfi_json_str(in, "channel_order", "RGB");
    if (!strcasecmp(order, "RGB"))
        m->channel_order = VF_CHANNELS_RGB;
    else if (!strcasecmp(order, "BGR"))
        m->channel_order = VF_CHANNELS_BGR;
    else
        return vfi_fail(err, VF_ERR_MODEL, "%s: channel_order must be RGB or BGR", path);
    const char *resize = vfi_json_str(in, "resize", "stretch");
    if (!strcmp(resize, "stretch")) {
        m->resize = VF_RESIZE_STRETCH;
    } else if (!strcmp(resize, "short_side_crop")) {
        m->resize = VF_RESIZE_SHORT_CROP;
        double s = vfi_json_num(in, "resize_short", m->input_size);
        if (!(s >= m->input_size && s <= 16384))
            return vfi_fail(err, VF_ERR_MODEL, "%s: resize_short must be >= size", path);
        m->resize_short = (int)s;
    } else if (!strcmp(resize, "resize_crop")) {
        /* torchvision's video recipe: scaled to [height, width], then the centre crop */
        m->resize = VF_RESIZE_FIXED_CROP;
        const vf_json *to = vfi_json_get(in, "resize_to");
        float hw[2];
        if (vfi_json_array_len(to) != 2 || !vfi_json_float(vfi_json_at(to, 0), &hw[0]) ||
            !vfi_json_float(vfi_json_at(to, 1), &hw[1]) || !(hw[0] >= m->input_size) ||
            !(hw[1] >= m->input_size) || !(hw[0] <= 16384) || !(hw[1] <= 16384))
            return vfi_fail(err, VF_ERR_MODEL,
                            "%s: resize_crop needs resize_to: [height, width], each >= size", path);
        m->resize_to[0] = (int)hw[0];
        m->resize_to[1] = (int)hw[1];
    } else {
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s: resize must be stretch, short_side_crop or resize_crop", path);
    }
    vf_status rc = read_triple(in, "mean", m->mean, path, err);
    if (rc >= 0)
        rc = read_triple(in, "std", m->std, path, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < 3; i++) {
        if (!(m->std[i] > 0))
            return vfi_fail(err, VF_ERR_MODEL, "%s: input.std must be positive", path);
    }
    return VF_OK;
}

/* One of names (NULL-terminated) as a string member: its index; def when absent, -1 when it
 * is something else. */
static int choice(const vf_json *j, const char *key, const char *const *names, int def)
{
    if (!vfi_json_get(j, key))
        return def;
    const char *v = vfi_json_str(j, key, "");
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

/* An audio model's "audio": {"sample_rate", "window", "hop", "n_fft" (default: the power of two
 * at least window), "center" (false), "power" (1 or 2), "mels", "fmin", "fmax", "mel_scale"
 * ("htk" or "slaney"), "triangles" ("mel" or "hz"), "norm" ("none" or "slaney"), "log" ("ln":
 * ln(x + log_offset), or "db": 10 log10(max(x, log_offset))), "log_offset", "patch" (frames a
 * network input), "patch_hop" (default: patch)}; logmel.h says what each means. */
static vf_status fill_audio(const vf_json *aj, vf_manifest *m, vf_err *err)
{
    static const char *const scales[] = {"htk", "slaney", NULL},
                             *const axes[] = {"hz", "mel", NULL},
                             *const norms[] = {"none", "slaney", NULL},
                             *const logs[] = {"ln", "db", NULL};
    const char *path = m->path;
    if (!vfi_json_is_object(aj))
        return vfi_fail(err, VF_ERR_MODEL, "%s: \"audio\" must be an object", path);
    vf_audio_spec *a = m->audio = vfi_calloc(1, sizeof(*a));
    if (!a)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_logmel_cfg *c = &a->front;
    vf_status rc =
        int_member(aj, "audio", "sample_rate", 0, 1000, 384000, path, &c->sample_rate, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "window", 0, 2, 65536, path, &c->window, err);
    int fft = 2;
    while (fft < c->window)
        fft *= 2;
    if (rc >= 0)
        rc = int_member(aj, "audio", "n_fft", fft, 2, 65536, path, &c->n_fft, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "hop", 0, 1, 1 << 22, path, &c->hop, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "power", 0, 1, 2, path, &c->power, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "mels", 0, 1, VF_MAX_MELS, path, &c->n_mels, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "patch", 0, 1, 1 << 16, path, &a->patch, err);
    if (rc >= 0)
        rc = int_member(aj, "audio", "patch_hop", a->patch, 1, 1 << 16, path, &a->patch_hop, err);
    if (rc < 0)
        return rc;
    c->center = vfi_json_bool(aj, "center", 0);
    int scale = choice(aj, "mel_scale", scales, -1), axis = choice(aj, "triangles", axes, -1),
        norm = choice(aj, "norm", norms, 0), log = choice(aj, "log", logs, -1);
    if (scale < 0 || axis < 0 || norm < 0 || log < 0 || c->center < 0)
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s: audio needs mel_scale (htk, slaney), triangles (hz, mel) and log "
                        "(ln, db); norm is none or slaney, center true or false",
                        path);
    c->scale = scale == 0 ? VF_MEL_HTK : VF_MEL_SLANEY;
    c->triangles_in_mel = axis == 1;
    c->slaney_norm = norm == 1;
    c->log = log == 0 ? VF_MEL_LN_OFFSET : VF_MEL_DB;
    c->fmin = vfi_json_num(aj, "fmin", -1);
    c->fmax = vfi_json_num(aj, "fmax", -1);
    c->log_offset = vfi_json_num(aj, "log_offset", -1);
    const char *why = vfi_logmel_check(c);
    if (*why)
        return vfi_fail(err, VF_ERR_MODEL, "%s: audio: %s", path, why);
    return VF_OK;
}

static vf_status fill_manifest(const vf_json *j, vf_manifest *m, vf_err *err)
{
    const char *path = m->path;
    if (dup_member(j, "name", &m->name) < 0 || dup_member(j, "description", &m->description) < 0 ||
        dup_member(j, "file", &m->file) < 0 || dup_member(j, "sha256", &m->sha256) < 0 ||
        dup_member(j, "url", &m->url) < 0 || dup_member(j, "export", &m->export_hint) < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (!m->name || !m->file)
        return vfi_fail(err, VF_ERR_MODEL, "%s: \"name\" and \"file\" are required", path);
    if (!bare_name(m->file)) /* else it would read as "not found" where it was never looked for */
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s: \"file\" must be a bare file name, found beside the manifest or in "
                        "the models directories, not '%s'",
                        path, m->file);
    double bytes = vfi_json_num(j, "size", 0);
    if (!(bytes >= 0 && bytes <= (double)INT64_MAX)) /* NaN too */
        return vfi_fail(err, VF_ERR_MODEL, "%s: \"size\" must be a byte count", path);
    m->size = (int64_t)bytes;
    const vf_json *in = vfi_json_get(j, "input"), *aj = vfi_json_get(j, "audio");
    vf_status rc;
    if (aj && in)
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s: an audio model has \"audio\" and an image model \"input\", not both",
                        path);
    if (aj)
        rc = fill_audio(aj, m, err);
    else if (vfi_json_is_object(in))
        rc = fill_input(in, m, err);
    else
        rc = vfi_fail(err, VF_ERR_MODEL, "%s: \"input\" object is required", path);
    if (rc < 0)
        return rc;
    const vf_json *layers = vfi_json_get(j, "layers");
    long n_layers = vfi_json_array_len(layers);
    if (n_layers < 1 || n_layers > 64)
        return vfi_fail(err, VF_ERR_MODEL, "%s: \"layers\" must list 1..64 layers", path);
    m->layers = vfi_calloc((size_t)n_layers, sizeof(*m->layers));
    if (!m->layers)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (long i = 0; i < n_layers; i++) {
        const vf_json *l = vfi_json_at(layers, (size_t)i);
        vf_layer_spec *s = &m->layers[m->n_layers++];
        if (dup_member(l, "name", &s->name) < 0 || dup_member(l, "tensor", &s->tensor) < 0)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        if (!s->name || !s->tensor)
            return vfi_fail(err, VF_ERR_MODEL, "%s: each layer needs \"name\" and \"tensor\"",
                            path);
        double dim = vfi_json_num(l, "dim", 0); /* 0: not stated */
        if (!(dim >= 0 && dim <= 1 << 24))
            return vfi_fail(err, VF_ERR_MODEL, "%s: layer %s: dim must be 0..16777216", path,
                            s->name);
        s->dim = (int)dim;
    }
    return fill_text(j, m, err);
}

vf_status vfi_manifest_load(const char *path, vf_manifest **out, vf_err *err)
{
    vf_json *j = NULL;
    vf_manifest *m = NULL;
    vf_status rc = vfi_json_load(path, MAX_MANIFEST_SIZE, &j, err);
    if (rc == VF_ERR_INVALID) /* not JSON, or too large: a model that cannot be loaded */
        rc = err->code = VF_ERR_MODEL;
    if (rc < 0)
        return rc;
    if (!vfi_json_get(j, "vidfeat_manifest")) {
        rc = vfi_fail(err, VF_ERR_UNSUPPORTED, "%s: not a vidfeat manifest", path);
        goto fail;
    }
    m = vfi_calloc(1, sizeof(*m));
    if (!m || !(m->path = vfi_strdup(path)) || !(m->dir = vfi_strdup(path))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    char *slash = strrchr(m->dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(m->dir, ".");
    rc = fill_manifest(j, m, err);
    if (rc < 0)
        goto fail;
    *out = m;
    m = NULL;
fail:
    vfi_manifest_free(&m);
    vfi_json_free(&j);
    return rc;
}

int vfi_models_search_path(const char *models_dir, const char **dirs, char *env_buf,
                           size_t env_size)
{
    int n = 0;
    size_t used = 0;
    if (models_dir && *models_dir)
        dirs[n++] = models_dir;
    const char *env = getenv("VIDFEAT_MODELS");
    if (env && *env && strlen(env) < env_size) {
        strcpy(env_buf, env);
        used = strlen(env) + 1;
        for (char *tok = strtok(env_buf, ":"); tok && n < VF_MAX_SEARCH_DIRS - 5;
             tok = strtok(NULL, ":"))
            dirs[n++] = tok;
    }
    dirs[n++] = "models";
    /* an installation's manifests where it is now (it may have been moved with its prefix;
     * in the build tree there are none there), this source tree's, where it was installed */
    if (used < env_size &&
        vfi_installed_path(VF_MODELS_FROM_LIB, VF_MODELS_FROM_BIN, env_buf + used, env_size - used))
        dirs[n++] = env_buf + used;
    const vf_tree *tree = vfi_build_tree(); /* never once installed */
    if (tree) {
        dirs[n++] = tree->source_models;
        dirs[n++] = tree->build_models;
    }
    dirs[n++] = VF_INSTALL_MODELS_DIR;
    return n;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

vf_status vfi_manifest_find(const char *models_dir, const char *name, vf_manifest **out,
                            vf_err *err)
{
    const char *dirs[VF_MAX_SEARCH_DIRS];
    char env[4096], path[4096];
    int n = vfi_models_search_path(models_dir, dirs, env, sizeof(env));
    if (strchr(name, '/') || !*name)
        return vfi_fail(err, VF_ERR_INVALID, "invalid model name '%s'", name);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s.json", dirs[i], name);
        if (!is_file(path))
            continue;
        vf_status rc = vfi_manifest_load(path, out, err);
        if (rc == VF_ERR_UNSUPPORTED)
            continue; /* some other JSON with that name */
        return rc;
    }
    return vfi_fail(err, VF_ERR_IO,
                    "unknown model '%s' (no %s.json in the models directories; "
                    "`vidfeat models` lists the known ones)",
                    name, name);
}

vf_status vfi_manifest_foreach(const char *models_dir,
                               vf_status (*visit)(void *user, vf_manifest *m), void *user)
{
    const char *dirs[VF_MAX_SEARCH_DIRS];
    char env[4096], path[4096];
    int n = vfi_models_search_path(models_dir, dirs, env, sizeof(env));
    for (int i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *e;
        vf_status rc = VF_OK;
        while (rc == VF_OK && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
                continue;
            snprintf(path, sizeof(path), "%s/%s", dirs[i], e->d_name);
            vf_manifest *m = NULL;
            vf_err err;
            rc = vfi_manifest_load(path, &m, &err);
            if (rc == VF_ERR_MODEL)
                vfi_log(VF_LOG_WARNING, "models", "%s", err.msg);
            if (rc == VF_ERR_NOMEM)
                break;
            rc = rc < 0 ? VF_OK : visit(user, m);
        }
        closedir(d);
        if (rc != VF_OK)
            return rc;
    }
    return VF_OK;
}

typedef struct by_file {
    const char *base;
    vf_manifest *found;
} by_file;

static vf_status match_file(void *user, vf_manifest *m)
{
    by_file *b = user;
    if (strcmp(m->file, b->base) != 0) {
        vfi_manifest_free(&m);
        return VF_OK;
    }
    b->found = m;
    return VF_EOF;
}

vf_status vfi_manifest_find_by_file(const char *models_dir, const char *base, vf_manifest **out,
                                    vf_err *err)
{
    by_file b = {base, NULL};
    vf_status rc = vfi_manifest_foreach(models_dir, match_file, &b);
    if (rc == VF_ERR_NOMEM)
        return vfi_fail(err, rc, "out of memory");
    if (!b.found)
        return vfi_fail(err, VF_ERR_IO, "no manifest names '%s'", base);
    *out = b.found;
    return VF_OK;
}

char *vfi_manifest_locate(const char *models_dir, const vf_manifest *m, const char *file)
{
    const char *dirs[VF_MAX_SEARCH_DIRS + 1];
    char env[4096], path[4096];
    int n = vfi_models_search_path(models_dir, dirs, env, sizeof(env));
    dirs[n++] = m->dir;
    if (!file || strchr(file, '/'))
        return NULL; /* manifests name bare files only */
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", dirs[i], file);
        if (is_file(path))
            return vfi_strdup(path);
    }
    return NULL;
}

char *vfi_manifest_locate_file(const char *models_dir, const vf_manifest *m)
{
    return vfi_manifest_locate(models_dir, m, m->file);
}

vf_weights_kind vfi_model_weights(const vf_manifest *m, const char *path)
{
    char value[256];
    vf_err err = {0};
    if (vfi_onnx_metadata(path, VFI_WEIGHTS_KEY, value, sizeof(value), &err) == VF_OK &&
        !strncmp(value, "random", 6))
        return VF_WEIGHTS_RANDOM;
    if (!m || !m->sha256 || !*m->sha256)
        return VF_WEIGHTS_UNKNOWN;
    struct stat st;
    if (stat(path, &st) != 0)
        return VF_WEIGHTS_UNKNOWN;
    if (m->size > 0 && (int64_t)st.st_size != m->size)
        return VF_WEIGHTS_OTHER; /* no need to read it */
    char hex[65];
    if (vfi_sha256_file_cached(path, hex, &err) < 0)
        return VF_WEIGHTS_UNKNOWN;
    return !strcasecmp(hex, m->sha256) ? VF_WEIGHTS_OFFICIAL : VF_WEIGHTS_OTHER;
}
