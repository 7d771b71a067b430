/*
 * sql_write.c - the writes of an extraction that every SQL store makes the same way, over
 * sql.h: its lease's fence checked, the video recorded and the extraction started, its running
 * frame count, its end (status, error, rates, the count from its rows) with its lease. Each runs
 * in one transaction begun by the driver's write statement; what differs between the dialects
 * (how a write begins, a new id, holding the lease row, the clock) is the driver's.
 */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "store/record.h"
#include "store/sql.h"

/* Roll back after a failure, whose message is already in err. */
static vf_status rolled_back(vf_store *s, vf_status rc)
{
    vfi_sql_exec(s, "ROLLBACK", "rolling back", NULL);
    return rc;
}

vf_status vfi_sql_fence(vf_store *s, const vf_store_lease *fence, int *finished, vf_err *err)
{
    if (finished)
        *finished = 0;
    if (!fence)
        return VF_OK;
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT state FROM leases WHERE id = ?1 AND token = ?2%s",
             s->ops->sql->hold_row);
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s, sql, "reading the lease", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, fence->id);
    vfi_sql_int64(q, 2, fence->token);
    char state[16] = "";
    if (vfi_sql_step(q)) {
        const char *v = vfi_sql_col_text(q, 0);
        snprintf(state, sizeof(state), "%s", v ? v : "");
    }
    if ((rc = vfi_sql_finish(q, err)) < 0)
        return rc;
    if (!strcmp(state, "claimed"))
        return VF_OK;
    if (finished && (!strcmp(state, "done") || !strcmp(state, "failed"))) {
        *finished = 1;
        return VF_OK;
    }
    return vfi_fail(err, VF_ERR_LEASE, "%s: the lease ran out and another worker has the file",
                    s->ops->sql->label(s));
}

static vf_status record_video(vf_store *s, const vf_store_video *v, int64_t *video_id, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "INSERT INTO videos (path, size, mtime, content_hash, duration,"
                                   " width, height, rotation, codec, frame_rate) VALUES (?1, ?2,"
                                   " ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (path) DO UPDATE"
                                   " SET size = ?2, mtime = ?3, content_hash = ?4, duration = ?5,"
                                   " width = ?6, height = ?7, rotation = ?8, codec = ?9,"
                                   " frame_rate = ?10 RETURNING id",
                                   "recording the video", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_text(q, 1, v->path);
    vfi_sql_int64(q, 2, v->size);
    vfi_sql_double(q, 3, v->mtime);
    vfi_sql_text(q, 4, v->content_hash);
    vfi_sql_double(q, 5, v->duration);
    vfi_sql_int64(q, 6, v->width);
    vfi_sql_int64(q, 7, v->height);
    vfi_sql_int64(q, 8, v->rotation);
    vfi_sql_text(q, 9, v->codec);
    vfi_sql_double(q, 10, v->frame_rate);
    return vfi_sql_one_int64(s, q, "recording the video", video_id, err);
}

vf_status vfi_sql_begin(vf_store *s, const vf_store_video *v, int64_t model_id,
                        const char *sampling, const vf_store_run *run, const vf_store_lease *fence,
                        int64_t *ext_id, vf_err *err)
{
    char now[32], sql[512];
    vfi_now_iso(now, sizeof(now));
    vf_status rc = vfi_sql_exec(s, s->ops->sql->write, "starting a transaction", err);
    if (rc < 0)
        return rc;
    int64_t video_id = 0;
    if ((rc = vfi_sql_fence(s, fence, NULL, err)) < 0 ||
        (rc = record_video(s, v, &video_id, err)) < 0)
        return rolled_back(s, rc);
    /* An earlier attempt (unfinished, failed or forced) goes, with its vectors. */
    vf_sql *q;
    if ((rc = vfi_sql_prepare(s,
                              "DELETE FROM extractions WHERE video_id = ?1 AND model_id = ?2"
                              " AND sampling = ?3",
                              "removing an old extraction", &q, err)) < 0)
        return rolled_back(s, rc);
    vfi_sql_int64(q, 1, video_id);
    vfi_sql_int64(q, 2, model_id);
    vfi_sql_text(q, 3, sampling);
    if ((rc = vfi_sql_run(q, err)) < 0)
        return rolled_back(s, rc);
    snprintf(sql, sizeof(sql),
             "INSERT INTO extractions (id, video_id, model_id, sampling, status, device,"
             " precision, batch_size, started_at) VALUES (%s, ?1, ?2, ?3, 'running', ?4, ?5, ?6,"
             " ?7) RETURNING id",
             s->ops->sql->new_extraction_id);
    if ((rc = vfi_sql_prepare(s, sql, "starting the extraction", &q, err)) < 0)
        return rolled_back(s, rc);
    vfi_sql_int64(q, 1, video_id);
    vfi_sql_int64(q, 2, model_id);
    vfi_sql_text(q, 3, sampling);
    vfi_sql_text(q, 4, run->device);
    vfi_sql_text(q, 5, run->precision);
    vfi_sql_int64(q, 6, run->batch_size);
    vfi_sql_text(q, 7, now);
    if ((rc = vfi_sql_one_int64(s, q, "starting the extraction", ext_id, err)) < 0 ||
        (rc = vfi_sql_exec(s, "COMMIT", "starting the extraction", err)) < 0)
        return rolled_back(s, rc);
    return VF_OK;
}

