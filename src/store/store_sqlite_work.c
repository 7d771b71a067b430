/*
 * store_sqlite_work.c - the SQLite store's leased work (store.h): files registered as work,
 * offered, claimed with a lease, renewed, released, and their states; the clock is this
 * machine's (an SQLite file is shared by the workers of one machine or file system). Every
 * statement goes through sql.h's calls; SQLite steps several at once on one connection.
 */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/owner.h"
#include "store/record.h"
#include "store/sql.h"
#include "store/store_sqlite_db.h"

vf_status vfi_sq_clock(vf_store *store, double *now, vf_err *err)
{
    (void)store, (void)err;
    *now = vfi_epoch_s();
    return VF_OK;
}

vf_status vfi_sq_enqueue(vf_store *store, const char *const *names, int n, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_sql *add = NULL, *reset = NULL;
    char now[32];
    vfi_now_iso(now, sizeof(now));
    vf_status rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0)
        return rc;
    TRY(vfi_sql_prepare(store,
                        "INSERT INTO queue (path, added_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                        "registering work", &add, err));
    TRY(vfi_sql_prepare(store,
                        "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL,"
                        " attempts = 0, error = NULL WHERE path = ?1 AND state IN ('done',"
                        " 'failed')",
                        "registering work", &reset, err));
    for (int i = 0; i < n; i++) {
        vfi_sql_reset(add);
        vfi_sql_reset(reset);
        vfi_sql_text(add, 1, names[i]);
        vfi_sql_text(add, 2, now);
        vfi_sql_text(reset, 1, names[i]);
        vfi_sql_step(add);
        vfi_sql_step(reset);
    }
    rc = vfi_sql_finish(add, err);
    add = NULL;
    TRY(rc);
    rc = vfi_sql_finish(reset, err);
    reset = NULL;
    TRY(rc);
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    vfi_sql_finish(add, NULL);
    vfi_sql_finish(reset, NULL);
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

/* Run sql with the work's model row and sampling as ?1 and ?2 (and nothing else bound). */
static vf_status run_for(vf_store *store, const vf_store_work *w, const char *sql, const char *what,
                         vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(store, sql, what, &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, w->model_id);
    vfi_sql_text(q, 2, w->sampling);
    return vfi_sql_run(q, err);
}

/* want: this connection's set (temporary: it goes with the connection). queue workers have
 * none: they claim from every lease of their key. */
vf_status vfi_sq_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_sql *q = NULL;
    vf_status rc = vfi_sq_exec(s,
                               "CREATE TEMP TABLE IF NOT EXISTS want (ord INTEGER PRIMARY KEY,"
                               " path TEXT NOT NULL UNIQUE, given TEXT, size INTEGER, mtime REAL)",
                               err);
    if (rc < 0 || (rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err)) < 0)
        return rc;
    s->want = files != NULL;
    if (!files) {
        TRY(run_for(store, w,
                    "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM queue"
                    " WHERE true ORDER BY id ON CONFLICT DO NOTHING",
                    "reading the queue", err));
        return vfi_sq_exec(s, "COMMIT", err);
    }
    TRY(vfi_sq_exec(s, "DELETE FROM want", err));
    TRY(vfi_sql_prepare(store, "INSERT OR IGNORE INTO want VALUES (?1, ?2, ?3, ?4, ?5)",
                        "listing the work", &q, err));
    for (int i = 0; i < n; i++) {
        vfi_sql_reset(q);
        vfi_sql_int64(q, 1, i);
        vfi_sql_text(q, 2, files[i].name);
        vfi_sql_text(q, 3, files[i].given);
        vfi_sql_int64(q, 4, files[i].size);
        vfi_sql_double(q, 5, files[i].mtime);
        vfi_sql_step(q);
    }
    rc = vfi_sql_finish(q, err);
    q = NULL;
    TRY(rc);
    if (!w->force) { /* the resume rule, for the whole set at once */
        static const char *const is_done =
            " EXISTS (SELECT 1 FROM videos v JOIN extractions e ON e.video_id = v.id"
            " WHERE v.path IN (w.path, w.given) AND v.size = w.size AND v.mtime = w.mtime"
            " AND e.model_id = ?1 AND e.sampling = ?2 AND e.precision = ?3"
            " AND e.status = 'done')";
        char sql[512];
        for (int del = 0; del < 2; del++) { /* marked, then gone from the set */
            snprintf(sql, sizeof(sql), "%s%s",
                     del ? "DELETE FROM want AS w WHERE" : "SELECT ord FROM want w WHERE", is_done);
            TRY(vfi_sql_prepare(store, sql, "reading extractions", &q, err));
            vfi_sql_int64(q, 1, w->model_id);
            vfi_sql_text(q, 2, w->sampling);
            vfi_sql_text(q, 3, w->precision);
            while (vfi_sql_step(q)) {
                int64_t ord = vfi_sql_col_int64(q, 0);
                if (done && ord >= 0 && ord < n)
                    done[ord] = 1;
            }
            rc = vfi_sql_finish(q, err);
            q = NULL;
            TRY(rc);
        }
    }
    TRY(run_for(store, w,
                "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM want"
                " WHERE true ORDER BY ord ON CONFLICT DO NOTHING",
                "listing the work", err));
    /* Files that ended before this worker began and are not done by the rule (changed since,
     * or failed) are work again; those that others finish from now on are not. */
    TRY(vfi_sql_prepare(store,
                        "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL,"
                        " attempts = 0, error = NULL WHERE model_id = ?1 AND sampling = ?2 AND"
                        " state IN ('done', 'failed') AND finished_at < ?3 AND (?4 OR state ="
                        " 'done' OR attempts < ?5) AND path IN (SELECT path FROM want)",
                        "listing the work", &q, err));
    vfi_sql_int64(q, 1, w->model_id);
    vfi_sql_text(q, 2, w->sampling);
    vfi_sql_double(q, 3, w->since);
    vfi_sql_int64(q, 4, w->force);
    vfi_sql_int64(q, 5, w->max_attempts);
    rc = vfi_sql_run(q, err);
    q = NULL;
    TRY(rc);
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    vfi_sql_finish(q, NULL);
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

/* The set's leases held by processes of this machine that are gone run out now; *n_expired
 * of them, *n_held held by live or remote workers. */
static vf_status expire_gone(sq_store *s, const vf_store_work *w, int *n_expired, int *n_held,
                             vf_err *err)
{
    vf_sql *q = NULL, *up = NULL;
    *n_expired = *n_held = 0;
    vf_status rc = vfi_sql_prepare(
        &s->base,
        s->want ? "SELECT l.id, l.owner FROM leases l JOIN want w ON w.path = l.path WHERE"
                  " l.model_id = ?1 AND l.sampling = ?2 AND l.state = 'claimed'"
                : "SELECT l.id, l.owner FROM leases l WHERE l.model_id = ?1 AND l.sampling = ?2"
                  " AND l.state = 'claimed'",
        "reading leases", &q, err);
    if (rc < 0)
        return rc;
    TRY(vfi_sql_prepare(&s->base,
                        "UPDATE leases SET expires = 0 WHERE id = ?1 AND state = 'claimed'",
                        "ending a dead worker's lease", &up, err));
    vfi_sql_int64(q, 1, w->model_id);
    vfi_sql_text(q, 2, w->sampling);
    while (vfi_sql_step(q)) {
        const char *owner = vfi_sql_col_text(q, 1);
        if (owner && !strcmp(owner, w->owner)) {
            continue; /* this worker's own files are in its pipeline */
        } else if (owner && vfi_owner_gone(owner)) {
            vfi_sql_reset(up);
            vfi_sql_int64(up, 1, vfi_sql_col_int64(q, 0));
            vfi_sql_step(up);
            (*n_expired)++;
        } else {
            (*n_held)++;
        }
    }
    rc = vfi_sql_finish(up, err);
    up = NULL;
    TRY(rc);
fail:
    vfi_sql_finish(up, NULL);
    vf_status read = vfi_sql_finish(q, rc < 0 ? NULL : err);
    return rc < 0 ? rc : read;
}

/* A file claimed by workers that died with it max_attempts times fails: its lease and a failed
 * extraction say why (c->error), like any file that failed. */
static vf_status give_up(vf_store *store, const vf_store_work *w, const vf_store_claim *c,
                         double now, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(store,
                                   "UPDATE leases SET state = 'failed', owner = NULL, expires ="
                                   " NULL, finished_at = ?2, error = ?3 WHERE id = ?1",
                                   "failing a file", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, c->lease.id);
    vfi_sql_double(q, 2, now);
    vfi_sql_text(q, 3, c->error);
    if ((rc = vfi_sql_run(q, err)) < 0 ||
        (rc = vfi_sql_prepare(store,
                              "INSERT INTO videos (path) VALUES (?1) ON CONFLICT (path) DO NOTHING",
                              "failing a file", &q, err)) < 0)
        return rc;
    vfi_sql_text(q, 1, c->name);
    if ((rc = vfi_sql_run(q, err)) < 0)
        return rc;
    char when[32];
    vfi_now_iso(when, sizeof(when));
    if ((rc = vfi_sql_prepare(store,
                              "INSERT INTO extractions (video_id, model_id, sampling, status,"
                              " error, precision, finished_at) SELECT id, ?2, ?3, 'failed', ?4,"
                              " ?5, ?6 FROM videos WHERE path = ?1 ON CONFLICT (video_id,"
                              " model_id, sampling) DO UPDATE SET status = 'failed', error ="
                              " excluded.error, finished_at = excluded.finished_at",
                              "failing a file", &q, err)) < 0)
        return rc;
    vfi_sql_text(q, 1, c->name);
    vfi_sql_int64(q, 2, w->model_id);
    vfi_sql_text(q, 3, w->sampling);
    vfi_sql_text(q, 4, c->error);
    vfi_sql_text(q, 5, w->precision);
    vfi_sql_text(q, 6, when);
    return vfi_sql_run(q, err);
}

/* The lease of c->lease.id is this worker's until now + lease_s: its new token into c. */
static vf_status take(vf_store *store, const vf_store_work *w, vf_store_claim *c, double now,
                      vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(store,
                                   "UPDATE leases SET state = 'claimed', owner = ?2, token = token"
                                   " + 1, expires = ?3, attempts = attempts + 1, error = NULL"
                                   " WHERE id = ?1 RETURNING token",
                                   "claiming work", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, c->lease.id);
    vfi_sql_text(q, 2, w->owner);
    vfi_sql_double(q, 3, now + w->lease_s);
    int got = vfi_sql_step(q);
    if (got)
        c->lease.token = vfi_sql_col_int64(q, 0);
    rc = vfi_sql_finish(q, err);
    if (rc >= 0 && !got)
        rc = vfi_fail(err, VF_ERR_STORE, "%s: claiming work: the lease is gone",
                      ((sq_store *)store)->path);
    return rc;
}

vf_status vfi_sq_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_sql *q = NULL;
    vf_status rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0 && (sqlite3_errcode(s->db) & 0xff) == SQLITE_BUSY) {
        c->kind = VF_CLAIM_WAIT; /* another worker holds the file's write lock: ask again */
        return VF_OK;
    }
    if (rc < 0)
        return rc;
    for (int pass = 0; pass < 2; pass++) {
        double now = vfi_epoch_s();
        /* pending files first, then those whose lease ran out, each by the index on state;
         * leases first (CROSS JOIN keeps that order): the claimable ones are few */
        static const char *const wanted[2][2] = {
            {"SELECT l.id, l.path, l.state, l.attempts, l.owner, w.ord FROM leases l CROSS JOIN"
             " want w ON w.path = l.path WHERE l.model_id = ?1 AND l.sampling = ?2 AND l.state ="
             " 'pending' ORDER BY l.id LIMIT 1",
             "SELECT l.id, l.path, l.state, l.attempts, l.owner, w.ord FROM leases l CROSS JOIN"
             " want w ON w.path = l.path WHERE l.model_id = ?1 AND l.sampling = ?2 AND l.state ="
             " 'claimed' AND l.expires < ?3 ORDER BY l.id LIMIT 1"},
            {"SELECT l.id, l.path, l.state, l.attempts, l.owner, -1 FROM leases l WHERE"
             " l.model_id = ?1 AND l.sampling = ?2 AND l.state = 'pending' ORDER BY l.id LIMIT 1",
             "SELECT l.id, l.path, l.state, l.attempts, l.owner, -1 FROM leases l WHERE"
             " l.model_id = ?1 AND l.sampling = ?2 AND l.state = 'claimed' AND l.expires < ?3"
             " ORDER BY l.id LIMIT 1"}};
        int found = 0, dead = 0, attempts = 0;
        char owner[128] = ""; /* a worker's name, host:pid:start, for the message */
        for (int k = 0; k < 2 && !found; k++) {
            TRY(vfi_sql_prepare(store, wanted[!s->want][k], "claiming work", &q, err));
            vfi_sql_int64(q, 1, w->model_id);
            vfi_sql_text(q, 2, w->sampling);
            if (k == 1)
                vfi_sql_double(q, 3, now);
            if ((found = vfi_sql_step(q))) {
                const char *state = vfi_sql_col_text(q, 2), *who = vfi_sql_col_text(q, 4);
                c->lease.id = vfi_sql_col_int64(q, 0);
                dead = state && !strcmp(state, "claimed");
                attempts = (int)vfi_sql_col_int64(q, 3);
                snprintf(owner, sizeof(owner), "%s", who ? who : "?");
                c->index = (int)vfi_sql_col_int64(q, 5);
                const char *name = vfi_sql_col_text(q, 1);
                if (!(c->name = vfi_strdup(name ? name : ""))) {
                    rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                    goto fail;
                }
            }
            rc = vfi_sql_finish(q, err);
            q = NULL;
            TRY(rc);
        }
        if (found && dead && attempts >= w->max_attempts) {
            snprintf(c->error, sizeof(c->error),
                     "gave up after %d attempts: the worker died each time (last: %s)", attempts,
                     owner);
            TRY(give_up(store, w, c, now, err));
            c->kind = VF_CLAIM_GAVE_UP;
            return vfi_sq_exec(s, "COMMIT", err);
        }
        if (found) {
            TRY(take(store, w, c, now, err));
            c->kind = VF_CLAIM_OK;
            return vfi_sq_exec(s, "COMMIT", err);
        }
        int expired, held;
        TRY(expire_gone(s, w, &expired, &held, err));
        c->kind = held ? VF_CLAIM_WAIT : VF_CLAIM_NONE;
        if (!expired)
            break;
    }
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    vfi_sql_finish(q, NULL);
    vfi_free(c->name);
    c->name = NULL;
    c->kind = VF_CLAIM_NONE;
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

