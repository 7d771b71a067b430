/*
 * store_sqlite_db.h - the SQLite store's database, shared by its files (private to them):
 * store_sqlite.c (the store: opening, the SQL driver, writing extractions, reading vectors at
 * refs, the ops table), store_sqlite_work.c (leased work), store_sqlite_merge.c (merge) and,
 * below them, store_sqlite_db.c (the schema and its migrations, a foreign database's schema
 * checked, a read-only open, the small helpers every statement uses).
 */
#ifndef VIDFEAT_STORE_SQLITE_DB_H
#define VIDFEAT_STORE_SQLITE_DB_H

#include <sqlite3.h>

#include "core/status.h"
#include "store/store.h"

typedef struct sq_store {
    vf_store base; /* first: what the interface hands around */
    sqlite3 *db;
    char *path;
    int want; /* claims come from the temporary table want (a list), not every lease of the key */
    int version; /* the schema's (a database opened for writing is brought to the newest) */
} sq_store;

#define VF_STORE_SCHEMA_VERSION 10 /* the schema this build makes */
#define BUSY_TIMEOUT_MS         5000

/* An extraction's id: never one given before (schema 6's extraction_ids, kept by a trigger). */
#define NEXT_EXTRACTION_ID "(SELECT last + 1 FROM extraction_ids)"

/* Fail with SQLite's message (naming the database and what), copied at once. */
vf_status vfi_sq_fail(sq_store *s, vf_err *err, const char *what);
/* Run a SQLite call; on failure record it and jump to the function's fail label (rc, s and err
 * in scope). */
#define CHECK_SQL(call, what)                                                                      \
    do {                                                                                           \
        if ((call) != SQLITE_OK) {                                                                 \
            rc = vfi_sq_fail(s, err, what);                                                        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Text, or SQL null for NULL (copied). */
void vfi_sq_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Run sql (no rows wanted); its failure in *err (err may be NULL). */
vf_status vfi_sq_exec(sq_store *s, const char *sql, vf_err *err);
/* Prepare sql into *st; VF_ERR_STORE naming what on failure. */
vf_status vfi_sq_prepare(sq_store *s, const char *sql, sqlite3_stmt **st, vf_err *err);
/* Step a statement that returns no rows, then finalize it. */
vf_status vfi_sq_run_once(sq_store *s, sqlite3_stmt *st, const char *what, vf_err *err);
/* Why a database could not even be read, in words a user can act on. */
const char *vfi_sq_read_problem(sqlite3 *db);
/* SQLite's defensive settings, and the collation "C" (byte order) sql.h's queries use. */
void vfi_sq_harden(sqlite3 *db);
/* Bring the schema up to VF_STORE_SCHEMA_VERSION in one transaction. */
vf_status vfi_sq_migrate(sq_store *s, vf_err *err);
/* Is the database's schema (at version) vidfeat's own? VF_ERR_STORE saying what differs. */
vf_status vfi_sq_check_schema(sq_store *s, int version, vf_err *err);
/* Open s->path read-only (defensively, its schema checked); its version into *version. */
vf_status vfi_sq_open_readonly(sq_store *s, int *version, vf_err *err);
/* SQLite configured for vidfeat (once per process, before the first connection): no memory
 * statistics, whose process-wide mutex every allocation takes. */
void vfi_sq_configure(void);

/* ---- leased work (store_sqlite_work.c): vf_store_ops entries ---- */
vf_status vfi_sq_clock(vf_store *store, double *now, vf_err *err);
vf_status vfi_sq_enqueue(vf_store *store, const char *const *names, int n, vf_err *err);
vf_status vfi_sq_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err);
vf_status vfi_sq_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err);
vf_status vfi_sq_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
                       vf_err *err);
vf_status vfi_sq_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err);
vf_status vfi_sq_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                             void *user, vf_err *err);

/* ---- merge (store_sqlite_merge.c) ---- */
vf_status vfi_sq_merge(vf_store *store, const char *from, vf_store_conflict_fn conflict, void *user,
                       int64_t *merged, vf_err *err);

#endif /* VIDFEAT_STORE_SQLITE_DB_H */
