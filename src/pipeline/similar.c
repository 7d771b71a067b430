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

#include "engine/extractor.h"
#include "core/clock.h"
#include "core/mem.h"
#include "core/status.h"
#include "pipeline/held.h"
#include "pipeline/index.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/store.h"

#define DEFAULT_K      10
#define MAX_K          100000
#define MAX_CANDIDATES VF_STORE_MAX_REFS

/* The query frame's vector, as the one-frame run saw it. */
typedef struct query_capture {
    float *vec;
    int dim, got;
    int64_t frame_index;
    double t;
    vf_status status;
    char error[VF_ERRMSG_SIZE];
} query_capture;

static int capture_batch(void *user, const vf_batch_view *b)
{
    query_capture *c = user;
    if (!c->got && b->n > 0 && b->dim == c->dim) {
        memcpy(c->vec, b->features, (size_t)c->dim * sizeof(float));
        c->frame_index = b->frame_index[0];
        c->t = b->t[0];
        c->got = 1;
    }
    return 0;
}

static void capture_file(void *user, int file, const vf_file_result *r)
{
    query_capture *c = user;
    (void)file;
    if (r->status < 0) {
        c->status = r->status;
        snprintf(c->error, sizeof(c->error), "%s", r->error);
    }
}

/* Extract the vector of the frame of `path` at `at` seconds with the row's model, after checking
 * that the model is the row's (file, preprocessing, dimension). */
static vf_status extract_query(const vf_config *cfg, const vfi_held_model *row, const char *path,
                               double at, float *vec, vf_neighbour *src, vf_err *err)
{
    vf_config c = *cfg;
    c.model = cfg->model ? cfg->model : row->name;
    c.layer = row->layer;
    c.db_path = NULL;
    c.batch_size = 1;
    c.sample_fps = 0.0;
    c.every = 0;
    c.keyframes = 0;
    c.start = at;
    c.duration = 0.0;
    c.max_frames = 1;
    c.decoders = 1;
    c.no_overlap = 0;
    c.store_f16 = row->f16;
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
    char sha[65], prep[256];
    vf_store_model m;
    vf_model_info info;
    vf_pipeline_info(p, &info);
    rc = vfi_record_model(&info, row->f16, &m, sha, prep, sizeof(prep), err);
    if (rc < 0)
        goto done;
    if (strcmp(sha, row->sha) || strcmp(prep, row->prep) || m.dim != row->dim) {
        rc = vfi_fail(err, VF_ERR_MODEL, "%s does not make the stored %s vectors: its %s differs",
                      info.path, row->name,
                      strcmp(sha, row->sha)     ? "file (sha256)"
                      : strcmp(prep, row->prep) ? "preprocessing"
                                                : "vector size");
        goto done;
    }
    query_capture cap = {.vec = vec, .dim = row->dim};
    vf_run_hooks hooks = {.user = &cap, .file_done = capture_file, .batch = capture_batch};
    rc = vf_pipeline_run(p, &path, 1, &hooks);
    if (rc < 0) {
        vfi_fail(err, rc, "%s", vf_pipeline_errmsg(p));
    } else if (cap.status < 0) {
        rc = vfi_fail(err, cap.status, "%s: %s", path, cap.error);
    } else if (!cap.got) {
        rc = at > 0.0 ? vfi_fail(err, VF_ERR_DECODE, "%s: no frame at %g s or after", path, at)
                      : vfi_fail(err, VF_ERR_DECODE, "%s: no frame", path);
    } else {
        *src = (vf_neighbour){path, cap.frame_index, 0, cap.t, 1.0, 0};
    }
done:
    vf_pipeline_free(&p);
    return rc;
}

typedef struct hit_relay {
    void (*hit)(void *user, const vf_neighbour *n);
    void *user;
} hit_relay;

static void relay_hit(void *user, const char *path, const vf_store_ref *ref, double similarity)
{
    const hit_relay *r = user;
    vf_neighbour n = {path, ref->frame_index, ref->pts, ref->t, similarity, 1};
    r->hit(r->user, &n);
}

/* The index to search for row: the one q names, else the first the database records for the row
 * whose file is here; *ix NULL: none (the scan). One that is there but unusable fails. */
typedef struct index_pick {
    const vfi_held_model *row;
    char *path; /* the first recorded whose file is here */
    int nomem;
} index_pick;

static void pick_index(void *user, const vf_store_index *rec)
{
    index_pick *p = user;
    if (p->path || p->nomem || access(rec->path, F_OK) != 0)
        return;
    p->nomem = !(p->path = vfi_strdup(rec->path));
}

static vf_status find_index(vf_store *s, const vfi_held_model *row, const vf_similar_query *q,
                            vfi_index **ix, vf_err *err)
{
    *ix = NULL;
    if (q->exact)
        return VF_OK;
    index_pick pick = {row, NULL, 0};
    vf_status rc = VF_OK;
    if (q->index) {
        if (!(pick.path = vfi_strdup(q->index)))
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    } else if ((rc = vfi_store_indexes(s, row->id, pick_index, &pick, err)) < 0) {
        return rc;
    } else if (pick.nomem) {
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    if (pick.path && (rc = vfi_index_open(pick.path, row, 1, ix, err)) < 0 && rc != VF_ERR_NOMEM &&
        !strstr(err->msg, "--exact"))
        snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
                 " (vidfeat index --rebuild makes it anew; --exact searches without it)");
    vfi_free(pick.path);
    return rc;
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
                              int k, int probe, const vf_store_ref *skip,
                              void (*hit)(void *user, const vf_neighbour *n), void *user,
                              int64_t *candidates, vf_err *err)
{
    int want = VFI_INDEX_CANDIDATES(k) > MAX_CANDIDATES ? MAX_CANDIDATES : VFI_INDEX_CANDIDATES(k);
    int n = 0;
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
        vf_neighbour nb = {path, ref->frame_index, ref->pts, ref->t, sim, 1};
        hit(user, &nb);
    }
    for (int i = 0; r.paths && i < want; i++)
        vfi_free(r.paths[i]);
    vfi_free(r.paths);
    vfi_rank_free(&r.rank);
    vfi_free(refs);
    vfi_free(unit);
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
    if (!db_path || !cfg || !q || !hit || !q->image == !q->video || k < 1 || k > MAX_K ||
        !(q->at >= 0.0) || !isfinite(q->at) || q->probe < 0) {
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "similar: a database, a hit callback, an image or a video (not both), a "
                      "time >= 0 and 1..%d neighbours are needed",
                      MAX_K);
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
        src = (vf_neighbour){path, ref.frame_index, ref.pts, ref.t, 1.0, 1};
    else if ((rc = extract_query(cfg, row, path, at, vec, &src, &err)) < 0)
        goto done;
    if (query_out)
        *query_out = src;
    if ((rc = find_index(s, row, q, &ix, &err)) < 0)
        goto done;
    vf_similar_stats stats = {.search = "exact"};
    double t0 = vfi_now_s();
    if (ix) {
        snprintf(stats.search, sizeof(stats.search), "index %s", vfi_index_kind(ix));
        snprintf(stats.index, sizeof(stats.index), "%s", vfi_index_path(ix));
        rc = search_index(s, ix, row, vec, k, q->probe, found ? &ref : NULL, hit, user,
                          &stats.candidates, &err);
    } else {
        hit_relay relay = {hit, user};
        rc = vfi_store_nearest(s, row->id, row->f16, vec, row->dim, k, found ? &ref : NULL,
                               relay_hit, &relay, &err);
    }
    stats.search_ms = (vfi_now_s() - t0) * 1e3;
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
