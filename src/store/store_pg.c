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
#include "store/store_pg_db.h"

#define PG_SCHEMA_VERSION 10
#define ADVISORY_KEY      "7419030817" /* any constant: the schema's lock */

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

/* schema 9: a clip model's windows' end times (record.h), as SQLite's */
static const char *const schema_v9 = VFI_WINDOW_END_SQL "UPDATE vidfeat_schema SET version = 9;";

/* schema 10: the shots an extraction found (record.h), as SQLite's */
static const char *const schema_v10 = VFI_SHOTS_TABLE_SQL "UPDATE vidfeat_schema SET version = 10;";

/* The URI as messages may show it: scheme, user, host, port and database, never a password. */
static void pg_close(vf_store *store)
{
    pg_store *s = (pg_store *)store;
    if (!s)
        return;
    vfi_pg_forget_want(s);
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
    vf_status rc = vfi_pg_query(s,
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
    rc = vfi_pg_query(s, "SELECT coalesce(max(version), 0) FROM vidfeat_schema", 0, NULL,
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
    if (!s || !(s->name = vfi_pg_display_name(uri))) {
        vfi_free(s);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    s->base.ops = &vfi_store_pg;
    /* the URI's own settings win; pg_stat_activity shows "vidfeat" unless it names itself */
    const char *const keys[] = {"dbname", "fallback_application_name", NULL};
    const char *const values[] = {uri, "vidfeat", NULL};
    s->conn = PQconnectdbParams(keys, values, 1);
    if (s->conn)
        PQsetNoticeProcessor(s->conn, vfi_pg_on_notice, s); /* kept by PQreset */
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        char why[512];
        vfi_pg_pq_message(s->conn ? PQerrorMessage(s->conn) : "out of memory", why, sizeof(why));
        vfi_pg_scrub(uri, why, sizeof(why)); /* libpq quotes a URI it cannot read */
        rc = vfi_fail(err, VF_ERR_STORE, "%s: cannot connect: %s", s->name, why);
        goto fail;
    }
    TRY(vfi_pg_session_settings(s, err)); /* the temporary tables come once the schema is there */
    if (mode == VF_STORE_WRITE) {
        TRY(vfi_pg_exec(s, "BEGIN", "starting a transaction", err));
        TRY(vfi_pg_exec(s, "SELECT pg_advisory_xact_lock(" ADVISORY_KEY ")", "locking the schema",
                        err));
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
            TRY(vfi_pg_exec(s, schema, "creating the tables", err));
        if (s->version < 3)
            TRY(vfi_pg_exec(s, schema_v3, "migrating the tables", err));
        if (s->version < 4)
            TRY(vfi_pg_exec(s, schema_v4, "migrating the tables", err));
        if (s->version < 5)
            TRY(vfi_pg_exec(s, schema_v5, "migrating the tables", err));
        if (s->version < 6)
            TRY(vfi_pg_exec(s, schema_v6, "migrating the tables", err));
        if (s->version < 7)
            TRY(vfi_pg_exec(s, schema_v7, "migrating the tables", err));
        if (s->version < 8)
            TRY(vfi_pg_exec(s, schema_v8, "migrating the tables", err));
        if (s->version < 9)
            TRY(vfi_pg_exec(s, schema_v9, "migrating the tables", err));
        if (s->version < 10)
            TRY(vfi_pg_exec(s, schema_v10, "migrating the tables", err));
        s->version = PG_SCHEMA_VERSION;
        TRY(vfi_pg_exec(s, "COMMIT", "creating the tables", err));
        s->write = 1;
        TRY(vfi_pg_session_tables(s, err));
    }
    *out = &s->base;
    return VF_OK;
fail:
    pg_close(&s->base);
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
                         const double *t_end, const float *v, int dim, int f16)
{
    unsigned char *p = p0;
    p[0] = 0;
    p[1] = 6; /* fields */
    p += 2;
    p = put_be64(put_be32(p, 8), (uint64_t)ext);
    p = put_be64(put_be32(p, 8), (uint64_t)frame);
    p = put_be64(put_be32(p, 8), (uint64_t)pts);
    uint64_t tb;
    memcpy(&tb, &t, 8);
    p = put_be64(put_be32(p, 8), tb);
    if (t_end) {
        memcpy(&tb, t_end, 8);
        p = put_be64(put_be32(p, 8), tb);
    } else {
        p = put_be32(p, 0xffffffffu); /* NULL: a frame's vector */
    }
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
                            const double *t, const double *t_end, const float *vecs, vf_err *err)
{
    size_t cap = (size_t)dim * 8 + 128; /* one row */
    unsigned char *row = vfi_malloc(cap);
    if (!row)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_status rc = vfi_pg_exec(s, "BEGIN", "starting a transaction", err);
    PGresult *res = NULL;
    int copying = 0;
    if (rc >= 0) {
        res = PQexec(s->conn, "COPY batch_in (extraction_id, frame_index, pts, t, t_end, vec) FROM"
                              " STDIN"
                              " (FORMAT binary)");
        copying = PQresultStatus(res) == PGRES_COPY_IN;
        if (!copying)
            rc = vfi_pg_fail(s, err, "writing features", res);
        PQclear(res);
    }
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0377, '\r', '\n',
                                             0,   0,   0,   0,   0,   0,   0,    0,    0};
    if (rc >= 0 && PQputCopyData(s->conn, (const char *)header, sizeof(header)) != 1)
        rc = vfi_pg_fail(s, err, "writing features", NULL);
    for (int i = 0; rc >= 0 && i < n; i++) {
        size_t len = binary_row(row, ext_id, frame_index[i], pts[i], t[i], t_end ? &t_end[i] : NULL,
                                vecs + (size_t)i * dim, dim, f16);
        if (PQputCopyData(s->conn, (const char *)row, (int)len) != 1)
            rc = vfi_pg_fail(s, err, "writing features", NULL);
    }
    static const unsigned char trailer[2] = {0377, 0377};
    if (rc >= 0 && PQputCopyData(s->conn, (const char *)trailer, 2) != 1)
        rc = vfi_pg_fail(s, err, "writing features", NULL);
    if (copying) {
        int ended = PQputCopyEnd(s->conn, rc >= 0 ? NULL : "abandoned");
        while ((res = PQgetResult(s->conn))) {
            if (rc >= 0 && (ended != 1 || PQresultStatus(res) != PGRES_COMMAND_OK))
                rc = vfi_pg_fail(s, err, "writing features", res);
            PQclear(res);
        }
    }
    /* the fence after the COPY (into this session's own table): the lease row is locked only
     * for the last few statements */
    if (rc >= 0)
        rc = vfi_sql_fence(&s->base, fence, NULL, err);
    if (rc >= 0)
        rc = vfi_pg_exec(s,
                         "INSERT INTO features (extraction_id, frame_index, pts, t, t_end, vec)"
                         " SELECT DISTINCT ON (frame_index) extraction_id, frame_index, pts, t,"
                         " t_end, vec FROM batch_in ORDER BY frame_index, seq DESC ON CONFLICT"
                         " (extraction_id, frame_index) DO UPDATE SET pts = excluded.pts,"
                         " t = excluded.t, t_end = excluded.t_end, vec = excluded.vec",
                         "writing features", err);
    /* the frames column follows the rows while it runs; finish sets it from the rows */
    if (rc >= 0)
        rc = vfi_sql_count_frames(&s->base, ext_id, n, err);
    if (rc >= 0)
        rc = vfi_pg_exec(s, "TRUNCATE batch_in", "writing features", err);
    if (rc >= 0)
        rc = vfi_pg_exec(s, "COMMIT", "writing features", err);
    if (rc < 0)
        vfi_pg_exec(s, "ROLLBACK", NULL, NULL);
    vfi_free(row);
    return rc;
}

static vf_status pg_begin(vf_store *store, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run,
                          const vf_store_lease *fence, int64_t *ext_id, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, vfi_sql_begin(store, v, model_id, sampling, run, fence, ext_id, err));
}

