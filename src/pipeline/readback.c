/*
 * readback.c - vf_db_read_vectors: the stored vectors of one model row, streamed from the store
 * (vfi_store_vectors) to the caller, what `vidfeat export` writes out.
 */
#include <stdio.h>

#include "vidfeat.h"
#include "core/mem.h"
#include "core/status.h"
#include "pipeline/held.h"
#include "store/store.h"

typedef struct relay {
    int (*vector)(void *user, const vf_db_vector *v);
    void *user;
    int64_t extraction; /* the one whose shots are converted (0: none yet), as the API has them */
    vf_db_shot *shots;
    int n_shots;
} relay;

static vf_status relay_vector(void *user, const vf_store_vector *sv)
{
    relay *r = user;
    if (sv->ref.extraction != r->extraction) { /* a new extraction's first vector */
        vfi_free(r->shots);
        r->shots = sv->n_shots ? vfi_mallocarray((size_t)sv->n_shots, sizeof(*r->shots)) : NULL;
        if (sv->n_shots && !r->shots)
            return VF_ERR_NOMEM;
        for (int i = 0; i < sv->n_shots; i++)
            r->shots[i] = (vf_db_shot){sv->shots[i].first, sv->shots[i].last, sv->shots[i].start,
                                       sv->shots[i].end};
        r->extraction = sv->ref.extraction;
        r->n_shots = sv->n_shots;
    }
    vf_db_vector v = {sv->path,    sv->sampling, sv->frames, sv->ref.frame_index,
                      sv->ref.pts, sv->ref.t,    sv->vec,    sv->t_end,
                      r->shots,    r->n_shots};
    return r->vector(r->user, &v) ? VF_ERR_CANCELLED : VF_OK;
}

vf_status vf_db_read_vectors(const char *db_path, const vf_config *cfg,
                             int (*model)(void *user, const vf_db_model *m),
                             int (*vector)(void *user, const vf_db_vector *v), void *user,
                             char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    vfi_held rows = {0};
    const vfi_held_model *row = NULL;
    if (!db_path || !cfg || !vector) {
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "read vectors: a database, a configuration and a "
                      "vector callback are needed");
        goto done;
    }
    if ((rc = vfi_store_open(db_path, VF_STORE_READ, &s, &err)) < 0 ||
        (rc = vfi_held_read(s, &rows, &err)) < 0 ||
        (rc = vfi_held_choose(&rows, cfg, 0, db_path, &row, &err)) < 0)
        goto done;
    vf_db_model m = {row->name, row->layer, row->sha,     row->prep,
                     row->dim,  row->f16,   row->vectors, row->frames};
    if (model && model(user, &m)) {
        rc = vfi_fail(&err, VF_ERR_CANCELLED, "read vectors: stopped by the caller");
        goto done;
    }
    relay r = {vector, user, 0, NULL, 0};
    rc = vfi_store_vectors(s, row->id, row->f16, row->dim, NULL, relay_vector, &r, &err);
    vfi_free(r.shots);
    if (rc == VF_ERR_NOMEM && !err.msg[0])
        vfi_fail(&err, rc, "out of memory");
    if (rc == VF_ERR_CANCELLED && !err.msg[0])
        vfi_fail(&err, rc, "read vectors: stopped by the caller");
done:
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_held_free(&rows);
    vfi_store_close(&s);
    return rc;
}
