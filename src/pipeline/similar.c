/*
 * similar.c - vf_db_similar: the stored frames nearest to a query frame. The query vector is read
 * back from the database (a video it holds) or extracted by a one-frame pipeline run with the
 * database's own model, after checking that the model file and preprocessing are the ones the
 * stored vectors came from. The search: a search index's candidates (index.h) when one covers the
 * model row, ranked by their exact cosine against the vectors the database holds (so scores are
 * exact, and a frame the database no longer holds is never returned); else the store's scan of
 * every vector (vfi_store_nearest). A session (session.h) keeps the row, the index and the text
 * tower for many queries; vf_db_similar is a session of one query.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/status.h"
#include "core/turns.h"
#include "pipeline/held.h"
#include "pipeline/index.h"
#include "pipeline/query.h"
#include "pipeline/session.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/store.h"

#define DEFAULT_K      10
#define MAX_K          100000
#define MAX_CANDIDATES VF_STORE_MAX_REFS
/* read-only connections a session keeps for its queries, at most */
#define POOL_SIZE 16
/* seconds between looks for a newer index file (or one where there was none) */
#define INDEX_RECHECK_S 5.0

struct vfi_session {
    char *db;
    vf_config cfg; /* its strings the session's own (strs) */
    char *strs[5];
    char *index_path; /* the index named at open, or NULL */
    vfi_held rows;
    const vfi_held_model *row;
    /* ix, its file's identity and when it was looked for: read-locked by each query, written
     * when the index is looked for again; ann_turns: ix's ANN index searched by one query at a
     * time (its parameters are set on it), in the order the queries came */
    pthread_rwlock_t index_rw;
    vf_turns ann_turns;
    pthread_mutex_t check_lock;
    vfi_index *ix;
    int index_looked; /* 1 once looked for (ix may still be NULL: none) */
    double index_checked;
    struct stat index_st;
    pthread_mutex_t text_lock; /* te: made once, used by one query at a time */
    vf_text_encoder *te;
    /* read-only connections no query is using, kept for the next (opening one costs more than
     * most queries: the schema is checked) */
    pthread_mutex_t pool_lock;
    vf_store *pool[POOL_SIZE];
    int n_pool;
};

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
    int found; /* candidates the database holds */
} reranking;

static vf_status rank_candidate(void *user, int i, const char *path, const vf_store_ref *ref,
                                const float *vec)
{
    reranking *r = user;
    r->found++;
    vfi_rank_offer(r->rank, ref, vec);
    if (!r->paths[i] && !(r->paths[i] = vfi_strdup(path)))
        r->nomem = 1;
    return VF_OK;
}

