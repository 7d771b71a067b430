/*
 * calib.c - int8 calibration files: read, match to a graph, update, write. Single-threaded; a
 * vf_calib is owned by whoever created or read it.
 *
 * The file:
 *   {"vidfeat_int8_calibration": 1, "model": "vgg19", "model_fingerprint": "<sha256>",
 *    "input_size": 224, "mean": [r, g, b], "std": [r, g, b], "images": 256,
 *    "ranges": {"<tensor>": 12.25, ...}}
 * Ranges are written with 9 significant digits, so reading gives back the same floats.
 */
#include "engine/calib.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/strmap.h"

#define FORMAT_KEY     "vidfeat_int8_calibration"
#define FORMAT_VERSION 1
#define MAX_CALIB_SIZE (16 << 20)
#define PREP_TOLERANCE 1e-6f /* mean/std compare equal within this (they pass through text) */

vf_calib *vfi_calib_create(const char fingerprint[65], int input_size, const float mean[3],
                           const float std[3])
{
    vf_calib *c = vfi_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    snprintf(c->fingerprint, sizeof(c->fingerprint), "%s", fingerprint);
    c->input_size = input_size;
    memcpy(c->mean, mean, sizeof(c->mean));
    memcpy(c->std, std, sizeof(c->std));
    return c;
}

void vfi_calib_free(vf_calib **pc)
{
    vf_calib *c = pc ? *pc : NULL;
    if (!c)
        return;
    for (int i = 0; i < c->n_ranges; i++)
        vfi_free(c->names[i]);
    vfi_free(c->names);
    vfi_free(c->ranges);
    vfi_free(c);
    *pc = NULL;
}

/* Append name -> range (the name is copied). */
static vf_status add_range(vf_calib *c, const char *name, float range)
{
    char **names = vfi_realloc(c->names, (size_t)(c->n_ranges + 1) * sizeof(*names));
    if (!names)
        return VF_ERR_NOMEM;
    c->names = names;
    float *ranges = vfi_realloc(c->ranges, (size_t)(c->n_ranges + 1) * sizeof(*ranges));
    if (!ranges)
        return VF_ERR_NOMEM;
    c->ranges = ranges;
    if (!(c->names[c->n_ranges] = vfi_strdup(name)))
        return VF_ERR_NOMEM;
    c->ranges[c->n_ranges++] = range;
    return VF_OK;
}

static int read_triple(const vf_json *j, const char *key, float out[3])
{
    const vf_json *a = vfi_json_get(j, key);
    if (vfi_json_array_len(a) != 3)
        return -1;
    for (int i = 0; i < 3; i++) {
        if (!vfi_json_float(vfi_json_at(a, (size_t)i), &out[i]))
            return -1;
    }
    return 0;
}

typedef struct range_reader {
    vf_calib *c;
    const char *path;
    vf_err *err;
} range_reader;

/* One member of "ranges": a tensor's name and its largest |x|. */
static int read_range(void *user, const char *name, const vf_json *v)
{
    range_reader *rr = user;
    float range;
    if (!vfi_json_float(v, &range) || !(range >= 0.0f))
        return vfi_fail(rr->err, VF_ERR_MODEL, "%s: range of '%s' is not a finite number >= 0",
                        rr->path, name);
    if (add_range(rr->c, name, range) < 0)
        return vfi_fail(rr->err, VF_ERR_NOMEM, "out of memory");
    return 0;
}

static vf_status fill(vf_calib *c, const vf_json *j, const char *path, vf_err *err)
{
    const char *fp = vfi_json_str(j, "model_fingerprint", NULL);
    const vf_json *ranges = vfi_json_get(j, "ranges");
    double size = vfi_json_num(j, "input_size", -1), images = vfi_json_num(j, "images", -1);
    if (vfi_json_num(j, FORMAT_KEY, 0) != FORMAT_VERSION)
        return vfi_fail(err, VF_ERR_MODEL, "%s: not a vidfeat int8 calibration file (version %d)",
                        path, FORMAT_VERSION);
    if (!fp || strlen(fp) != 64 || !(size >= 1 && size <= 8192) ||
        !(images >= 0 && images <= 9007199254740992.0) || /* exact in a double, fits int64 */
        read_triple(j, "mean", c->mean) < 0 || read_triple(j, "std", c->std) < 0 || !ranges ||
        !vfi_json_is_object(ranges))
        return vfi_fail(err, VF_ERR_MODEL,
                        "%s: a calibration file needs model_fingerprint, input_size, mean, std, "
                        "images and ranges",
                        path);
    snprintf(c->fingerprint, sizeof(c->fingerprint), "%s", fp);
    c->input_size = (int)size;
    c->images = (int64_t)images;
    range_reader rr = {c, path, err};
    return (vf_status)vfi_json_each(ranges, read_range, &rr);
}