static vf_status pg_batch(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int n,
                          int dim, int f16, const int64_t *frame_index, const int64_t *pts,
                          const double *t, const double *t_end, const float *vecs, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, batch_once(s, ext_id, fence, n, dim, f16, frame_index, pts, t, t_end, vecs, err));
}

static vf_status pg_finish(vf_store *store, int64_t ext_id, const vf_store_lease *fence,
                           const vf_store_end *e, vf_err *err)
{
    pg_store *s = (pg_store *)store;
    RETRYING(s, vfi_sql_end(store, ext_id, fence, e, err));
}

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
        rc = vfi_pg_query(s,
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
        if ((rc = vfi_pg_parse_vec(s, PQgetvalue(res, r, 3), dim, v, err)) < 0)
            break;
        char *path = vfi_pg_bytes(res, r, 4, &oom);
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
    .sql = &vfi_pg_driver,
    .name = "PostgreSQL (libpq)",
    .claims = pg_claims,
    .display = vfi_pg_display,
    .has_password = vfi_pg_has_password,
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
    .clock = vfi_pg_clock,
    .enqueue = vfi_pg_enqueue,
    .offer = vfi_pg_offer,
    .claim = vfi_pg_claim,
    .renew = vfi_pg_renew,
    .release = vfi_pg_release,
    .work_states = vfi_pg_work_states,
    .models = vfi_sql_models,
    .vector_at = vfi_sql_vector_at,
    .nearest = vfi_sql_nearest,
    .vectors = vfi_sql_vectors,
    .vectors_at = pg_vectors_at,
    .index_put = vfi_sql_index_put,
    .indexes = vfi_sql_indexes,
};
