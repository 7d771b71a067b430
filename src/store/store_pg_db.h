/*
 * store_pg_db.h - the PostgreSQL store's connection, shared by its files (private to them):
 * store_pg.c (the store: its schema, opening, writing extractions, reading vectors at refs, the
 * ops table), store_pg_work.c (leased work) and, below them, store_pg_db.c (the URI as shown,
 * failures in words, statements with text parameters, the SQL driver, a lost connection made
 * again).
 */
#ifndef VIDFEAT_STORE_PG_DB_H
#define VIDFEAT_STORE_PG_DB_H

#include <libpq-fe.h>

#include "core/status.h"
#include "store/sql.h"
#include "store/store.h"

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

/* Return CALL's status, repeating it while the connection is lost and made again. */
#define RETRYING(s, call)                                                                          \
    do {                                                                                           \
        double waited_ = 0.0;                                                                      \
        vf_status rc_;                                                                             \
        while ((rc_ = (call)) < 0 && rc_ != VF_ERR_LEASE && vfi_pg_reconnect((s), &waited_))       \
            ;                                                                                      \
        return rc_;                                                                                \
    } while (0)

/* The URI without its password (and any option that may carry one), in a new string. */
char *vfi_pg_display_name(const char *uri);
int vfi_pg_has_password(const char *uri);
/* msg (size bytes) with every copy of a password uri holds, as written or percent-decoded,
 * replaced by "(password)": libpq quotes the parts of a URI it cannot read in its message. */
void vfi_pg_scrub(const char *uri, char *msg, size_t size);
void vfi_pg_display(const char *uri, char *buf, size_t size);
/* libpq's message, first line only (it ends with a newline, and may add hints). */
const char *vfi_pg_pq_message(const char *msg, char *buf, size_t size);
/* libpq's notice processor (its default prints the raw message to stderr): a server warning
 * becomes one warning line naming the server; a FATAL or PANIC read outside a query, which
 * comes just before the server closes the session, is kept for the reconnection's line. */
void vfi_pg_on_notice(void *arg, const char *msg);
/* A libpq failure as *err naming the database and what (and the grant a role lacks). */
vf_status vfi_pg_fail(pg_store *s, vf_err *err, const char *what, const PGresult *res);
/* Run sql (no parameters, no rows wanted). */
vf_status vfi_pg_exec(pg_store *s, const char *sql, const char *what, vf_err *err);
/* The bytes of a column that holds a file name or a message naming one (see above): a new
 * string (vfi_free), NULL for SQL null or when out of memory (*oom set). */
char *vfi_pg_bytes(const PGresult *res, int row, int col, int *oom);
/* Run a statement with text parameters (NULL: SQL null); *out gets the result when it
 * succeeded (PQclear it). */
vf_status vfi_pg_query(pg_store *s, const char *sql, int n, const char *const *params,
                       const char *what, PGresult **out, vf_err *err);
void vfi_pg_forget_want(pg_store *s);
/* COPY the set's files (ord, path, given, size, mtime) into want; files NULL: the names kept
 * from the last offer (a new connection). */
vf_status vfi_pg_fill_want(pg_store *s, const vf_store_offer *files, int n, vf_err *err);
/* A new connection's settings: quiet notices, and a limit on idling inside a transaction. */
vf_status vfi_pg_session_settings(pg_store *s, vf_err *err);
/* A writer's temporary tables: the batch table, and the set to claim from (offered again). */
vf_status vfi_pg_session_tables(pg_store *s, vf_err *err);
/* A real[] in text form ("{1.5,-2,NaN}") into dim floats. */
vf_status vfi_pg_parse_vec(pg_store *s, const char *text, int dim, float *out, vf_err *err);

/* After a failed call: 1 when the connection was lost and has been made again (the call is to
 * be repeated), 0 when it was not lost or the server stayed away for RECONNECT_S seconds. */
int vfi_pg_reconnect(pg_store *s, double *waited);

/* The SQL driver (sql.h) over the store's connection. */
extern const vf_sql_driver vfi_pg_driver;

/* ---- leased work (store_pg_work.c): vf_store_ops entries ---- */
vf_status vfi_pg_clock(vf_store *store, double *now, vf_err *err);
vf_status vfi_pg_enqueue(vf_store *store, const char *const *names, int n, vf_err *err);
vf_status vfi_pg_offer(vf_store *store, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err);
vf_status vfi_pg_claim(vf_store *store, const vf_store_work *w, vf_store_claim *c, vf_err *err);
vf_status vfi_pg_renew(vf_store *store, const vf_store_work *w, const int64_t *ids, int n,
                       vf_err *err);
vf_status vfi_pg_release(vf_store *store, const vf_store_lease *l, int done, vf_err *err);
vf_status vfi_pg_work_states(vf_store *store, const vf_store_work *w, vf_store_state_fn fn,
                             void *user, vf_err *err);

#endif /* VIDFEAT_STORE_PG_DB_H */
