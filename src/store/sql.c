/*
 * sql.c - the store calls every SQL store makes the same way, written once over sql.h: the model
 * row recorded and the rows read, whether a file is done, a benchmark's result recorded, a vector
 * by file and time, the nearest vectors by a full scan, every vector of a model row in file
 * order, the search indexes recorded and read. Each runs through the store's driver, so one
 * query serves SQLite and PostgreSQL alike (sql.h says what both dialects share).
 */
#define _XOPEN_SOURCE 700 /* realpath, gethostname */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/path.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/sql.h"

vf_status vfi_sql_exec(vf_store *s, const char *sql, const char *what, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s, sql, what, &q, err);
    return rc < 0 ? rc : vfi_sql_run(q, err);
}

vf_status vfi_sql_one_int64(vf_store *s, vf_sql *q, const char *what, int64_t *out, vf_err *err)
{
    int got = vfi_sql_step(q);
    if (got)
        *out = vfi_sql_col_int64(q, 0);
    vf_status rc = vfi_sql_finish(q, err);
    if (rc >= 0 && !got)
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s: no row", s->ops->sql->label(s), what);
    return rc;
}

vf_status vfi_sql_model(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "INSERT INTO models (name, file_sha256, layer, dim, dtype,"
                                   " preprocessing, weights, text_sha256) VALUES (?1, ?2, ?3, ?4,"
                                   " ?5, ?6, ?7, ?8) ON CONFLICT (name, file_sha256, layer, dtype,"
                                   " preprocessing) DO UPDATE SET dim = ?4, weights = ?7,"
                                   " text_sha256 = coalesce(?8, models.text_sha256) RETURNING id",
                                   "recording the model", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_text(q, 1, m->name);
    vfi_sql_text(q, 2, m->file_sha256);
    vfi_sql_text(q, 3, m->layer);
    vfi_sql_int64(q, 4, m->dim);
    vfi_sql_text(q, 5, m->f16 ? "float16" : "float32");
    vfi_sql_text(q, 6, m->preprocessing);
    vfi_sql_text(q, 7, m->weights);
    vfi_sql_text(q, 8, m->text_sha256);
    return vfi_sql_one_int64(s, q, "recording the model", model_id, err);
}

vf_status vfi_sql_is_done(vf_store *s, const vf_store_file *f, int64_t model_id,
                          const char *sampling, const char *precision, int *done, vf_err *err)
{
    vf_sql *q;
    *done = 0;
    vf_status rc = vfi_sql_prepare(s,
                                   "SELECT e.status FROM extractions e JOIN videos v ON v.id ="
                                   " e.video_id WHERE v.path = ?1 AND v.size = ?2 AND v.mtime = ?3"
                                   " AND e.model_id = ?4 AND e.sampling = ?5 AND e.precision = ?6",
                                   "reading extractions", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_text(q, 1, f->name);
    vfi_sql_int64(q, 2, f->size);
    vfi_sql_double(q, 3, f->mtime);
    vfi_sql_int64(q, 4, model_id);
    vfi_sql_text(q, 5, sampling);
    vfi_sql_text(q, 6, precision);
    if (vfi_sql_step(q)) {
        const char *status = vfi_sql_col_text(q, 0);
        *done = status && !strcmp(status, "done");
    }
    rc = vfi_sql_finish(q, err);
    if (rc < 0)
        *done = 0;
    return rc;
}

vf_status vfi_sql_add_run(vf_store *s, const vf_run_record *r, const char *version, vf_err *err)
{
    char when[32], host[256] = "";
    vfi_now_iso(when, sizeof(when));
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "INSERT INTO runs (started_at, host, vidfeat_version, device,"
                                   " device_name, backend, model, layer, precision, batch_size,"
                                   " threads, mode, input, frames, end_to_end_fps, decode_fps,"
                                   " convert_fps, infer_fps, store_fps, peak_rss_mb) VALUES (?1,"
                                   " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,"
                                   " ?16, ?17, ?18, ?19, ?20)",
                                   "recording the run", &q, err);
    if (rc < 0)
        return rc;
    const char *text[] = {
        when,     host[0] ? host : NULL, version, r->device, r->device_name, r->backend, r->model,
        r->layer, r->precision};
    int i = 1;
    for (size_t k = 0; k < sizeof(text) / sizeof(text[0]); k++)
        vfi_sql_text(q, i++, text[k]);
    vfi_sql_int64(q, i++, r->batch_size);
    vfi_sql_int64(q, i++, r->threads);
    vfi_sql_text(q, i++, r->mode);
    vfi_sql_text(q, i++, r->input);
    vfi_sql_int64(q, i++, r->frames);
    const double rates[] = {r->end_to_end_fps, r->decode_fps, r->convert_fps,
                            r->infer_fps,      r->store_fps,  r->peak_rss_mb};
    for (size_t k = 0; k < sizeof(rates) / sizeof(rates[0]); k++) {
        if (vfi_record_measured(rates[k]))
            vfi_sql_double(q, i++, rates[k]);
        else
            vfi_sql_text(q, i++, NULL); /* not measured */
    }
    return vfi_sql_run(q, err);
}

