/*
 * store_pg.c - the PostgreSQL store (store.h's interface, for -o postgresql://... or
 * postgres://..., any libpq URI). The only file that sees libpq.
 *
 * The same tables and meaning as the SQLite store (store_sqlite.h), with PostgreSQL's types:
 *   videos, models, extractions, runs   as in SQLite (ids bigserial, times ISO 8601 text)
 *   features(extraction_id, frame_index, pts, t, vec real[])
 * vec is a real[] any client reads (castable to pgvector's vector where it is installed); with
 * --dtype f16 it holds the float16-rounded values (the model row's dtype says float16), so a
 * vector reads back as the same floats from either store. The schema version is in
 * vidfeat_schema(version); the schema is made or migrated in one transaction, under an advisory
 * lock so that workers starting together do not race. A batch is one transaction: COPY into a
 * temporary table, then one INSERT (a frame written twice keeps its last vector, as in SQLite).
 *
 * Leased work (store.h): queue and leases as in SQLite, timed by the server's clock (every
 * machine's workers agree on when a lease runs out); a claim takes its row FOR UPDATE SKIP LOCKED,
 * and a write checks its fence FOR SHARE, so a claim and a fenced write of one file never
 * interleave. A connection lost (a server restart) is made again with backoff for up to
 * RECONNECT_S seconds and the call repeated; every call is safe to repeat.
 *
 * The database is named in messages by its URI without the password (and without any option
 * that may carry one).
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "store/store_pg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "core/half.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/owner.h"
#include "core/path.h"
#include "core/utf8.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/sql.h"

#define PG_SCHEMA_VERSION 8
#define ADVISORY_KEY      "7419030817" /* any constant: the schema's lock */

#define RECONNECT_S 120.0 /* how long a lost server is waited for */
#define IDLE_TX_S   "5"   /* seconds a session may sit idle inside a transaction */

typedef struct pg_store {
    vf_store base; /* first: what the interface hands around */
    PGconn *conn;
    char *name;  /* the URI without the password: for messages */
    int version; /* the database's schema version (0 before it is made) */
    int write;   /* opened for writing: the session has its temporary tables */
    /* the offered set (vfi_store_offer), kept to be offered again on a new connection; want
     * says claims come from it rather than from every lease of the key */
    int want;
    char **want_names;
    int n_want;
    /* why the connection was lost, told with the reconnection: the FATAL or PANIC the server
     * sent outside a query (an idle-in-transaction timeout, a shutdown), else libpq's error */
    char ended[256];
} pg_store;

static vf_status session_settings(pg_store *s, vf_err *err);
static vf_status session_tables(pg_store *s, vf_err *err);

static const char *const schema =
    "CREATE TABLE vidfeat_schema (version integer NOT NULL);"
    "CREATE TABLE videos ("
    " id bigserial PRIMARY KEY, path text NOT NULL UNIQUE, size bigint,"
    " mtime double precision, content_hash text, duration double precision, width integer,"
    " height integer, rotation integer, codec text, frame_rate double precision);"
    "CREATE TABLE models ("
    " id bigserial PRIMARY KEY, name text NOT NULL, file_sha256 text NOT NULL,"
    " layer text NOT NULL, dim integer NOT NULL, dtype text NOT NULL,"
    " preprocessing text NOT NULL, UNIQUE (name, file_sha256, layer, dtype, preprocessing));"
    "CREATE TABLE extractions ("
    " id bigserial PRIMARY KEY, video_id bigint NOT NULL REFERENCES videos(id),"
    " model_id bigint NOT NULL REFERENCES models(id), sampling text NOT NULL,"
    " status text NOT NULL CHECK (status IN ('running', 'done', 'failed')), error text,"
    " device text, precision text, batch_size integer, frames bigint NOT NULL DEFAULT 0,"
    " started_at text, finished_at text, decode_fps double precision,"
    " convert_fps double precision, infer_fps double precision, store_fps double precision,"
    " UNIQUE (video_id, model_id, sampling));"
    "CREATE TABLE features ("
    " extraction_id bigint NOT NULL REFERENCES extractions(id) ON DELETE CASCADE,"
    " frame_index bigint NOT NULL, pts bigint, t double precision NOT NULL,"
    " vec real[] NOT NULL, PRIMARY KEY (extraction_id, frame_index));"
    "CREATE INDEX extractions_model ON extractions (model_id);"
    "CREATE TABLE runs ("
    " id bigserial PRIMARY KEY, started_at text NOT NULL, host text, vidfeat_version text,"
    " device text NOT NULL, device_name text, backend text, model text NOT NULL, layer text,"
    " precision text NOT NULL, batch_size integer NOT NULL, threads integer,"
    " mode text NOT NULL CHECK (mode IN ('pipeline', 'per_frame', 'infer_only')), input text,"
    " frames bigint, end_to_end_fps double precision, decode_fps double precision,"
    " convert_fps double precision, infer_fps double precision, store_fps double precision,"
    " peak_rss_mb double precision);"
    "INSERT INTO vidfeat_schema VALUES (2);";

/* schema 3: leased work */
static const char *const schema_v3 =
    "CREATE TABLE queue (id bigserial PRIMARY KEY, path text NOT NULL UNIQUE, added_at text);"
    "CREATE TABLE leases ("
    " id bigserial PRIMARY KEY, path text NOT NULL, model_id bigint NOT NULL REFERENCES"
    " models(id), sampling text NOT NULL, state text NOT NULL DEFAULT 'pending'"
    " CHECK (state IN ('pending', 'claimed', 'done', 'failed')), owner text,"
    " token bigint NOT NULL DEFAULT 0, expires double precision,"
    " attempts integer NOT NULL DEFAULT 0, finished_at double precision, error text,"
    " UNIQUE (path, model_id, sampling));"
    "CREATE INDEX leases_state ON leases (model_id, sampling, state, id);"
    "UPDATE vidfeat_schema SET version = 3;";

