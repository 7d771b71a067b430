/*
 * store_sqlite.c - see store_sqlite.h. WAL journal, synchronous=NORMAL (a crash or kill -9
 * never corrupts the file and loses at most the batch being written), a 5 s busy timeout for
 * another writer, a batch's statement prepared once and stepped for each row (the writes that
 * read the same in PostgreSQL are sql_write.c's). An extraction is marked done only
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
#include "store/store_sqlite_db.h"

static void sq_close(vf_store *store)
{
    sq_store *s = (sq_store *)store;
    if (!s)
        return;
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
        vf_status rc = vfi_sq_fail(s, err, what);
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
    vfi_sq_bind_text(((sq_sql *)b)->st, i, v);
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
        q->rc = vfi_sq_fail(q->s, &q->err, q->what);
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

/* Parameter i: n bytes (a stored vector), copied when copy, else kept until the next step. The
 * SQLite store's own: PostgreSQL's batch is a COPY. */
static void bind_blob(vf_sql *b, int i, const void *bytes, int n, int copy)
{
    sqlite3_bind_blob(((sq_sql *)b)->st, i, bytes, n, copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
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
    .write = "BEGIN IMMEDIATE",
    .new_extraction_id = NEXT_EXTRACTION_ID,
    .hold_row = "",    /* BEGIN IMMEDIATE holds the whole database */
    .epoch_now = NULL, /* leases are timed by this machine's clock (vfi_sq_clock) */
    .schema = sql_schema,
    .label = sql_label,
};

/* ---- reading vectors back -------------------------------------------------------------- */

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
    TRY(vfi_sq_open_readonly(s, &version, err));
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

/* The extractions vectors_at has looked up lately: whether each is a done extraction of the
 * model, and its file's path (candidates come by similarity, a file's frames often together). */
#define SEEN_EXTRACTIONS 64
typedef struct seen_ext {
    int64_t id;
    char *path; /* NULL: not a done extraction of the model */
} seen_ext;

/* The path of extraction ext when it is a done one of model_id, else NULL; remembered in seen
 * (n of them, the oldest replaced at *next). *failed: 1 when SQLite failed, 2 out of memory. */
static const char *extraction_path(sqlite3_stmt *st, int64_t ext, int64_t model_id, seen_ext *seen,
                                   int *n, int *next, int *failed)
{
    for (int i = 0; i < *n; i++)
        if (seen[i].id == ext)
            return seen[i].path;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ext);
    sqlite3_bind_int64(st, 2, model_id);
    int r = sqlite3_step(st);
    char *path = NULL;
    if (r == SQLITE_ROW && !(path = vfi_strdup((const char *)sqlite3_column_text(st, 0))))
        *failed = 2;
    else if (r != SQLITE_ROW && r != SQLITE_DONE)
        *failed = 1;
    if (*failed)
        return NULL;
    int slot = *n;
    if (*n < SEEN_EXTRACTIONS) {
        (*n)++;
    } else {
        slot = *next;
        *next = (*next + 1) % SEEN_EXTRACTIONS;
        vfi_free(seen[slot].path);
    }
    seen[slot] = (seen_ext){ext, path};
    return path;
}

static vf_status sq_vectors_at(vf_store *store, int64_t model_id, int f16, int dim,
                               const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                               vf_err *err)
{
    sq_store *s = (sq_store *)store;
    vf_status rc = VF_OK;
    sqlite3_stmt *st = NULL, *ext_st = NULL;
    seen_ext seen[SEEN_EXTRACTIONS] = {{0, NULL}};
    int n_seen = 0, next = 0, failed = 0;
    float *v = vfi_mallocarray((size_t)(dim > 0 ? dim : 1), sizeof(float));
    if (!v)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if ((rc = vfi_sq_exec(s, "BEGIN", err)) < 0) { /* one snapshot */
        vfi_free(v);
        return rc;
    }
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "SELECT v.path FROM extractions e JOIN videos v ON v.id ="
                                 " e.video_id WHERE e.id = ?1 AND e.model_id = ?2 AND"
                                 " e.status = 'done'",
                                 -1, &ext_st, NULL),
              "reading extractions");
    CHECK_SQL(sqlite3_prepare_v2(s->db,
                                 "SELECT pts, t, vec FROM features WHERE extraction_id = ?1 AND"
                                 " frame_index = ?2",
                                 -1, &st, NULL),
              "reading features");
    for (int i = 0; i < n && rc >= 0; i++) {
        const char *path =
            extraction_path(ext_st, refs[i].extraction, model_id, seen, &n_seen, &next, &failed);
        if (failed) {
            rc = failed == 2 ? vfi_fail(err, VF_ERR_NOMEM, "out of memory")
                             : vfi_sq_fail(s, err, "reading extractions");
            break;
        }
        if (!path)
            continue; /* gone, or not done */
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, refs[i].extraction);
        sqlite3_bind_int64(st, 2, refs[i].frame_index);
        int r = sqlite3_step(st);
        if (r == SQLITE_DONE)
            continue; /* gone */
        if (r != SQLITE_ROW) {
            rc = vfi_sq_fail(s, err, "reading features");
            break;
        }
        vf_store_ref ref = refs[i];
        ref.pts = sqlite3_column_int64(st, 0);
        ref.t = sqlite3_column_double(st, 1);
        TRY(read_vec(s, st, 2, f16, dim, v, err));
        TRY(fn(user, i, path, &ref, v));
    }