vf_status vfi_sql_models(vf_store *s, vf_store_model_fn row, void *user, vf_err *err)
{
    char sql[512];
    vf_sql *q;
    vfi_store_models_sql(s->ops->sql->schema(s), sql, sizeof(sql));
    vf_status rc = vfi_sql_prepare(s, sql, "reading models", &q, err);
    if (rc < 0)
        return rc;
    while (vfi_sql_step(q)) {
        const char *dtype = vfi_sql_col_text(q, 5);
        vf_store_model m = {
            .name = vfi_sql_col_text(q, 1),
            .file_sha256 = vfi_sql_col_text(q, 2),
            .layer = vfi_sql_col_text(q, 3),
            .dim = (int)vfi_sql_col_int64(q, 4),
            .f16 = dtype && !strcmp(dtype, "float16"),
            .preprocessing = vfi_sql_col_text(q, 6),
            .text_sha256 = vfi_sql_col_text(q, 8),
            .weights = vfi_sql_col_text(q, 9),
        };
        row(user, vfi_sql_col_int64(q, 0), &m, vfi_sql_col_int64(q, 7));
    }
    return vfi_sql_finish(q, err);
}

/* The video id stored for path, or for another name of the same file (0: none): the name
 * extractions record (vfi_path_absolute), the path as given (databases from before names were
 * absolute), each looked up by the path's index first; else any stored path that realpath
 * resolves to the same file (every video of the model read: an archive's worth, so only when the
 * names are not there). */
static vf_status find_video(vf_store *s, int64_t model_id, const char *path, int by_name,
                            int64_t *video, vf_err *err)
{
    char *name = vfi_path_absolute(path); /* NULL for "" */
    *video = 0;
    if (!name && path[0])
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "SELECT v.id FROM videos v WHERE v.path IN (?2, ?3) AND EXISTS"
                                   " (SELECT 1 FROM extractions e WHERE e.video_id = v.id AND"
                                   " e.model_id = ?1) ORDER BY v.id LIMIT 1",
                                   "reading videos", &q, err);
    if (rc >= 0) {
        vfi_sql_int64(q, 1, model_id);
        vfi_sql_text(q, 2, name ? name : path);
        vfi_sql_text(q, 3, path);
        if (vfi_sql_step(q))
            *video = vfi_sql_col_int64(q, 0);
        rc = vfi_sql_finish(q, err);
    }
    if (rc >= 0 && !*video && !by_name)
        rc = vfi_sql_prepare(s,
                             "SELECT DISTINCT v.id, v.path FROM videos v JOIN extractions e ON"
                             " e.video_id = v.id WHERE e.model_id = ?1 ORDER BY v.id",
                             "reading videos", &q, err);
    if (rc >= 0 && !*video && !by_name) {
        vfi_sql_int64(q, 1, model_id);
        char *want = realpath(path, NULL);
        while (!*video && vfi_sql_step(q)) {
            if (vfi_rank_same_file(vfi_sql_col_text(q, 1), path, name, want))
                *video = vfi_sql_col_int64(q, 0);
        }
        free(want); /* realpath's allocation */
        rc = vfi_sql_finish(q, err);
    }
    vfi_free(name);
    return rc;
}

vf_status vfi_sql_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, int by_name,
                            double t, float *vec, int dim, vf_store_ref *ref, int *found,
                            vf_err *err)
{
    int64_t video;
    *found = 0;
    vf_status rc = find_video(s, model_id, path, by_name, &video, err);
    if (rc < 0 || !video)
        return rc;
    vf_sql *q;
    rc = vfi_sql_prepare(s,
                         "SELECT f.extraction_id, f.frame_index, f.pts, f.t, f.vec FROM"
                         " features f JOIN extractions e ON e.id = f.extraction_id WHERE"
                         " e.video_id = ?1 AND e.model_id = ?2"
                         " ORDER BY abs(f.t - ?3), f.t, e.id LIMIT 1",
                         "reading features", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, video);
    vfi_sql_int64(q, 2, model_id);
    vfi_sql_double(q, 3, t);
    if (vfi_sql_step(q)) {
        *ref = (vf_store_ref){vfi_sql_col_int64(q, 0), vfi_sql_col_int64(q, 1),
                              vfi_sql_col_int64(q, 2), vfi_sql_col_real(q, 3)};
        *found = vfi_sql_col_vec(q, 4, f16, dim, vec) >= 0;
    }
    rc = vfi_sql_finish(q, err);
    if (rc < 0)
        *found = 0;
    return rc;
}

