/*
 * store.c - the calls that reach an open store's ops (the registry that opens one: registry.c),
 * and what every kind of store reads the same way (a database name's URI scheme).
 */
#include "store/store.h"

#include <stdio.h>
#include <string.h>

size_t vfi_store_uri_scheme(const char *target)
{
    size_t n = strspn(target, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return n && !strncmp(target + n, "://", 3) ? n : 0;
}

void vfi_store_models_sql(int version, char *buf, size_t size)
{
    /* a database read as it is may be older than the weights' column (schema 5) and the text
     * tower's (schema 7) */
    snprintf(buf, size,
             "SELECT m.id, m.name, m.file_sha256, m.layer, m.dim, m.dtype, m.preprocessing,"
             " count(*), %s, %s FROM models m JOIN extractions e ON e.model_id = m.id JOIN"
             " features f ON f.extraction_id = e.id GROUP BY m.id ORDER BY m.id",
             version >= 7 ? "m.text_sha256" : "NULL", version >= 5 ? "m.weights" : "NULL");
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
                          const char *sampling, const vf_store_run *run,
                          const vf_store_lease *fence, int64_t *ext_id, vf_err *err)
{
    return s->ops->begin(s, v, model_id, sampling, run, fence, ext_id, err);
}

vf_status vfi_store_batch(vf_store *s, int64_t ext_id, const vf_store_lease *fence, int n, int dim,
                          int f16, const int64_t *frame_index, const int64_t *pts, const double *t,
                          const double *t_end, const float *vecs, vf_err *err)
{
    return s->ops->batch(s, ext_id, fence, n, dim, f16, frame_index, pts, t, t_end, vecs, err);
}

vf_status vfi_store_finish(vf_store *s, int64_t ext_id, const vf_store_lease *fence,
                           const vf_store_end *e, vf_err *err)
{
    return s->ops->finish(s, ext_id, fence, e, err);
}

vf_status vfi_store_clock(vf_store *s, double *now, vf_err *err)
{
    return s->ops->clock(s, now, err);
}

vf_status vfi_store_enqueue(vf_store *s, const char *const *names, int n, vf_err *err)
{
    return n > 0 ? s->ops->enqueue(s, names, n, err) : VF_OK;
}

vf_status vfi_store_offer(vf_store *s, const vf_store_work *w, const vf_store_offer *files, int n,
                          unsigned char *done, vf_err *err)
{
    return s->ops->offer(s, w, files, n, done, err);
}

vf_status vfi_store_claim(vf_store *s, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    c->kind = VF_CLAIM_NONE;
    c->lease = (vf_store_lease){0, 0};
    c->index = -1;
    c->name = NULL;
    c->error[0] = '\0';
    return s->ops->claim(s, w, c, err);
}

vf_status vfi_store_renew(vf_store *s, const vf_store_work *w, const int64_t *ids, int n,
                          vf_err *err)
{
    return n > 0 ? s->ops->renew(s, w, ids, n, err) : VF_OK;
}

vf_status vfi_store_release(vf_store *s, const vf_store_lease *l, int done, vf_err *err)
{
    return s->ops->release(s, l, done, err);
}

vf_status vfi_store_work_states(vf_store *s, const vf_store_work *w, vf_store_state_fn fn,
                                void *user, vf_err *err)
{
    return s->ops->work_states(s, w, fn, user, err);
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

vf_status vfi_store_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, int by_name,
                              double t, float *vec, int dim, vf_store_ref *ref, int *found,
                              vf_err *err)
{
    return s->ops->vector_at(s, model_id, f16, path, by_name, t, vec, dim, ref, found, err);
}

vf_status vfi_store_nearest(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                            const vf_store_ref *skip, vf_store_hit_fn hit, void *user, vf_err *err)
{
    return s->ops->nearest(s, model_id, f16, q, dim, k, skip, hit, user, err);
}

vf_status vfi_store_vectors(vf_store *s, int64_t model_id, int f16, int dim, vf_store_want_fn want,
                            vf_store_vector_fn fn, void *user, vf_err *err)
{
    return s->ops->vectors(s, model_id, f16, dim, want, fn, user, err);
}

vf_status vfi_store_vectors_at(vf_store *s, int64_t model_id, int f16, int dim,
                               const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                               vf_err *err)
{
    if (n < 0 || n > VF_STORE_MAX_REFS)
        return vfi_fail(err, VF_ERR_INVALID, "at most %d vectors at once", VF_STORE_MAX_REFS);
    return n ? s->ops->vectors_at(s, model_id, f16, dim, refs, n, fn, user, err) : VF_OK;
}

vf_status vfi_store_index_put(vf_store *s, const vf_store_index *ix, vf_err *err)
{
    return s->ops->index_put(s, ix, err);
}

vf_status vfi_store_indexes(vf_store *s, int64_t model_id, vf_store_index_fn fn, void *user,
                            vf_err *err)
{
    return s->ops->indexes(s, model_id, fn, user, err);
}

vf_status vfi_store_merge(vf_store *s, const char *from, vf_store_conflict_fn conflict, void *user,
                          int64_t *merged, vf_err *err)
{
    *merged = 0;
    if (!s->ops->merge)
        return vfi_fail(err, VF_ERR_NOT_BUILT, "merging into a %s database is not supported",
                        s->ops->name);
    return s->ops->merge(s, from, conflict, user, merged, err);
}
