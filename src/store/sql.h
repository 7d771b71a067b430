/*
 * sql.h - SQL over a store's connection, whatever the database, in the manner of Fossil's db_*
 * calls: a statement prepared from SQL with ?N parameters (SQLite's syntax; the PostgreSQL
 * driver sends $N), its parameters bound, stepped a row at a time, its columns read by type. The
 * first failure sticks to the statement (its message names the database and what was being
 * done) and steps after it find no row, so a caller checks once, when it finishes the statement.
 * Reads (sql.c) and the writes of an extraction (sql_write.c) are written once above the
 * drivers; leased work and a batch's bulk write are each driver's own, on the same calls where
 * the dialects allow.
 *
 * Each SQL store provides a driver (vf_store_ops.sql: store_sqlite.c, store_pg.c); the queries
 * that read the same in both dialects are written once above them (sql.c). What both dialects
 * share here: ?N parameters, standard joins and ordering, COLLATE "C" for byte order (SQLite
 * has a collation of that name registered), text in and out as the names it holds (a
 * PostgreSQL database keeps names that are not UTF-8 as utf8.h writes them; the driver gives
 * them back as bytes), a stored vector read by its driver (a BLOB in SQLite, real[] in
 * PostgreSQL).
 */
#ifndef VIDFEAT_SQL_H
#define VIDFEAT_SQL_H

#include <stdint.h>

#include "core/status.h"
#include "store/store.h"

/* Rows come as they are stepped (memory does not grow with them), and one connection runs one
 * statement at a time: another statement may start only once this one is finished, reset or
 * has given its last row. Unless, for a statement whose rows are few: */
enum {
    VF_SQL_ALL_ROWS = 1, /* its rows are all read when it runs; others may run meanwhile */
};

/* A statement; every driver's begins with its driver. */
typedef struct vf_sql {
    const struct vf_sql_driver *drv;
} vf_sql;

typedef struct vf_sql_driver {
    /* A statement of sql on the store's connection; `what` names the work in messages ("reading
     * features"); flags VF_SQL_*. VF_OK, or the failure in *err and *out NULL. */
    vf_status (*prepare)(vf_store *s, const char *sql, const char *what, unsigned flags,
                         vf_sql **out, vf_err *err);
    /* Parameter i (from 1): an integer, a number, a text or (NULL) SQL null. Text is copied. */
    void (*bind_int64)(vf_sql *q, int i, int64_t v);
    void (*bind_double)(vf_sql *q, int i, double v);
    void (*bind_text)(vf_sql *q, int i, const char *v);
    /* 1: a row is there to read; 0: no more rows (the statement ran to its end, or failed: the
     * failure is kept for finish). */
    int (*step)(vf_sql *q);
    /* Ready to run again (with new bindings); a kept failure stays. */
    void (*reset)(vf_sql *q);
    /* Column col (from 0) of the row: read until the next step. text: NULL for SQL null. */
    int64_t (*int64)(vf_sql *q, int col);
    double (*real)(vf_sql *q, int col);
    const char *(*text)(vf_sql *q, int col);
    /* A stored vector of dim floats (stored as float16 when f16, where the store does that) into
     * out; a failure (a vector of another size) is kept and returned. */
    vf_status (*vec)(vf_sql *q, int col, int f16, int dim, float *out);
    /* Free the statement (NULL: nothing); its kept failure into *err (err may be NULL), returned,
     * or VF_OK. */
    vf_status (*finish)(vf_sql *q, vf_err *err);
    /* The statement that begins a read-only transaction seeing one snapshot. */
    const char *snapshot;
    /* The statement that begins a write transaction (taking the write lock at once, where the
     * database has one). */
    const char *write;
    /* A new extraction's id, as SQL: never one given before. */
    const char *new_extraction_id;
    /* What a fence's SELECT of its lease row ends with to hold the row until the transaction
     * ends ("" where the write lock already does). */
    const char *hold_row;
    /* Now, in seconds since 1970, as SQL: the clock leases are timed by, where that is the
     * server's; NULL where it is this machine's (the value is bound). */
    const char *epoch_now;
    /* The schema version of the store's database (store.h: older ones are read too). */
    int (*schema)(vf_store *s);
    /* The database as messages name it. */
    const char *(*label)(vf_store *s);
} vf_sql_driver;

