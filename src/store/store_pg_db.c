/*
 * store_pg_db.c - the PostgreSQL store's connection (store_pg_db.h): the URI as messages show it
 * (without a password), libpq's failures in words, statements with text parameters (names that
 * are not UTF-8 as utf8.h writes them), the SQL driver of sql.h in single-row mode, and a lost
 * connection made again with its session (settings, the offered set).
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
#include "store/store_pg_db.h"

char *vfi_pg_display_name(const char *uri)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(uri, &msg);
    PQfreemem(msg);
    const char *user = NULL, *host = NULL, *port = NULL, *db = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
        if (!o->val || !o->val[0])
            continue;
        if (!strcmp(o->keyword, "user"))
            user = o->val;
        else if (!strcmp(o->keyword, "host") || (!host && !strcmp(o->keyword, "hostaddr")))
            host = o->val;
        else if (!strcmp(o->keyword, "port"))
            port = o->val;
        else if (!strcmp(o->keyword, "dbname"))
            db = o->val;
    }
    char buf[1024];
    snprintf(buf, sizeof(buf), "postgresql://%s%s%s%s%s/%s", user ? user : "", user ? "@" : "",
             host ? host : "", port ? ":" : "", port ? port : "", db ? db : "");
    if (!opts)
        snprintf(buf, sizeof(buf), "postgresql://(a URI libpq cannot read)");
    PQconninfoFree(opts);
    return vfi_strdup(buf);
}

/* The passwords a URI holds as written, read without libpq (which cannot read a malformed one,
 * and then quotes it): the userinfo's after its ':' (postgresql://user:PASSWORD@...) and each
 * password=VALUE of the query. Up to max, each [start, start + len) of uri; how many. */
static int written_passwords(const char *uri, const char **start, size_t *len, int max)
{
    int n = 0;
    const char *rest = strstr(uri, "://");
    if (!rest)
        return 0;
    rest += 3;
    /* the userinfo: up to the last '@' before the path or query (a password's own '@' is
     * percent-encoded), else the first '@' at all (a URI malformed after it) */
    const char *end = rest + strcspn(rest, "/?"), *at = NULL;
    for (const char *q = rest; q < end; q++)
        if (*q == '@')
            at = q;
    if (!at)
        at = strchr(rest, '@');
    const char *colon = at ? memchr(rest, ':', (size_t)(at - rest)) : NULL;
    if (colon && n < max && at > colon + 1) {
        start[n] = colon + 1;
        len[n++] = (size_t)(at - colon - 1);
    }
    for (const char *q = strchr(uri, '?'); q && n < max; q = strchr(q + 1, '&')) {
        const char *kv = q + 1;
        if (!strncmp(kv, "password=", 9) && kv[9] && kv[9] != '&') {
            start[n] = kv + 9;
            len[n++] = strcspn(kv + 9, "&");
        }
    }
    return n;
}

int vfi_pg_has_password(const char *uri)
{
    PQconninfoOption *opts = PQconninfoParse(uri, NULL);
    int found = 0;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        found |= !strcmp(o->keyword, "password") && o->val && o->val[0];
    PQconninfoFree(opts);
    const char *start[4];
    size_t len[4];
    return found || written_passwords(uri, start, len, 4) > 0; /* a URI libpq cannot read too */
}

/* s with every copy of the n bytes at what replaced by "(password)", in place (size bytes). */
static void blot(char *s, size_t size, const char *what, size_t n)
{
    static const char mask[] = "(password)";
    if (!n)
        return;
    char needle[256];
    if (n >= sizeof(needle))
        n = sizeof(needle) - 1; /* the start of a password longer than this is masked */
    memcpy(needle, what, n);
    needle[n] = '\0';
    for (char *at = s; (at = strstr(at, needle)) != NULL;) {
        size_t tail = strlen(at + n) + 1, m = sizeof(mask) - 1;
        if ((size_t)(at - s) + m + tail > size)
            tail = size - (size_t)(at - s) - m; /* cut at the end rather than overflow */
        memmove(at + m, at + n, tail);
        memcpy(at, mask, m);
        s[size - 1] = '\0';
        at += m;
    }
}