/* schema 4: the frames view (record.h), as SQLite's */
static const char *const schema_v4 = VFI_FRAMES_VIEW_SQL "UPDATE vidfeat_schema SET version = 4;";

/* schema 5: whose weights each model file has (record.h), as SQLite's */
static const char *const schema_v5 =
    VFI_WEIGHTS_COLUMN_SQL "UPDATE vidfeat_schema SET version = 5;";

/* schema 6: the search indexes (record.h), as SQLite's */
static const char *const schema_v6 = VFI_INDEXES_TABLE_SQL "UPDATE vidfeat_schema SET version = 6;";

/* schema 7: the text tower paired with a CLIP model's image vectors (record.h), as SQLite's */
static const char *const schema_v7 = VFI_TEXT_COLUMN_SQL "UPDATE vidfeat_schema SET version = 7;";

/* schema 8: each index file's SHA-256 (record.h), as SQLite's */
static const char *const schema_v8 =
    VFI_INDEX_SHA_COLUMN_SQL "UPDATE vidfeat_schema SET version = 8;";

/* The URI as messages may show it: scheme, user, host, port and database, never a password. */
static char *display_name(const char *uri)
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

static int pg_has_password(const char *uri)
{
    PQconninfoOption *opts = PQconninfoParse(uri, NULL);
    int found = 0;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        found |= !strcmp(o->keyword, "password") && o->val && o->val[0];
    PQconninfoFree(opts);
    return found;
}

static void pg_display(const char *uri, char *buf, size_t size)
{
    char *name = display_name(uri);
    snprintf(buf, size, "%s", name ? name : "postgresql://");
    vfi_free(name);
}

/* libpq's message, first line only (it ends with a newline, and may add hints). */
static const char *pq_message(const char *msg, char *buf, size_t size)
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
    pq_message(msg, buf, size);
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
 * becomes one warning line naming the server; a FATAL or PANIC read outside a query, which
 * comes just before the server closes the session, is kept for the reconnection's line. */
static void on_notice(void *arg, const char *msg)
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

static vf_status pg_fail(pg_store *s, vf_err *err, const char *what, const PGresult *res)
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
            s->name, what, reason ? reason : pq_message(msg, why, sizeof(why)), PQuser(s->conn));
    return vfi_fail(err, VF_ERR_STORE, "%s: %s: %s", s->name, what,
                    pq_message(msg, why, sizeof(why)));
}

/* Run sql (no parameters, no rows wanted). */
static vf_status exec(pg_store *s, const char *sql, const char *what, vf_err *err)
{
    PGresult *res = PQexec(s->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    vf_status rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? VF_OK
                   : err                                           ? pg_fail(s, err, what, res)
                                                                   : VF_ERR_STORE;
    PQclear(res);
    return rc;
}

/*
 * File names that are not UTF-8. A UTF-8 database refuses such text, and archives hold names in
 * other encodings (Latin-1): every text parameter goes in as utf8.h writes it (a plain one, every
 * number and nearly every name, as it is), and the columns that hold names or messages naming
 * files (paths, errors) come back through pg_bytes. The same name always gives the same text,
 * so equality, and with it the resume rule, holds.
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
static char *pg_bytes(const PGresult *res, int row, int col, int *oom)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    char *b = vfi_utf8_to_bytes(PQgetvalue(res, row, col));
    *oom |= !b;
    return b;
}

/* Run a statement with text parameters (NULL: SQL null); *out gets the result when it
 * succeeded (PQclear it). */
static vf_status query(pg_store *s, const char *sql, int n, const char *const *params,
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
        rc = pg_fail(s, err, what, res);
        PQclear(res);
        return rc;
    }
    if (out)
        *out = res;
    else
        PQclear(res);
    return VF_OK;
}

static void forget_want(pg_store *s)
{
    for (int i = 0; i < s->n_want; i++)
        vfi_free(s->want_names[i]);
    vfi_free(s->want_names);
    s->want_names = NULL;
    s->n_want = 0;
}

static void pg_close(vf_store *store)
{
    pg_store *s = (pg_store *)store;
    if (!s)
        return;
    forget_want(s);
    PQfinish(s->conn);
    vfi_free(s->name);
    vfi_free(s);
}

static int pg_claims(const char *target)
{
    size_t n = vfi_store_uri_scheme(target);
    return (n == 10 && !strncmp(target, "postgresql", 10)) ||
           (n == 8 && !strncmp(target, "postgres", 8));
}

/* The schema version, 0 when the database has none of vidfeat's tables. VF_ERR_STORE when it
 * has tables of the same names that vidfeat did not make. */
static vf_status schema_version(pg_store *s, int *version, vf_err *err)
{
    PGresult *res = NULL;
    *version = 0;
    vf_status rc = query(s,
                         "SELECT to_regclass('vidfeat_schema') IS NOT NULL,"
                         " to_regclass('videos') IS NOT NULL",
                         0, NULL, "reading the schema version", &res, err);
    if (rc < 0)
        return rc;
    int has_schema = !strcmp(PQgetvalue(res, 0, 0), "t");
    int has_videos = !strcmp(PQgetvalue(res, 0, 1), "t");
    PQclear(res);
    if (!has_schema)
        return has_videos ? vfi_fail(err, VF_ERR_STORE,
                                     "%s: has a videos table that vidfeat did not create", s->name)
                          : VF_OK;
    rc = query(s, "SELECT coalesce(max(version), 0) FROM vidfeat_schema", 0, NULL,
               "reading the schema version", &res, err);
    if (rc < 0)
        return rc;
    *version = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return VF_OK;
}

