/*
 * store_sqlite.c - see store_sqlite.h. WAL journal, synchronous=NORMAL (a crash or kill -9
 * never corrupts the file and loses at most the batch being written), a 5 s busy timeout for
 * another writer, prepared statements reused for every batch. An extraction is marked done only
 * by the statement that records its frame count, after every batch is committed, so a database
 * can never show a done extraction with frames missing.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "store/store_sqlite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "core/clock.h"
#include "core/half.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/owner.h"
#include "core/status.h"
#include "core/path.h"
#include "store/rank.h"
#include "store/record.h"
#include "store/sql.h"

typedef struct sq_store {
    vf_store base; /* first: what the interface hands around */
    sqlite3 *db;
    sqlite3_stmt *ins_feature;
    sqlite3_stmt *add_frames; /* the running count, in the batch's transaction */
    char *path;
    int want; /* claims come from the temporary table want (a list), not every lease of the key */
    int version; /* the schema's (a database opened for writing is brought to the newest) */
} sq_store;

#define BUSY_TIMEOUT_MS 5000

/* Fail with SQLite's message, copied at once (the next call may overwrite it). */
static vf_status db_fail(sq_store *s, vf_err *err, const char *what)
{
    return vfi_fail(err, VF_ERR_STORE, "%s: %s: %s", s->path, what,
                    s->db ? sqlite3_errmsg(s->db) : "cannot open");
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Why a database could not even be read, in words a user can act on. */
static const char *read_problem(sqlite3 *db)
{
    switch (sqlite3_errcode(db) & 0xff) { /* the primary code of an extended one */
    case SQLITE_NOTADB:
        return "not a vidfeat database";
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN: /* WAL mode needs to create its -shm file beside the database */
        return "cannot write to it (vidfeat needs to write to the database and its directory: a "
               "read-only file, directory or file system?)";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return "locked by another writer";
    default:
        return "cannot read it";
    }
}

#define CHECK_SQL(call, what)                                                                      \
    do {                                                                                           \
        if ((call) != SQLITE_OK) {                                                                 \
            rc = db_fail(s, err, what);                                                            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static const char *const schema_v1 =
    "CREATE TABLE videos ("
    " id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, size INTEGER, mtime REAL,"
    " content_hash TEXT, duration REAL, width INTEGER, height INTEGER, rotation INTEGER,"
    " codec TEXT, frame_rate REAL);"
    "CREATE TABLE models ("
    " id INTEGER PRIMARY KEY, name TEXT NOT NULL, file_sha256 TEXT NOT NULL, layer TEXT NOT NULL,"
    " dim INTEGER NOT NULL, dtype TEXT NOT NULL, preprocessing TEXT NOT NULL,"
    " UNIQUE(name, file_sha256, layer, dtype, preprocessing));"
    "CREATE TABLE extractions ("
    " id INTEGER PRIMARY KEY, video_id INTEGER NOT NULL REFERENCES videos(id),"
    " model_id INTEGER NOT NULL REFERENCES models(id), sampling TEXT NOT NULL,"
    " status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')), error TEXT,"
    " device TEXT, precision TEXT, batch_size INTEGER, frames INTEGER NOT NULL DEFAULT 0,"
    " started_at TEXT, finished_at TEXT, decode_fps REAL, convert_fps REAL, infer_fps REAL,"
    " store_fps REAL, UNIQUE(video_id, model_id, sampling));"
    "CREATE TABLE features ("
    " extraction_id INTEGER NOT NULL REFERENCES extractions(id) ON DELETE CASCADE,"
    " frame_index INTEGER NOT NULL, pts INTEGER, t REAL NOT NULL, vec BLOB NOT NULL,"
    " PRIMARY KEY (extraction_id, frame_index)) WITHOUT ROWID;";

/* v2: benchmark results (vidfeat bench -o), one row per configuration, so that runs from several
 * machines can be merged into one file and compared. */
static const char *const schema_v2 =
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, host TEXT, vidfeat_version TEXT,"
    " device TEXT NOT NULL, device_name TEXT, backend TEXT, model TEXT NOT NULL, layer TEXT,"
    " precision TEXT NOT NULL, batch_size INTEGER NOT NULL, threads INTEGER,"
    " mode TEXT NOT NULL CHECK (mode IN ('pipeline', 'per_frame', 'infer_only')), input TEXT,"
    " frames INTEGER, end_to_end_fps REAL, decode_fps REAL, convert_fps REAL, infer_fps REAL,"
    " store_fps REAL, peak_rss_mb REAL);";

/* v3: leased work (store.h): files registered as work, and each file's lease per model and
 * sampling. */
static const char *const schema_v3 =
    "CREATE TABLE queue (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, added_at TEXT);"
    "CREATE TABLE leases ("
    " id INTEGER PRIMARY KEY, path TEXT NOT NULL, model_id INTEGER NOT NULL REFERENCES models(id),"
    " sampling TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending'"
    " CHECK (state IN ('pending', 'claimed', 'done', 'failed')), owner TEXT,"
    " token INTEGER NOT NULL DEFAULT 0, expires REAL, attempts INTEGER NOT NULL DEFAULT 0,"
    " finished_at REAL, error TEXT, UNIQUE (path, model_id, sampling));"
    "CREATE INDEX leases_state ON leases (model_id, sampling, state, id);";

/* v4: the frames view (record.h), what a reader of the vectors wants in one place. */
static const char *const schema_v4 = VFI_FRAMES_VIEW_SQL;

/* v5: whose weights each model file has (record.h). */
static const char *const schema_v5 = VFI_WEIGHTS_COLUMN_SQL;

/* v6: the search indexes built over the vectors (record.h); extraction ids never used twice. A
 * search index knows a file's vectors by their extraction's id, and SQLite gives a new row the
 * largest id + 1, so a file redone right after its extraction was the newest would get its old
 * id back: new extractions take the largest id ever given + 1 (NEXT_EXTRACTION_ID), which the
 * trigger keeps. (PostgreSQL's sequences never give an id twice.) */
static const char *const schema_v6 =
    VFI_INDEXES_TABLE_SQL "CREATE TABLE extraction_ids (last INTEGER NOT NULL);"
                          "INSERT INTO extraction_ids SELECT coalesce(max(id), 0) FROM extractions;"
                          "CREATE TRIGGER extraction_ids AFTER INSERT ON extractions BEGIN"
                          " UPDATE extraction_ids SET last = NEW.id WHERE NEW.id > last; END;";
#define NEXT_EXTRACTION_ID "(SELECT last + 1 FROM extraction_ids)"

/* v7: the text tower paired with a CLIP model's image vectors (record.h). */
static const char *const schema_v7 = VFI_TEXT_COLUMN_SQL;

/* v8: each index file's SHA-256 (record.h). */
static const char *const schema_v8 = VFI_INDEX_SHA_COLUMN_SQL;

/* migrations[v] brings a database from user_version v to v + 1 */
static const char *const migrations[VF_STORE_SCHEMA_VERSION] = {
    schema_v1, schema_v2, schema_v3, schema_v4, schema_v5, schema_v6, schema_v7, schema_v8};

static vf_status exec(sq_store *s, const char *sql, vf_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        vf_status rc = vfi_fail(err, VF_ERR_STORE, "%s: %s", s->path, msg ? msg : "error");
        sqlite3_free(msg);
        return rc;
    }
    return VF_OK;
}

/* Bring the schema up to VF_STORE_SCHEMA_VERSION in one transaction: all steps or none. The
 * version is read again inside it, so two processes opening an old file migrate it once. */
static vf_status migrate(sq_store *s, vf_err *err)
{
    vf_status rc = exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0)
        return rc;
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        rc = db_fail(s, err, "reading the schema version");
        goto fail;
    }
    for (int v = version; v < VF_STORE_SCHEMA_VERSION; v++) {
        if ((rc = exec(s, migrations[v], err)) < 0)
            goto fail;
    }
    if (version < VF_STORE_SCHEMA_VERSION) {
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", VF_STORE_SCHEMA_VERSION);
        if ((rc = exec(s, sql, err)) < 0)
            goto fail;
        if (version > 0)
            vfi_log(VF_LOG_INFO, "store", "%s: schema %d migrated to %d", s->path, version,
                    VF_STORE_SCHEMA_VERSION);
    }
    if ((rc = exec(s, "COMMIT", err)) < 0)
        goto fail;
    return VF_OK;
fail:
    exec(s, "ROLLBACK", NULL);
    return rc;
}