void vfi_pg_scrub(const char *uri, char *msg, size_t size)
{
    const char *start[4];
    size_t len[4];
    int n = written_passwords(uri, start, len, 4);
    for (int i = 0; i < n; i++) {
        blot(msg, size, start[i], len[i]);
        char plain[256]; /* and as libpq decodes it (%xx), where it could */
        size_t k = 0;
        for (size_t j = 0; j < len[i] && k + 1 < sizeof(plain); j++) {
            const char *c = start[i] + j;
            unsigned v;
            if (*c == '%' && j + 2 < len[i] + 1 && sscanf(c + 1, "%2x", &v) == 1 && v) {
                plain[k++] = (char)v;
                j += 2;
            } else {
                plain[k++] = *c;
            }
        }
        blot(msg, size, plain, k);
    }
}

void vfi_pg_display(const char *uri, char *buf, size_t size)
{
    char *name = vfi_pg_display_name(uri);
    snprintf(buf, size, "%s", name ? name : "postgresql://");
    vfi_free(name);
}

/* libpq's message, first line only (it ends with a newline, and may add hints). */
const char *vfi_pg_pq_message(const char *msg, char *buf, size_t size)
{
    snprintf(buf, size, "%s", msg && msg[0] ? msg : "no reason given");
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* msg's first line without libpq's severity prefix ("FATAL:  "), into buf; *level is 2 for
 * FATAL or PANIC, 1 for another severity, 0 for none. */
static const char *pq_reason(const char *msg, char *buf, size_t size, int *level)
{
    static const char *const levels[] = {
        "FATAL:", "PANIC:", "ERROR:", "WARNING:", "NOTICE:", "INFO:"};
    vfi_pg_pq_message(msg, buf, size);
    *level = 0;
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        size_t n = strlen(levels[i]);
        if (!strncmp(buf, levels[i], n)) {
            n += strspn(buf + n, " ");
            memmove(buf, buf + n, strlen(buf + n) + 1);
            *level = i < 2 ? 2 : 1;
            break;
        }
    }
    return buf;
}

/* libpq's notice processor (its default prints the raw message to stderr): a server warning
 * becomes one warning line naming the server; a FATAL or PANIC read outside a vfi_pg_query, which
 * comes just before the server closes the session, is kept for the reconnection's line. */
void vfi_pg_on_notice(void *arg, const char *msg)
{
    pg_store *s = arg;
    char text[sizeof(s->ended)];
    int level;
    pq_reason(msg, text, sizeof(text), &level);
    if (level == 2)
        memcpy(s->ended, text, sizeof(s->ended));
    else
        vfi_log(VF_LOG_WARNING, "store", "%s: the server says: %s", s->name, text);
}

#define SQLSTATE_NO_PRIVILEGE "42501" /* insufficient_privilege */

vf_status vfi_pg_fail(pg_store *s, vf_err *err, const char *what, const PGresult *res)
{
    char why[512];
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    if (!msg || !msg[0])
        msg = PQerrorMessage(s->conn);
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *reason = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (state && !strcmp(state, SQLSTATE_NO_PRIVILEGE)) /* which grant the role lacks */
        return vfi_fail(
            err, VF_ERR_STORE,
            "%s: %s: %s: the role %s lacks that grant (docs/archives.md \"PostgreSQL roles\": "
            "the owner role makes the tables, the worker role needs its grants)",
            s->name, what, reason ? reason : vfi_pg_pq_message(msg, why, sizeof(why)),
            PQuser(s->conn));
    return vfi_fail(err, VF_ERR_STORE, "%s: %s: %s", s->name, what,
                    vfi_pg_pq_message(msg, why, sizeof(why)));
}