static vf_status pg_open(const char *uri, vf_store_mode mode, vf_store **out, vf_err *err)
{
    vf_status rc = VF_OK;
    pg_store *s = vfi_calloc(1, sizeof(*s));
    if (!s || !(s->name = display_name(uri))) {
        vfi_free(s);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    s->base.ops = &vfi_store_pg;
    /* the URI's own settings win; pg_stat_activity shows "vidfeat" unless it names itself */
    const char *const keys[] = {"dbname", "fallback_application_name", NULL};
    const char *const values[] = {uri, "vidfeat", NULL};
    s->conn = PQconnectdbParams(keys, values, 1);
    if (s->conn)
        PQsetNoticeProcessor(s->conn, on_notice, s); /* kept by PQreset */
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        char why[512];
        rc = vfi_fail(
            err, VF_ERR_STORE, "%s: cannot connect: %s", s->name,
            pq_message(s->conn ? PQerrorMessage(s->conn) : "out of memory", why, sizeof(why)));
        goto fail;
    }
    TRY(session_settings(s, err)); /* the temporary tables come once the schema is there */
    if (mode == VF_STORE_WRITE) {
        TRY(exec(s, "BEGIN", "starting a transaction", err));
        TRY(exec(s, "SELECT pg_advisory_xact_lock(" ADVISORY_KEY ")", "locking the schema", err));
    }
    TRY(schema_version(s, &s->version, err));
    if (s->version > PG_SCHEMA_VERSION) {
        rc = vfi_fail(err, VF_ERR_STORE,
                      "%s: schema version %d is newer than this vidfeat's %d (upgrade vidfeat)",
                      s->name, s->version, PG_SCHEMA_VERSION);
        goto fail;
    }
    if (mode == VF_STORE_READ && s->version == 0) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: not a vidfeat database", s->name);
        goto fail;
    }
    if (mode == VF_STORE_WRITE) {
        /* version 1 never existed here: the PostgreSQL store began at schema 2 */
        if (s->version == 0)
            TRY(exec(s, schema, "creating the tables", err));
        if (s->version < 3)
            TRY(exec(s, schema_v3, "migrating the tables", err));
        if (s->version < 4)
            TRY(exec(s, schema_v4, "migrating the tables", err));
        if (s->version < 5)
            TRY(exec(s, schema_v5, "migrating the tables", err));
        if (s->version < 6)
            TRY(exec(s, schema_v6, "migrating the tables", err));
        if (s->version < 7)
            TRY(exec(s, schema_v7, "migrating the tables", err));
        if (s->version < 8)
            TRY(exec(s, schema_v8, "migrating the tables", err));
        s->version = PG_SCHEMA_VERSION;
        TRY(exec(s, "COMMIT", "creating the tables", err));
        s->write = 1;
        TRY(session_tables(s, err));
    }
    *out = &s->base;
    return VF_OK;
fail:
    pg_close(&s->base);
    return rc;
}

/* Inside a transaction: VF_OK while fence (NULL: none) is still this worker's claim (the row
 * is then locked against a claim until the transaction ends), VF_ERR_LEASE when it has moved
 * on. *finished (may be NULL) is set when the claim already ended with this token (a finish
 * whose reply was lost with the connection). */
static vf_status check_fence(pg_store *s, const vf_store_lease *fence, int *finished, vf_err *err)
{
    if (finished)
        *finished = 0;
    if (!fence)
        return VF_OK;
    char id[24], token[24];
    snprintf(id, sizeof(id), "%lld", (long long)fence->id);
    snprintf(token, sizeof(token), "%lld", (long long)fence->token);
    const char *p[] = {id, token};
    PGresult *res;
    vf_status rc = query(s, "SELECT state FROM leases WHERE id = $1 AND token = $2 FOR SHARE", 2, p,
                         "reading the lease", &res, err);
    if (rc < 0)
        return rc;
    const char *state = PQntuples(res) ? PQgetvalue(res, 0, 0) : "";
    if (!strcmp(state, "claimed"))
        rc = VF_OK;
    else if (finished && (!strcmp(state, "done") || !strcmp(state, "failed")))
        *finished = 1;
    else
        rc = vfi_fail(err, VF_ERR_LEASE, "%s: the lease ran out and another worker has the file",
                      s->name);
    PQclear(res);
    return rc;
}

