/*
 * similar.c - vf_db_similar: the stored frames nearest to a query frame. The query vector is read
 * back from the database (a video it holds) or extracted by a one-frame pipeline run with the
 * database's own model, after checking that the model file and preprocessing are the ones the
 * stored vectors came from. The search: a search index's candidates (index.h) when one covers the
 * model row, ranked by their exact cosine against the vectors the database holds (so scores are
 * exact, and a frame the database no longer holds is never returned); else the store's scan of
 * every vector (vfi_store_nearest).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/status.h"
#include "pipeline/held.h"
#include "pipeline/index.h"
#include "pipeline/query.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/store.h"

#define DEFAULT_K      10
#define MAX_K          100000
#define MAX_CANDIDATES VF_STORE_MAX_REFS

/* The vector of the frame of `path` at `at` seconds, extracted now with the row's model. */
static vf_status extract_query(const vf_config *cfg, const vfi_held_model *row, const char *path,
                               double at, float *vec, vf_neighbour *src, vf_err *err)
{
    vfi_query_frames f;
    vf_status rc = vfi_query_extract(cfg, row, path, at, 1, &f, err);
    if (rc < 0)
        return rc;
    memcpy(vec, f.vec, (size_t)row->dim * sizeof(float));
    *src = (vf_neighbour){path, f.frame_index[0], 0, f.t[0], 1.0, 0, 0};
    vfi_query_frames_free(&f);
    return VF_OK;
}

typedef struct hit_relay {
    void (*hit)(void *user, const vf_neighbour *n);
    void *user;
    int query;
} hit_relay;

static void relay_hit(void *user, const char *path, const vf_store_ref *ref, double similarity)
{
    const hit_relay *r = user;
    vf_neighbour n = {path, ref->frame_index, ref->pts, ref->t, similarity, 1, r->query};
    r->hit(r->user, &n);
}

/* The candidates' vectors as the database holds them, ranked by exact cosine; their paths kept
 * by candidate for the hits. */
typedef struct reranking {
    vf_rank *rank;
    char **paths; /* by candidate */
    int nomem;
} reranking;

static vf_status rank_candidate(void *user, int i, const char *path, const vf_store_ref *ref,
                                const float *vec)
{
    reranking *r = user;
    vfi_rank_offer(r->rank, ref, vec);
    if (!r->paths[i] && !(r->paths[i] = vfi_strdup(path)))
        r->nomem = 1;
    return VF_OK;
}

static vf_status search_index(vf_store *s, vfi_index *ix, const vfi_held_model *row, const float *q,
                              int k, int probe, const vf_store_ref *skip, const hit_relay *out,
                              int64_t *candidates, vf_err *err)
{
    int want = VFI_INDEX_CANDIDATES(k), n = 0;
    if (want < k)
        want = k;
    vf_store_ref *refs = vfi_mallocarray((size_t)want, sizeof(*refs));
    float *unit = vfi_mallocarray((size_t)row->dim, sizeof(float));
    reranking r = {vfi_rank_create(q, row->dim, k), vfi_calloc((size_t)want, sizeof(char *)), 0};
    vf_status rc =
        refs && unit && r.rank && r.paths ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0) {
        vfi_index_unit(q, row->dim, unit);
        rc = vfi_index_search(ix, unit, want, probe, skip, refs, &n, err);
    }
    if (rc >= 0)
        rc = vfi_store_vectors_at(s, row->id, row->f16, row->dim, refs, n, rank_candidate, &r, err);
    if (rc >= 0 && r.nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    *candidates = n;
    for (int i = 0; rc >= 0 && i < vfi_rank_count(r.rank); i++) {
        double sim;
        const vf_store_ref *ref = vfi_rank_get(r.rank, i, &sim);
        const char *path = "";
        for (int j = 0; j < n; j++)
            if (refs[j].extraction == ref->extraction && refs[j].frame_index == ref->frame_index)
                path = r.paths[j];
        vf_neighbour nb = {path, ref->frame_index, ref->pts, ref->t, sim, 1, out->query};
        out->hit(out->user, &nb);
    }
    for (int i = 0; r.paths && i < want; i++)
        vfi_free(r.paths[i]);
    vfi_free(r.paths);
    vfi_rank_free(&r.rank);
    vfi_free(refs);
    vfi_free(unit);
    return rc;
}

/* The k stored vectors nearest q (an index's candidates, else the scan), skip left out. */
static vf_status search(vf_store *s, vfi_index *ix, const vfi_held_model *row, const float *q,
                        int k, int probe, const vf_store_ref *skip, const hit_relay *out,
                        vf_similar_stats *stats, vf_err *err)
{
    vf_status rc;
    *stats = (vf_similar_stats){.search = "exact"};
    snprintf(stats->weights, sizeof(stats->weights), "%s", row->weights ? row->weights : "");
    double t0 = vfi_now_s();
    if (ix) {
        snprintf(stats->search, sizeof(stats->search), "index %s", vfi_index_kind(ix));
        snprintf(stats->index, sizeof(stats->index), "%s", vfi_index_path(ix));
        rc = search_index(s, ix, row, q, k, probe, skip, out, &stats->candidates, err);
    } else {
        rc = vfi_store_nearest(s, row->id, row->f16, q, row->dim, k, skip, relay_hit, (void *)out,
                               err);
    }
    stats->search_ms = (vfi_now_s() - t0) * 1e3;
    return rc;
}