vf_status vfi_sql_nearest(vf_store *s, int64_t model_id, int f16, const float *query, int dim,
                          int k, const vf_store_ref *skip, vf_store_hit_fn hit, void *user,
                          vf_err *err)
{
    vf_status rc = VF_OK;
    vf_sql *q = NULL;
    int64_t missing = -1; /* a ranked vector's extraction without a video */
    float *v = vfi_mallocarray((size_t)(dim > 0 ? dim : 1), sizeof(float));
    vf_rank *rank = vfi_rank_create(query, dim, k);
    if (!v || !rank) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* every vector once, a row at a time: memory does not grow with the table */
    rc = vfi_sql_prepare(s,
                         "SELECT f.extraction_id, f.frame_index, f.pts, f.t, f.vec FROM"
                         " features f JOIN extractions e ON e.id = f.extraction_id"
                         " WHERE e.model_id = ?1",
                         "reading features", &q, err);
    if (rc < 0)
        goto out;
    vfi_sql_int64(q, 1, model_id);
    while (vfi_sql_step(q)) {
        vf_store_ref ref = {vfi_sql_col_int64(q, 0), vfi_sql_col_int64(q, 1),
                            vfi_sql_col_int64(q, 2), vfi_sql_col_real(q, 3)};
        if (skip && ref.extraction == skip->extraction && ref.frame_index == skip->frame_index)
            continue;
        if (vfi_sql_col_vec(q, 4, f16, dim, v) < 0)
            break;
        vfi_rank_offer(rank, &ref, v);
    }
    rc = vfi_sql_finish(q, err);
    q = NULL;
    if (rc < 0)
        goto out;
    rc = vfi_sql_prepare(s,
                         "SELECT v.path FROM extractions e JOIN videos v ON v.id = e.video_id"
                         " WHERE e.id = ?1",
                         "reading videos", &q, err);
    for (int i = 0; rc >= 0 && missing < 0 && i < vfi_rank_count(rank); i++) {
        double sim;
        const vf_store_ref *ref = vfi_rank_get(rank, i, &sim);
        vfi_sql_reset(q);
        vfi_sql_int64(q, 1, ref->extraction);
        if (vfi_sql_step(q))
            hit(user, vfi_sql_col_text(q, 0), ref, sim);
        else
            missing = ref->extraction; /* or the statement failed: finish says */
    }
out:
    if (q) {
        vf_status fin = vfi_sql_finish(q, rc < 0 ? NULL : err);
        rc = rc < 0 ? rc : fin;
        if (rc >= 0 && missing >= 0)
            rc = vfi_fail(err, VF_ERR_STORE, "%s: extraction %lld has no video",
                          s->ops->sql->label(s), (long long)missing);
    }
    vfi_free(v);
    vfi_rank_free(&rank);
    return rc;
}

/* Extraction ext_id's shots (schema 10) into *shots (grown as needed, *cap its room), *n of
 * them: a statement of its own, all its rows read at once, so that its failure (a role without
 * the grant) is the one said. */
static vf_status read_shots(vf_store *s, int64_t ext_id, vf_shot **shots, int *cap, int *n,
                            vf_err *err)
{
    *n = 0;
    vf_sql *q;
    vf_status rc = vfi_sql_prepare_all(s,
                                       "SELECT first_frame, last_frame, start_t, end_t FROM shots"
                                       " WHERE extraction_id = ?1 ORDER BY shot",
                                       "reading shots", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, ext_id);
    while (rc >= 0 && vfi_sql_step(q)) {
        if (*n == *cap) {
            int more = *cap ? 2 * *cap : 64;
            vf_shot *p = more > 0 ? vfi_realloc(*shots, (size_t)more * sizeof(*p)) : NULL;
            if (!p) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                break;
            }
            *shots = p;
            *cap = more;
        }
        (*shots)[(*n)++] = (vf_shot){vfi_sql_col_int64(q, 0), vfi_sql_col_int64(q, 1),
                                     vfi_sql_col_real(q, 2), vfi_sql_col_real(q, 3)};
    }
    vf_status fin = vfi_sql_finish(q, rc < 0 ? NULL : err);
    return rc < 0 ? rc : fin;
}