static vf_status begin_once(pg_store *s, const vf_store_video *v, int64_t model_id,
                            const char *sampling, const vf_store_run *run,
                            const vf_store_lease *fence, int64_t *ext_id, vf_err *err)
{
    char size[24], mtime[40], duration[40], width[16], height[16], rotation[16], rate[40],
        model[24], batch[16], now[32], video[24];
    snprintf(size, sizeof(size), "%lld", (long long)v->size);
    snprintf(mtime, sizeof(mtime), "%.17g", v->mtime);
    snprintf(duration, sizeof(duration), "%.17g", v->duration);
    snprintf(width, sizeof(width), "%d", v->width);
    snprintf(height, sizeof(height), "%d", v->height);
    snprintf(rotation, sizeof(rotation), "%d", v->rotation);
    snprintf(rate, sizeof(rate), "%.17g", v->frame_rate);
    snprintf(model, sizeof(model), "%lld", (long long)model_id);
    snprintf(batch, sizeof(batch), "%d", run->batch_size);
    vfi_now_iso(now, sizeof(now));
    const char *pv[] = {v->path, size,   mtime,    v->content_hash, duration,
                        width,   height, rotation, v->codec,        rate};
    PGresult *res = NULL;
    vf_status rc = exec(s, "BEGIN", "starting a transaction", err);
    if (rc < 0)
        return rc;
    TRY(check_fence(s, fence, NULL, err));
    TRY(query(s,
              "INSERT INTO videos (path, size, mtime, content_hash, duration, width, height,"
              " rotation, codec, frame_rate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
              " ON CONFLICT (path) DO UPDATE SET size = $2, mtime = $3, content_hash = $4,"
              " duration = $5, width = $6, height = $7, rotation = $8, codec = $9,"
              " frame_rate = $10 RETURNING id",
              10, pv, "recording the video", &res, err));
    snprintf(video, sizeof(video), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    res = NULL;
    /* An earlier attempt (unfinished, failed or forced) goes, with its vectors. */
    const char *pd[] = {video, model, sampling};
    TRY(query(s, "DELETE FROM extractions WHERE video_id = $1 AND model_id = $2 AND sampling = $3",
              3, pd, "removing an old extraction", NULL, err));
    const char *pe[] = {video, model, sampling, run->device, run->precision, batch, now};
    TRY(query(s,
              "INSERT INTO extractions (video_id, model_id, sampling, status, device, precision,"
              " batch_size, started_at) VALUES ($1, $2, $3, 'running', $4, $5, $6, $7)"
              " RETURNING id",
              7, pe, "starting the extraction", &res, err));
    *ext_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    res = NULL;
    TRY(exec(s, "COMMIT", "starting the extraction", err));
    return VF_OK;
fail:
    PQclear(res);
    exec(s, "ROLLBACK", NULL, NULL);
    return rc;
}

/* Big-endian stores for COPY's binary format. */
static unsigned char *put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static unsigned char *put_be64(unsigned char *p, uint64_t v)
{
    return put_be32(put_be32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* One row of batch_in in COPY's binary format (PostgreSQL's documented wire format): five
 * fields, each a length and its big-endian bytes; vec a one-dimensional float4 array. Binary,
 * not text: no float printing or parsing on either side, and exact by construction. */
static size_t binary_row(unsigned char *p0, int64_t ext, int64_t frame, int64_t pts, double t,
                         const float *v, int dim, int f16)
{
    unsigned char *p = p0;
    p[0] = 0;
    p[1] = 5; /* fields */
    p += 2;
    p = put_be64(put_be32(p, 8), (uint64_t)ext);
    p = put_be64(put_be32(p, 8), (uint64_t)frame);
    p = put_be64(put_be32(p, 8), (uint64_t)pts);
    uint64_t tb;
    memcpy(&tb, &t, 8);
    p = put_be64(put_be32(p, 8), tb);
    p = put_be32(p, (uint32_t)(20 + 8 * dim)); /* the array: header, then length + value each */
    p = put_be32(p, 1);                        /* dimensions */
    p = put_be32(p, 0);                        /* no NULLs */
    p = put_be32(p, 700);                      /* float4's type oid */
    p = put_be32(p, (uint32_t)dim);
    p = put_be32(p, 1); /* lower bound */
    for (int k = 0; k < dim; k++) {
        float x = f16 ? vfi_f16_to_f32(vfi_f32_to_f16(v[k])) : v[k];
        uint32_t b;
        memcpy(&b, &x, 4);
        p = put_be32(put_be32(p, 4), b);
    }
    return (size_t)(p - p0);
}

static vf_status batch_once(pg_store *s, int64_t ext_id, const vf_store_lease *fence, int n,
                            int dim, int f16, const int64_t *frame_index, const int64_t *pts,
                            const double *t, const float *vecs, vf_err *err)
{
    size_t cap = (size_t)dim * 8 + 128; /* one row */
    unsigned char *row = vfi_malloc(cap);
    if (!row)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_status rc = exec(s, "BEGIN", "starting a transaction", err);
    PGresult *res = NULL;
    int copying = 0;
    if (rc >= 0) {
        res = PQexec(s->conn, "COPY batch_in (extraction_id, frame_index, pts, t, vec) FROM STDIN"
                              " (FORMAT binary)");
        copying = PQresultStatus(res) == PGRES_COPY_IN;
        if (!copying)
            rc = pg_fail(s, err, "writing features", res);
        PQclear(res);
    }
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0377, '\r', '\n',
                                             0,   0,   0,   0,   0,   0,   0,    0,    0};
    if (rc >= 0 && PQputCopyData(s->conn, (const char *)header, sizeof(header)) != 1)
        rc = pg_fail(s, err, "writing features", NULL);
    for (int i = 0; rc >= 0 && i < n; i++) {
        size_t len =
            binary_row(row, ext_id, frame_index[i], pts[i], t[i], vecs + (size_t)i * dim, dim, f16);
        if (PQputCopyData(s->conn, (const char *)row, (int)len) != 1)
            rc = pg_fail(s, err, "writing features", NULL);
    }
    static const unsigned char trailer[2] = {0377, 0377};
    if (rc >= 0 && PQputCopyData(s->conn, (const char *)trailer, 2) != 1)
        rc = pg_fail(s, err, "writing features", NULL);
    if (copying) {
        int ended = PQputCopyEnd(s->conn, rc >= 0 ? NULL : "abandoned");
        while ((res = PQgetResult(s->conn))) {
            if (rc >= 0 && (ended != 1 || PQresultStatus(res) != PGRES_COMMAND_OK))
                rc = pg_fail(s, err, "writing features", res);
            PQclear(res);
        }
    }
    char id[24], count[16];
    snprintf(id, sizeof(id), "%lld", (long long)ext_id);
    snprintf(count, sizeof(count), "%d", n);
    const char *pu[] = {id, count};
    /* the fence after the COPY (into this session's own table): the lease row is locked only
     * for the last few statements */
    if (rc >= 0)
        rc = check_fence(s, fence, NULL, err);
    if (rc >= 0)
        rc = exec(s,
                  "INSERT INTO features (extraction_id, frame_index, pts, t, vec)"
                  " SELECT DISTINCT ON (frame_index) extraction_id, frame_index, pts, t, vec"
                  " FROM batch_in ORDER BY frame_index, seq DESC ON CONFLICT (extraction_id,"
                  " frame_index) DO UPDATE SET pts = excluded.pts, t = excluded.t,"
                  " vec = excluded.vec",
                  "writing features", err);
    /* the frames column follows the rows while it runs; finish sets it from the rows */
    if (rc >= 0)
        rc = query(s, "UPDATE extractions SET frames = frames + $2 WHERE id = $1", 2, pu,
                   "counting frames", NULL, err);
    if (rc >= 0)
        rc = exec(s, "TRUNCATE batch_in", "writing features", err);
    if (rc >= 0)
        rc = exec(s, "COMMIT", "writing features", err);
    if (rc < 0)
        exec(s, "ROLLBACK", NULL, NULL);
    vfi_free(row);
    return rc;
}

/* A measured rate as text, or NULL for "not measured". */
static const char *rate_text(double v, char *buf, size_t size)
{
    if (!vfi_record_measured(v))
        return NULL;
    snprintf(buf, size, "%.17g", v);
    return buf;
}

static vf_status finish_once(pg_store *s, int64_t ext_id, const vf_store_lease *fence, int end,
                             const char *error, const double *stage_fps, vf_err *err)
{
    int ok = end == VF_END_DONE;
    char id[24], now[32], rates[4][40], lease[24], token[24];
    snprintf(id, sizeof(id), "%lld", (long long)ext_id);
    vfi_now_iso(now, sizeof(now));
    const char *p[8] = {id, ok ? "done" : "failed", error && *error ? error : NULL, now};
    for (int i = 0; i < 4; i++)
        p[4 + i] = rate_text(stage_fps ? stage_fps[i] : 0.0, rates[i], sizeof(rates[i]));
    vf_status rc = exec(s, "BEGIN", "starting a transaction", err);
    if (rc < 0)
        return rc;
    int finished = 0;
    TRY(check_fence(s, fence, &finished, err));
    if (finished) /* this finish was committed before the connection went */
        return exec(s, "COMMIT", "finishing the extraction", err);
    if (end == VF_END_REFUSED)
        TRY(query(s, "DELETE FROM features WHERE extraction_id = $1", 1, p,
                  "removing the extraction's vectors", NULL, err));
    /* The count comes from the rows actually written, so "done" always matches them. */
    TRY(query(s,
              "UPDATE extractions SET status = $2, error = $3, finished_at = $4,"
              " decode_fps = $5, convert_fps = $6, infer_fps = $7, store_fps = $8, frames ="
              " (SELECT count(*) FROM features WHERE extraction_id = $1) WHERE id = $1",
              8, p, "finishing the extraction", NULL, err));
    if (fence) { /* the lease ends with the extraction */
        snprintf(lease, sizeof(lease), "%lld", (long long)fence->id);
        snprintf(token, sizeof(token), "%lld", (long long)fence->token);
        const char *pl[] = {lease, token, p[1], p[2]};
        TRY(query(s,
                  "UPDATE leases SET state = $3, owner = NULL, expires = NULL, attempts = 0,"
                  " finished_at = extract(epoch FROM clock_timestamp()), error = $4 WHERE id ="
                  " $1 AND token = $2",
                  4, pl, "ending the lease", NULL, err));
    }
    return exec(s, "COMMIT", "finishing the extraction", err);
fail:
    exec(s, "ROLLBACK", NULL, NULL);
    return rc;
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
    char *text = vfi_utf8_from_bytes(v); /* a name that is not UTF-8: as query() sends it */
    int ok = text && copy_put_text(buf, cap, len, text);
    vfi_free(text);
    return ok;
}

/* COPY the set's files (ord, path, given, size, mtime) into want; files NULL: the names kept
 * from the last offer (a new connection). */
static vf_status fill_want(pg_store *s, const vf_store_offer *files, int n, vf_err *err)
{
    vf_status rc = exec(s,
                        "CREATE TEMP TABLE IF NOT EXISTS want (ord integer PRIMARY KEY,"
                        " path text NOT NULL UNIQUE, given text, size bigint,"
                        " mtime double precision)",
                        "listing the work", err);
    if (rc >= 0)
        rc = exec(s, "TRUNCATE want", "listing the work", err);
    if (rc < 0)
        return rc;
    /* COPY stops at a duplicate key: the set goes through a staging table, first copy wins */
    if ((rc = exec(s,
                   "CREATE TEMP TABLE IF NOT EXISTS want_in (ord integer, path text, given text,"
                   " size bigint, mtime double precision); TRUNCATE want_in",
                   "listing the work", err)) < 0)
        return rc;
    PGresult *res = PQexec(s->conn, "COPY want_in FROM STDIN");
    int copying = PQresultStatus(res) == PGRES_COPY_IN;
    if (!copying)
        rc = pg_fail(s, err, "listing the work", res);
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
            rc = pg_fail(s, err, "listing the work", NULL);
    }
    if (copying) {
        int ended = PQputCopyEnd(s->conn, rc >= 0 ? NULL : "abandoned");
        while ((res = PQgetResult(s->conn))) {
            if (rc >= 0 && (ended != 1 || PQresultStatus(res) != PGRES_COMMAND_OK))
                rc = pg_fail(s, err, "listing the work", res);
            PQclear(res);
        }
    }
    if (rc >= 0)
        rc = exec(s,
                  "INSERT INTO want SELECT DISTINCT ON (path) * FROM want_in ORDER BY path, ord;"
                  " ANALYZE want",
                  "listing the work", err);
    return rc;
}

