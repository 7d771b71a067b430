/*
 * store_sqlite_db.c - the SQLite store's database (store_sqlite_db.h): its schema and the
 * migrations that make it, a database from elsewhere checked against it and opened
 * defensively, and the helpers every statement uses.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "store/record.h"
#include "store/store_sqlite_db.h"

/* Fail with SQLite's message, copied at once (the next call may overwrite it). */
vf_status vfi_sq_fail(sq_store *s, vf_err *err, const char *what)
{
    return vfi_fail(err, VF_ERR_STORE, "%s: %s: %s", s->path, what,
                    s->db ? sqlite3_errmsg(s->db) : "cannot open");
}

void vfi_sq_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Why a database could not even be read, in words a user can act on. */
const char *vfi_sq_read_problem(sqlite3 *db)
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

/* v7: the text tower paired with a CLIP model's image vectors (record.h). */
static const char *const schema_v7 = VFI_TEXT_COLUMN_SQL;

/* v8: each index file's SHA-256 (record.h). */
static const char *const schema_v8 = VFI_INDEX_SHA_COLUMN_SQL;

/* v9: a clip model's windows' end times (record.h). */
static const char *const schema_v9 = VFI_WINDOW_END_SQL;

/* v10: the shots an extraction found (record.h). */
static const char *const schema_v10 = VFI_SHOTS_TABLE_SQL;

/* migrations[v] brings a database from user_version v to v + 1 */
static const char *const migrations[VF_STORE_SCHEMA_VERSION] = {
    schema_v1, schema_v2, schema_v3, schema_v4, schema_v5,
    schema_v6, schema_v7, schema_v8, schema_v9, schema_v10};

vf_status vfi_sq_exec(sq_store *s, const char *sql, vf_err *err)
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
vf_status vfi_sq_migrate(sq_store *s, vf_err *err)
{
    vf_status rc = vfi_sq_exec(s, "BEGIN IMMEDIATE", err);
    if (rc < 0)
        return rc;
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        rc = vfi_sq_fail(s, err, "reading the schema version");
        goto fail;
    }
    for (int v = version; v < VF_STORE_SCHEMA_VERSION; v++) {
        if ((rc = vfi_sq_exec(s, migrations[v], err)) < 0)
            goto fail;
    }
    if (version < VF_STORE_SCHEMA_VERSION) {
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", VF_STORE_SCHEMA_VERSION);
        if ((rc = vfi_sq_exec(s, sql, err)) < 0)
            goto fail;
        if (version > 0)
            vfi_log(VF_LOG_INFO, "store", "%s: schema %d migrated to %d", s->path, version,
                    VF_STORE_SCHEMA_VERSION);
    }
    if ((rc = vfi_sq_exec(s, "COMMIT", err)) < 0)
        goto fail;
    return VF_OK;
fail:
    vfi_sq_exec(s, "ROLLBACK", NULL);
    return rc;
}

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
void vfi_sq_harden(sqlite3 *db)
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
 * is a table there (not a view, which could be an endless query), every view they make is that
 * view, as vidfeat writes it (`frames` is read by info, similar, matches and export), and every
 * trigger there is one of vidfeat's, as vidfeat writes it (a trigger runs on vidfeat's own
 * writes). Tables,
 * indexes and views a user added beside vidfeat's are left alone: vidfeat never reads them.
 * The reference is made by running the migrations on an empty database in memory.
 */
vf_status vfi_sq_check_schema(sq_store *s, int version, vf_err *err)
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
    if (sqlite3_prepare_v2(ref, "SELECT type, sql FROM sqlite_master WHERE name = ?1 AND type = ?2",
                           -1, &mine, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "SELECT type, name, sql FROM main.sqlite_master WHERE type = 'trigger'"
                           " OR name IN (SELECT value FROM json_each(?1))",
                           -1, &theirs, NULL) != SQLITE_OK) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, vfi_sq_read_problem(s->db),
                      sqlite3_errmsg(s->db));
        goto done;
    }
    /* the names of vidfeat's tables and views, as a JSON array for the query above */
    char names[1024] = "[";
    sqlite3_stmt *tables = NULL;
    if (sqlite3_prepare_v2(ref, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')",
                           -1, &tables, NULL) == SQLITE_OK)
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
        sqlite3_reset(mine);
        sqlite3_bind_text(mine, 1, name ? name : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(mine, 2, type ? type : "", -1, SQLITE_TRANSIENT);
        /* vidfeat's object of that name and type (a table and a trigger may share a name); a
         * view or trigger as written */
        const char *want =
            sqlite3_step(mine) == SQLITE_ROW ? (const char *)sqlite3_column_text(mine, 0) : NULL;
        int known = want && type && !strcmp(want, type);
        if (known && strcmp(type, "table")) {
            squeeze((const char *)sqlite3_column_text(mine, 1), a, sizeof(a));
            squeeze((const char *)sqlite3_column_text(theirs, 2), b, sizeof(b));
            known = !strcmp(a, b);
        }
        /* the first object of the wrong kind is named before one whose text differs (a table
         * renamed away rewrites the views that read it) */
        if (!known && (rc >= 0 || !want)) {
            rc = vfi_fail(err, VF_ERR_STORE,
                          "%s: not vidfeat's schema: %s '%s' is not what vidfeat made (a "
                          "database changed by hand or by someone else; not read)",
                          s->path, type ? type : "object", name ? name : "");
            if (!want)
                goto done;
        }
    }
    if (rc >= 0 && r != SQLITE_DONE)
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, vfi_sq_read_problem(s->db),
                      sqlite3_errmsg(s->db));
done:
    sqlite3_finalize(mine);
    sqlite3_finalize(theirs);
    sqlite3_close(ref);
    return rc;
}

static void configure(void)
{
    /* SQLite's memory statistics take one process-wide mutex at every allocation: with many
     * threads reading at once (vidfeat serve) that mutex was most of the time. vidfeat reads no
     * statistics. (A program that started SQLite first keeps its setting: SQLITE_MISUSE.) */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

void vfi_sq_configure(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, configure);
}

/* Open s->path read-only into s->db and read its schema version into *version: a vidfeat
 * database has one of at least 1. s->db is left for the caller to close, also on failure. */
vf_status vfi_sq_open_readonly(sq_store *s, int *version, vf_err *err)
{
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL;
    vfi_sq_configure();
    if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return vfi_fail(err, VF_ERR_STORE, "%s: cannot open (%s)", s->path,
                        s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    vfi_sq_harden(s->db);
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", s->path, vfi_sq_read_problem(s->db),
                      sqlite3_errmsg(s->db));
    } else if ((*version = sqlite3_column_int(st, 0)) < 1) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: not a vidfeat database", s->path);
    }
    sqlite3_finalize(st);
    if (rc >= 0)
        rc = vfi_sq_check_schema(s, *version, err);
    return rc;
}

/* Prepare sql into *st; VF_ERR_STORE naming what on failure. */
vf_status vfi_sq_prepare(sq_store *s, const char *sql, sqlite3_stmt **st, vf_err *err)
{
    *st = NULL;
    return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK
               ? VF_OK
               : vfi_sq_fail(s, err, "prepare");
}

/* Step a statement that returns no rows, then finalize it. */
vf_status vfi_sq_run_once(sq_store *s, sqlite3_stmt *st, const char *what, vf_err *err)
{
    vf_status rc = sqlite3_step(st) == SQLITE_DONE ? VF_OK : vfi_sq_fail(s, err, what);
    sqlite3_finalize(st);
    return rc;
}