static vf_status search_index(vf_store *s, vfi_index *ix, vf_turns *turns,
                              const vfi_held_model *row, const float *q, int k, int probe,
                              const vf_store_ref *skip, const hit_relay *out, int64_t *candidates,
                              vf_err *err)
{
    int want = VFI_INDEX_CANDIDATES(k), n = 0;
    if (want < k)
        want = k;
    vf_store_ref *refs = vfi_mallocarray((size_t)want, sizeof(*refs));
    float *unit = vfi_mallocarray((size_t)row->dim, sizeof(float));
    reranking r = {vfi_rank_create(q, row->dim, k), vfi_calloc((size_t)want, sizeof(char *)), 0, 0};
    vf_status rc =
        refs && unit && r.rank && r.paths ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0) {
        vfi_index_unit(q, row->dim, unit);
        vfi_turns_enter(turns);
        rc = vfi_index_search(ix, unit, want, probe, skip, refs, &n, err);
        vfi_turns_leave(turns);
    }
    if (rc >= 0)
        rc = vfi_store_vectors_at(s, row->id, row->f16, row->dim, refs, n, rank_candidate, &r, err);
    if (rc >= 0 && r.nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    /* candidates of extractions it covers, none of them rows of the database: its ids were
     * not made from this database (a crafted or foreign file), not an index to answer by */
    if (rc >= 0 && n > 0 && !r.found)
        rc = vfi_fail(err, VF_ERR_STORE,
                      "%s: a damaged index (its vectors name no row of the database); vidfeat "
                      "index builds it again",
                      vfi_index_path(ix));
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
static vf_status search(vf_store *s, vfi_index *ix, vf_turns *turns, const vfi_held_model *row,
                        const float *q, int k, int probe, const vf_store_ref *skip,
                        const hit_relay *out, vf_similar_stats *stats, vf_err *err)
{
    vf_status rc;
    *stats = (vf_similar_stats){.search = "exact"};
    snprintf(stats->weights, sizeof(stats->weights), "%s", row->weights ? row->weights : "");
    double t0 = vfi_now_s();
    if (ix) {
        snprintf(stats->search, sizeof(stats->search), "index %s", vfi_index_kind(ix));
        snprintf(stats->index, sizeof(stats->index), "%s", vfi_index_path(ix));
        rc = search_index(s, ix, turns, row, q, k, probe, skip, out, &stats->candidates, err);
    } else {
        rc = vfi_store_nearest(s, row->id, row->f16, q, row->dim, k, skip, relay_hit, (void *)out,
                               err);
    }
    stats->search_ms = (vfi_now_s() - t0) * 1e3;
    return rc;
}

/* ---- the session ---------------------------------------------------------------------------- */

vf_status vfi_session_open(const char *db, const vf_config *cfg, int sound_only, const char *index,
                           vfi_session **out, vf_err *err)
{
    *out = NULL;
    vfi_session *ss = vfi_calloc(1, sizeof(*ss));
    if (!ss)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    pthread_rwlock_init(&ss->index_rw, NULL);
    vfi_turns_init(&ss->ann_turns, 1);
    pthread_mutex_init(&ss->check_lock, NULL);
    pthread_mutex_init(&ss->text_lock, NULL);
    pthread_mutex_init(&ss->pool_lock, NULL);
    ss->cfg = *cfg;
    const char **fields[] = {&ss->cfg.model, &ss->cfg.models_dir, &ss->cfg.layer, &ss->cfg.backend,
                             &ss->cfg.int8_scales};
    int nomem = !(ss->db = vfi_strdup(db)) || (index && !(ss->index_path = vfi_strdup(index)));
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (*fields[i] && !(*fields[i] = ss->strs[i] = vfi_strdup(*fields[i])))
            nomem = 1;
    vf_status rc = nomem ? vfi_fail(err, VF_ERR_NOMEM, "out of memory") : VF_OK;
    vf_store *s = NULL;
    if (rc >= 0)
        rc = vfi_store_open(db, VF_STORE_READ, &s, err);
    if (rc >= 0)
        rc = vfi_held_read(s, &ss->rows, err);
    if (rc >= 0)
        rc = vfi_held_choose(&ss->rows, &ss->cfg, sound_only, db, &ss->row, err);
    vfi_store_close(&s);
    if (rc < 0) {
        vfi_session_free(&ss);
        return rc;
    }
    *out = ss;
    return VF_OK;
}

const vfi_held_model *vfi_session_row(const vfi_session *ss)
{
    return ss->row;
}

const vf_config *vfi_session_config(const vfi_session *ss)
{
    return &ss->cfg;
}

void vfi_session_free(vfi_session **ps)
{
    vfi_session *ss = *ps;
    if (!ss)
        return;
    vfi_index_free(&ss->ix);
    vf_text_encoder_free(&ss->te);
    for (int i = 0; i < ss->n_pool; i++)
        vfi_store_close(&ss->pool[i]);
    vfi_held_free(&ss->rows);
    for (size_t i = 0; i < sizeof(ss->strs) / sizeof(ss->strs[0]); i++)
        vfi_free(ss->strs[i]);
    vfi_free(ss->index_path);
    vfi_free(ss->db);
    pthread_rwlock_destroy(&ss->index_rw);
    vfi_turns_destroy(&ss->ann_turns);
    pthread_mutex_destroy(&ss->check_lock);
    pthread_mutex_destroy(&ss->text_lock);
    pthread_mutex_destroy(&ss->pool_lock);
    vfi_free(ss);
    *ps = NULL;
}

/* A read-only connection to the session's database: a kept one, else a new one. */
static vf_status take_store(vfi_session *ss, vf_store **s, vf_err *err)
{
    *s = NULL;
    pthread_mutex_lock(&ss->pool_lock);
    if (ss->n_pool)
        *s = ss->pool[--ss->n_pool];
    pthread_mutex_unlock(&ss->pool_lock);
    return *s ? VF_OK : vfi_store_open(ss->db, VF_STORE_READ, s, err);
}

/* Give a connection back after a query: kept when the query went well (a failure may have
 * been the connection's) and there is room, else closed. */
static void give_store(vfi_session *ss, vf_store **s, vf_status rc)
{
    if (!*s)
        return;
    pthread_mutex_lock(&ss->pool_lock);
    if (rc >= 0 && ss->n_pool < POOL_SIZE) {
        ss->pool[ss->n_pool++] = *s;
        *s = NULL;
    }
    pthread_mutex_unlock(&ss->pool_lock);
    vfi_store_close(s);
}

/* Has the index file changed (or gone) since it was opened? */
static int index_changed(const vfi_session *ss)
{
    struct stat st;
    if (stat(vfi_index_path(ss->ix), &st) != 0)
        return 1;
    return st.st_ino != ss->index_st.st_ino || st.st_dev != ss->index_st.st_dev ||
           st.st_size != ss->index_st.st_size || st.st_mtim.tv_sec != ss->index_st.st_mtim.tv_sec ||
           st.st_mtim.tv_nsec != ss->index_st.st_mtim.tv_nsec;
}

/* The index to search (looked for the first time, and again every INDEX_RECHECK_S when its file
 * changed or there was none), read-locked in ss->index_rw on success: the caller unlocks. */
static vf_status session_index(vfi_session *ss, vf_store *s, vfi_index **ix, vf_err *err)
{
    vf_status rc = VF_OK;
    pthread_mutex_lock(&ss->check_lock); /* one thread looks; the others search meanwhile */
    double now = vfi_now_s();
    if (!ss->index_looked || now - ss->index_checked >= INDEX_RECHECK_S) {
        pthread_rwlock_rdlock(&ss->index_rw);
        int look = !ss->index_looked || !ss->ix || index_changed(ss);
        pthread_rwlock_unlock(&ss->index_rw);
        vfi_index *fresh = NULL;
        if (look && (rc = vfi_index_find(s, ss->row, ss->index_path, &fresh, err)) >= 0) {
            pthread_rwlock_wrlock(&ss->index_rw);
            vfi_index_free(&ss->ix);
            ss->ix = fresh;
            if (fresh && stat(vfi_index_path(fresh), &ss->index_st) != 0)
                memset(&ss->index_st, 0, sizeof(ss->index_st));
            ss->index_looked = 1;
            pthread_rwlock_unlock(&ss->index_rw);
        }
        ss->index_checked = now;
    }
    pthread_mutex_unlock(&ss->check_lock);
    if (rc < 0)
        return rc;
    pthread_rwlock_rdlock(&ss->index_rw);
    *ix = ss->ix;
    return VF_OK;
}

/* The texts' embeddings by the session's text tower (made at the first text query). */
static vf_status session_texts(vfi_session *ss, const vf_similar_query *q, float **vecs, double *ms,
                               vf_err *err)
{
    vf_status rc = VF_OK;
    pthread_mutex_lock(&ss->text_lock);
    if (!ss->te)
        rc = vfi_query_text_tower(&ss->cfg, ss->row, ss->db, q->n_texts, &ss->te, err);
    if (rc >= 0)
        rc = vfi_query_encode(ss->te, ss->row, q->texts, q->n_texts, vecs, ms, err);
    pthread_mutex_unlock(&ss->text_lock);
    return rc;
}

/* VF_ERR_INVALID unless q is one query (an image, a video or texts) that can be answered. */
static vf_status check_query(const vf_similar_query *q, void (*hit)(void *, const vf_neighbour *),
                             vf_err *err)
{
    int k = q && q->k ? q->k : DEFAULT_K;
    int n_texts = q ? q->n_texts : 0;
    if (!q || !hit || (!!q->image + !!q->video + (n_texts > 0)) != 1 || n_texts < 0 ||
        (n_texts && !q->texts) || k < 1 || k > MAX_K || !(q->at >= 0.0) || !isfinite(q->at) ||
        q->probe < 0)
        return vfi_fail(err, VF_ERR_INVALID,
                        "similar: a database, a hit callback, one query (an image, a video or "
                        "texts), a time >= 0 and 1..%d neighbours are needed",
                        MAX_K);
    for (int i = 0; i < n_texts; i++)
        if (!q->texts[i])
            return vfi_fail(err, VF_ERR_INVALID, "similar: text %d is NULL", i);
    return VF_OK;
}

vf_status vfi_session_stored(vfi_session *ss, const char *path, double t, vf_store_ref *ref,
                             int *found, vf_err *err)
{
    vf_store *s = NULL;
    *found = 0;
    float *vec = vfi_mallocarray((size_t)ss->row->dim, sizeof(float));
    vf_status rc = vec ? take_store(ss, &s, err) : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        rc = vfi_store_vector_at(s, ss->row->id, ss->row->f16, path, 1, t, vec, ss->row->dim, ref,
                                 found, err);
    give_store(ss, &s, rc);
    vfi_free(vec);
    return rc;
}

vf_status vfi_session_similar(vfi_session *ss, const vf_similar_query *q, int stored_only,
                              void (*hit)(void *user, const vf_neighbour *n), void *user,
                              vf_neighbour *src_out, vf_err *err)
{
    vf_status rc = check_query(q, hit, err);
    if (rc < 0)
        return rc;
    int k = q->k ? q->k : DEFAULT_K;
    int n_texts = q->n_texts;
    const vfi_held_model *row = ss->row;
    vf_store *s = NULL;
    float *vecs = NULL;
    double embed_ms = 0.0;
    vf_neighbour src = {0};
    vf_store_ref ref = {0};
    int found = 0, locked = 0, sound = 1;
    vfi_index *ix = NULL;
    rc = take_store(ss, &s, err);
    if (rc < 0)
        return rc;
    if (n_texts) {
        rc = session_texts(ss, q, &vecs, &embed_ms, err);
    } else if (!(vecs = vfi_mallocarray((size_t)row->dim, sizeof(float)))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    } else {
        /* a file the database holds: its stored vector, and the hits leave that frame out */
        const char *path = q->image ? q->image : q->video;
        double at = q->image ? 0.0 : q->at;
        /* the server's (stored_only): the name as stored, one look-up, nothing resolved */
        rc = vfi_store_vector_at(s, row->id, row->f16, path, stored_only, at, vecs, row->dim, &ref,
                                 &found, err);
        sound = rc >= 0;
        if (rc >= 0 && found)
            src = (vf_neighbour){path, ref.frame_index, ref.pts, ref.t, 1.0, 1, 0};
        else if (rc >= 0 && stored_only)
            rc = vfi_fail(err, VF_ERR_STORE, "%s: no %s vectors of it in %s", path, row->name,
                          ss->db);
        else if (rc >= 0)
            rc = extract_query(&ss->cfg, row, path, at, vecs, &src, err);
        if (rc >= 0 && src_out)
            *src_out = src;
    }
    /* an index proposes at most MAX_CANDIDATES: a larger k is the scan's */
    if (rc >= 0 && VFI_INDEX_CANDIDATES(k) <= MAX_CANDIDATES && !q->exact) {
        rc = session_index(ss, s, &ix, err);
        locked = rc >= 0;
    }
    for (int i = 0; rc >= 0 && i < (n_texts ? n_texts : 1); i++) {
        vf_similar_stats stats;
        hit_relay out = {hit, user, i};
        rc = search(s, ix, &ss->ann_turns, row, vecs + (size_t)i * (size_t)row->dim, k, q->probe,
                    found ? &ref : NULL, &out, &stats, err);
        sound &= rc >= 0;
        stats.embed_ms = embed_ms;
        if (rc >= 0 && q->stats)
            q->stats[i] = stats;
    }
    if (locked)
        pthread_rwlock_unlock(&ss->index_rw);
    vfi_free(vecs);
    give_store(ss, &s, sound ? VF_OK : VF_ERR_STORE); /* a failed read: the connection goes */
    return rc;
}

vf_status vf_db_similar(const char *db_path, const vf_config *cfg, const vf_similar_query *q,
                        void (*hit)(void *user, const vf_neighbour *n), void *user,
                        vf_neighbour *query_out, char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vfi_session *ss = NULL;
    vf_status rc = check_query(q, hit, &err);
    if (rc >= 0 && (!db_path || !cfg))
        rc = vfi_fail(&err, VF_ERR_INVALID, "similar: a database and a configuration are needed");
    else if (rc >= 0 && (rc = vfi_session_open(db_path, cfg, q->sound, q->index, &ss, &err)) >= 0) {
        vfi_held_warn_weights(ss->row, db_path);
        rc = vfi_session_similar(ss, q, 0, hit, user, query_out, &err);
    }
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_session_free(&ss);
    return rc;
}