fail:
    sqlite3_finalize(st);
    sqlite3_finalize(ext_st);
    vfi_sq_exec(s, "COMMIT", NULL);
    for (int i = 0; i < n_seen; i++)
        vfi_free(seen[i].path);
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
    vfi_sq_configure();
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        rc = vfi_sq_fail(s, err, "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(s->db, 1);
    vfi_sq_harden(s->db);
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
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s (%s)", path, vfi_sq_read_problem(s->db),
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
    } else if ((rc = vfi_sq_check_schema(s, version, err)) < 0) {
        goto fail;
    }
    /* Switching a new file to WAL takes it whole and does not wait for the busy handler: when
     * several workers open a new database at once, the others are asked again, for up to the
     * busy timeout. */
    for (int waited_ms = 0;; waited_ms += 10) {
        rc = vfi_sq_exec(s, "PRAGMA journal_mode=WAL", err);
        if (rc >= 0 || (sqlite3_errcode(s->db) & 0xff) != SQLITE_BUSY ||
            waited_ms >= BUSY_TIMEOUT_MS)
            break;
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
    if (rc < 0 ||
        (rc = vfi_sq_exec(s, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err)) < 0)
        goto fail;
    if (version < VF_STORE_SCHEMA_VERSION && (rc = vfi_sq_migrate(s, err)) < 0)
        goto fail;
    s->version = VF_STORE_SCHEMA_VERSION;
    *out = &s->base;
    return VF_OK;
fail:
    sq_close(&s->base);
    return rc;
}

static vf_status sq_batch(vf_store *store, int64_t ext_id, const vf_store_lease *fence, int n,
                          int dim, int f16, const int64_t *frame_index, const int64_t *pts,
                          const double *t, const double *t_end, const float *vecs, vf_err *err)
{
    uint16_t *half = NULL;
    if (f16 && !(half = vfi_mallocarray((size_t)dim, sizeof(uint16_t))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_sql *q = NULL;
    vf_status rc = vfi_sql_exec(store, "BEGIN IMMEDIATE", "starting a transaction", err);
    if (rc < 0)
        goto out;
    if ((rc = vfi_sql_fence(store, fence, NULL, err)) < 0 ||
        (rc = vfi_sql_prepare(store,
                              "INSERT OR REPLACE INTO features (extraction_id, frame_index, pts,"
                              " t, vec, t_end) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                              "writing features", &q, err)) < 0)
        goto rollback;
    for (int i = 0; i < n; i++) {
        const float *v = vecs + (size_t)i * dim;
        vfi_sql_reset(q);
        vfi_sql_int64(q, 1, ext_id);
        vfi_sql_int64(q, 2, frame_index[i]);
        vfi_sql_int64(q, 3, pts[i]);
        vfi_sql_double(q, 4, t[i]);
        if (f16) {
            for (int k = 0; k < dim; k++)
                half[k] = vfi_f32_to_f16(v[k]);
            bind_blob(q, 5, half, dim * 2, 1);
        } else {
            bind_blob(q, 5, v, dim * 4, 0); /* x86-64: little-endian */
        }
        if (t_end)
            vfi_sql_double(q, 6, t_end[i]);
        else
            vfi_sql_text(q, 6, NULL); /* a frame's vector */
        vfi_sql_step(q);
    }
    rc = vfi_sql_finish(q, err);
    q = NULL;
    /* the extraction's frames column follows the rows while it runs (an interrupted one then
     * says how far it got); vfi_store_finish sets it from the rows themselves */
    if (rc >= 0 && (rc = vfi_sql_count_frames(store, ext_id, n, err)) >= 0 &&
        (rc = vfi_sql_exec(store, "COMMIT", "writing features", err)) >= 0)
        goto out;
rollback:
    vfi_sql_finish(q, NULL);
    vfi_sql_exec(store, "ROLLBACK", "rolling back", NULL);
out:
    vfi_free(half);
    return rc;
}

static vf_status sq_inspect(const char *path, const vf_db_visitor *v, vf_err *err)
{
    sq_store tmp = {.base.ops = &vfi_store_sqlite, .path = (char *)path};
    char engine[64];
    int version;
    vf_status rc =
        vfi_sq_open_readonly(&tmp, &version, err); /* a newer schema: as far as it can be */
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
    .begin = vfi_sql_begin,
    .batch = sq_batch,
    .finish = vfi_sql_end,
    .add_run = vfi_sql_add_run,
    .clock = vfi_sq_clock,
    .enqueue = vfi_sq_enqueue,
    .offer = vfi_sq_offer,
    .claim = vfi_sq_claim,
    .renew = vfi_sq_renew,
    .release = vfi_sq_release,
    .work_states = vfi_sq_work_states,
    .merge = vfi_sq_merge,
    .models = vfi_sql_models,
    .vector_at = vfi_sql_vector_at,
    .nearest = vfi_sql_nearest,
    .vectors = vfi_sql_vectors,
    .vectors_at = sq_vectors_at,
    .index_put = vfi_sql_index_put,
    .indexes = vfi_sql_indexes,
};
