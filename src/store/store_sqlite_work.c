/*
 * store_sqlite_work.c - the SQLite store's leased work (store.h): files registered as work,
 * offered, claimed with a lease, renewed, released, and their states; the clock is this
 * machine's (an SQLite file is shared by the workers of one machine or file system).
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
    sqlite3_stmt *add = NULL, *reset = NULL;
    char now[32];
    vfi_now_iso(now, sizeof(now));
    vf_status rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0)
        return rc;
    TRY(vfi_sq_prepare(s, "INSERT INTO queue (path, added_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                       &add, err));
    TRY(vfi_sq_prepare(
        s,
        "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL, attempts = 0,"
        " error = NULL WHERE path = ? AND state IN ('done', 'failed')",
        &reset, err));
    for (int i = 0; i < n; i++) {
        sqlite3_bind_text(add, 1, names[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(add, 2, now, -1, SQLITE_STATIC);
        sqlite3_bind_text(reset, 1, names[i], -1, SQLITE_STATIC);
        if (sqlite3_step(add) != SQLITE_DONE || sqlite3_step(reset) != SQLITE_DONE) {
            rc = vfi_sq_fail(s, err, "registering work");
            goto fail;
        }
        sqlite3_reset(add);
        sqlite3_reset(reset);
    }
    sqlite3_finalize(add);
    sqlite3_finalize(reset);
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(add);
    sqlite3_finalize(reset);
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

/* want: this connection's set (temporary: it goes with the connection). queue workers have
 * none: they claim from every lease of their key. */
vf_status vfi_sq_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    vf_status rc = vfi_sq_exec(s,
                               "CREATE TEMP TABLE IF NOT EXISTS want (ord INTEGER PRIMARY KEY,"
                               " path TEXT NOT NULL UNIQUE, given TEXT, size INTEGER, mtime REAL)",
                               err);
    if (rc < 0 || (rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err)) < 0)
        return rc;
    s->want = files != NULL;
    if (!files) {
        TRY(vfi_sq_prepare(
            s,
            "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM queue"
            " WHERE true ORDER BY id ON CONFLICT DO NOTHING",
            &st, err));
        sqlite3_bind_int64(st, 1, w->model_id);
        sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
        TRY(vfi_sq_run_once(s, st, "reading the queue", err));
        return vfi_sq_exec(s, "COMMIT", err);
    }
    TRY(vfi_sq_exec(s, "DELETE FROM want", err));
    TRY(vfi_sq_prepare(s, "INSERT OR IGNORE INTO want VALUES (?, ?, ?, ?, ?)", &st, err));
    for (int i = 0; i < n; i++) {
        sqlite3_bind_int(st, 1, i);
        sqlite3_bind_text(st, 2, files[i].name, -1, SQLITE_STATIC);
        vfi_sq_bind_text(st, 3, files[i].given);
        sqlite3_bind_int64(st, 4, files[i].size);
        sqlite3_bind_double(st, 5, files[i].mtime);
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = vfi_sq_fail(s, err, "listing the work");
            goto fail;
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!w->force) { /* the resume rule, for the whole set at once */
        static const char *const is_done =
            " EXISTS (SELECT 1 FROM videos v JOIN extractions e ON e.video_id = v.id"
            " WHERE v.path IN (w.path, w.given) AND v.size = w.size AND v.mtime = w.mtime"
            " AND e.model_id = ?1 AND e.sampling = ?2 AND e.precision = ?3"
            " AND e.status = 'done')";
        char sql[512];
        snprintf(sql, sizeof(sql), "SELECT ord FROM want w WHERE%s", is_done);
        TRY(vfi_sq_prepare(s, sql, &st, err));
        sqlite3_bind_int64(st, 1, w->model_id);
        sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, w->precision, -1, SQLITE_STATIC);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            int ord = sqlite3_column_int(st, 0);
            if (done && ord >= 0 && ord < n)
                done[ord] = 1;
        }
        if (r != SQLITE_DONE) {
            rc = vfi_sq_fail(s, err, "reading extractions");
            goto fail;
        }
        sqlite3_finalize(st);
        snprintf(sql, sizeof(sql), "DELETE FROM want AS w WHERE%s", is_done);
        TRY(vfi_sq_prepare(s, sql, &st, err));
        sqlite3_bind_int64(st, 1, w->model_id);
        sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, w->precision, -1, SQLITE_STATIC);
        TRY(vfi_sq_run_once(s, st, "listing the work", err));
    }
    TRY(vfi_sq_prepare(s,
                       "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM want"
                       " WHERE true ORDER BY ord ON CONFLICT DO NOTHING",
                       &st, err));
    sqlite3_bind_int64(st, 1, w->model_id);
    sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
    TRY(vfi_sq_run_once(s, st, "listing the work", err));
    /* Files that ended before this worker began and are not done by the rule (changed since,
     * or failed) are work again; those that others finish from now on are not. */
    TRY(vfi_sq_prepare(
        s,
        "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL, attempts = 0,"
        " error = NULL WHERE model_id = ?1 AND sampling = ?2 AND state IN ('done',"
        " 'failed') AND finished_at < ?3 AND (?4 OR state = 'done' OR attempts < ?5)"
        " AND path IN (SELECT path FROM want)",
        &st, err));
    sqlite3_bind_int64(st, 1, w->model_id);
    sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, w->since);
    sqlite3_bind_int(st, 4, w->force);
    sqlite3_bind_int(st, 5, w->max_attempts);
    TRY(vfi_sq_run_once(s, st, "listing the work", err));
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(st);
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

