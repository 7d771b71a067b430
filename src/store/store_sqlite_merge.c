/*
 * store_sqlite_merge.c - vidfeat merge into an SQLite database: the done extractions of another
 * (checked as any database from elsewhere) copied in with their vectors, in one transaction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "store/record.h"
#include "store/store_sqlite_db.h"

/* The files done in both with other vectors (counts, frames, times or values), told to
 * conflict(); the same vectors are one extraction. */
static vf_status report_conflicts(sq_store *s, vf_store_conflict_fn conflict, void *user,
                                  vf_err *err)
{
    sqlite3_stmt *st = NULL;
    vf_status rc = VF_OK;
    TRY(vfi_sq_prepare(
        s,
        "SELECT p.path, p.sampling, (SELECT count(*) FROM src.features a WHERE"
        " a.extraction_id = p.old) != (SELECT count(*) FROM features b WHERE"
        " b.extraction_id = p.new) OR EXISTS (SELECT 1 FROM src.features a LEFT JOIN"
        " features b ON b.extraction_id = p.new AND b.frame_index = a.frame_index WHERE"
        " a.extraction_id = p.old AND (b.vec IS NULL OR b.vec != a.vec OR b.t != a.t))"
        " FROM pairs p WHERE p.new IS NOT NULL",
        &st, err));
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW)
        if (sqlite3_column_int(st, 2) && conflict)
            conflict(user, (const char *)sqlite3_column_text(st, 0),
                     (const char *)sqlite3_column_text(st, 1));
    if (r != SQLITE_DONE)
        rc = vfi_sq_fail(s, err, "comparing vectors");
fail:
    sqlite3_finalize(st);
    return rc;
}

/* The source's done extractions that are not here, copied (new ids, counted in *merged), each
 * old id mapped to its new one in temp.ext_map for the vectors. */
static vf_status copy_extractions(sq_store *s, int64_t *merged, vf_err *err)
{
    sqlite3_stmt *st = NULL;
    vf_status rc = VF_OK;
    int r;
    TRY(vfi_sq_prepare(
        s,
        "INSERT INTO extractions (id, video_id, model_id, sampling, status, error, device,"
        " precision, batch_size, frames, started_at, finished_at, decode_fps,"
        " convert_fps, infer_fps, store_fps) SELECT " NEXT_EXTRACTION_ID ","
        " p.video_id, p.model_id, e.sampling,"
        " 'done', NULL, e.device, e.precision, e.batch_size, e.frames, e.started_at,"
        " e.finished_at, e.decode_fps, e.convert_fps, e.infer_fps, e.store_fps FROM"
        " pairs p JOIN src.extractions e ON e.id = p.old WHERE p.old = ? RETURNING id",
        &st, err));
    sqlite3_stmt *olds = NULL, *map = NULL;
    TRY(vfi_sq_prepare(s, "SELECT old FROM pairs WHERE new IS NULL ORDER BY old", &olds, err));
    if ((rc = vfi_sq_prepare(s, "INSERT INTO ext_map VALUES (?, ?)", &map, err)) < 0) {
        sqlite3_finalize(olds);
        goto fail;
    }
    while ((r = sqlite3_step(olds)) == SQLITE_ROW) {
        int64_t old = sqlite3_column_int64(olds, 0);
        sqlite3_bind_int64(st, 1, old);
        if (sqlite3_step(st) != SQLITE_ROW) {
            r = SQLITE_ERROR;
            break;
        }
        sqlite3_bind_int64(map, 1, old);
        sqlite3_bind_int64(map, 2, sqlite3_column_int64(st, 0));
        sqlite3_reset(st);
        if (sqlite3_step(map) != SQLITE_DONE) {
            r = SQLITE_ERROR;
            break;
        }
        sqlite3_reset(map);
        (*merged)++;
    }
    sqlite3_finalize(olds);
    sqlite3_finalize(map);
    if (r != SQLITE_DONE)
        rc = vfi_sq_fail(s, err, "copying extractions");
fail:
    sqlite3_finalize(st);
    return rc;
}

/* Copy the done extractions of the database at `from` into s (see store.h). Conflicts: a file
 * done in both with other vectors; s's is kept and conflict() told. */
