/*
 * store.c - the registry of kinds of store, and the calls that reach a store's ops.
 */
#include "store/store.h"

#include <stdio.h>
#include <string.h>

#include "store/store_sqlite.h"

/* Asked in order; SQLite takes what none before it claims. */
static const vf_store_ops *const kinds[] = {&vfi_store_sqlite};

size_t vfi_store_uri_scheme(const char *target)
{
    size_t n = strspn(target, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return n && !strncmp(target + n, "://", 3) ? n : 0;
}

const vf_store_ops *vfi_store_kind(const char *target, vf_err *err)
{
    if (!target || !target[0]) {
        vfi_fail(err, VF_ERR_INVALID, "no database named");
        return NULL;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (kinds[i]->claims(target))
            return kinds[i];
    }
    size_t scheme = vfi_store_uri_scheme(target);
    vfi_fail(err, VF_ERR_NOT_BUILT,
             "%.*s: no store for %.*s:// databases in this build (a file path means SQLite)",
             (int)(scheme ? scheme + 3 : strlen(target)), target, (int)scheme, target);
    return NULL;
}

vf_status vfi_store_open(const char *target, vf_store_mode mode, vf_store **out, vf_err *err)
{
    *out = NULL;
    const vf_store_ops *kind = vfi_store_kind(target, err);
    return kind ? kind->open(target, mode, out, err) : err->code;
}

void vfi_store_close(vf_store **ps)
{
    if (ps && *ps) {
        (*ps)->ops->close(*ps);
        *ps = NULL;
    }
}

vf_status vfi_store_describe(const char *target, vf_store_line_fn line, void *user, vf_err *err)
{
    const vf_store_ops *kind = vfi_store_kind(target, err);
    return kind ? kind->describe(target, line, user, err) : err->code;
}

vf_status vfi_store_model(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err)
{
    return s->ops->model(s, m, model_id, err);
}

vf_status vfi_store_is_done(vf_store *s, const vf_store_file *f, int64_t model_id,
                            const char *sampling, const char *precision, int *done, vf_err *err)
{
    return s->ops->is_done(s, f, model_id, sampling, precision, done, err);
}

vf_status vfi_store_begin(vf_store *s, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run, int64_t *ext_id,
                          vf_err *err)
{
    return s->ops->begin(s, v, model_id, sampling, run, ext_id, err);
}

vf_status vfi_store_batch(vf_store *s, int64_t ext_id, int n, int dim, int f16,
                          const int64_t *frame_index, const int64_t *pts, const double *t,
                          const float *vecs, vf_err *err)
{
    return s->ops->batch(s, ext_id, n, dim, f16, frame_index, pts, t, vecs, err);
}

vf_status vfi_store_finish(vf_store *s, int64_t ext_id, int ok, const char *error,
                           const double *stage_fps, vf_err *err)
{
    return s->ops->finish(s, ext_id, ok, error, stage_fps, err);
}

vf_status vfi_store_add_run(vf_store *s, const vf_run_record *r, const char *version, vf_err *err)
{
    if (!r->device || !r->model || !r->precision || !r->mode)
        return vfi_fail(err, VF_ERR_INVALID,
                        "a benchmark record needs device, model, precision "
                        "and mode");
    return s->ops->add_run(s, r, version, err);
}

vf_status vfi_store_models(vf_store *s, vf_store_model_fn row, void *user, vf_err *err)
{
    return s->ops->models(s, row, user, err);
}

vf_status vfi_store_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, double t,
                              float *vec, int dim, vf_store_ref *ref, int *found, vf_err *err)
{
    return s->ops->vector_at(s, model_id, f16, path, t, vec, dim, ref, found, err);
}

vf_status vfi_store_nearest(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                            const vf_store_ref *skip, vf_store_hit_fn hit, void *user, vf_err *err)
{
    return s->ops->nearest(s, model_id, f16, q, dim, k, skip, hit, user, err);
}

const char *vfi_store_versions(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s %s", i ? ", " : "", kinds[i]->name,
                              kinds[i]->version());
    return buf;
}