/* A new connection's settings: quiet notices, and a limit on idling inside a transaction. */
static vf_status session_settings(pg_store *s, vf_err *err)
{
    /* A worker paused inside a transaction (SIGSTOP, a frozen machine) would hold its locks,
     * its lease row's among them, for as long as it is paused: the server ends such a session
     * after IDLE_TX_S, and the worker, if it wakes, connects again (and is fenced). */
    return exec(s,
                "SET client_min_messages = warning;"
                " SET idle_in_transaction_session_timeout = '" IDLE_TX_S "s'",
                "setting up", err);
}

/* A writer's temporary tables: the batch table, and the set to claim from (offered again). */
static vf_status session_tables(pg_store *s, vf_err *err)
{
    vf_status rc = VF_OK;
    if (s->write)
        rc = exec(s,
                  "CREATE TEMP TABLE IF NOT EXISTS batch_in (seq bigserial, extraction_id bigint,"
                  " frame_index bigint, pts bigint, t double precision, vec real[])",
                  "preparing", err);
    if (rc >= 0 && s->want && s->n_want)
        rc = fill_want(s, NULL, s->n_want, err);
    return rc;
}

/* After a failed call: 1 when the connection was lost and has been made again (the call is to
 * be repeated), 0 when it was not lost or the server stayed away for RECONNECT_S seconds. */