vf_status vfi_sq_merge(vf_store *store, const char *from, vf_store_conflict_fn conflict, void *user,
                       int64_t *merged, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    *merged = 0;
    vf_status rc = VF_OK;
    int version = 0;
    {
        sq_store probe = {.path = (char *)from};
        TRY(vfi_sq_open_readonly(&probe, &version, err));
        sqlite3_close(probe.db);
        if (version < 1 || version > VF_STORE_SCHEMA_VERSION)
            return vfi_fail(err, VF_ERR_STORE, "%s: schema version %d cannot be merged", from,
                            version);
    }
    TRY(vfi_sq_prepare(s, "ATTACH DATABASE ? AS src", &st, err));
    sqlite3_bind_text(st, 1, from, -1, SQLITE_STATIC);
    TRY(vfi_sq_run_once(s, st, "opening it", err));
    st = NULL;
    TRY(vfi_sq_exec(s, "BEGIN IMMEDIATE", err));
    /* models and videos by their identity; maps from the source's ids to ours */
    TRY(vfi_sq_exec(
        s,
        "INSERT OR IGNORE INTO models (name, file_sha256, layer, dim, dtype, preprocessing)"
        " SELECT name, file_sha256, layer, dim, dtype, preprocessing FROM src.models;"
        "CREATE TEMP TABLE model_map AS SELECT m.id AS old, n.id AS new FROM src.models m"
        " JOIN models n USING (name, file_sha256, layer, dtype, preprocessing);"
        "CREATE TEMP TABLE done_src AS SELECT e.*, v.path AS vpath FROM src.extractions e"
        " JOIN src.videos v ON v.id = e.video_id WHERE e.status = 'done';"
        "INSERT INTO videos (path, size, mtime, content_hash, duration, width, height,"
        " rotation, codec, frame_rate) SELECT v.path, v.size, v.mtime, v.content_hash,"
        " v.duration, v.width, v.height, v.rotation, v.codec, v.frame_rate FROM src.videos"
        " v WHERE v.id IN (SELECT video_id FROM done_src) AND true ON CONFLICT (path) DO"
        " NOTHING;"
        "CREATE TEMP TABLE pairs AS SELECT d.id AS old, n.id AS new, d.vpath AS path,"
        " mm.new AS model_id, d.sampling, v.id AS video_id FROM done_src d JOIN model_map mm"
        " ON mm.old = d.model_id JOIN videos v ON v.path = d.vpath LEFT JOIN extractions n"
        " ON n.video_id = v.id AND n.model_id = mm.new AND n.sampling = d.sampling"
        " AND n.status = 'done';",
        err));
    /* whose weights, where the source knows and we do not (schema 5) */
    if (version >= 5)
        TRY(vfi_sq_exec(s,
                        "UPDATE models SET weights = (SELECT o.weights FROM src.models o WHERE"
                        " o.name = models.name AND o.file_sha256 = models.file_sha256 AND o.layer ="
                        " models.layer AND o.dtype = models.dtype AND o.preprocessing ="
                        " models.preprocessing) WHERE weights IS NULL;",
                        err));
    /* the text tower paired with a CLIP model's vectors, likewise (schema 7) */
    if (version >= 7)
        TRY(vfi_sq_exec(
            s,
            "UPDATE models SET text_sha256 = (SELECT o.text_sha256 FROM src.models o WHERE"
            " o.name = models.name AND o.file_sha256 = models.file_sha256 AND o.layer ="
            " models.layer AND o.dtype = models.dtype AND o.preprocessing ="
            " models.preprocessing) WHERE text_sha256 IS NULL;",
            err));
    TRY(report_conflicts(s, conflict, user, err));
    /* the rest: replace any unfinished or failed attempt here, copy extraction and vectors */
    TRY(vfi_sq_exec(
        s,
        "DELETE FROM extractions WHERE id IN (SELECT e.id FROM extractions e JOIN pairs p"
        " ON p.new IS NULL AND e.video_id = p.video_id AND e.model_id = p.model_id AND"
        " e.sampling = p.sampling);"
        "CREATE TEMP TABLE ext_map (old INTEGER PRIMARY KEY, new INTEGER);",
        err));
    TRY(copy_extractions(s, merged, err));
    /* a window's end time since schema 9 */
    TRY(vfi_sq_exec(s,
                    version >= 9 ? "INSERT INTO features (extraction_id, frame_index, pts, t, "
                                   "t_end, vec) SELECT m.new, f.frame_index, f.pts, f.t, f.t_end, "
                                   "f.vec FROM src.features f JOIN ext_map m ON m.old = "
                                   "f.extraction_id"
                                 : "INSERT INTO features (extraction_id, frame_index, pts, t, "
                                   "vec) SELECT m.new, f.frame_index, f.pts, f.t, f.vec FROM "
                                   "src.features f JOIN ext_map m ON m.old = f.extraction_id",
                    err));
    /* and the shots found with them, since schema 10 */
    if (version >= 10)
        TRY(vfi_sq_exec(s,
                        "INSERT INTO shots (extraction_id, shot, first_frame, last_frame, start_t,"
                        " end_t) SELECT m.new, o.shot, o.first_frame, o.last_frame, o.start_t,"
                        " o.end_t FROM src.shots o JOIN ext_map m ON m.old = o.extraction_id",
                        err));
    TRY(vfi_sq_exec(s,
                    "DROP TABLE temp.model_map; DROP TABLE temp.done_src; DROP TABLE temp.pairs;"
                    " DROP TABLE temp.ext_map;",
                    err));
    TRY(vfi_sq_exec(s, "COMMIT", err));
    return vfi_sq_exec(s, "DETACH DATABASE src", err);
fail:
    sqlite3_finalize(st);
    vfi_sq_exec(s, "ROLLBACK", NULL);
    vfi_sq_exec(s,
                "DROP TABLE IF EXISTS temp.model_map; DROP TABLE IF EXISTS temp.done_src;"
                " DROP TABLE IF EXISTS temp.pairs; DROP TABLE IF EXISTS temp.ext_map;",
                NULL);
    vfi_sq_exec(s, "DETACH DATABASE src", NULL);
    return rc;
}