/* The set's leases held by processes of this machine that are gone run out now; *n_expired
 * of them, *n_held held by live or remote workers. */
static vf_status expire_gone(sq_store *s, const vf_store_work *w, int *n_expired, int *n_held,
                             vf_err *err)
{
    sqlite3_stmt *st = NULL, *up = NULL;
    *n_expired = *n_held = 0;
    vf_status rc =
        vfi_sq_prepare(s,
                       s->want ? "SELECT l.id, l.owner FROM leases l JOIN want w ON w.path"
                                 " = l.path WHERE l.model_id = ?1 AND l.sampling = ?2 AND"
                                 " l.state = 'claimed'"
                               : "SELECT l.id, l.owner FROM leases l WHERE l.model_id = ?1"
                                 " AND l.sampling = ?2 AND l.state = 'claimed'",
                       &st, err);
    if (rc < 0)
        return rc;
    TRY(vfi_sq_prepare(s, "UPDATE leases SET expires = 0 WHERE id = ? AND state = 'claimed'", &up,
                       err));
    sqlite3_bind_int64(st, 1, w->model_id);
    sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(st, 1);
        if (owner && !strcmp(owner, w->owner)) {
            continue; /* this worker's own files are in its pipeline */
        } else if (owner && vfi_owner_gone(owner)) {
            sqlite3_bind_int64(up, 1, sqlite3_column_int64(st, 0));
            if (sqlite3_step(up) != SQLITE_DONE) {
                rc = vfi_sq_fail(s, err, "ending a dead worker's lease");
                goto fail;
            }
            sqlite3_reset(up);
            (*n_expired)++;
        } else {
            (*n_held)++;
        }
    }
    if (r != SQLITE_DONE)
        rc = vfi_sq_fail(s, err, "reading leases");
fail:
    sqlite3_finalize(st);
    sqlite3_finalize(up);
    return rc;
}