/* Run sql (no parameters, no rows wanted). */
vf_status vfi_pg_exec(pg_store *s, const char *sql, const char *what, vf_err *err)
{
    PGresult *res = PQexec(s->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    vf_status rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? VF_OK
                   : err                                           ? vfi_pg_fail(s, err, what, res)
                                                                   : VF_ERR_STORE;
    PQclear(res);
    return rc;
}

/*
 * File names that are not UTF-8. A UTF-8 database refuses such text, and archives hold names in
 * other encodings (Latin-1): every text parameter goes in as utf8.h writes it (a plain one, every
 * number and nearly every name, as it is), and the columns that hold names or messages naming
 * files (paths, errors) come back through vfi_pg_bytes. The same name always gives the same
 * text, so equality, and with it the resume rule, holds.
 */
#define MAX_PARAMS 32

/* params[0..n) as the text PostgreSQL is sent: into text[], the ones made anew in owned[] (to
 * vfi_free after the call). VF_ERR_NOMEM (err). */
static vf_status encode_params(int n, const char *const *params, const char **text, char **owned,
                               vf_err *err)
{
    if (n > MAX_PARAMS)
        return vfi_fail(err, VF_ERR_INTERNAL, "a statement of %d parameters (at most %d)", n,
                        MAX_PARAMS);
    for (int i = 0; i < n; i++) {
        owned[i] = NULL;
        text[i] = params[i];
        if (params[i] && !vfi_utf8_is_plain(params[i]) &&
            !(text[i] = owned[i] = vfi_utf8_from_bytes(params[i]))) {
            for (int j = 0; j < i; j++)
                vfi_free(owned[j]);
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        }
    }
    return VF_OK;
}

static void free_params(int n, char **owned)
{
    for (int i = 0; i < n; i++)
        vfi_free(owned[i]);
}

/* The bytes of a column that holds a file name or a message naming one (see above): a new
 * string (vfi_free), NULL for SQL null or when out of memory (*oom set). */
char *vfi_pg_bytes(const PGresult *res, int row, int col, int *oom)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    char *b = vfi_utf8_to_bytes(PQgetvalue(res, row, col));
    *oom |= !b;
    return b;
}

/* Run a statement with text parameters (NULL: SQL null); *out gets the result when it
 * succeeded (PQclear it). */
vf_status vfi_pg_query(pg_store *s, const char *sql, int n, const char *const *params,
                       const char *what, PGresult **out, vf_err *err)
{
    const char *text[MAX_PARAMS] = {0};
    char *owned[MAX_PARAMS] = {0};
    vf_status rc = encode_params(n, params, text, owned, err);
    if (rc < 0)
        return rc;
    PGresult *res = PQexecParams(s->conn, sql, n, NULL, text, NULL, NULL, 0);
    free_params(n, owned);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        rc = vfi_pg_fail(s, err, what, res);
        PQclear(res);
        return rc;
    }
    if (out)
        *out = res;
    else
        PQclear(res);
    return VF_OK;
}

void vfi_pg_forget_want(pg_store *s)
{
    for (int i = 0; i < s->n_want; i++)
        vfi_free(s->want_names[i]);
    vfi_free(s->want_names);
    s->want_names = NULL;
    s->n_want = 0;
}

/* ---- a lost connection, made again ------------------------------------------------------ */

/* One value in COPY's text format: backslash, tab, newline and carriage return escaped; NULL
 * as \N. Appends to buf at *len (cap bytes); 0 when it does not fit. */
static int copy_put_text(char *buf, size_t cap, size_t *len, const char *v)
{
    if (!v) {
        if (*len + 2 >= cap)
            return 0;
        buf[(*len)++] = '\\';
        buf[(*len)++] = 'N';
        return 1;
    }
    for (; *v; v++) {
        if (*len + 2 >= cap)
            return 0;
        char c = *v;
        if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
            buf[(*len)++] = '\\';
            c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
        }
        buf[(*len)++] = c;
    }
    return 1;
}

static int copy_put(char *buf, size_t cap, size_t *len, const char *v)
{
    if (!v || vfi_utf8_is_plain(v))
        return copy_put_text(buf, cap, len, v);
    char *text = vfi_utf8_from_bytes(v); /* a name that is not UTF-8: as vfi_pg_query() sends it */
    int ok = text && copy_put_text(buf, cap, len, text);
    vfi_free(text);
    return ok;
}

/* COPY the set's files (ord, path, given, size, mtime) into want; files NULL: the names kept
 * from the last offer (a new connection). */
