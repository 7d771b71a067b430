/*
 * int8_file.c - see int8_file.h. The file's format is calib.c's.
 */
#include "engine/int8_file.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/digest.h"
#include "engine/calib.h"

#define CALIB_SUFFIX ".int8"

struct vf_int8_file {
    char *model_path, *model_name;
    /* while calibrating: the ranges to save (a file's other layers kept); NULL once saved for
     * good, or when a file was used */
    vf_calib *calib;
    char *target;   /* the file to write; NULL: beside the model, else the cache */
    char *path;     /* the file the scales were read from or saved to */
    int64_t frames; /* its images */
    int64_t saved;  /* images the last file written holds */
};

/* Where a model's calibration file goes by default: beside the model file, and in the user's
 * cache directory, named with the model's fingerprint so that two model files of the same name
 * do not share it. Either may come back NULL. */
static void default_paths(const char *model_path, const char *fingerprint, char **beside,
                          char **cached)
{
    size_t len = strlen(model_path) + sizeof(CALIB_SUFFIX);
    *beside = vfi_malloc(len);
    if (*beside)
        snprintf(*beside, len, "%s%s", model_path, CALIB_SUFFIX);
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    len = strlen(base) + 16 + sizeof("-" CALIB_SUFFIX);
    char *name = vfi_malloc(len);
    *cached = NULL;
    if (name) {
        snprintf(name, len, "%s-%.16s%s", base, fingerprint, CALIB_SUFFIX);
        *cached = vfi_cache_path(name);
        vfi_free(name);
    }
}

/* Try the file at path: 1 when its ranges were taken (into *ranges), else 0. */
static int try_file(vf_int8_file *f, const char *path, const vf_graph *g, float **ranges)
{
    vf_calib *file = NULL;
    vf_err e;
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if (vfi_calib_read(path, &file, &e) < 0) {
        vfi_log(VF_LOG_WARNING, "engine", "int8: %s; calibrating again", e.msg);
        return 0;
    }
    int used = 0;
    if (!vfi_calib_same_source(file, f->calib)) {
        vfi_log(VF_LOG_INFO, "engine",
                "int8: %s is for another model file or preprocessing; calibrating again", path);
    } else if (vfi_calib_ranges(file, g, ranges, &e) >= 0) {
        f->path = vfi_strdup(path);
        f->frames = file->images;
        vfi_calib_free(&f->calib);
        vfi_log(VF_LOG_INFO, "engine", "int8: scales from %s (calibrated on %lld frames)", path,
                (long long)file->images);
        used = 1;
    } else if (e.code == VF_ERR_MODEL) { /* another layer's: keep those, add these */
        vfi_log(VF_LOG_INFO, "engine", "int8: %s: %s; calibrating this layer", path, e.msg);
        vfi_calib_free(&f->calib);
        f->calib = file;
        file = NULL;
        vfi_free(f->target);
        f->target = vfi_strdup(path);
    }
    vfi_calib_free(&file);
    return used;
}

vf_status vfi_int8_file_open(const vf_int8_source *src, const vf_graph *g, vf_int8_file **out,
                             float **ranges, vf_err *err)
{
    *out = NULL;
    *ranges = NULL;
    char fp[65];
    vf_status rc = vfi_sha256_file_sampled(src->model_path, fp, err);
    if (rc < 0)
        return rc;
    vf_int8_file *f = vfi_calloc(1, sizeof(*f));
    if (!f || !(f->model_path = vfi_strdup(src->model_path)) ||
        !(f->model_name = vfi_strdup(src->model_name)) ||
        !(f->calib = vfi_calib_create(fp, src->input_size, src->mean, src->std))) {
        vfi_int8_file_free(&f);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    char *beside = NULL, *cached = NULL;
    if (!src->requested)
        default_paths(src->model_path, fp, &beside, &cached);
    const char *paths[2] = {src->requested ? src->requested : beside, cached};
    for (int i = 0; i < 2 && f->calib && !*ranges && !src->recalibrate; i++)
        try_file(f, paths[i], g, ranges);
    if (f->calib && !f->target && src->requested)
        f->target = vfi_strdup(src->requested);
    vfi_free(beside);
    vfi_free(cached);
    if ((!f->calib && !*ranges) || (*ranges && !f->path) ||
        (f->calib && src->requested && !f->target)) {
        vfi_free(*ranges);
        *ranges = NULL;
        vfi_int8_file_free(&f);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    *out = f;
    return VF_OK;
}

void vfi_int8_file_save(vf_int8_file *f, const vf_graph *g, const float *ranges, int64_t n,
                        int complete)
{
    if (!f->calib || n == f->saved)
        return;
    char *beside = NULL, *cached = NULL;
    if (!f->target)
        default_paths(f->model_path, f->calib->fingerprint, &beside, &cached);
    const char *paths[2] = {f->target ? f->target : beside, cached};
    const char *saved = NULL;
    vf_err errs[2] = {{VF_OK, "no file name"}, {VF_OK, "no cache directory ($HOME unset)"}};
    int updated = vfi_calib_update(f->calib, g, ranges, n) >= 0;
    if (!updated)
        snprintf(errs[0].msg, sizeof(errs[0].msg), "out of memory");
    for (int i = 0; updated && i < 2 && !saved; i++) {
        if (!paths[i])
            continue;
        if (i == 1)
            vfi_make_parent_dirs(paths[i]);
        if (vfi_calib_write(f->calib, f->model_name, paths[i], &errs[i]) >= 0)
            saved = paths[i];
    }
    if (saved) {
        char *path = vfi_strdup(saved);
        if (path) {
            vfi_free(f->path);
            f->path = path;
            if (!f->target)
                f->target = vfi_strdup(saved); /* a later save goes to the same place */
        }
        f->saved = f->frames = n;
        vfi_log(VF_LOG_INFO, "engine", "int8: scales calibrated on %lld frames saved to %s",
                (long long)n, saved);
    } else {
        vfi_log(VF_LOG_WARNING, "engine",
                "int8: the calibration could not be saved (%s%s%s); the next run calibrates again",
                errs[0].msg, paths[1] ? "; " : "", paths[1] ? errs[1].msg : "");
    }
    if (complete)
        vfi_calib_free(&f->calib); /* the backend's ranges are final */
    vfi_free(beside);
    vfi_free(cached);
}

const char *vfi_int8_file_path(const vf_int8_file *f)
{
    return f ? f->path : NULL;
}

int64_t vfi_int8_file_frames(const vf_int8_file *f)
{
    return f ? f->frames : 0;
}

void vfi_int8_file_free(vf_int8_file **pf)
{
    vf_int8_file *f = pf ? *pf : NULL;
    if (!f)
        return;
    vfi_calib_free(&f->calib);
    vfi_free(f->model_path);
    vfi_free(f->model_name);
    vfi_free(f->target);
    vfi_free(f->path);
    vfi_free(f);
    *pf = NULL;
}