/* "id, id, ..." of ids[0..n) into a new string (numbers only: safe to splice into SQL). */
static char *id_list(const int64_t *ids, int n)
{
    size_t cap = (size_t)n * 22 + 1, len = 0;
    char *buf = vfi_malloc(cap);
    if (!buf)
        return NULL;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)ids[i]);
    return buf;
}

vf_status vfi_sq_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
                       vf_err *err)
{
    char *list = id_list(ids, n);
    size_t cap = list ? strlen(list) + 128 : 0;
    char *sql = list ? vfi_malloc(cap) : NULL;
    if (!sql) {
        vfi_free(list);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    snprintf(sql, cap,
             "UPDATE leases SET expires = ?1 WHERE owner = ?2 AND state = 'claimed' AND id IN (%s)",
             list);
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(store, sql, "renewing leases", &q, err);
    if (rc >= 0) {
        vfi_sql_double(q, 1, vfi_epoch_s() + w->lease_s);
        vfi_sql_text(q, 2, w->owner);
        rc = vfi_sql_run(q, err);
    }
    vfi_free(sql);
    vfi_free(list);
    return rc;
}

vf_status vfi_sq_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err)
{
    vf_sql *q;
    vf_status rc =
        vfi_sql_prepare(store,
                        done ? "UPDATE leases SET state = 'done', owner = NULL, expires = NULL,"
                               " attempts = 0, finished_at = ?3 WHERE id = ?1 AND token = ?2"
                               " AND state = 'claimed'"
                             : "UPDATE leases SET state = 'pending', owner = NULL, expires ="
                               " NULL, attempts = max(attempts - 1, 0) WHERE id = ?1 AND"
                               " token = ?2 AND state = 'claimed'",
                        "giving a file back", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, l->id);
    vfi_sql_int64(q, 2, l->token);
    if (done)
        vfi_sql_double(q, 3, vfi_epoch_s());
    return vfi_sql_run(q, err);
}

vf_status vfi_sq_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                             void *user, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    if (!s->want)
        return VF_OK; /* a queue worker's set is every queued file: it reports only its own */
    vf_sql *q;
    vf_status rc =
        vfi_sql_prepare(store,
                        "SELECT w.ord, coalesce(l.state, 'pending'), l.error FROM want w LEFT"
                        " JOIN leases l ON l.path = w.path AND l.model_id = ?1 AND"
                        " l.sampling = ?2 ORDER BY w.ord",
                        "reading leases", &q, err);
    if (rc < 0)
        return rc;
    vfi_sql_int64(q, 1, w->model_id);
    vfi_sql_text(q, 2, w->sampling);
    while (vfi_sql_step(q))
        fn(user, (int)vfi_sql_col_int64(q, 0), vfi_sql_col_text(q, 1), vfi_sql_col_text(q, 2));
    return vfi_sql_finish(q, err);
}