vf_status vfi_pg_fill_want(pg_store *s, const vf_store_offer *files, int n, vf_err *err)
{
    vf_status rc = vfi_pg_exec(s,
                               "CREATE TEMP TABLE IF NOT EXISTS want (ord integer PRIMARY KEY,"
                               " path text NOT NULL UNIQUE, given text, size bigint,"
                               " mtime double precision)",
                               "listing the work", err);
    if (rc >= 0)
        rc = vfi_pg_exec(s, "TRUNCATE want", "listing the work", err);
    if (rc < 0)
        return rc;
    /* COPY stops at a duplicate key: the set goes through a staging table, first copy wins */
    if ((rc = vfi_pg_exec(
             s,
             "CREATE TEMP TABLE IF NOT EXISTS want_in (ord integer, path text, given text,"
             " size bigint, mtime double precision); TRUNCATE want_in",
             "listing the work", err)) < 0)
        return rc;
    PGresult *res = PQexec(s->conn, "COPY want_in FROM STDIN");
    int copying = PQresultStatus(res) == PGRES_COPY_IN;
    if (!copying)
        rc = vfi_pg_fail(s, err, "listing the work", res);
    PQclear(res);
    char line[3 * 4096 + 128];
    for (int i = 0; rc >= 0 && i < n; i++) {
        size_t len = (size_t)snprintf(line, sizeof(line), "%d\t", i);
        const char *name = files ? files[i].name : s->want_names[i];
        char num[64];
        int ok = copy_put(line, sizeof(line), &len, name);
        line[len++] = '\t';
        ok = ok && copy_put(line, sizeof(line), &len, files ? files[i].given : NULL);
        snprintf(num, sizeof(num), "\t%lld\t%.17g\n", files ? (long long)files[i].size : 0LL,
                 files ? files[i].mtime : 0.0);
        ok = ok && len + strlen(num) < sizeof(line);
        if (!ok) {
            rc =
                vfi_fail(err, VF_ERR_STORE, "%s: a path too long to list: %.80s...", s->name, name);
            break;
        }
        memcpy(line + len, num, strlen(num));
        len += strlen(num);
        if (PQputCopyData(s->conn, line, (int)len) != 1)
            rc = vfi_pg_fail(s, err, "listing the work", NULL);
    }
    if (copying) {
        int ended = PQputCopyEnd(s->conn, rc >= 0 ? NULL : "abandoned");
        while ((res = PQgetResult(s->conn))) {
            if (rc >= 0 && (ended != 1 || PQresultStatus(res) != PGRES_COMMAND_OK))
                rc = vfi_pg_fail(s, err, "listing the work", res);
            PQclear(res);
        }
    }
    if (rc >= 0)
        rc = vfi_pg_exec(
            s,
            "INSERT INTO want SELECT DISTINCT ON (path) * FROM want_in ORDER BY path, ord;"
            " ANALYZE want",
            "listing the work", err);
    return rc;
}

/* A new connection's settings: quiet notices, and a limit on idling inside a transaction. */
vf_status vfi_pg_session_settings(pg_store *s, vf_err *err)
{
    /* A worker paused inside a transaction (SIGSTOP, a frozen machine) would hold its locks,
     * its lease row's among them, for as long as it is paused: the server ends such a session
     * after IDLE_TX_S, and the worker, if it wakes, connects again (and is fenced). */
    return vfi_pg_exec(s,
                       "SET client_min_messages = warning;"
                       " SET idle_in_transaction_session_timeout = '" IDLE_TX_S "s'",
                       "setting up", err);
}

/* A writer's temporary tables: the batch table, and the set to claim from (offered again). */
vf_status vfi_pg_session_tables(pg_store *s, vf_err *err)
{
    vf_status rc = VF_OK;
    if (s->write)
        rc = vfi_pg_exec(
            s,
            "CREATE TEMP TABLE IF NOT EXISTS batch_in (seq bigserial, extraction_id bigint,"
            " frame_index bigint, pts bigint, t double precision, t_end double precision,"
            " vec real[])",
            "preparing", err);
    if (rc >= 0 && s->want && s->n_want)
        rc = vfi_pg_fill_want(s, NULL, s->n_want, err);
    return rc;
}

/* After a failed call: 1 when the connection was lost and has been made again (the call is to
 * be repeated), 0 when it was not lost or the server stayed away for RECONNECT_S seconds. */
int vfi_pg_reconnect(pg_store *s, double *waited)
{
    if (PQstatus(s->conn) != CONNECTION_BAD)
        return 0;
    /* why, for the line: what the server said as it ended the session, or what libpq saw */
    int level;
    if (!s->ended[0])
        pq_reason(PQerrorMessage(s->conn), s->ended, sizeof(s->ended), &level);
    double pause = 0.25;
    while (*waited < RECONNECT_S) {
        struct timespec ts = {(time_t)pause, (long)((pause - (time_t)pause) * 1e9)};
        nanosleep(&ts, NULL);
        *waited += pause;
        pause = pause < 4.0 ? pause * 2 : 4.0;
        PQreset(s->conn);
        if (PQstatus(s->conn) == CONNECTION_OK && vfi_pg_session_settings(s, NULL) >= 0 &&
            vfi_pg_session_tables(s, NULL) >= 0) {
            vfi_log(VF_LOG_WARNING, "store", "%s: connection lost (%s); made again after %.1f s",
                    s->name, s->ended, *waited);
            s->ended[0] = '\0';
            return 1;
        }
    }
    return 0;
}