/* In one read-only snapshot: the done extractions in path order (bytes), then each one's
 * vectors along its primary key, a row at a time, so nothing is sorted and memory stays one
 * vector. */
vf_status vfi_sql_vectors(vf_store *s, int64_t model_id, int f16, int dim, vf_store_want_fn want,
                          vf_store_vector_fn fn, void *user, vf_err *err)
{
    vf_sql *ext = NULL, *q = NULL;
    int with_shots = s->ops->sql->schema(s) >= 10;
    vf_shot *shots = NULL;
    int cap = 0;
    float *v = vfi_mallocarray((size_t)(dim > 0 ? dim : 1), sizeof(float));
    if (!v)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_status rc = vfi_sql_exec(s, s->ops->sql->snapshot, "reading", err);
    if (rc < 0) {
        vfi_free(v);
        return rc;
    }
    rc = vfi_sql_prepare_all(s,
                             "SELECT e.id, v.path, e.sampling, e.frames FROM extractions e"
                             " JOIN videos v ON v.id = e.video_id WHERE e.model_id = ?1 AND"
                             " e.status = 'done' ORDER BY v.path COLLATE \"C\","
                             " e.sampling COLLATE \"C\"",
                             "reading extractions", &ext, err);
    if (rc >= 0)
        rc = vfi_sql_prepare(s,
                             s->ops->sql->schema(s) >= 9
                                 ? "SELECT frame_index, pts, t, vec, t_end FROM features WHERE"
                                   " extraction_id = ?1 ORDER BY frame_index"
                                 : "SELECT frame_index, pts, t, vec, NULL FROM features WHERE"
                                   " extraction_id = ?1 ORDER BY frame_index",
                             "reading features", &q, err);
    if (rc >= 0)
        vfi_sql_int64(ext, 1, model_id);
    while (rc >= 0 && vfi_sql_step(ext)) {
        vf_store_vector out = {
            .path = vfi_sql_col_text(ext, 1),
            .sampling = vfi_sql_col_text(ext, 2),
            .frames = vfi_sql_col_int64(ext, 3),
            .ref.extraction = vfi_sql_col_int64(ext, 0),
            .vec = v,
        };
        if (want && !want(user, out.ref.extraction, out.frames))
            continue;
        if (with_shots &&
            (rc = read_shots(s, out.ref.extraction, &shots, &cap, &out.n_shots, err)) < 0)
            break;
        out.shots = out.n_shots ? shots : NULL;
        vfi_sql_reset(q);
        vfi_sql_int64(q, 1, out.ref.extraction);
        while (rc >= 0 && vfi_sql_step(q)) {
            out.ref.frame_index = vfi_sql_col_int64(q, 0);
            out.ref.pts = vfi_sql_col_int64(q, 1);
            out.ref.t = vfi_sql_col_real(q, 2);
            out.t_end = vfi_sql_col_text(q, 4) ? vfi_sql_col_real(q, 4) : NAN; /* NULL: a frame */
            if (vfi_sql_col_vec(q, 3, f16, dim, v) < 0)
                break;
            rc = fn(user, &out);
        }
    }
    /* the first failure: the callback's, else the statements' */
    vf_status fe = vfi_sql_finish(ext, rc < 0 ? NULL : err);
    rc = rc < 0 ? rc : fe;
    vf_status fq = vfi_sql_finish(q, rc < 0 ? NULL : err);
    rc = rc < 0 ? rc : fq;
    vfi_sql_exec(s, "COMMIT", "reading", NULL);
    vfi_free(shots);
    vfi_free(v);
    return rc;
}

vf_status vfi_sql_index_put(vf_store *s, const vf_store_index *ix, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "INSERT INTO indexes (path, model_id, kind, vectors, files,"
                                   " built_at, host, sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,"
                                   " ?8) ON CONFLICT (path) DO UPDATE SET model_id = ?2,"
                                   " kind = ?3, vectors = ?4, files = ?5, built_at = ?6,"
                                   " host = ?7, sha256 = ?8",
                                   "recording the index", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_text(q, 1, ix->path);
    vfi_sql_int64(q, 2, ix->model_id);
    vfi_sql_text(q, 3, ix->kind);
    vfi_sql_int64(q, 4, ix->vectors);
    vfi_sql_int64(q, 5, ix->files);
    vfi_sql_text(q, 6, ix->built_at);
    vfi_sql_text(q, 7, ix->host);
    vfi_sql_text(q, 8, ix->sha256);
    return vfi_sql_run(q, err);
}

