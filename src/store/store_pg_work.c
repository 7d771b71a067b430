/*
 * store_pg_work.c - the PostgreSQL store's leased work (store.h): files registered as work,
 * offered, claimed with FOR UPDATE SKIP LOCKED, renewed, released, their states, the server's
 * clock; each call repeated on a connection made again.
 */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/owner.h"
#include "core/path.h"
#include "core/utf8.h"
#include "store/record.h"
#include "store/sql.h"
#include "store/store_pg_db.h"

static vf_status clock_once(pg_store *s, double *now, vf_err *err)
{
    vf_sql *q;
    vf_status rc = vfi_sql_prepare(&s->base, "SELECT extract(epoch FROM clock_timestamp())::float8",
                                   "reading the clock", &q, err);
    if (rc < 0)
        return rc;
    *now = vfi_sql_step(q) ? vfi_sql_col_real(q, 0) : 0.0;
    return vfi_sql_finish(q, err);
}

vf_status vfi_pg_clock(vf_store *store, double *now, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, clock_once(s, now, err));
}

/* names[0..n) as a text[] literal ("{\"a\",\"b\"}") in a new string. */
static char *text_array(const char *const *names, int n)
{
    size_t cap = 3;
    for (int i = 0; i < n; i++)
        cap += 2 * strlen(names[i]) + 3;
    char *buf = vfi_malloc(cap), *p = buf;
    if (!buf)
        return NULL;
    *p++ = '{';
    for (int i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        *p++ = '"';
        for (const char *c = names[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = '\0';
    return buf;
}

static vf_status enqueue_once(pg_store *s, const char *const *names, int n, vf_err *err)
{
    char now[32];
    vfi_now_iso(now, sizeof(now));
    vf_status rc = VF_OK;
    for (int from = 0; from < n && rc >= 0; from += 10000) { /* one statement per 10,000 */
        int k = n - from < 10000 ? n - from : 10000;
        char *arr = text_array(names + from, k);
        if (!arr)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        const char *p[] = {arr, now};
        rc = vfi_pg_query(s,
                          "WITH names AS (SELECT DISTINCT unnest($1::text[]) AS path),"
                          " added AS (INSERT INTO queue (path, added_at) SELECT path, $2 FROM names"
                          " ON CONFLICT DO NOTHING)"
                          " UPDATE leases SET state = 'pending', owner = NULL, expires = NULL,"
                          " attempts = 0, error = NULL WHERE path IN (SELECT path FROM names)"
                          " AND state IN ('done', 'failed')",
                          2, p, "registering work", NULL, err);
        vfi_free(arr);
    }
    return rc;
}

vf_status vfi_pg_enqueue(vf_store *store, const char *const *names, int n, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, enqueue_once(s, names, n, err));
}

static vf_status offer_once(pg_store *s, const vf_store_work *w, const vf_store_offer *files, int n,
                            unsigned char *done, vf_err *err)
{
    char model[24], since[40], force[2] = {w->force ? 't' : 'f', 0}, max[16];
    snprintf(model, sizeof(model), "%lld", (long long)w->model_id);
    snprintf(since, sizeof(since), "%.17g", w->since);
    snprintf(max, sizeof(max), "%d", w->max_attempts);
    PGresult *res = NULL;
    s->want = files != NULL;
    if (!files) {
        const char *p[] = {model, w->sampling};
        return vfi_pg_query(s,
                            "INSERT INTO leases (path, model_id, sampling) SELECT path, $1, $2 FROM"
                            " queue ORDER BY id ON CONFLICT DO NOTHING",
                            2, p, "reading the queue", NULL, err);
    }
    vf_status rc = vfi_pg_fill_want(s, files, n, err);
    if (rc < 0)
        return rc;
    if (!w->force) { /* the resume rule, for the whole set at once */
        const char *p[] = {model, w->sampling, w->precision};
        TRY(vfi_pg_query(
            s,
            "DELETE FROM want w WHERE EXISTS (SELECT 1 FROM videos v JOIN extractions e"
            " ON e.video_id = v.id WHERE v.path IN (w.path, w.given) AND v.size = w.size"
            " AND v.mtime = w.mtime AND e.model_id = $1 AND e.sampling = $2"
            " AND e.precision = $3 AND e.status = 'done') RETURNING ord",
            3, p, "reading extractions", &res, err));
        for (int i = 0; i < PQntuples(res); i++) {
            int ord = atoi(PQgetvalue(res, i, 0));
            if (done && ord >= 0 && ord < n)
                done[ord] = 1;
        }
        PQclear(res);
        res = NULL;
    }
    const char *pl[] = {model, w->sampling};
    TRY(vfi_pg_query(s,
                     "INSERT INTO leases (path, model_id, sampling) SELECT path, $1, $2 FROM want"
                     " ORDER BY ord ON CONFLICT DO NOTHING",
                     2, pl, "listing the work", NULL, err));
    /* Files that ended before this worker began and are not done by the rule (changed since,
     * or failed) are work again; those that others finish from now on are not. */
    const char *pr[] = {model, w->sampling, since, force, max};
    TRY(vfi_pg_query(
        s,
        "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL, attempts = 0,"
        " error = NULL WHERE model_id = $1 AND sampling = $2 AND state IN ('done',"
        " 'failed') AND finished_at < $3 AND ($4 OR state = 'done' OR attempts < $5)"
        " AND path IN (SELECT path FROM want)",
        5, pr, "listing the work", NULL, err));
    /* keep the names, to list them again on a new connection */
    vfi_pg_forget_want(s);
    if (!(s->want_names = vfi_calloc((size_t)n + 1, sizeof(char *))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (; s->n_want < n; s->n_want++)
        if (!(s->want_names[s->n_want] = vfi_strdup(files[s->n_want].name)))
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    return VF_OK;
fail:
    PQclear(res);
    return rc;
}

vf_status vfi_pg_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, offer_once(s, w, files, n, done, err));
}

/* The set's leases held by processes of this machine that are gone run out now (in the
 * claim's transaction); *n_expired of them, *n_held held by live or remote workers. */
static vf_status expire_gone(pg_store *s, const vf_store_work *w, int *n_expired, int *n_held,
                             vf_err *err)
{
    char model[24];
    snprintf(model, sizeof(model), "%lld", (long long)w->model_id);
    const char *p[] = {model, w->sampling};
    PGresult *res;
    *n_expired = *n_held = 0;
    vf_status rc =
        vfi_pg_query(s,
                     s->want ? "SELECT l.id, l.owner FROM leases l JOIN want w ON w.path ="
                               " l.path WHERE l.model_id = $1 AND l.sampling = $2 AND"
                               " l.state = 'claimed'"
                             : "SELECT l.id, l.owner FROM leases l WHERE l.model_id = $1"
                               " AND l.sampling = $2 AND l.state = 'claimed'",
                     2, p, "reading leases", &res, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < PQntuples(res) && rc >= 0; i++) {
        const char *owner = PQgetvalue(res, i, 1);
        if (!strcmp(owner, w->owner)) {
            continue; /* this worker's own files are in its pipeline */
        } else if (vfi_owner_gone(owner)) {
            const char *pu[] = {PQgetvalue(res, i, 0)};
            rc =
                vfi_pg_query(s, "UPDATE leases SET expires = 0 WHERE id = $1 AND state = 'claimed'",
                             1, pu, "ending a dead worker's lease", NULL, err);
            (*n_expired)++;
        } else {
            (*n_held)++;
        }
    }
    PQclear(res);
    return rc;
}

static vf_status claim_once(pg_store *s, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    char model[24], lease[40];
    snprintf(model, sizeof(model), "%lld", (long long)w->model_id);
    snprintf(lease, sizeof(lease), "%.17g", w->lease_s);
    PGresult *res = NULL;
    vfi_free(c->name);
    c->name = NULL;
    c->kind = VF_CLAIM_NONE;
    vf_status rc = vfi_pg_exec(s, "BEGIN", "starting a transaction", err);
    if (rc < 0)
        return rc;
    /* pending files first, then those whose lease ran out: each its own indexed scan */
    static const char *const wanted[2][2] = {
        {"SELECT l.id, l.path, l.state, l.attempts, l.owner, w.ord FROM leases l JOIN want w ON"
         " w.path = l.path WHERE l.model_id = $1 AND l.sampling = $2 AND l.state = 'pending'"
         " ORDER BY l.id LIMIT 1 FOR UPDATE OF l SKIP LOCKED",
         "SELECT l.id, l.path, l.state, l.attempts, l.owner, w.ord FROM leases l JOIN want w ON"
         " w.path = l.path WHERE l.model_id = $1 AND l.sampling = $2 AND l.state = 'claimed'"
         " AND l.expires < extract(epoch FROM clock_timestamp()) ORDER BY l.id LIMIT 1"
         " FOR UPDATE OF l SKIP LOCKED"},
        {"SELECT l.id, l.path, l.state, l.attempts, l.owner, -1 FROM leases l WHERE l.model_id ="
         " $1 AND l.sampling = $2 AND l.state = 'pending' ORDER BY l.id LIMIT 1"
         " FOR UPDATE SKIP LOCKED",
         "SELECT l.id, l.path, l.state, l.attempts, l.owner, -1 FROM leases l WHERE l.model_id ="
         " $1 AND l.sampling = $2 AND l.state = 'claimed' AND l.expires < extract(epoch FROM"
         " clock_timestamp()) ORDER BY l.id LIMIT 1 FOR UPDATE SKIP LOCKED"}};
    for (int pass = 0; pass < 2; pass++) {
        const char *p[] = {model, w->sampling};
        TRY(vfi_pg_query(s, wanted[!s->want][0], 2, p, "claiming work", &res, err));
        if (PQntuples(res) == 0) {
            PQclear(res);
            res = NULL;
            TRY(vfi_pg_query(s, wanted[!s->want][1], 2, p, "claiming work", &res, err));
        }
        if (PQntuples(res) == 1) {
            char id[24];
            snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
            int dead = !strcmp(PQgetvalue(res, 0, 2), "claimed");
            int attempts = atoi(PQgetvalue(res, 0, 3));
            c->lease.id = strtoll(id, NULL, 10);
            c->index = atoi(PQgetvalue(res, 0, 5));
            int oom = 0;
            if (!(c->name = vfi_pg_bytes(res, 0, 1, &oom))) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                goto fail;
            }
            if (dead && attempts >= w->max_attempts) {
                snprintf(c->error, sizeof(c->error),
                         "gave up after %d attempts: the worker died each time (last: %s)",
                         attempts, PQgetvalue(res, 0, 4));
                PQclear(res);
                res = NULL;
                const char *pf[] = {id, c->error};
                TRY(vfi_pg_query(s,
                                 "UPDATE leases SET state = 'failed', owner = NULL, expires = NULL,"
                                 " finished_at = extract(epoch FROM clock_timestamp()), error = $2"
                                 " WHERE id = $1",
                                 2, pf, "failing a file", NULL, err));
                /* recorded as a failed extraction, like any file that failed */
                char when[32];
                vfi_now_iso(when, sizeof(when));
                const char *pe[] = {c->name, model, w->sampling, c->error, w->precision, when};
                TRY(vfi_pg_query(
                    s,
                    "WITH v AS (INSERT INTO videos (path) VALUES ($1) ON CONFLICT (path)"
                    " DO UPDATE SET path = excluded.path RETURNING id)"
                    " INSERT INTO extractions (video_id, model_id, sampling, status, error,"
                    " precision, finished_at) SELECT id, $2, $3, 'failed', $4, $5, $6 FROM"
                    " v ON CONFLICT (video_id, model_id, sampling) DO UPDATE SET status ="
                    " 'failed', error = excluded.error, finished_at = excluded.finished_at",
                    6, pe, "failing a file", NULL, err));
                c->kind = VF_CLAIM_GAVE_UP;
                return vfi_pg_exec(s, "COMMIT", "failing a file", err);
            }
            PQclear(res);
            res = NULL;
            const char *pc[] = {id, w->owner, lease};
            TRY(vfi_pg_query(s,
                             "UPDATE leases SET state = 'claimed', owner = $2, token = token + 1,"
                             " expires = extract(epoch FROM clock_timestamp()) + $3, attempts ="
                             " attempts + 1, error = NULL WHERE id = $1 RETURNING token",
                             3, pc, "claiming work", &res, err));
            c->lease.token = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
            PQclear(res);
            res = NULL;
            TRY(vfi_pg_exec(s, "COMMIT", "claiming work", err));
            c->kind = VF_CLAIM_OK;
            return VF_OK;
        }
        PQclear(res);
        res = NULL;
        int expired, held;
        TRY(expire_gone(s, w, &expired, &held, err));
        c->kind = held ? VF_CLAIM_WAIT : VF_CLAIM_NONE;
        if (!expired)
            break;
    }
    return vfi_pg_exec(s, "COMMIT", "claiming work", err);
fail:
    PQclear(res);
    vfi_pg_exec(s, "ROLLBACK", NULL, NULL);
    vfi_free(c->name);
    c->name = NULL;
    c->kind = VF_CLAIM_NONE;
    return rc;
}

vf_status vfi_pg_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, claim_once(s, w, c, err));
}