/* Each text's neighbours in turn: the texts embedded at once, then searched one by one. */
static vf_status similar_texts(vf_store *s, const vfi_held_model *row, const char *db,
                               const vf_config *cfg, const vf_similar_query *q,
                               void (*hit)(void *user, const vf_neighbour *n), void *user,
                               vf_err *err)
{
    int k = q->k ? q->k : DEFAULT_K;
    float *vecs = NULL;
    double embed_ms = 0.0;
    vfi_index *ix = NULL;
    vf_status rc = vfi_query_texts(cfg, row, db, q->texts, q->n_texts, &vecs, &embed_ms, err);
    if (rc >= 0 && VFI_INDEX_CANDIDATES(k) <= MAX_CANDIDATES && !q->exact)
        rc = vfi_index_find(s, row, q->index, &ix, err);
    for (int i = 0; rc >= 0 && i < q->n_texts; i++) {
        vf_similar_stats stats;
        hit_relay out = {hit, user, i};
        rc = search(s, ix, row, vecs + (size_t)i * (size_t)row->dim, k, q->probe, NULL, &out,
                    &stats, err);
        stats.embed_ms = embed_ms;
        if (rc >= 0 && q->stats)
            q->stats[i] = stats;
    }
    vfi_index_free(&ix);
    vfi_free(vecs);
    return rc;
}

vf_status vf_db_similar(const char *db_path, const vf_config *cfg, const vf_similar_query *q,
                        void (*hit)(void *user, const vf_neighbour *n), void *user,
                        vf_neighbour *query_out, char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    vfi_held rows = {0};
    vfi_index *ix = NULL;
    float *vec = NULL;
    int k = q && q->k ? q->k : DEFAULT_K;
    int n_texts = q ? q->n_texts : 0;
    if (!db_path || !cfg || !q || !hit || (!!q->image + !!q->video + (n_texts > 0)) != 1 ||
        n_texts < 0 || (n_texts && !q->texts) || k < 1 || k > MAX_K || !(q->at >= 0.0) ||
        !isfinite(q->at) || q->probe < 0) {
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "similar: a database, a hit callback, one query (an image, a video or "
                      "texts), a time >= 0 and 1..%d neighbours are needed",
                      MAX_K);
        goto done;
    }
    for (int i = 0; i < n_texts; i++)
        if (!q->texts[i]) {
            rc = vfi_fail(&err, VF_ERR_INVALID, "similar: text %d is NULL", i);
            goto done;
        }
    rc = vfi_store_open(db_path, VF_STORE_READ, &s, &err);
    if (rc < 0)
        goto done;
    rc = vfi_held_read(s, &rows, &err);
    const vfi_held_model *row = NULL;
    if (rc >= 0)
        rc = vfi_held_choose(&rows, cfg, db_path, &row, &err);
    if (rc < 0)
        goto done;
    vfi_held_warn_weights(row, db_path);
    if (n_texts) {
        rc = similar_texts(s, row, db_path, cfg, q, hit, user, &err);
        goto done;
    }
    if (!(vec = vfi_mallocarray((size_t)row->dim, sizeof(float)))) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* a file the database holds: its stored vector, and the hits leave that frame out */
    const char *path = q->image ? q->image : q->video;
    double at = q->image ? 0.0 : q->at;
    vf_store_ref ref = {0};
    vf_neighbour src = {0};
    int found = 0;
    rc = vfi_store_vector_at(s, row->id, row->f16, path, at, vec, row->dim, &ref, &found, &err);
    if (rc < 0)
        goto done;
    if (found)
        src = (vf_neighbour){path, ref.frame_index, ref.pts, ref.t, 1.0, 1, 0};
    else if ((rc = extract_query(cfg, row, path, at, vec, &src, &err)) < 0)
        goto done;
    if (query_out)
        *query_out = src;
    /* an index proposes at most MAX_CANDIDATES: a larger k is the scan's */
    if (VFI_INDEX_CANDIDATES(k) <= MAX_CANDIDATES && !q->exact &&
        (rc = vfi_index_find(s, row, q->index, &ix, &err)) < 0)
        goto done;
    vf_similar_stats stats;
    hit_relay out = {hit, user, 0};
    rc = search(s, ix, row, vec, k, q->probe, found ? &ref : NULL, &out, &stats, &err);
    if (q->stats)
        *q->stats = stats;
done:
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_free(vec);
    vfi_index_free(&ix);
    vfi_held_free(&rows);
    vfi_store_close(&s);
    return rc;
}