static int reconnect(pg_store *s, double *waited)
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
        if (PQstatus(s->conn) == CONNECTION_OK && session_settings(s, NULL) >= 0 &&
            session_tables(s, NULL) >= 0) {
            vfi_log(VF_LOG_WARNING, "store", "%s: connection lost (%s); made again after %.1f s",
                    s->name, s->ended, *waited);
            s->ended[0] = '\0';
            return 1;
        }
    }
    return 0;
}

/* Return CALL's status, repeating it while the connection is lost and made again. */
#define RETRYING(s, call)                                                                          \
    do {                                                                                           \
        double waited_ = 0.0;                                                                      \
        vf_status rc_;                                                                             \
        while ((rc_ = (call)) < 0 && rc_ != VF_ERR_LEASE && reconnect((s), &waited_))              \
            ;                                                                                      \
        return rc_;                                                                                \
    } while (0)

static vf_status pg_begin(vf_store *store, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run,
                          const vf_store_lease *fence, int64_t *ext_id, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, begin_once(s, v, model_id, sampling, run, fence, ext_id, err));
}

static vf_status pg_batch(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int n,
                          int dim, int f16, const int64_t *frame_index, const int64_t *pts,
                          const double *t, const float *vecs, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, batch_once(s, ext_id, fence, n, dim, f16, frame_index, pts, t, vecs, err));
}

static vf_status pg_finish(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int end,
                           const char *error, const double *stage_fps, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, finish_once(s, ext_id, fence, end, error, stage_fps, err));
}

/* ---- leased work (store.h) -------------------------------------------------------------- */

static vf_status clock_once(pg_store *s, double *now, vf_err *err)
{
    PGresult *res;
    vf_status rc = query(s, "SELECT extract(epoch FROM clock_timestamp())::float8", 0, NULL,
                         "reading the clock", &res, err);
    if (rc >= 0) {
        *now = strtod(PQgetvalue(res, 0, 0), NULL);
        PQclear(res);
    }
    return rc;
}