/* A real[] in text form ("{1.5,-2,NaN}") into dim floats. */
vf_status vfi_pg_parse_vec(pg_store *s, const char *text, int dim, float *out, vf_err *err)
{
    const char *p = text;
    int n = 0;
    if (*p++ != '{')
        goto bad;
    while (*p && *p != '}') {
        char *end;
        float x = strtof(p, &end); /* NaN and Infinity too */
        if (end == p || n == dim)
            goto bad;
        out[n++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    if (*p == '}' && n == dim)
        return VF_OK;
bad:
    return vfi_fail(err, VF_ERR_STORE, "%s: a stored vector is not %d numbers", s->name, dim);
}

/* ---- the SQL driver (sql.h) --------------------------------------------------------------- */

#define SQL_COLS 16 /* text columns a statement's row gives back as bytes */

typedef struct pg_sql {
    vf_sql base; /* first: its driver */
    pg_store *s;
    char *sql; /* $N where the statement said ?N */
    const char *what;
    unsigned flags;
    int n;                    /* parameters: the highest bound */
    char *params[MAX_PARAMS]; /* their text (NULL: SQL null), owned */
    Oid types[MAX_PARAMS];    /* int8, float8, or 0 (text: the server's inference) */
    PGresult *res;            /* the row (single-row mode), or every row (VF_SQL_ALL_ROWS) */
    int row;                  /* the row of res being read */
    int running;              /* sent, and not all its results read */
    char *texts[SQL_COLS];    /* the row's text columns as bytes, owned until the next step */
    vf_status rc;             /* the kept failure */
    vf_err err;
} pg_sql;

static void sql_clear_row(pg_sql *q)
{
    for (int i = 0; i < SQL_COLS; i++) {
        vfi_free(q->texts[i]);
        q->texts[i] = NULL;
    }
}

/* Read the statement's results to the end: the connection is ready for the next one. */
static void sql_drain(pg_sql *q)
{
    sql_clear_row(q);
    PQclear(q->res);
    q->res = NULL;
    if (q->running) {
        PGresult *r;
        while ((r = PQgetResult(q->s->conn)))
            PQclear(r);
    }
    q->running = 0;
}

static vf_status sql_prepare(vf_store *store, const char *sql, const char *what, unsigned flags,
                             vf_sql **out, vf_err *err)
{
    pg_sql *q = vfi_calloc(1, sizeof(*q));
    *out = NULL;
    if (!q || !(q->sql = vfi_strdup(sql))) {
        vfi_free(q);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    for (char *c = q->sql; *c; c++) { /* ?N -> $N */
        if (c[0] == '?' && c[1] >= '0' && c[1] <= '9')
            c[0] = '$';
    }
    q->base.drv = &vfi_pg_driver;
    q->s = (pg_store *)store;
    q->what = what;
    q->flags = flags;
    *out = &q->base;
    return VF_OK;
}

/* Parameter i's text (owned: a copy of v or v made from its bytes) and type. */
static void sql_bind(vf_sql *b, int i, char *text, int fail, Oid type)
{
    pg_sql *q = (pg_sql *)b;
    if (i < 1 || i > MAX_PARAMS || fail) {
        vfi_free(text);
        if (q->rc >= 0)
            q->rc = fail ? vfi_fail(&q->err, VF_ERR_NOMEM, "out of memory")
                         : vfi_fail(&q->err, VF_ERR_INTERNAL, "parameter %d", i);
        return;
    }
    vfi_free(q->params[i - 1]);
    q->params[i - 1] = text;
    q->types[i - 1] = type;
    if (i > q->n)
        q->n = i;
}

static void sql_bind_int64(vf_sql *b, int i, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    char *t = vfi_strdup(buf);
    sql_bind(b, i, t, !t, 20 /* int8 */);
}

static void sql_bind_double(vf_sql *b, int i, double v)
{
    char buf[40];
    snprintf(buf, sizeof(buf), "%.17g", v);
    char *t = vfi_strdup(buf);
    sql_bind(b, i, t, !t, 701 /* float8 */);
}

static void sql_bind_text(vf_sql *b, int i, const char *v)
{
    char *t = v ? vfi_utf8_from_bytes(v) : NULL; /* names as the database keeps them */
    sql_bind(b, i, t, v && !t, 0);
}

static int sql_step(vf_sql *b)
{
    pg_sql *q = (pg_sql *)b;
    pg_store *s = q->s;
    if (q->rc < 0)
        return 0;
    sql_clear_row(q);
    if (q->flags & VF_SQL_ALL_ROWS) {
        if (!q->res) {
            q->res = PQexecParams(s->conn, q->sql, q->n, q->types, (const char *const *)q->params,
                                  NULL, NULL, 0);
            ExecStatusType st = PQresultStatus(q->res);
            if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
                q->rc = vfi_pg_fail(s, &q->err, q->what, q->res);
                PQclear(q->res);
                q->res = NULL;
                return 0;
            }
            q->row = -1;
        }
        return ++q->row < PQntuples(q->res);
    }
    if (!q->running) {
        if (!PQsendQueryParams(s->conn, q->sql, q->n, q->types, (const char *const *)q->params,
                               NULL, NULL, 0) ||
            !PQsetSingleRowMode(s->conn)) {
            q->rc = vfi_pg_fail(s, &q->err, q->what, NULL);
            return 0;
        }
        q->running = 1;
    }
    PQclear(q->res);
    q->res = PQgetResult(s->conn);
    q->row = 0;
    ExecStatusType st = q->res ? PQresultStatus(q->res) : PGRES_TUPLES_OK;
    if (st == PGRES_SINGLE_TUPLE)
        return 1;
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        q->rc = vfi_pg_fail(s, &q->err, q->what, q->res);
    sql_drain(q);
    return 0;
}

static void sql_reset(vf_sql *b)
{
    sql_drain((pg_sql *)b);
}

static int64_t sql_int64(vf_sql *b, int col)
{
    pg_sql *q = (pg_sql *)b;
    return strtoll(PQgetvalue(q->res, q->row, col), NULL, 10);
}

static double sql_real(vf_sql *b, int col)
{
    pg_sql *q = (pg_sql *)b;
    return strtod(PQgetvalue(q->res, q->row, col), NULL);
}

static const char *sql_text(vf_sql *b, int col)
{
    pg_sql *q = (pg_sql *)b;
    if (PQgetisnull(q->res, q->row, col))
        return NULL;
    const char *v = PQgetvalue(q->res, q->row, col);
    if (col >= SQL_COLS || vfi_utf8_is_plain(v))
        return v;
    if (!q->texts[col] && !(q->texts[col] = vfi_utf8_to_bytes(v)) && q->rc >= 0)
        q->rc = vfi_fail(&q->err, VF_ERR_NOMEM, "out of memory");
    return q->texts[col] ? q->texts[col] : "";
}

static vf_status sql_vec(vf_sql *b, int col, int f16, int dim, float *out)
{
    (void)f16; /* real[]: the values are stored as they read back */
    pg_sql *q = (pg_sql *)b;
    vf_status rc = vfi_pg_parse_vec(q->s, PQgetvalue(q->res, q->row, col), dim, out, &q->err);
    if (rc < 0 && q->rc >= 0)
        q->rc = rc;
    return rc;
}

static vf_status sql_finish(vf_sql *b, vf_err *err)
{
    pg_sql *q = (pg_sql *)b;
    vf_status rc = q->rc;
    if (rc < 0 && err)
        *err = q->err;
    sql_drain(q);
    for (int i = 0; i < MAX_PARAMS; i++)
        vfi_free(q->params[i]);
    vfi_free(q->sql);
    vfi_free(q);
    return rc;
}

static int sql_schema(vf_store *store)
{
    return ((pg_store *)store)->version;
}

static const char *sql_label(vf_store *store)
{
    return ((pg_store *)store)->name;
}

const vf_sql_driver vfi_pg_driver = {
    .prepare = sql_prepare,
    .bind_int64 = sql_bind_int64,
    .bind_double = sql_bind_double,
    .bind_text = sql_bind_text,
    .step = sql_step,
    .reset = sql_reset,
    .int64 = sql_int64,
    .real = sql_real,
    .text = sql_text,
    .vec = sql_vec,
    .finish = sql_finish,
    .snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    .write = "BEGIN",
    .new_extraction_id = "DEFAULT",
    .hold_row = " FOR SHARE", /* a claim of the file waits until the write is over */
    .epoch_now = "extract(epoch FROM clock_timestamp())", /* the server's: every worker's */
    .schema = sql_schema,
    .label = sql_label,
};