static void sq_close(vf_store *store)
{
    sq_store *s = (sq_store *)store;
    if (!s)
        return;
    sqlite3_finalize(s->ins_feature);
    sqlite3_finalize(s->add_frames);
    sqlite3_close(s->db);
    vfi_free(s->path);
    vfi_free(s);
}

/* ---- the SQL driver (sql.h) --------------------------------------------------------------- */

static vf_status read_vec(sq_store *s, sqlite3_stmt *st, int col, int f16, int dim, float *out,
                          vf_err *err);

typedef struct sq_sql {
    vf_sql base; /* first: its driver */
    sq_store *s;
    sqlite3_stmt *st;
    const char *what;
    vf_status rc; /* the kept failure */
    vf_err err;
} sq_sql;

static const vf_sql_driver sq_driver;

static vf_status sql_prepare(vf_store *store, const char *sql, const char *what, unsigned flags,
                             vf_sql **out, vf_err *err)
{
    (void)flags; /* SQLite steps any number of statements at once */
    sq_store *s = (sq_store *)store;
    sq_sql *q = vfi_calloc(1, sizeof(*q));
    *out = NULL;
    if (!q)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (sqlite3_prepare_v2(s->db, sql, -1, &q->st, NULL) != SQLITE_OK) {
        vf_status rc = db_fail(s, err, what);
        sqlite3_finalize(q->st);
        vfi_free(q);
        return rc;
    }
    q->base.drv = &sq_driver;
    q->s = s;
    q->what = what;
    *out = &q->base;
    return VF_OK;
}

static void sql_bind_int64(vf_sql *b, int i, int64_t v)
{
    sqlite3_bind_int64(((sq_sql *)b)->st, i, v);
}

static void sql_bind_double(vf_sql *b, int i, double v)
{
    sqlite3_bind_double(((sq_sql *)b)->st, i, v);
}

static void sql_bind_text(vf_sql *b, int i, const char *v)
{
    bind_text_or_null(((sq_sql *)b)->st, i, v);
}

static int sql_step(vf_sql *b)
{
    sq_sql *q = (sq_sql *)b;
    if (q->rc < 0)
        return 0;
    int r = sqlite3_step(q->st);
    if (r == SQLITE_ROW)
        return 1;
    if (r != SQLITE_DONE)
        q->rc = db_fail(q->s, &q->err, q->what);
    return 0;
}

static void sql_reset(vf_sql *b)
{
    sqlite3_reset(((sq_sql *)b)->st);
}

static int64_t sql_int64(vf_sql *b, int col)
{
    return sqlite3_column_int64(((sq_sql *)b)->st, col);
}

static double sql_real(vf_sql *b, int col)
{
    return sqlite3_column_double(((sq_sql *)b)->st, col);
}

static const char *sql_text(vf_sql *b, int col)
{
    return (const char *)sqlite3_column_text(((sq_sql *)b)->st, col);
}

static vf_status sql_vec(vf_sql *b, int col, int f16, int dim, float *out)
{
    sq_sql *q = (sq_sql *)b;
    vf_status rc = read_vec(q->s, q->st, col, f16, dim, out, &q->err);
    if (rc < 0 && q->rc >= 0)
        q->rc = rc;
    return rc;
}

static vf_status sql_finish(vf_sql *b, vf_err *err)
{
    sq_sql *q = (sq_sql *)b;
    vf_status rc = q->rc;
    if (rc < 0 && err)
        *err = q->err;
    sqlite3_finalize(q->st);
    vfi_free(q);
    return rc;
}

static int sql_schema(vf_store *store)
{
    return ((sq_store *)store)->version;
}

static const char *sql_label(vf_store *store)
{
    return ((sq_store *)store)->path;
}

static const vf_sql_driver sq_driver = {
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
    .snapshot = "BEGIN", /* a WAL reader sees the database as it was when it began */
    .schema = sql_schema,
    .label = sql_label,
};

/* Byte order, under the name PostgreSQL gives it, so that one query sorts alike in both. */
static int collate_c(void *arg, int na, const void *a, int nb, const void *b)
{
    (void)arg;
    int c = memcmp(a, b, (size_t)(na < nb ? na : nb));
    return c ? c : (na > nb) - (na < nb);
}