static vf_status pg_clock(vf_store *store, double *now, vf_err *err)
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
        rc = query(s,
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

static vf_status pg_enqueue(vf_store *store, const char *const *names, int n, vf_err *err)
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
        return query(s,
                     "INSERT INTO leases (path, model_id, sampling) SELECT path, $1, $2 FROM"
                     " queue ORDER BY id ON CONFLICT DO NOTHING",
                     2, p, "reading the queue", NULL, err);
    }
    vf_status rc = fill_want(s, files, n, err);
    if (rc < 0)
        return rc;
    if (!w->force) { /* the resume rule, for the whole set at once */
        const char *p[] = {model, w->sampling, w->precision};
        TRY(query(s,
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
    TRY(query(s,
              "INSERT INTO leases (path, model_id, sampling) SELECT path, $1, $2 FROM want"
              " ORDER BY ord ON CONFLICT DO NOTHING",
              2, pl, "listing the work", NULL, err));
    /* Files that ended before this worker began and are not done by the rule (changed since,
     * or failed) are work again; those that others finish from now on are not. */
    const char *pr[] = {model, w->sampling, since, force, max};
    TRY(query(s,
              "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL, attempts = 0,"
              " error = NULL WHERE model_id = $1 AND sampling = $2 AND state IN ('done',"
              " 'failed') AND finished_at < $3 AND ($4 OR state = 'done' OR attempts < $5)"
              " AND path IN (SELECT path FROM want)",
              5, pr, "listing the work", NULL, err));
    /* keep the names, to list them again on a new connection */
    forget_want(s);
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

static vf_status pg_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files,
                          int n, unsigned char *done, vf_err *err)
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
    vf_status rc = query(s,
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
            rc = query(s, "UPDATE leases SET expires = 0 WHERE id = $1 AND state = 'claimed'", 1,
                       pu, "ending a dead worker's lease", NULL, err);
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
    vf_status rc = exec(s, "BEGIN", "starting a transaction", err);
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
        TRY(query(s, wanted[!s->want][0], 2, p, "claiming work", &res, err));
        if (PQntuples(res) == 0) {
            PQclear(res);
            res = NULL;
            TRY(query(s, wanted[!s->want][1], 2, p, "claiming work", &res, err));
        }
        if (PQntuples(res) == 1) {
            char id[24];
            snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
            int dead = !strcmp(PQgetvalue(res, 0, 2), "claimed");
            int attempts = atoi(PQgetvalue(res, 0, 3));
            c->lease.id = strtoll(id, NULL, 10);
            c->index = atoi(PQgetvalue(res, 0, 5));
            int oom = 0;
            if (!(c->name = pg_bytes(res, 0, 1, &oom))) {
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
                TRY(query(s,
                          "UPDATE leases SET state = 'failed', owner = NULL, expires = NULL,"
                          " finished_at = extract(epoch FROM clock_timestamp()), error = $2"
                          " WHERE id = $1",
                          2, pf, "failing a file", NULL, err));
                /* recorded as a failed extraction, like any file that failed */
                char when[32];
                vfi_now_iso(when, sizeof(when));
                const char *pe[] = {c->name, model, w->sampling, c->error, w->precision, when};
                TRY(query(s,
                          "WITH v AS (INSERT INTO videos (path) VALUES ($1) ON CONFLICT (path)"
                          " DO UPDATE SET path = excluded.path RETURNING id)"
                          " INSERT INTO extractions (video_id, model_id, sampling, status, error,"
                          " precision, finished_at) SELECT id, $2, $3, 'failed', $4, $5, $6 FROM"
                          " v ON CONFLICT (video_id, model_id, sampling) DO UPDATE SET status ="
                          " 'failed', error = excluded.error, finished_at = excluded.finished_at",
                          6, pe, "failing a file", NULL, err));
                c->kind = VF_CLAIM_GAVE_UP;
                return exec(s, "COMMIT", "failing a file", err);
            }
            PQclear(res);
            res = NULL;
            const char *pc[] = {id, w->owner, lease};
            TRY(query(s,
                      "UPDATE leases SET state = 'claimed', owner = $2, token = token + 1,"
                      " expires = extract(epoch FROM clock_timestamp()) + $3, attempts ="
                      " attempts + 1, error = NULL WHERE id = $1 RETURNING token",
                      3, pc, "claiming work", &res, err));
            c->lease.token = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
            PQclear(res);
            res = NULL;
            TRY(exec(s, "COMMIT", "claiming work", err));
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
    return exec(s, "COMMIT", "claiming work", err);
fail:
    PQclear(res);
    exec(s, "ROLLBACK", NULL, NULL);
    vfi_free(c->name);
    c->name = NULL;
    c->kind = VF_CLAIM_NONE;
    return rc;
}

static vf_status pg_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err)
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
    vf_status rc = query(s,
                         "UPDATE leases SET expires = extract(epoch FROM clock_timestamp()) + $3"
                         " WHERE id = ANY($1::bigint[]) AND owner = $2 AND state = 'claimed'",
                         3, p, "renewing leases", NULL, err);
    vfi_free(arr);
    return rc;
}

static vf_status pg_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
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
    return query(s,
                 done ? "UPDATE leases SET state = 'done', owner = NULL, expires = NULL,"
                        " attempts = 0, finished_at = extract(epoch FROM clock_timestamp())"
                        " WHERE id = $1 AND token = $2 AND state = 'claimed'"
                      : "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL,"
                        " attempts = greatest(attempts - 1, 0) WHERE id = $1 AND token = $2"
                        " AND state = 'claimed'",
                 2, p, "giving a file back", NULL, err);
}

static vf_status pg_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err)
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
    vf_status rc = query(s,
                         "SELECT w.ord, coalesce(l.state, 'pending'), l.error FROM want w LEFT"
                         " JOIN leases l ON l.path = w.path AND l.model_id = $1 AND"
                         " l.sampling = $2 ORDER BY w.ord",
                         2, p, "reading leases", &res, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < PQntuples(res) && rc >= 0; i++) {
        int oom = 0;
        char *error = pg_bytes(res, i, 2, &oom);
        if (oom)
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        else
            fn(user, atoi(PQgetvalue(res, i, 0)), PQgetvalue(res, i, 1), error);
        vfi_free(error);
    }
    PQclear(res);
    return rc;
}

static vf_status pg_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                                void *user, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, states_once(s, w, fn, user, err));
}

/* A real[] in text form ("{1.5,-2,NaN}") into dim floats. */
static vf_status parse_vec(pg_store *s, const char *text, int dim, float *out, vf_err *err)
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

