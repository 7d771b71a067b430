/*
 * held.c - the model rows a database holds vectors of, and the one a configuration chooses.
 */
#include "pipeline/held.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "store/record.h"
#include "engine/extractor.h"

void vfi_held_free(vfi_held *l)
{
    for (int i = 0; i < l->n; i++) {
        vfi_free(l->v[i].name);
        vfi_free(l->v[i].sha);
        vfi_free(l->v[i].layer);
        vfi_free(l->v[i].prep);
        vfi_free(l->v[i].text_sha);
        vfi_free(l->v[i].weights);
    }
    vfi_free(l->v);
}

static void collect_row(void *user, int64_t id, const vf_store_model *m, int64_t vectors)
{
    vfi_held *l = user;
    vfi_held_model *grown = vfi_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
    if (!grown) {
        l->nomem = 1;
        return;
    }
    l->v = grown;
    vfi_held_model *r = &l->v[l->n++];
    *r = (vfi_held_model){id,
                          vfi_strdup(m->name),
                          vfi_strdup(m->file_sha256),
                          vfi_strdup(m->layer),
                          vfi_strdup(m->preprocessing),
                          m->dim,
                          m->f16,
                          vfi_record_frames(m->preprocessing),
                          vectors,
                          m->text_sha256 ? vfi_strdup(m->text_sha256) : NULL,
                          m->weights ? vfi_strdup(m->weights) : NULL};
    if (!r->name || !r->sha || !r->layer || !r->prep || (m->text_sha256 && !r->text_sha) ||
        (m->weights && !r->weights))
        l->nomem = 1;
}

vf_status vfi_held_read(vf_store *s, vfi_held *h, vf_err *err)
{
    *h = (vfi_held){0};
    vf_status rc = vfi_store_models(s, collect_row, h, err);
    if (rc >= 0 && h->nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    return rc;
}

/* "name (layer, dim, dtype), ..." for messages. */
static void list_rows(const vfi_held *l, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s (%s, %d, %s, %lld vectors)",
                                i ? ", " : "", l->v[i].name, l->v[i].layer, l->v[i].dim,
                                l->v[i].f16 ? "f16" : "f32", (long long)l->v[i].vectors);
}

/* The one row cfg selects. */
vf_status vfi_held_choose(const vfi_held *l, const vf_config *cfg, int sound_only, const char *db,
                          const vfi_held_model **out, vf_err *err)
{
    /* rows record a model file by the name the extractor gives it */
    char held[VF_ERRMSG_SIZE];
    size_t len = 5;
    const char *name = "(any)";
    if (cfg->model)
        name = vfi_model_file_name(cfg->model, &len);
    int n = 0, of_kind = 0; /* rows that match; rows of the kind asked (sound_only: sound) */
    for (int i = 0; i < l->n; i++) {
        if (sound_only && !vfi_record_is_sound(l->v[i].prep))
            continue;
        of_kind++;
        if ((!cfg->model || (strlen(l->v[i].name) == len && !strncmp(l->v[i].name, name, len))) &&
            (!cfg->layer || !strcmp(l->v[i].layer, cfg->layer))) {
            *out = &l->v[i];
            n++;
        }
    }
    if (n == 1)
        return VF_OK;
    if (!l->n)
        return vfi_fail(err, VF_ERR_STORE, "%s: holds no feature vectors", db);
    list_rows(l, held, sizeof(held));
    if (sound_only && !of_kind)
        return vfi_fail(err, VF_ERR_STORE,
                        "%s: holds no vectors of sound (vidfeat --audio MODEL makes them); it "
                        "holds %s",
                        db, held);
    if (!n)
        return vfi_fail(err, VF_ERR_STORE, "%s: no vectors of model %.*s%s%s; it holds %s", db,
                        (int)len, name, cfg->layer ? ", layer " : "", cfg->layer ? cfg->layer : "",
                        held);
    return vfi_fail(err, VF_ERR_STORE,
                    "%s: holds vectors of several models, choose one (model "
                    "and layer): %s",
                    db, held);
}

typedef struct extraction_list {
    vfi_held_extraction *v;
    int n, cap;
    int64_t total;
    int nomem;
} extraction_list;

static int list_extraction(void *user, int64_t extraction, int64_t frames)
{
    extraction_list *l = user;
    vfi_held_extraction *grown = vfi_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
    if (!grown) {
        l->nomem = 1;
        return 0;
    }
    l->v = grown;
    l->v[l->n++] = (vfi_held_extraction){extraction, frames};
    l->total += frames;
    return 0; /* its vectors are not read */
}

static vf_status no_vector(void *user, const vf_store_vector *v)
{
    (void)user, (void)v;
    return VF_OK;
}

vf_status vfi_held_extractions(vf_store *s, const vfi_held_model *row, vfi_held_extraction **out,
                               int *n, int64_t *total, vf_err *err)
{
    extraction_list l = {0};
    vf_status rc =
        vfi_store_vectors(s, row->id, row->f16, row->dim, list_extraction, no_vector, &l, err);
    if (rc >= 0 && l.nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc < 0) {
        vfi_free(l.v);
        l = (extraction_list){0};
    }
    *out = l.v;
    *n = l.n;
    *total = l.total;
    return rc;
}

void vfi_held_warn_weights(const vfi_held_model *row, const char *db)
{
    if (row->weights && !strcmp(row->weights, vf_weights_str(VF_WEIGHTS_RANDOM)))
        vfi_log(VF_LOG_WARNING, "search",
                "%s: the vectors searched are %s's with random weights, made for tests: their "
                "similarities mean nothing; extract with real weights (`vidfeat models` says "
                "where each model's come from)",
                db, row->name);
}