vf_status vfi_sq_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
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
        int r = SQLITE_DONE;
        st = NULL;
        for (int k = 0; k < 2 && r == SQLITE_DONE; k++) {
            sqlite3_finalize(st);
            TRY(vfi_sq_prepare(s, wanted[!s->want][k], &st, err));
            sqlite3_bind_int64(st, 1, w->model_id);
            sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
            if (k == 1)
                sqlite3_bind_double(st, 3, now);
            r = sqlite3_step(st);
        }
        if (r != SQLITE_ROW && r != SQLITE_DONE) {
            rc = vfi_sq_fail(s, err, "claiming work");
            goto fail;
        }
        if (r == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(st, 0);
            int dead = !strcmp((const char *)sqlite3_column_text(st, 2), "claimed");
            int attempts = sqlite3_column_int(st, 3);
            const char *owner = (const char *)sqlite3_column_text(st, 4);
            c->index = sqlite3_column_int(st, 5);
            if (!(c->name = vfi_strdup((const char *)sqlite3_column_text(st, 1)))) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                goto fail;
            }
            c->lease.id = id;
            if (dead && attempts >= w->max_attempts) {
                snprintf(c->error, sizeof(c->error),
                         "gave up after %d attempts: the worker died each time (last: %s)",
                         attempts, owner ? owner : "?");
                sqlite3_finalize(st);
                TRY(vfi_sq_prepare(
                    s,
                    "UPDATE leases SET state = 'failed', owner = NULL, expires = NULL,"
                    " finished_at = ?2, error = ?3 WHERE id = ?1",
                    &st, err));
                sqlite3_bind_int64(st, 1, id);
                sqlite3_bind_double(st, 2, now);
                sqlite3_bind_text(st, 3, c->error, -1, SQLITE_STATIC);
                TRY(vfi_sq_run_once(s, st, "failing a file", err));
                /* recorded as a failed extraction, like any file that failed */
                TRY(vfi_sq_prepare(
                    s, "INSERT INTO videos (path) VALUES (?1) ON CONFLICT (path) DO NOTHING", &st,
                    err));
                sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
                TRY(vfi_sq_run_once(s, st, "failing a file", err));
                char when[32];
                vfi_now_iso(when, sizeof(when));
                TRY(vfi_sq_prepare(
                    s,
                    "INSERT INTO extractions (video_id, model_id, sampling, status, error,"
                    " precision, finished_at) SELECT id, ?2, ?3, 'failed', ?4, ?5, ?6 FROM"
                    " videos WHERE path = ?1 ON CONFLICT (video_id, model_id, sampling)"
                    " DO UPDATE SET status = 'failed', error = excluded.error,"
                    " finished_at = excluded.finished_at",
                    &st, err));
                sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, w->model_id);
                sqlite3_bind_text(st, 3, w->sampling, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 4, c->error, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 5, w->precision, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 6, when, -1, SQLITE_STATIC);
                TRY(vfi_sq_run_once(s, st, "failing a file", err));
                st = NULL;
                c->kind = VF_CLAIM_GAVE_UP;
                return vfi_sq_exec(s, "COMMIT", err);
            }
            sqlite3_finalize(st);
            TRY(vfi_sq_prepare(s,
                               "UPDATE leases SET state = 'claimed', owner = ?2, token = token + 1,"
                               " expires = ?3, attempts = attempts + 1, error = NULL WHERE id = ?1"
                               " RETURNING token",
                               &st, err));
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_text(st, 2, w->owner, -1, SQLITE_STATIC);
            sqlite3_bind_double(st, 3, now + w->lease_s);
            if (sqlite3_step(st) != SQLITE_ROW) {
                rc = vfi_sq_fail(s, err, "claiming work");
                goto fail;
            }
            c->lease.token = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
            c->kind = VF_CLAIM_OK;
            return vfi_sq_exec(s, "COMMIT", err);
        }
        sqlite3_finalize(st);
        st = NULL;
        int expired, held;
        TRY(expire_gone(s, w, &expired, &held, err));
        c->kind = held ? VF_CLAIM_WAIT : VF_CLAIM_NONE;
        if (!expired)
            break;
    }
    return vfi_sq_exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(st);
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
    sq_store *s = (sq_store *)store;
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
    sqlite3_stmt *st = NULL;
    vf_status rc = vfi_sq_prepare(s, sql, &st, err);
    if (rc >= 0) {
        sqlite3_bind_double(st, 1, vfi_epoch_s() + w->lease_s);
        sqlite3_bind_text(st, 2, w->owner, -1, SQLITE_STATIC);
        rc = vfi_sq_run_once(s, st, "renewing leases", err);
    }
    vfi_free(sql);
    vfi_free(list);
    return rc;
}

vf_status vfi_sq_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    vf_status rc =
        vfi_sq_prepare(s,
                       done ? "UPDATE leases SET state = 'done', owner = NULL, expires = NULL,"
                              " attempts = 0, finished_at = ?3 WHERE id = ?1 AND token = ?2"
                              " AND state = 'claimed'"
                            : "UPDATE leases SET state = 'pending', owner = NULL, expires ="
                              " NULL, attempts = max(attempts - 1, 0) WHERE id = ?1 AND"
                              " token = ?2 AND state = 'claimed'",
                       &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, l->id);
    sqlite3_bind_int64(st, 2, l->token);
    if (done)
        sqlite3_bind_double(st, 3, vfi_epoch_s());
    return vfi_sq_run_once(s, st, "giving a file back", err);
}

vf_status vfi_sq_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                             void *user, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    if (!s->want)
        return VF_OK; /* a queue worker's set is every queued file: it reports only its own */
    vf_status rc =
        vfi_sq_prepare(s,
                       "SELECT w.ord, coalesce(l.state, 'pending'), l.error FROM want w LEFT"
                       " JOIN leases l ON l.path = w.path AND l.model_id = ?1 AND"
                       " l.sampling = ?2 ORDER BY w.ord",
                       &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, w->model_id);
    sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW)
        fn(user, sqlite3_column_int(st, 0), (const char *)sqlite3_column_text(st, 1),
           (const char *)sqlite3_column_text(st, 2));
    if (r != SQLITE_DONE)
        rc = vfi_sq_fail(s, err, "reading leases");
    sqlite3_finalize(st);
    return rc;
}