/* ---- a database from elsewhere ----------------------------------------------------------- */

/* Every connection: no writes to the schema by ordinary SQL, and nothing in the file's schema
 * (views, triggers, defaults) may call a function with side effects. */
static void harden(sqlite3 *db)
{
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_create_collation_v2(db, "C", SQLITE_UTF8, NULL, collate_c, NULL);
}

/* Whitespace runs as one space: the same statement however it was laid out. */
static void squeeze(const char *in, char *out, size_t size)
{
    size_t n = 0;
    int space = 0;
    for (; in && *in && n + 1 < size; in++) {
        int ws = *in == ' ' || *in == '\t' || *in == '\n' || *in == '\r';
        if (ws && !space && n)
            out[n++] = ' ';
        else if (!ws)
            out[n++] = *in;
        space = ws;
    }
    out[n] = '\0';
}

/*
 * The schema of s->db is vidfeat's own at version (>= 1): every table vidfeat's migrations make
 * is a table there (not a view, which could be an endless query), and every trigger there is
 * one of vidfeat's, as vidfeat writes it (a trigger runs on vidfeat's own writes). Tables,
 * indexes and views a user added beside vidfeat's are left alone: vidfeat never reads them.
 * The reference is made by running the migrations on an empty database in memory.
 */
static vf_status check_schema(sq_store *s, int version, vf_err *err)
{
    sqlite3 *ref = NULL;
    sqlite3_stmt *mine = NULL, *theirs = NULL;
    vf_status rc = VF_OK;
    char a[4096], b[4096];
    if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < version && v < VF_STORE_SCHEMA_VERSION; v++)
        if (sqlite3_exec(ref, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
            rc = vfi_fail(err, VF_ERR_INTERNAL, "schema %d: %s", v + 1, sqlite3_errmsg(ref));
            goto done;
        }
    if (sqlite3_prepare_v2(ref, "SELECT name, sql FROM sqlite_master WHERE type = ?1 AND name = ?2",
                           -1, &mine, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "SELECT type, name, sql FROM main.sqlite_master WHERE type = 'trigger'"
                           " OR name IN (SELECT value FROM json_each(?1))",
                           -1, &theirs, NULL) != SQLITE_OK) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, read_problem(s->db),
                      sqlite3_errmsg(s->db));
        goto done;
    }
    /* the names of vidfeat's tables, as a JSON array for the query above */
    char names[1024] = "[";
    sqlite3_stmt *tables = NULL;
    if (sqlite3_prepare_v2(ref, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &tables,
                           NULL) == SQLITE_OK)
        while (sqlite3_step(tables) == SQLITE_ROW)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s\"%s\"",
                     names[1] ? "," : "", (const char *)sqlite3_column_text(tables, 0));
    sqlite3_finalize(tables);
    strncat(names, "]", sizeof(names) - strlen(names) - 1);
    sqlite3_bind_text(theirs, 1, names, -1, SQLITE_STATIC);
    int r;
    while ((r = sqlite3_step(theirs)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(theirs, 0);
        const char *name = (const char *)sqlite3_column_text(theirs, 1);
        int trigger = type && !strcmp(type, "trigger");
        sqlite3_reset(mine);
        sqlite3_bind_text(mine, 1, trigger ? "trigger" : "table", -1, SQLITE_STATIC);
        sqlite3_bind_text(mine, 2, name ? name : "", -1, SQLITE_TRANSIENT);
        int known = sqlite3_step(mine) == SQLITE_ROW;
        if (known && trigger) { /* the same statement */
            squeeze((const char *)sqlite3_column_text(mine, 1), a, sizeof(a));
            squeeze((const char *)sqlite3_column_text(theirs, 2), b, sizeof(b));
            known = !strcmp(a, b);
        }
        if (!known || !type || (!trigger && strcmp(type, "table"))) {
            rc = vfi_fail(err, VF_ERR_STORE,
                          "%s: not vidfeat's schema: %s '%s' is not what vidfeat made (a "
                          "database changed by hand or by someone else; not read)",
                          s->path, type ? type : "object", name ? name : "");
            goto done;
        }
    }
    if (r != SQLITE_DONE)
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, read_problem(s->db),
                      sqlite3_errmsg(s->db));
done:
    sqlite3_finalize(mine);
    sqlite3_finalize(theirs);
    sqlite3_close(ref);
    return rc;
}

/* ---- reading vectors back -------------------------------------------------------------- */

/* Open s->path read-only into s->db and read its schema version into *version: a vidfeat
 * database has one of at least 1. s->db is left for the caller to close, also on failure. */
static vf_status open_readonly(sq_store *s, int *version, vf_err *err)
{
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return vfi_fail(err, VF_ERR_STORE, "%s: cannot open (%s)", s->path,
                        s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    harden(s->db);
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, read_problem(s->db),
                      sqlite3_errmsg(s->db));
    } else if ((*version = sqlite3_column_int(st, 0)) < 1) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: not a vidfeat database", s->path);
    }
    sqlite3_finalize(st);
    if (rc >= 0)
        rc = check_schema(s, *version, err);
    return rc;
}

static sq_store *new_store(const char *path)
{
    sq_store *s = vfi_calloc(1, sizeof(*s));
    if (s && !(s->path = vfi_strdup(path))) {
        vfi_free(s);
        return NULL;
    }
    if (s)
        s->base.ops = &vfi_store_sqlite;
    return s;
}

static vf_status open_read(const char *path, vf_store **out, vf_err *err)
{
    vf_status rc = VF_OK;
    int version = 0;
    sq_store *s = new_store(path);
    if (!s)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    TRY(open_readonly(s, &version, err));
    if (version > VF_STORE_SCHEMA_VERSION) {
        rc = vfi_fail(err, VF_ERR_STORE,
                      "%s: schema version %d is newer than this vidfeat's (upgrade vidfeat)", path,
                      version);
        goto fail;
    }
    s->version = version;
    *out = &s->base;
    return VF_OK;
fail:
    sq_close(&s->base);
    return rc;
}

/* A stored vector (float32 or float16 BLOB of dim elements) as floats; VF_ERR_STORE when its
 * size does not fit. */