vf_status vfi_sql_indexes(vf_store *s, int64_t model_id, vf_store_index_fn fn, void *user,
                          vf_err *err)
{
    int version = s->ops->sql->schema(s);
    if (version < 6)
        return VF_OK; /* an older database opened read-only: none */
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(
        s,
        version >= 8 ? "SELECT path, model_id, kind, vectors, files, built_at, host, sha256"
                       " FROM indexes WHERE ?1 < 0 OR model_id = ?1 ORDER BY path COLLATE \"C\""
                     : "SELECT path, model_id, kind, vectors, files, built_at, host, NULL"
                       " FROM indexes WHERE ?1 < 0 OR model_id = ?1 ORDER BY path COLLATE \"C\"",
        "reading the indexes", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, model_id);
    while (vfi_sql_step(q)) {
        vf_store_index ix = {vfi_sql_col_text(q, 0),  vfi_sql_col_int64(q, 1),
                             vfi_sql_col_text(q, 2),  vfi_sql_col_int64(q, 3),
                             vfi_sql_col_int64(q, 4), vfi_sql_col_text(q, 5),
                             vfi_sql_col_text(q, 6),  vfi_sql_col_text(q, 7)};
        fn(user, &ix);
    }
    return vfi_sql_finish(q, err);
}

vf_status vfi_sql_inspect(vf_store *s, const char *database, const char *engine,
                          const vf_db_visitor *v, vf_err *err)
{
    int version = s->ops->sql->schema(s);
    vf_db_summary sum = {.database = database, .engine = engine, .schema = version};
    vf_sql *q = NULL;
    vf_status rc = vfi_sql_exec(s, s->ops->sql->snapshot, "reading", err);
    if (rc < 0)
        return rc;
    rc = vfi_sql_prepare(s, VFI_INSPECT_COUNTS_SQL_AT(version), "reading", &q, err);
    if (rc >= 0 && vfi_sql_step(q)) {
        int64_t *counts[] = {&sum.videos,  &sum.models,  &sum.done,   &sum.failed,
                             &sum.running, &sum.vectors, &sum.pending};
        for (int i = 0; i < (int)(sizeof(counts) / sizeof(counts[0])); i++)
            *counts[i] = vfi_sql_col_int64(q, i);
        if (v->summary)
            v->summary(v->user, &sum);
    }
    if (rc >= 0)
        rc = vfi_sql_finish(q, err);
    if (rc >= 0 && v->extraction) { /* by path in byte order, then model */
        rc = vfi_sql_prepare(s,
                             VFI_INSPECT_EXTRACTIONS_SQL_AT(version,
                                                            " ORDER BY v.path COLLATE \"C\", m.name"
                                                            " COLLATE \"C\""),
                             "reading", &q, err);
        while (rc >= 0 && vfi_sql_step(q)) {
            vf_db_extraction e = {
                .status = vfi_sql_col_text(q, 0),
                .frames = vfi_sql_col_int64(q, 1),
                .infer_fps = vfi_sql_col_real(q, 2),
                .model = vfi_sql_col_text(q, 3),
                .layer = vfi_sql_col_text(q, 4),
                .dim = (int)vfi_sql_col_int64(q, 5),
                .dtype = vfi_sql_col_text(q, 6),
                .sampling = vfi_sql_col_text(q, 7),
                .path = vfi_sql_col_text(q, 8),
                .error = vfi_sql_col_text(q, 9),
                .weights = vfi_sql_col_text(q, 10),
            };
            v->extraction(v->user, &e);
        }
        if (rc >= 0)
            rc = vfi_sql_finish(q, err);
    }
    /* benchmark runs (schema 2); a version-1 file opened read-only has none */
    if (rc >= 0 && version >= 2 && v->run) {
        rc = vfi_sql_prepare(s, VFI_INSPECT_RUNS_SQL, "reading", &q, err);
        while (rc >= 0 && vfi_sql_step(q)) {
            vf_db_bench_run r = {
                .started_at = vfi_sql_col_text(q, 0),
                .host = vfi_sql_col_text(q, 1),
                .device = vfi_sql_col_text(q, 2),
                .precision = vfi_sql_col_text(q, 3),
                .batch_size = (int)vfi_sql_col_int64(q, 4),
                .mode = vfi_sql_col_text(q, 5),
                .model = vfi_sql_col_text(q, 6),
                .end_to_end_fps = vfi_sql_col_real(q, 7),
                .infer_fps = vfi_sql_col_real(q, 8),
                .device_name = vfi_sql_col_text(q, 9),
            };
            v->run(v->user, &r);
        }
        if (rc >= 0)
            rc = vfi_sql_finish(q, err);
    }
    vfi_sql_exec(s, "COMMIT", "reading", NULL);
    return rc;
}