static const vf_sql_driver pg_driver;

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
    q->base.drv = &pg_driver;
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
                q->rc = pg_fail(s, &q->err, q->what, q->res);
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
            q->rc = pg_fail(s, &q->err, q->what, NULL);
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
        q->rc = pg_fail(s, &q->err, q->what, q->res);
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
    vf_status rc = parse_vec(q->s, PQgetvalue(q->res, q->row, col), dim, out, &q->err);
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

static const vf_sql_driver pg_driver = {
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
    .schema = sql_schema,
    .label = sql_label,
};

/* refs' extractions and frame indexes as two bigint[] literals, in new strings */
static vf_status ref_arrays(const vf_store_ref *refs, int n, char **ext, char **frame, vf_err *err)
{
    size_t cap = (size_t)n * 22 + 3;
    *ext = vfi_malloc(cap);
    *frame = vfi_malloc(cap);
    if (!*ext || !*frame) {
        vfi_free(*ext);
        vfi_free(*frame);
        *ext = *frame = NULL;
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    size_t a = 0, b = 0;
    (*ext)[a++] = (*frame)[b++] = '{';
    for (int i = 0; i < n; i++) {
        a += (size_t)snprintf(*ext + a, cap - a, "%s%lld", i ? "," : "",
                              (long long)refs[i].extraction);
        b += (size_t)snprintf(*frame + b, cap - b, "%s%lld", i ? "," : "",
                              (long long)refs[i].frame_index);
    }
    snprintf(*ext + a, cap - a, "}");
    snprintf(*frame + b, cap - b, "}");
    return VF_OK;
}

static vf_status pg_vectors_at(vf_store *store, int64_t model_id, int f16, int dim,
                               const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                               vf_err *err)
{
    (void)f16; /* the values are stored as they read back */
    pg_store *s = (pg_store *)store;
    char *ext = NULL, *frame = NULL, model[24];
    PGresult *res = NULL;
    float *v = vfi_mallocarray((size_t)(dim > 0 ? dim : 1), sizeof(float));
    vf_status rc =
        v ? ref_arrays(refs, n, &ext, &frame, err) : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    snprintf(model, sizeof(model), "%lld", (long long)model_id);
    const char *p[] = {ext, frame, model};
    if (rc >= 0) /* one statement: one snapshot */
        rc = query(s,
                   "SELECT w.ord - 1, f.pts, f.t, f.vec, v.path FROM unnest($1::bigint[],"
                   " $2::bigint[]) WITH ORDINALITY AS w(e, i, ord) JOIN features f ON"
                   " f.extraction_id = w.e AND f.frame_index = w.i JOIN extractions e ON"
                   " e.id = f.extraction_id JOIN videos v ON v.id = e.video_id WHERE"
                   " e.model_id = $3 AND e.status = 'done'",
                   3, p, "reading features", &res, err);
    for (int r = 0; rc >= 0 && r < PQntuples(res); r++) {
        int i = atoi(PQgetvalue(res, r, 0)), oom = 0;
        if (i < 0 || i >= n) {
            rc = vfi_fail(err, VF_ERR_INTERNAL, "a vector that was not asked for");
            break;
        }
        vf_store_ref ref = refs[i];
        ref.pts = strtoll(PQgetvalue(res, r, 1), NULL, 10);
        ref.t = strtod(PQgetvalue(res, r, 2), NULL);
        if ((rc = parse_vec(s, PQgetvalue(res, r, 3), dim, v, err)) < 0)
            break;
        char *path = pg_bytes(res, r, 4, &oom);
        rc = oom ? vfi_fail(err, VF_ERR_NOMEM, "out of memory") : fn(user, i, path, &ref, v);
        vfi_free(path);
    }
    PQclear(res);
    vfi_free(ext);
    vfi_free(frame);
    vfi_free(v);
    return rc;
}

static vf_status pg_inspect(const char *uri, const vf_db_visitor *v, vf_err *err)
{
    vf_store *store = NULL;
    vf_status rc = pg_open(uri, VF_STORE_READ, &store, err);
    if (rc < 0)
        return rc;
    pg_store *s = (pg_store *)store;
    char engine[64];
    int version = PQserverVersion(s->conn);
    snprintf(engine, sizeof(engine), "PostgreSQL %d.%d", version / 10000, version % 10000);
    rc = vfi_sql_inspect(store, s->name, engine, v, err);
    pg_close(store);
    return rc;
}

static void pg_version(char *buf, size_t size)
{
    int v = PQlibVersion();
    snprintf(buf, size, "%d.%d", v / 10000, v % 10000);
}

const vf_store_ops vfi_store_pg = {
    .sql = &pg_driver,
    .name = "PostgreSQL (libpq)",
    .claims = pg_claims,
    .display = pg_display,
    .has_password = pg_has_password,
    .open = pg_open,
    .close = pg_close,
    .inspect = pg_inspect,
    .version = pg_version,
    .model = vfi_sql_model,
    .is_done = vfi_sql_is_done,
    .begin = pg_begin,
    .batch = pg_batch,
    .finish = pg_finish,
    .add_run = vfi_sql_add_run,
    .clock = pg_clock,
    .enqueue = pg_enqueue,
    .offer = pg_offer,
    .claim = pg_claim,
    .renew = pg_renew,
    .release = pg_release,
    .work_states = pg_work_states,
    .models = vfi_sql_models,
    .vector_at = vfi_sql_vector_at,
    .nearest = vfi_sql_nearest,
    .vectors = vfi_sql_vectors,
    .vectors_at = pg_vectors_at,
    .index_put = vfi_sql_index_put,
    .indexes = vfi_sql_indexes,
};