static vf_status read_vec(sq_store *s, sqlite3_stmt *st, int col, int f16, int dim, float *out,
                          vf_err *err)
{
    const unsigned char *blob = sqlite3_column_blob(st, col);
    size_t es = f16 ? 2 : 4, bytes = (size_t)sqlite3_column_bytes(st, col);
    if (bytes != (size_t)dim * es || (!blob && dim))
        return vfi_fail(err, VF_ERR_STORE, "%s: a vector of %zu bytes where %d %s were expected",
                        s->path, bytes, dim, f16 ? "float16s" : "float32s");
    for (int i = 0; i < dim; i++) {
        if (f16)
            out[i] = vfi_f16_to_f32((uint16_t)(blob[2 * i] | blob[2 * i + 1] << 8));
        else {
            uint32_t x = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                         (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
            memcpy(&out[i], &x, sizeof(x));
        }
    }
    return VF_OK;
}

static vf_status sq_vectors_at(vf_store *store, int64_t model_id, int f16, int dim,
                               const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                               vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL;
    float *v = vfi_mallocarray((size_t)(dim > 0 ? dim : 1), sizeof(float));
    if (!v)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if ((rc = exec(s, "BEGIN", err)) < 0) { /* one snapshot */
        vfi_free(v);
        return rc;
    }
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "SELECT f.pts, f.t, f.vec, v.path FROM features f JOIN extractions"
                                 " e ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id"
                                 " WHERE f.extraction_id = ?1 AND f.frame_index = ?2 AND"
                                 " e.model_id = ?3 AND e.status = 'done'",
                                 -1, &st, NULL),
              "reading features");
    for (int i = 0; i < n && rc >= 0; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, refs[i].extraction);
        sqlite3_bind_int64(st, 2, refs[i].frame_index);
        sqlite3_bind_int64(st, 3, model_id);
        int r = sqlite3_step(st);
        if (r == SQLITE_DONE)
            continue; /* gone */
        if (r != SQLITE_ROW) {
            rc = db_fail(s, err, "reading features");
            break;
        }
        vf_store_ref ref = refs[i];
        ref.pts = sqlite3_column_int64(st, 0);
        ref.t = sqlite3_column_double(st, 1);
        TRY(read_vec(s, st, 2, f16, dim, v, err));
        TRY(fn(user, i, (const char *)sqlite3_column_text(st, 3), &ref, v));
    }
fail:
    sqlite3_finalize(st);
    exec(s, "COMMIT", NULL);
    vfi_free(v);
    return rc;
}

static void sq_version(char *buf, size_t size)
{
    snprintf(buf, size, "%s", sqlite3_libversion());
}

static vf_status open_write(const char *path, vf_store **out, vf_err *err)
{
    vf_status rc = VF_OK;
    sq_store *s = new_store(path);
    if (!s)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        rc = db_fail(s, err, "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(s->db, 1);
    harden(s->db);
    /* The version and whether the file has tables, in one statement: one snapshot. (Read
     * apart, another worker creating the schema in between made a new file look foreign.) */
    int version = -1, tables = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT (SELECT user_version FROM pragma_user_version),"
                           " (SELECT count(*) FROM sqlite_master)",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", path, read_problem(s->db),
                      sqlite3_errmsg(s->db));
        goto fail;
    }
    version = sqlite3_column_int(st, 0);
    tables = sqlite3_column_int(st, 1);
    sqlite3_finalize(st);
    if (version > VF_STORE_SCHEMA_VERSION) {
        rc = vfi_fail(err, VF_ERR_STORE,
                      "%s: schema version %d is newer than this vidfeat's %d (upgrade vidfeat)",
                      path, version, VF_STORE_SCHEMA_VERSION);
        goto fail;
    }
    if (version == 0) {
        /* A new file, or a database that is not ours: refuse anything with tables in it, before
         * anything is written to it. */
        if (tables) {
            rc = vfi_fail(err, VF_ERR_STORE, "%s: a database that vidfeat did not create", path);
            goto fail;
        }
    } else if ((rc = check_schema(s, version, err)) < 0) {
        goto fail;
    }
    /* Switching a new file to WAL takes it whole and does not wait for the busy handler: when
     * several workers open a new database at once, the others are asked again, for up to the
     * busy timeout. */
    for (int waited_ms = 0;; waited_ms += 10) {
        rc = exec(s, "PRAGMA journal_mode=WAL", err);
        if (rc >= 0 || (sqlite3_errcode(s->db) & 0xff) != SQLITE_BUSY ||
            waited_ms >= BUSY_TIMEOUT_MS)
            break;
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
    if (rc < 0 || (rc = exec(s, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err)) < 0)
        goto fail;
    if (version < VF_STORE_SCHEMA_VERSION && (rc = migrate(s, err)) < 0)
        goto fail;
    s->version = VF_STORE_SCHEMA_VERSION;
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "INSERT OR REPLACE INTO features (extraction_id, frame_index, "
                                 "pts, t, vec) VALUES (?, ?, ?, ?, ?)",
                                 -1, &s->ins_feature, NULL),
              "prepare");
    CHECK_SQL(sqlite3_prepare_v2(s->db, "UPDATE extractions SET frames = frames + ? WHERE id = ?",
                                 -1, &s->add_frames, NULL),
              "prepare");
    *out = &s->base;
    return VF_OK;
fail:
    sq_close(&s->base);
    return rc;
}

/* Inside a write transaction: VF_OK while fence (NULL: none) is still this worker's claim,
 * VF_ERR_LEASE when the lease has moved on (the worker must drop the file). */
static vf_status check_fence(sq_store *s, const vf_store_lease *fence, vf_err *err)
{
    if (!fence)
        return VF_OK;
    sqlite3_stmt *st = NULL;
    vf_status rc = VF_OK;
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "SELECT 1 FROM leases WHERE id = ? AND token = ? AND state = "
                                 "'claimed'",
                                 -1, &st, NULL),
              "prepare");
    sqlite3_bind_int64(st, 1, fence->id);
    sqlite3_bind_int64(st, 2, fence->token);
    int r = sqlite3_step(st);
    if (r == SQLITE_DONE)
        rc = vfi_fail(err, VF_ERR_LEASE, "%s: the lease ran out and another worker has the file",
                      s->path);
    else if (r != SQLITE_ROW)
        rc = db_fail(s, err, "reading the lease");