static inline vf_status vfi_sql_prepare(vf_store *s, const char *sql, const char *what,
                                        vf_sql **out, vf_err *err)
{
    return s->ops->sql->prepare(s, sql, what, 0, out, err);
}
static inline vf_status vfi_sql_prepare_all(vf_store *s, const char *sql, const char *what,
                                            vf_sql **out, vf_err *err)
{
    return s->ops->sql->prepare(s, sql, what, VF_SQL_ALL_ROWS, out, err);
}
static inline void vfi_sql_int64(vf_sql *q, int i, int64_t v)
{
    q->drv->bind_int64(q, i, v);
}
static inline void vfi_sql_double(vf_sql *q, int i, double v)
{
    q->drv->bind_double(q, i, v);
}
static inline void vfi_sql_text(vf_sql *q, int i, const char *v)
{
    q->drv->bind_text(q, i, v);
}
static inline int vfi_sql_step(vf_sql *q)
{
    return q->drv->step(q);
}
static inline void vfi_sql_reset(vf_sql *q)
{
    q->drv->reset(q);
}
static inline int64_t vfi_sql_col_int64(vf_sql *q, int col)
{
    return q->drv->int64(q, col);
}
static inline double vfi_sql_col_real(vf_sql *q, int col)
{
    return q->drv->real(q, col);
}
static inline const char *vfi_sql_col_text(vf_sql *q, int col)
{
    return q->drv->text(q, col);
}
static inline vf_status vfi_sql_col_vec(vf_sql *q, int col, int f16, int dim, float *out)
{
    return q->drv->vec(q, col, f16, dim, out);
}
/* Accepts NULL. */
static inline vf_status vfi_sql_finish(vf_sql *q, vf_err *err)
{
    return q ? q->drv->finish(q, err) : VF_OK;
}

/* Run a bound statement to its end (no rows wanted) and free it: vfi_sql_finish's result. */
static inline vf_status vfi_sql_run(vf_sql *q, vf_err *err)
{
    while (vfi_sql_step(q))
        ;
    return vfi_sql_finish(q, err);
}

/* Run sql once (no rows wanted): BEGIN, COMMIT, ... */
vf_status vfi_sql_exec(vf_store *s, const char *sql, const char *what, vf_err *err);
/* Run bound statement q of store s, whose one row holds an integer (an id RETURNING gives),
 * into *out, and free it; no row is a failure naming `what`. */
vf_status vfi_sql_one_int64(vf_store *s, vf_sql *q, const char *what, int64_t *out, vf_err *err);

/* ---- the calls written once for every SQL store (sql.c): vf_store_ops entries ---- */
vf_status vfi_sql_model(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err);
vf_status vfi_sql_is_done(vf_store *s, const vf_store_file *f, int64_t model_id,
                          const char *sampling, const char *precision, int *done, vf_err *err);
vf_status vfi_sql_add_run(vf_store *s, const vf_run_record *r, const char *version, vf_err *err);
vf_status vfi_sql_models(vf_store *s, vf_store_model_fn row, void *user, vf_err *err);
vf_status vfi_sql_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, int by_name,
                            double t, float *vec, int dim, vf_store_ref *ref, int *found,
                            vf_err *err);
vf_status vfi_sql_nearest(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                          const vf_store_ref *skip, vf_store_hit_fn hit, void *user, vf_err *err);
vf_status vfi_sql_vectors(vf_store *s, int64_t model_id, int f16, int dim, vf_store_want_fn want,
                          vf_store_vector_fn fn, void *user, vf_err *err);
vf_status vfi_sql_index_put(vf_store *s, const vf_store_index *ix, vf_err *err);
vf_status vfi_sql_indexes(vf_store *s, int64_t model_id, vf_store_index_fn fn, void *user,
                          vf_err *err);

/* ---- the writes every SQL store makes the same way (sql_write.c) ---- */

/* Inside a write transaction: VF_OK while fence (NULL: none) is still this worker's claim (the
 * lease row held until the transaction ends), VF_ERR_LEASE when it has moved on. *finished (may
 * be NULL) is set instead when the claim already ended with this token (a finish repeated
 * after its reply was lost). */
vf_status vfi_sql_fence(vf_store *s, const vf_store_lease *fence, int *finished, vf_err *err);
/* vf_store_ops.begin and .finish, each one transaction (a driver that reconnects repeats them:
 * each is safe to repeat). */
vf_status vfi_sql_begin(vf_store *s, const vf_store_video *v, int64_t model_id,
                        const char *sampling, const vf_store_run *run, const vf_store_lease *fence,
                        int64_t *ext_id, vf_err *err);
vf_status vfi_sql_end(vf_store *s, int64_t ext_id, const vf_store_lease *fence,
                      const vf_store_end *e, vf_err *err);
/* Inside a batch's transaction: the extraction's running frame count raised by n (finish sets
 * it from the rows). */
vf_status vfi_sql_count_frames(vf_store *s, int64_t ext_id, int n, vf_err *err);

/* What the database holds (vf_db_inspect), from an open store, in one snapshot: the summary
 * (database and engine as given), each extraction, each benchmark run. */
vf_status vfi_sql_inspect(vf_store *s, const char *database, const char *engine,
                          const vf_db_visitor *v, vf_err *err);

#endif /* VIDFEAT_SQL_H */