vf_status vfi_sql_count_frames(vf_store *s, int64_t ext_id, int n, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s, "UPDATE extractions SET frames = frames + ?2 WHERE id = ?1",
                                   "counting frames", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, ext_id);
    vfi_sql_int64(q, 2, n);
    return vfi_sql_run(q, err);
}

/* The extraction's row ended: status, error, rates, the count from the rows actually written
 * (so "done" always matches them). */
static vf_status end_extraction(vf_store *s, int64_t ext_id, int ok, const char *error,
                                const double *stage_fps, vf_err *err)
{
    char now[32];
    vfi_now_iso(now, sizeof(now));
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "UPDATE extractions SET status = ?2, error = ?3, finished_at ="
                                   " ?4, decode_fps = ?5, convert_fps = ?6, infer_fps = ?7,"
                                   " store_fps = ?8, frames = (SELECT count(*) FROM features"
                                   " WHERE extraction_id = ?1) WHERE id = ?1",
                                   "finishing the extraction", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, ext_id);
    vfi_sql_text(q, 2, ok ? "done" : "failed");
    vfi_sql_text(q, 3, error && *error ? error : NULL);
    vfi_sql_text(q, 4, now);
    for (int i = 0; i < 4; i++) {
        double v = stage_fps ? stage_fps[i] : 0.0;
        if (vfi_record_measured(v))
            vfi_sql_double(q, 5 + i, v);
        else
            vfi_sql_text(q, 5 + i, NULL); /* not measured */
    }
    return vfi_sql_run(q, err);
}

/* The lease ends with its extraction. */
static vf_status end_lease(vf_store *s, const vf_store_lease *fence, int ok, const char *error,
                           vf_err *err)
{
    const char *now = s->ops->sql->epoch_now;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "UPDATE leases SET state = ?3, owner = NULL, expires = NULL, attempts = 0,"
             " finished_at = %s, error = ?4 WHERE id = ?1 AND token = ?2",
             now ? now : "?5");
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s, sql, "ending the lease", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, fence->id);
    vfi_sql_int64(q, 2, fence->token);
    vfi_sql_text(q, 3, ok ? "done" : "failed");
    vfi_sql_text(q, 4, error && *error ? error : NULL);
    if (!now)
        vfi_sql_double(q, 5, vfi_epoch_s());
    return vfi_sql_run(q, err);
}

/* A done extraction's shots (schema 10). */
static vf_status add_shots(vf_store *s, int64_t ext_id, const vf_shot *shots, int n, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(s,
                                   "INSERT INTO shots (extraction_id, shot, first_frame,"
                                   " last_frame, start_t, end_t) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                                   "writing the shots", &q, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < n; i++) { /* a failure is kept, and returned by the finish */
        vfi_sql_int64(q, 1, ext_id);
        vfi_sql_int64(q, 2, i);
        vfi_sql_int64(q, 3, shots[i].first);
        vfi_sql_int64(q, 4, shots[i].last);
        vfi_sql_double(q, 5, shots[i].start);
        vfi_sql_double(q, 6, shots[i].end);
        while (vfi_sql_step(q))
            ;
        vfi_sql_reset(q);
    }
    return vfi_sql_finish(q, err);
}

vf_status vfi_sql_end(vf_store *s, int64_t ext_id, const vf_store_lease *fence,
                      const vf_store_end *e, vf_err *err)
{
    int end = e->end, ok = end == VF_END_DONE, finished = 0;
    const char *error = e->error;
    const double *stage_fps = e->stage_fps;
    vf_status rc = vfi_sql_exec(s, s->ops->sql->write, "starting a transaction", err);
    if (rc < 0)
        return rc;
    if ((rc = vfi_sql_fence(s, fence, &finished, err)) < 0)
        return rolled_back(s, rc);
    if (finished) /* this end was committed before its reply was lost */
        return vfi_sql_exec(s, "COMMIT", "finishing the extraction", err);
    if (end == VF_END_REFUSED) {
        vf_sql *q;
        if ((rc = vfi_sql_prepare(s, "DELETE FROM features WHERE extraction_id = ?1",
                                  "removing the extraction's vectors", &q, err)) < 0)
            return rolled_back(s, rc);
        vfi_sql_int64(q, 1, ext_id);
        if ((rc = vfi_sql_run(q, err)) < 0)
            return rolled_back(s, rc);
    }
    if (ok && e->n_shots > 0 && (rc = add_shots(s, ext_id, e->shots, e->n_shots, err)) < 0)
        return rolled_back(s, rc);
    if ((rc = end_extraction(s, ext_id, ok, error, stage_fps, err)) < 0 ||
        (fence && (rc = end_lease(s, fence, ok, error, err)) < 0) ||
        (rc = vfi_sql_exec(s, "COMMIT", "finishing the extraction", err)) < 0)
        return rolled_back(s, rc);
    return VF_OK;
}