fail:
    sqlite3_finalize(st);
    return rc;
}

static vf_status sq_begin(vf_store *store, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run,
                          const vf_store_lease *fence, int64_t *ext_id, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL;
    char now[32];
    vfi_now_iso(now, sizeof(now));
    if ((rc = exec(s, "BEGIN IMMEDIATE", err)) < 0)
        return rc;
    if ((rc = check_fence(s, fence, err)) < 0)
        goto fail;
    CHECK_SQL(sqlite3_prepare_v2(
                  s->db,
                  "INSERT INTO videos (path, size, mtime, content_hash, duration, width, height, "
                  "rotation, codec, frame_rate) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
                  "ON CONFLICT (path) DO UPDATE SET size = ?2, mtime = ?3, content_hash = ?4, "
                  "duration = ?5, width = ?6, height = ?7, rotation = ?8, codec = ?9, "
                  "frame_rate = ?10 RETURNING id",
                  -1, &st, NULL),
              "prepare");
    sqlite3_bind_text(st, 1, v->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, v->size);
    sqlite3_bind_double(st, 3, v->mtime);
    sqlite3_bind_text(st, 4, v->content_hash, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, v->duration);
    sqlite3_bind_int(st, 6, v->width);
    sqlite3_bind_int(st, 7, v->height);
    sqlite3_bind_int(st, 8, v->rotation);
    sqlite3_bind_text(st, 9, v->codec, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 10, v->frame_rate);
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = db_fail(s, err, "recording the video");
        goto fail;
    }
    int64_t video_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    /* An earlier attempt (unfinished, failed or forced) goes, with its vectors. */
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "DELETE FROM extractions WHERE video_id = ? AND model_id = ? "
                                 "AND sampling = ?",
                                 -1, &st, NULL),
              "prepare");
    sqlite3_bind_int64(st, 1, video_id);
    sqlite3_bind_int64(st, 2, model_id);
    sqlite3_bind_text(st, 3, sampling, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_fail(s, err, "removing an old extraction");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "INSERT INTO extractions (id, video_id, model_id, sampling, "
                                 "status, device, precision, batch_size, started_at) VALUES "
                                 "(" NEXT_EXTRACTION_ID ", ?, ?, ?, 'running', ?, ?, ?, ?) "
                                 "RETURNING id",
                                 -1, &st, NULL),
              "prepare");
    sqlite3_bind_int64(st, 1, video_id);
    sqlite3_bind_int64(st, 2, model_id);
    sqlite3_bind_text(st, 3, sampling, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, run->device, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, run->precision, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, run->batch_size);
    sqlite3_bind_text(st, 7, now, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = db_fail(s, err, "starting the extraction");
        goto fail;
    }
    *ext_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = exec(s, "COMMIT", err)) < 0)
        goto fail;
    return VF_OK;
fail:
    sqlite3_finalize(st);
    exec(s, "ROLLBACK", NULL);
    return rc;
}