vf_status vfi_calib_read(const char *path, vf_calib **out, vf_err *err)
{
    *out = NULL;
    vf_json *j = NULL;
    vf_status rc = vfi_json_load(path, MAX_CALIB_SIZE, &j, err);
    if (rc == VF_ERR_INVALID) /* not JSON, or too large */
        rc = err->code = VF_ERR_MODEL;
    if (rc < 0)
        return rc;
    vf_calib *c = vfi_calloc(1, sizeof(*c));
    if (!c)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    else
        rc = fill(c, j, path, err);
    vfi_json_free(&j);
    if (rc < 0)
        vfi_calib_free(&c);
    *out = c;
    return rc;
}

/* The calibration file's document; NULL when out of memory. */
static vf_json *calib_document(const vf_calib *c, const char *model)
{
    vf_json *doc = vfi_json_new_object(), *mean = vfi_json_new_array(), *std = vfi_json_new_array(),
            *ranges = vfi_json_new_object();
    /* each add takes its value over, also when it fails: none is skipped */
    int bad = vfi_json_add_int(doc, FORMAT_KEY, FORMAT_VERSION) < 0;
    bad |= vfi_json_add_str(doc, "model", model ? model : "") < 0;
    bad |= vfi_json_add_str(doc, "model_fingerprint", c->fingerprint) < 0;
    bad |= vfi_json_add_int(doc, "input_size", c->input_size) < 0;
    bad |= vfi_json_add(doc, "mean", mean) < 0;
    bad |= vfi_json_add(doc, "std", std) < 0;
    bad |= vfi_json_add_int(doc, "images", c->images) < 0;
    bad |= vfi_json_add(doc, "ranges", ranges) < 0;
    for (int i = 0; i < 3 && !bad; i++)
        bad = vfi_json_push_float(mean, c->mean[i]) < 0 || vfi_json_push_float(std, c->std[i]) < 0;
    for (int i = 0; i < c->n_ranges && !bad; i++)
        bad = vfi_json_add_float(ranges, c->names[i], c->ranges[i]) < 0;
    if (bad)
        vfi_json_free(&doc);
    return doc;
}

vf_status vfi_calib_write(const vf_calib *c, const char *model, const char *path, vf_err *err)
{
    vf_json *doc = calib_document(c, model);
    if (!doc)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    FILE *f;
    char *tmp;
    vf_status rc = vfi_replace_open(path, &f, &tmp, err);
    if (rc >= 0) {
        vfi_json_write(f, doc, 1); /* a write error shows when the file is closed */
        rc = vfi_replace_close(f, tmp, path, err);
    }
    vfi_json_free(&doc);
    return rc;
}

int vfi_calib_same_source(const vf_calib *a, const vf_calib *b)
{
    if (strcmp(a->fingerprint, b->fingerprint) || a->input_size != b->input_size)
        return 0;
    for (int i = 0; i < 3; i++) {
        if (fabsf(a->mean[i] - b->mean[i]) > PREP_TOLERANCE * fmaxf(1.0f, fabsf(a->mean[i])) ||
            fabsf(a->std[i] - b->std[i]) > PREP_TOLERANCE * fmaxf(1.0f, fabsf(a->std[i])))
            return 0;
    }
    return 1;
}

/* Name -> position in c->names (a name given twice: the first). */
static vf_status index_names(const vf_calib *c, vf_strmap **out)
{
    vf_status rc = vfi_strmap_create(out);
    for (int i = 0; rc >= 0 && i < c->n_ranges; i++) {
        rc = vfi_strmap_put(*out, c->names[i], i);
        if (rc == VF_ERR_INVALID) /* already there */
            rc = VF_OK;
    }
    return rc;
}

static int is_activation(const vf_graph *g, int v)
{
    return v == g->input || g->values[v].producer >= 0;
}

vf_status vfi_calib_ranges(const vf_calib *c, const vf_graph *g, float **out, vf_err *err)
{
    *out = NULL;
    vf_strmap *index = NULL;
    float *ranges = vfi_calloc((size_t)g->n_values, sizeof(float));
    vf_status rc = ranges ? index_names(c, &index) : VF_ERR_NOMEM;
    if (rc < 0) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int v = 0; v < g->n_values; v++) {
        if (!is_activation(g, v))
            continue;
        int i = vfi_strmap_get(index, g->values[v].name, -1);
        if (i < 0) {
            rc = vfi_fail(err, VF_ERR_MODEL, "no range for the tensor '%s'", g->values[v].name);
            goto fail;
        }
        ranges[v] = c->ranges[i];
    }
    *out = ranges;
    ranges = NULL;
fail:
    vfi_strmap_free(&index);
    vfi_free(ranges);
    return rc;
}

vf_status vfi_calib_update(vf_calib *c, const vf_graph *g, const float *ranges, int64_t images)
{
    vf_strmap *index = NULL;
    vf_status rc = index_names(c, &index);
    for (int v = 0; rc >= 0 && v < g->n_values; v++) {
        if (!is_activation(g, v))
            continue;
        int i = vfi_strmap_get(index, g->values[v].name, -1);
        if (i >= 0)
            c->ranges[i] = ranges[v];
        else
            rc = add_range(c, g->values[v].name, ranges[v]);
    }
    if (rc >= 0)
        c->images = images;
    vfi_strmap_free(&index);
    return rc < 0 ? VF_ERR_NOMEM : VF_OK;
}