static vf_status renew_once(pg_store *s, const vf_store_work *w, const int64_t *ids, int n,
                            vf_err *err)
{
    size_t cap = (size_t)n * 22 + 3, len = 0;
    char *arr = vfi_malloc(cap), lease[40];
    if (!arr)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    arr[len++] = '{';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(arr + len, cap - len, "%s%lld", i ? "," : "", (long long)ids[i]);
    snprintf(arr + len, cap - len, "}");
    snprintf(lease, sizeof(lease), "%.17g", w->lease_s);
    const char *p[] = {arr, w->owner, lease};
    vf_status rc =
        vfi_pg_query(s,
                     "UPDATE leases SET expires = extract(epoch FROM clock_timestamp()) + $3"
                     " WHERE id = ANY($1::bigint[]) AND owner = $2 AND state = 'claimed'",
                     3, p, "renewing leases", NULL, err);
    vfi_free(arr);
    return rc;
}

vf_status vfi_pg_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
                       vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, renew_once(s, w, ids, n, err));
}

static vf_status release_once(pg_store *s, const vf_store_lease *l, int done, vf_err *err)
{
    char id[24], token[24];
    snprintf(id, sizeof(id), "%lld", (long long)l->id);
    snprintf(token, sizeof(token), "%lld", (long long)l->token);
    const char *p[] = {id, token};
    return vfi_pg_query(s,
                        done ? "UPDATE leases SET state = 'done', owner = NULL, expires = NULL,"
                               " attempts = 0, finished_at = extract(epoch FROM clock_timestamp())"
                               " WHERE id = $1 AND token = $2 AND state = 'claimed'"
                             : "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL,"
                               " attempts = greatest(attempts - 1, 0) WHERE id = $1 AND token = $2"
                               " AND state = 'claimed'",
                        2, p, "giving a file back", NULL, err);
}

vf_status vfi_pg_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, release_once(s, l, done, err));
}

static vf_status states_once(pg_store *s, const vf_store_work *w, vf_store_state_fn fn, void *user,
                             vf_err *err)
{
    if (!s->want)
        return VF_OK; /* a queue worker's set is every queued file: it reports only its own */
    char model[24];
    snprintf(model, sizeof(model), "%lld", (long long)w->model_id);
    const char *p[] = {model, w->sampling};
    PGresult *res;
    vf_status rc =
        vfi_pg_query(s,
                     "SELECT w.ord, coalesce(l.state, 'pending'), l.error FROM want w LEFT"
                     " JOIN leases l ON l.path = w.path AND l.model_id = $1 AND"
                     " l.sampling = $2 ORDER BY w.ord",
                     2, p, "reading leases", &res, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < PQntuples(res) && rc >= 0; i++) {
        int oom = 0;
        char *error = vfi_pg_bytes(res, i, 2, &oom);
        if (oom)
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        else
            fn(user, atoi(PQgetvalue(res, i, 0)), PQgetvalue(res, i, 1), error);
        vfi_free(error);
    }
    PQclear(res);
    return rc;
}

vf_status vfi_pg_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                             void *user, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, states_once(s, w, fn, user, err));
}