static vf_status sq_batch(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int n,
                          int dim, int f16, const int64_t *frame_index, const int64_t *pts,
                          const double *t, const float *vecs, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_status rc = VF_OK;
    uint16_t *half = NULL;
    if (f16 && !(half = vfi_mallocarray((size_t)dim, sizeof(uint16_t))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if ((rc = exec(s, "BEGIN IMMEDIATE", err)) < 0)
        goto out;
    if ((rc = check_fence(s, fence, err)) < 0) {
        exec(s, "ROLLBACK", NULL);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        sqlite3_stmt *st = s->ins_feature;
        const float *v = vecs + (size_t)i * dim;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, ext_id);
        sqlite3_bind_int64(st, 2, frame_index[i]);
        sqlite3_bind_int64(st, 3, pts[i]);
        sqlite3_bind_double(st, 4, t[i]);
        if (f16) {
            for (int k = 0; k < dim; k++)
                half[k] = vfi_f32_to_f16(v[k]);
            sqlite3_bind_blob(st, 5, half, dim * 2, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_blob(st, 5, v, dim * 4, SQLITE_STATIC); /* x86-64: little-endian */
        }
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = db_fail(s, err, "writing features");
            sqlite3_reset(st);
            exec(s, "ROLLBACK", NULL);
            goto out;
        }
    }
    sqlite3_reset(s->ins_feature);
    /* the extraction's frames column follows the rows while it runs (an interrupted one then
     * says how far it got); vfi_store_finish sets it from the rows themselves */
    sqlite3_bind_int(s->add_frames, 1, n);
    sqlite3_bind_int64(s->add_frames, 2, ext_id);
    if (sqlite3_step(s->add_frames) != SQLITE_DONE)
        rc = db_fail(s, err, "counting frames");
    sqlite3_reset(s->add_frames);
    if (rc < 0) {
        exec(s, "ROLLBACK", NULL);
        goto out;
    }
    if ((rc = exec(s, "COMMIT", err)) < 0)
        exec(s, "ROLLBACK", NULL);
out:
    vfi_free(half);
    return rc;
}

/* A measured rate, or NULL for "not measured" (0, negative or not finite). */
static void bind_rate(sqlite3_stmt *st, int i, double v)
{
    if (vfi_record_measured(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static vf_status sq_finish(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int end,
                           const char *error, const double *stage_fps, vf_err *err)
{
    int ok = end == VF_END_DONE;
    sq_store *s = (sq_store *)store;
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL;
    char now[32];
    vfi_now_iso(now, sizeof(now));
    if ((rc = exec(s, "BEGIN IMMEDIATE", err)) < 0)
        return rc;
    if ((rc = check_fence(s, fence, err)) < 0)
        goto fail;
    if (end == VF_END_REFUSED) {
        char sql[80];
        snprintf(sql, sizeof(sql), "DELETE FROM features WHERE extraction_id = %lld",
                 (long long)ext_id);
        if ((rc = exec(s, sql, err)) < 0)
            goto fail;
    }
    /* The count comes from the rows actually written, so "done" always matches them. */
    CHECK_SQL(sqlite3_prepare_v2(
                  s->db,
                  "UPDATE extractions SET status = ?2, error = ?3, finished_at = ?4, "
                  "decode_fps = ?5, convert_fps = ?6, infer_fps = ?7, store_fps = ?8, frames = "
                  "(SELECT count(*) FROM features WHERE extraction_id = ?1) WHERE id = ?1",
                  -1, &st, NULL),
              "prepare");
    sqlite3_bind_int64(st, 1, ext_id);
    sqlite3_bind_text(st, 2, ok ? "done" : "failed", -1, SQLITE_STATIC);
    if (error && *error)
        sqlite3_bind_text(st, 3, error, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 3);
    sqlite3_bind_text(st, 4, now, -1, SQLITE_STATIC);
    for (int i = 0; i < 4; i++)
        bind_rate(st, 5 + i, stage_fps ? stage_fps[i] : 0.0);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_fail(s, err, "finishing the extraction");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (fence) { /* the lease ends with the extraction */
        CHECK_SQL(sqlite3_prepare_v2(s->db,
                                     "UPDATE leases SET state = ?3, owner = NULL, expires = NULL,"
                                     " attempts = 0, finished_at = ?4, error = ?5 WHERE id = ?1"
                                     " AND token = ?2",
                                     -1, &st, NULL),
                  "prepare");
        sqlite3_bind_int64(st, 1, fence->id);
        sqlite3_bind_int64(st, 2, fence->token);
        sqlite3_bind_text(st, 3, ok ? "done" : "failed", -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 4, vfi_epoch_s());
        bind_text_or_null(st, 5, error && *error ? error : NULL);
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = db_fail(s, err, "ending the lease");
            goto fail;
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if ((rc = exec(s, "COMMIT", err)) < 0)
        goto fail;
    return VF_OK;
fail:
    sqlite3_finalize(st);
    exec(s, "ROLLBACK", NULL);
    return rc;
}

/* ---- leased work (store.h) -------------------------------------------------------------- */

static vf_status sq_clock(vf_store *store, double *now, vf_err *err)
{
    (void)store, (void)err;
    *now = vfi_epoch_s();
    return VF_OK;
}

/* Prepare sql into *st; VF_ERR_STORE naming what on failure. */
static vf_status prepare(sq_store *s, const char *sql, sqlite3_stmt **st, vf_err *err)
{
    *st = NULL;
    return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK ? VF_OK
                                                                     : db_fail(s, err, "prepare");
}

/* Step a statement that returns no rows, then finalize it. */
static vf_status run_once(sq_store *s, sqlite3_stmt *st, const char *what, vf_err *err)
{
    vf_status rc = sqlite3_step(st) == SQLITE_DONE ? VF_OK : db_fail(s, err, what);
    sqlite3_finalize(st);
    return rc;
}

static vf_status sq_enqueue(vf_store *store, const char *const *names, int n, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *add = NULL, *reset = NULL;
    char now[32];
    vfi_now_iso(now, sizeof(now));
    vf_status rc = exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0)
        return rc;
    TRY(prepare(s, "INSERT INTO queue (path, added_at) VALUES (?, ?) ON CONFLICT DO NOTHING", &add,
                err));
    TRY(prepare(s,
                "UPDATE leases SET state = 'pending', owner = NULL, expires = NULL, attempts = 0,"
                " error = NULL WHERE path = ? AND state IN ('done', 'failed')",
                &reset, err));
    for (int i = 0; i < n; i++) {
        sqlite3_bind_text(add, 1, names[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(add, 2, now, -1, SQLITE_STATIC);
        sqlite3_bind_text(reset, 1, names[i], -1, SQLITE_STATIC);
        if (sqlite3_step(add) != SQLITE_DONE || sqlite3_step(reset) != SQLITE_DONE) {
            rc = db_fail(s, err, "registering work");
            goto fail;
        }
        sqlite3_reset(add);
        sqlite3_reset(reset);
    }
    sqlite3_finalize(add);
    sqlite3_finalize(reset);
    return exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(add);
    sqlite3_finalize(reset);
    exec(s, "ROLLBACK", NULL);
    return rc;
}

/* want: this connection's set (temporary: it goes with the connection). queue workers have
 * none: they claim from every lease of their key. */
static vf_status sq_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files,
                          int n, unsigned char *done, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    vf_status rc = exec(s,
                        "CREATE TEMP TABLE IF NOT EXISTS want (ord INTEGER PRIMARY KEY,"
                        " path TEXT NOT NULL UNIQUE, given TEXT, size INTEGER, mtime REAL)",
                        err);
    if (rc < 0 || (rc = exec(s, "BEGIN IMMEDIATE", err)) < 0)
        return rc;
    s->want = files != NULL;
    if (!files) {
        TRY(prepare(s,
                    "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM queue"
                    " WHERE true ORDER BY id ON CONFLICT DO NOTHING",
                    &st, err));
        sqlite3_bind_int64(st, 1, w->model_id);
        sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
        TRY(run_once(s, st, "reading the queue", err));
        return exec(s, "COMMIT", err);
    }
    TRY(exec(s, "DELETE FROM want", err));
    TRY(prepare(s, "INSERT OR IGNORE INTO want VALUES (?, ?, ?, ?, ?)", &st, err));
    for (int i = 0; i < n; i++) {
        sqlite3_bind_int(st, 1, i);
        sqlite3_bind_text(st, 2, files[i].name, -1, SQLITE_STATIC);
        bind_text_or_null(st, 3, files[i].given);
        sqlite3_bind_int64(st, 4, files[i].size);
        sqlite3_bind_double(st, 5, files[i].mtime);
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = db_fail(s, err, "listing the work");
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
        TRY(prepare(s, sql, &st, err));
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
            rc = db_fail(s, err, "reading extractions");
            goto fail;
        }
        sqlite3_finalize(st);
        snprintf(sql, sizeof(sql), "DELETE FROM want AS w WHERE%s", is_done);
        TRY(prepare(s, sql, &st, err));
        sqlite3_bind_int64(st, 1, w->model_id);
        sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, w->precision, -1, SQLITE_STATIC);
        TRY(run_once(s, st, "listing the work", err));
    }
    TRY(prepare(s,
                "INSERT INTO leases (path, model_id, sampling) SELECT path, ?1, ?2 FROM want"
                " WHERE true ORDER BY ord ON CONFLICT DO NOTHING",
                &st, err));
    sqlite3_bind_int64(st, 1, w->model_id);
    sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
    TRY(run_once(s, st, "listing the work", err));
    /* Files that ended before this worker began and are not done by the rule (changed since,
     * or failed) are work again; those that others finish from now on are not. */
    TRY(prepare(s,
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
    TRY(run_once(s, st, "listing the work", err));
    return exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(st);
    exec(s, "ROLLBACK", NULL);
    return rc;
}

/* The set's leases held by processes of this machine that are gone run out now; *n_expired
 * of them, *n_held held by live or remote workers. */
static vf_status expire_gone(sq_store *s, const vf_store_work *w, int *n_expired, int *n_held,
                             vf_err *err)
{
    sqlite3_stmt *st = NULL, *up = NULL;
    *n_expired = *n_held = 0;
    vf_status rc = prepare(s,
                           s->want ? "SELECT l.id, l.owner FROM leases l JOIN want w ON w.path"
                                     " = l.path WHERE l.model_id = ?1 AND l.sampling = ?2 AND"
                                     " l.state = 'claimed'"
                                   : "SELECT l.id, l.owner FROM leases l WHERE l.model_id = ?1"
                                     " AND l.sampling = ?2 AND l.state = 'claimed'",
                           &st, err);
    if (rc < 0)
        return rc;
    TRY(prepare(s, "UPDATE leases SET expires = 0 WHERE id = ? AND state = 'claimed'", &up, err));
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
                rc = db_fail(s, err, "ending a dead worker's lease");
                goto fail;
            }
            sqlite3_reset(up);
            (*n_expired)++;
        } else {
            (*n_held)++;
        }
    }
    if (r != SQLITE_DONE)
        rc = db_fail(s, err, "reading leases");
fail:
    sqlite3_finalize(st);
    sqlite3_finalize(up);
    return rc;
}

static vf_status sq_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    vf_status rc = exec(s, "BEGIN IMMEDIATE", err);
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
            TRY(prepare(s, wanted[!s->want][k], &st, err));
            sqlite3_bind_int64(st, 1, w->model_id);
            sqlite3_bind_text(st, 2, w->sampling, -1, SQLITE_STATIC);
            if (k == 1)
                sqlite3_bind_double(st, 3, now);
            r = sqlite3_step(st);
        }
        if (r != SQLITE_ROW && r != SQLITE_DONE) {
            rc = db_fail(s, err, "claiming work");
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
                TRY(prepare(s,
                            "UPDATE leases SET state = 'failed', owner = NULL, expires = NULL,"
                            " finished_at = ?2, error = ?3 WHERE id = ?1",
                            &st, err));
                sqlite3_bind_int64(st, 1, id);
                sqlite3_bind_double(st, 2, now);
                sqlite3_bind_text(st, 3, c->error, -1, SQLITE_STATIC);
                TRY(run_once(s, st, "failing a file", err));
                /* recorded as a failed extraction, like any file that failed */
                TRY(prepare(s,
                            "INSERT INTO videos (path) VALUES (?1) ON CONFLICT (path) DO NOTHING",
                            &st, err));
                sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
                TRY(run_once(s, st, "failing a file", err));
                char when[32];
                vfi_now_iso(when, sizeof(when));
                TRY(prepare(s,
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
                TRY(run_once(s, st, "failing a file", err));
                st = NULL;
                c->kind = VF_CLAIM_GAVE_UP;
                return exec(s, "COMMIT", err);
            }
            sqlite3_finalize(st);
            TRY(prepare(s,
                        "UPDATE leases SET state = 'claimed', owner = ?2, token = token + 1,"
                        " expires = ?3, attempts = attempts + 1, error = NULL WHERE id = ?1"
                        " RETURNING token",
                        &st, err));
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_text(st, 2, w->owner, -1, SQLITE_STATIC);
            sqlite3_bind_double(st, 3, now + w->lease_s);
            if (sqlite3_step(st) != SQLITE_ROW) {
                rc = db_fail(s, err, "claiming work");
                goto fail;
            }
            c->lease.token = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
            c->kind = VF_CLAIM_OK;
            return exec(s, "COMMIT", err);
        }
        sqlite3_finalize(st);
        st = NULL;
        int expired, held;
        TRY(expire_gone(s, w, &expired, &held, err));
        c->kind = held ? VF_CLAIM_WAIT : VF_CLAIM_NONE;
        if (!expired)
            break;
    }
    return exec(s, "COMMIT", err);
fail:
    sqlite3_finalize(st);
    vfi_free(c->name);
    c->name = NULL;
    c->kind = VF_CLAIM_NONE;
    exec(s, "ROLLBACK", NULL);
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

static vf_status sq_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
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
    vf_status rc = prepare(s, sql, &st, err);
    if (rc >= 0) {
        sqlite3_bind_double(st, 1, vfi_epoch_s() + w->lease_s);
        sqlite3_bind_text(st, 2, w->owner, -1, SQLITE_STATIC);
        rc = run_once(s, st, "renewing leases", err);
    }
    vfi_free(sql);
    vfi_free(list);
    return rc;
}

static vf_status sq_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    vf_status rc = prepare(s,
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
    return run_once(s, st, "giving a file back", err);
}

static vf_status sq_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                                void *user, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    if (!s->want)
        return VF_OK; /* a queue worker's set is every queued file: it reports only its own */
    vf_status rc = prepare(s,
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
        rc = db_fail(s, err, "reading leases");
    sqlite3_finalize(st);
    return rc;
}

/* ---- merge (vidfeat merge) --------------------------------------------------------------- */

/* Copy the done extractions of the database at `from` into s (see store.h). Conflicts: a file
 * done in both with other vectors; s's is kept and conflict() told. */
static vf_status sq_merge(vf_store *store, const char *from, vf_store_conflict_fn conflict,
                          void *user, int64_t *merged, vf_err *err)
{
    sq_store *s = (sq_store *)store;
    sqlite3_stmt *st = NULL;
    *merged = 0;
    vf_status rc = VF_OK;
    int version = 0;
    {
        sq_store probe = {.path = (char *)from};
        TRY(open_readonly(&probe, &version, err));
        sqlite3_close(probe.db);
        if (version < 1 || version > VF_STORE_SCHEMA_VERSION)
            return vfi_fail(err, VF_ERR_STORE, "%s: schema version %d cannot be merged", from,
                            version);
    }
    TRY(prepare(s, "ATTACH DATABASE ? AS src", &st, err));
    sqlite3_bind_text(st, 1, from, -1, SQLITE_STATIC);
    TRY(run_once(s, st, "opening it", err));
    st = NULL;
    TRY(exec(s, "BEGIN IMMEDIATE", err));
    /* models and videos by their identity; maps from the source's ids to ours */
    TRY(exec(s,
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
        TRY(exec(s,
                 "UPDATE models SET weights = (SELECT o.weights FROM src.models o WHERE"
                 " o.name = models.name AND o.file_sha256 = models.file_sha256 AND o.layer ="
                 " models.layer AND o.dtype = models.dtype AND o.preprocessing ="
                 " models.preprocessing) WHERE weights IS NULL;",
                 err));
    /* the text tower paired with a CLIP model's vectors, likewise (schema 7) */
    if (version >= 7)
        TRY(exec(s,
                 "UPDATE models SET text_sha256 = (SELECT o.text_sha256 FROM src.models o WHERE"
                 " o.name = models.name AND o.file_sha256 = models.file_sha256 AND o.layer ="
                 " models.layer AND o.dtype = models.dtype AND o.preprocessing ="
                 " models.preprocessing) WHERE text_sha256 IS NULL;",
                 err));
    /* done in both: the same vectors are one extraction; other vectors are a conflict */
    TRY(prepare(s,
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
    if (r != SQLITE_DONE) {
        rc = db_fail(s, err, "comparing vectors");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    /* the rest: replace any unfinished or failed attempt here, copy extraction and vectors */
    TRY(exec(s,
             "DELETE FROM extractions WHERE id IN (SELECT e.id FROM extractions e JOIN pairs p"
             " ON p.new IS NULL AND e.video_id = p.video_id AND e.model_id = p.model_id AND"
             " e.sampling = p.sampling);"
             "CREATE TEMP TABLE ext_map (old INTEGER PRIMARY KEY, new INTEGER);",
             err));
    TRY(prepare(s,
                "INSERT INTO extractions (id, video_id, model_id, sampling, status, error, device,"
                " precision, batch_size, frames, started_at, finished_at, decode_fps,"
                " convert_fps, infer_fps, store_fps) SELECT " NEXT_EXTRACTION_ID ","
                " p.video_id, p.model_id, e.sampling,"
                " 'done', NULL, e.device, e.precision, e.batch_size, e.frames, e.started_at,"
                " e.finished_at, e.decode_fps, e.convert_fps, e.infer_fps, e.store_fps FROM"
                " pairs p JOIN src.extractions e ON e.id = p.old WHERE p.old = ? RETURNING id",
                &st, err));
    sqlite3_stmt *olds = NULL, *map = NULL;
    TRY(prepare(s, "SELECT old FROM pairs WHERE new IS NULL ORDER BY old", &olds, err));
    if ((rc = prepare(s, "INSERT INTO ext_map VALUES (?, ?)", &map, err)) < 0) {
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
    if (r != SQLITE_DONE) {
        rc = db_fail(s, err, "copying extractions");
        goto fail;
    }
    TRY(exec(s,
             "INSERT INTO features (extraction_id, frame_index, pts, t, vec) SELECT m.new,"
             " f.frame_index, f.pts, f.t, f.vec FROM src.features f JOIN ext_map m ON m.old ="
             " f.extraction_id;"
             "DROP TABLE temp.model_map; DROP TABLE temp.done_src; DROP TABLE temp.pairs;"
             " DROP TABLE temp.ext_map;",
             err));
    sqlite3_finalize(st);
    st = NULL;
    TRY(exec(s, "COMMIT", err));
    return exec(s, "DETACH DATABASE src", err);
fail:
    sqlite3_finalize(st);
    exec(s, "ROLLBACK", NULL);
    exec(s,
         "DROP TABLE IF EXISTS temp.model_map; DROP TABLE IF EXISTS temp.done_src;"
         " DROP TABLE IF EXISTS temp.pairs; DROP TABLE IF EXISTS temp.ext_map;",
         NULL);
    exec(s, "DETACH DATABASE src", NULL);
    return rc;
}

static vf_status sq_inspect(const char *path, const vf_db_visitor *v, vf_err *err)
{
    sq_store tmp = {.base.ops = &vfi_store_sqlite, .path = (char *)path};
    char engine[64];
    int version;
    vf_status rc = open_readonly(&tmp, &version, err); /* a newer schema: as far as it can be */
    if (rc >= 0) {
        tmp.version = version;
        snprintf(engine, sizeof(engine), "SQLite %s", sqlite3_libversion());
        rc = vfi_sql_inspect(&tmp.base, path, engine, v, err);
    }
    sqlite3_close(tmp.db);
    return rc;
}

/* A file path: anything that is not a URI ("scheme://..."). */
static int sq_claims(const char *target)
{
    return vfi_store_uri_scheme(target) == 0;
}

static void sq_display(const char *path, char *buf, size_t size)
{
    snprintf(buf, size, "%s", path);
}

static vf_status sq_open(const char *path, vf_store_mode mode, vf_store **out, vf_err *err)
{
    return mode == VF_STORE_READ ? open_read(path, out, err) : open_write(path, out, err);
}

const vf_store_ops vfi_store_sqlite = {
    .name = "SQLite",
    .sql = &sq_driver,
    .claims = sq_claims,
    .display = sq_display,
    .open = sq_open,
    .close = sq_close,
    .inspect = sq_inspect,
    .version = sq_version,
    .model = vfi_sql_model,
    .is_done = vfi_sql_is_done,
    .begin = sq_begin,
    .batch = sq_batch,
    .finish = sq_finish,
    .add_run = vfi_sql_add_run,
    .clock = sq_clock,
    .enqueue = sq_enqueue,
    .offer = sq_offer,
    .claim = sq_claim,
    .renew = sq_renew,
    .release = sq_release,
    .work_states = sq_work_states,
    .merge = sq_merge,
    .models = vfi_sql_models,
    .vector_at = vfi_sql_vector_at,
    .nearest = vfi_sql_nearest,
    .vectors = vfi_sql_vectors,
    .vectors_at = sq_vectors_at,
    .index_put = vfi_sql_index_put,
    .indexes = vfi_sql_indexes,
};
