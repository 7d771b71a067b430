/*
 * store.h - where feature vectors are kept, behind one interface: an ops table per kind of
 * database and a registry that picks the kind from the place a user names (-o): a file path is
 * SQLite (store_sqlite.c). The pipeline, similar, info and bench reach storage only through the
 * vfi_store_* calls here; what a record means (the sampling key, the model's and the file's
 * identity, when a file counts as done) is decided once, store-neutrally, in record.h.
 *
 * A store is used by one thread at a time (the pipeline's store thread while a run is going).
 * Every call fails with VF_ERR_STORE and a message naming the database (VF_ERR_NOMEM when out
 * of memory); strings passed in are borrowed for the call.
 *
 * The records, whatever the store (SQLite's schema: store_sqlite.h):
 *   video       a file under its absolute name, with its size, mtime and content hash
 *   model       a network, file digest, layer, dimension, dtype and preprocessing
 *   extraction  one video by one model with one sampling: running | done | failed, the device,
 *               precision and batch it ran with, its frame count and stage rates
 *   feature     one vector of an extraction: frame index, pts, t (seconds)
 *   run         one benchmark result (vidfeat bench -o)
 *   queue       a file registered as work (vidfeat enqueue), under the name it is recorded by
 *   lease       a file's work for one model and sampling: pending | claimed (by an owner, until
 *               a time, with a fencing token) | done | failed, the attempts that never ended
 *
 * Leased work: each worker works through a set of files (the inputs it was given, or every
 * queued file), claiming one at a time. A claim is one transaction that takes a file nobody
 * holds (or whose holder's lease ran out) and raises its token; the holder renews its leases
 * while it works, and begin, batch and finish are each refused (VF_ERR_LEASE) unless the token
 * is still the one it claimed with, so a worker that wakes up after its lease was taken over
 * writes nothing. finish ends the lease in the same transaction as the extraction. A file whose
 * holders died max_attempts times in a row is marked failed instead of claimed again.
 */
#ifndef VIDFEAT_STORE_H
#define VIDFEAT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "media/shots.h"

typedef struct vf_store_ops vf_store_ops;
typedef struct vf_store_end vf_store_end; /* how an extraction ended (vfi_store_finish) */

/* Each kind of store's handle begins with this. */
typedef struct vf_store {
    const vf_store_ops *ops;
} vf_store;

typedef enum vf_store_mode {
    VF_STORE_WRITE, /* created if missing, migrated to the current schema */
    VF_STORE_READ,  /* must exist; never written (a run may be writing it meanwhile) */
} vf_store_mode;

typedef struct vf_store_video {
    const char *path; /* the name it is recorded under (record.h) */
    int64_t size;
    double mtime;
    const char *content_hash;
    double duration;
    int width, height, rotation;
    const char *codec;
    double frame_rate;
} vf_store_video;

typedef struct vf_store_model {
    const char *name;
    const char *file_sha256;
    const char *layer;
    int dim;
    int f16; /* vectors stored as float16 */
    const char *preprocessing;
    const char *weights; /* vf_weights_str, NULL when unknown */
    /* a CLIP model: the SHA-256 of the text tower paired with it (schema 7), NULL when not
     * known; recorded where a row has none */
    const char *text_sha256;
} vf_store_model;

typedef struct vf_store_run {
    const char *device;
    const char *precision;
    int batch_size;
} vf_store_run;

/* A file as the resume rule compares it: recorded under name, or under the name it was given
 * (databases written before names were absolute). */
typedef struct vf_store_file {
    const char *name;
    int64_t size;
    double mtime;
} vf_store_file;

/* Where a stored vector is. */
typedef struct vf_store_ref {
    int64_t extraction, frame_index, pts;
    double t;
} vf_store_ref;

/* One benchmark configuration's result: vidfeat.h's vf_bench_record. */
typedef vf_bench_record vf_run_record;

/* A claim: which lease, and the token that fences its writes. */
typedef struct vf_store_lease {
    int64_t id, token;
} vf_store_lease;

/* One worker's work: the key its files are claimed under and how. */
typedef struct vf_store_work {
    int64_t model_id;
    const char *sampling;
    const char *precision; /* what "done" was computed in (the resume rule) */
    const char *owner;     /* this worker (core/owner.h) */
    double lease_s;        /* a claim lasts this long unless renewed */
    int max_attempts;      /* claims in a row whose holder died before the file is failed */
    int force;             /* claim files done or failed before `since` too, attempts or not */
    /* the store's clock when the worker began (vfi_store_clock); files finished before it may
     * be claimed again (they were found not done, or it is a rerun of failures), files finished
     * by others since are not. < 0: never (queue workers: done and failed files stay so). */
    double since;
} vf_store_work;

/* A worker's file as it is offered for work: its name, the name it was given (old databases:
 * NULL when the same), and its size and mtime for the resume rule. */
typedef struct vf_store_offer {
    const char *name, *given;
    int64_t size;
    double mtime;
} vf_store_offer;

typedef enum vf_claim_kind {
    VF_CLAIM_NONE,    /* nothing left to claim, and nobody else holds one of the set */
    VF_CLAIM_WAIT,    /* nothing to claim now; other workers hold some of the set */
    VF_CLAIM_OK,      /* claimed: lease, name and index are set */
    VF_CLAIM_GAVE_UP, /* the file's holders died max_attempts times: now failed (error says so) */
} vf_claim_kind;

typedef struct vf_store_claim {
    vf_claim_kind kind;
    vf_store_lease lease;
    int index;  /* its index in the offered set; -1 for a queue worker's set */
    char *name; /* the recorded name (vfi_free it) */
    char error[256];
} vf_store_claim;

/* How a worker's file ended where the worker did not see it (vfi_store_work_states). */
typedef void (*vf_store_state_fn)(void *user, int index, const char *state, const char *error);

/* A file done in both databases of a merge, with other vectors. */
typedef void (*vf_store_conflict_fn)(void *user, const char *path, const char *sampling);

/* One stored vector of a done extraction as vfi_store_vectors reads it (strings and vec borrowed
 * for the call). */
typedef struct vf_store_vector {
    const char *path, *sampling; /* the extraction's file (as recorded) and sampling */
    int64_t frames;              /* the extraction's vector count */
    vf_store_ref ref;
    const float *vec;     /* dim floats */
    double t_end;         /* a clip model's window: its last frame's time; NaN for a frame */
    const vf_shot *shots; /* the extraction's shots (--shots, schema 10), in order; NULL: none */
    int n_shots;
} vf_store_vector;

/* < 0 stops the reading, which returns it */
typedef vf_status (*vf_store_vector_fn)(void *user, const vf_store_vector *v);
/* Which extractions vfi_store_vectors reads: told each one's id and vector count before its
 * vectors; 0 passes over them (they are not read). */
typedef int (*vf_store_want_fn)(void *user, int64_t extraction, int64_t frames);
/* One vector vfi_store_vectors_at found: the i-th ref asked for, its video's path (as recorded)
 * and the vector (borrowed for the call). < 0 stops the reading, which returns it. */
typedef vf_status (*vf_store_ref_fn)(void *user, int i, const char *path, const vf_store_ref *ref,
                                     const float *vec);

/* A search index over a model row's vectors, as the database records it (schema 6; strings
 * borrowed for the call). */
typedef struct vf_store_index {
    const char *path;       /* the index file, where it was built (absolute) */
    int64_t model_id;       /* the model row (and so layer) it covers */
    const char *kind;       /* FAISS's words for it ("IVF1024,Flat") */
    int64_t vectors, files; /* what it held when built */
    const char *built_at;   /* ISO 8601, UTC */
    const char *host;       /* the machine it was built on */
    const char *sha256;     /* the file's SHA-256 when written (schema 8); NULL: not recorded */
} vf_store_index;
typedef void (*vf_store_index_fn)(void *user, const vf_store_index *ix);

typedef void (*vf_store_model_fn)(void *user, int64_t id, const vf_store_model *m, int64_t vectors);
typedef void (*vf_store_hit_fn)(void *user, const char *path, const vf_store_ref *ref,
                                double similarity);

/* What a kind of store provides; see the vfi_store_* calls below for each one's contract. */
struct vf_store_ops {
    const char *name;
    /* (NULL: not an SQL store) the driver of sql.h, through which the reads written once for
     * every SQL store (sql.c) run */
    const struct vf_sql_driver *sql;
    /* 1 when target (what the user gave as -o) names a store of this kind */
    int (*claims)(const char *target);
    /* target as messages may show it (a URI without its password) into buf */
    void (*display)(const char *target, char *buf, size_t size);
    /* (may be NULL: never) Does the name itself hold a password? */
    int (*has_password)(const char *target);
    vf_status (*open)(const char *target, vf_store_mode mode, vf_store **out, vf_err *err);
    void (*close)(vf_store *s);
    vf_status (*inspect)(const char *target, const vf_db_visitor *v, vf_err *err);
    void (*version)(char *buf, size_t size); /* the library's version */

    vf_status (*model)(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err);
    vf_status (*is_done)(vf_store *s, const vf_store_file *f, int64_t model_id,
                         const char *sampling, const char *precision, int *done, vf_err *err);
    vf_status (*begin)(vf_store *s, const vf_store_video *v, int64_t model_id, const char *sampling,
                       const vf_store_run *run, const vf_store_lease *fence, int64_t *ext_id,
                       vf_err *err);
    vf_status (*batch)(vf_store *s, int64_t ext_id, const vf_store_lease *fence, int n, int dim,
                       int f16, const int64_t *frame_index, const int64_t *pts, const double *t,
                       const double *t_end, const float *vecs, vf_err *err);
    vf_status (*finish)(vf_store *s, int64_t ext_id, const vf_store_lease *fence,
                        const vf_store_end *e, vf_err *err);
    vf_status (*add_run)(vf_store *s, const vf_run_record *r, const char *version, vf_err *err);

    vf_status (*clock)(vf_store *s, double *now, vf_err *err);
    vf_status (*enqueue)(vf_store *s, const char *const *names, int n, vf_err *err);
    vf_status (*offer)(vf_store *s, const vf_store_work *w, const vf_store_offer *files, int n,
                       unsigned char *done, vf_err *err);
    vf_status (*claim)(vf_store *s, const vf_store_work *w, vf_store_claim *c, vf_err *err);
    vf_status (*renew)(vf_store *s, const vf_store_work *w, const int64_t *ids, int n, vf_err *err);
    vf_status (*release)(vf_store *s, const vf_store_lease *l, int done, vf_err *err);
    vf_status (*work_states)(vf_store *s, const vf_store_work *w, vf_store_state_fn fn, void *user,
                             vf_err *err);
    /* NULL where the kind cannot merge */
    vf_status (*merge)(vf_store *s, const char *from, vf_store_conflict_fn conflict, void *user,
                       int64_t *merged, vf_err *err);

    vf_status (*models)(vf_store *s, vf_store_model_fn row, void *user, vf_err *err);
    vf_status (*vector_at)(vf_store *s, int64_t model_id, int f16, const char *path, int by_name,
                           double t, float *vec, int dim, vf_store_ref *ref, int *found,
                           vf_err *err);
    vf_status (*nearest)(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                         const vf_store_ref *skip, vf_store_hit_fn hit, void *user, vf_err *err);
    vf_status (*vectors)(vf_store *s, int64_t model_id, int f16, int dim, vf_store_want_fn want,
                         vf_store_vector_fn fn, void *user, vf_err *err);
    vf_status (*vectors_at)(vf_store *s, int64_t model_id, int f16, int dim,
                            const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                            vf_err *err);
    vf_status (*index_put)(vf_store *s, const vf_store_index *ix, vf_err *err);
    vf_status (*indexes)(vf_store *s, int64_t model_id, vf_store_index_fn fn, void *user,
                         vf_err *err);
};

/* The length of SCHEME when target is a URI "SCHEME://...", else 0 (a file path). */
size_t vfi_store_uri_scheme(const char *target);

/* The models query both stores run (standard SQL, no parameters) for a database at schema
 * `version`, read as it is: columns id, name, file_sha256, layer, dim, dtype, preprocessing,
 * count of vectors, text_sha256, weights (NULL where the schema is older than the column). */
void vfi_store_models_sql(int version, char *buf, size_t size);

/* The kind of store target names, or NULL (err says why: a URI no compiled-in store takes). */
const vf_store_ops *vfi_store_kind(const char *target, vf_err *err);

/* target as it may be shown: a URI without its password (an unknown kind: as it is). */
const char *vfi_store_display(const char *target, char *buf, size_t size);
/* Does the database's name hold a password (a postgresql:// URI with one)? 1 yes, 0 no. */
int vfi_store_has_password(const char *target);

/* Open the store target names. WRITE: created if missing, older schemas migrated, newer ones and
 * foreign databases refused untouched. READ: it must exist and be a vidfeat database of this
 * version or older. */
vf_status vfi_store_open(const char *target, vf_store_mode mode, vf_store **out, vf_err *err);
/* Accepts NULL and *ps == NULL; sets *ps to NULL. */
void vfi_store_close(vf_store **ps);

/* What a database holds, as vidfeat.h's records (vf_db_inspect): read-only, one snapshot, rows
 * as they come (a newer schema as far as it can be read). */
vf_status vfi_store_inspect(const char *target, const vf_db_visitor *v, vf_err *err);

/* Find or insert the model row. */
vf_status vfi_store_model(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err);

/* Is there a finished extraction of this file (same name, size and mtime) by this model with
 * this sampling, computed in this precision? (One computed otherwise is redone, and replaced.) */
vf_status vfi_store_is_done(vf_store *s, const vf_store_file *f, int64_t model_id,
                            const char *sampling, const char *precision, int *done, vf_err *err);

/* Record the video and start its extraction (status running), replacing any earlier unfinished
 * or forced one with its features. fence: the lease the file is held by (NULL: not leased);
 * VF_ERR_LEASE, with nothing written, when it is no longer this worker's. */
vf_status vfi_store_begin(vf_store *s, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run,
                          const vf_store_lease *fence, int64_t *ext_id, vf_err *err);

/* Write n vectors of dim floats in one transaction (fenced as begin). */
vf_status vfi_store_batch(vf_store *s, int64_t ext_id, const vf_store_lease *fence, int n, int dim,
                          int f16, const int64_t *frame_index, const int64_t *pts, const double *t,
                          const double *t_end, const float *vecs, vf_err *err);

/* How an extraction ends (vfi_store_finish). */
enum {
    VF_END_FAILED = 0,  /* failed: the rows written so far stay, not done */
    VF_END_DONE = 1,    /* every vector is written */
    VF_END_REFUSED = 2, /* failed, and its rows go: they came from what it may not read */
};

/* How an extraction ended, what vfi_store_finish records (everything borrowed). */
struct vf_store_end {
    int end;                 /* VF_END_* */
    const char *error;       /* why it failed, or what a done file lacked; NULL or "": nothing */
    const double *stage_fps; /* decode, convert, infer, store frames/s; NULL: not measured */
    const vf_shot *shots;    /* a done extraction's shots (--shots, schema 10); NULL: none */
    int n_shots;
};

/* Mark the extraction done or failed as e says, with its stage rates and (done) its shots. The
 * frame count is taken from the committed rows in the same step, so "done" always matches them.
 * Fenced as begin; the lease ends done or failed in the same transaction. */
vf_status vfi_store_finish(vf_store *s, int64_t ext_id, const vf_store_lease *fence,
                           const vf_store_end *e, vf_err *err);

/* Append one benchmark result, with the time, host name and vidfeat version. */
vf_status vfi_store_add_run(vf_store *s, const vf_run_record *r, const char *version, vf_err *err);

/* ---- leased work (see the top of this file) ---- */

/* The store's clock in seconds since the epoch: the server's for a server (every machine's
 * leases are timed by one clock), this machine's for a file. */
vf_status vfi_store_clock(vf_store *s, double *now, vf_err *err);

/* Register files as work (their recorded names) for any model; files already registered have
 * their leases made pending again, so that queue workers look at them once more. */
vf_status vfi_store_enqueue(vf_store *s, const char *const *names, int n, vf_err *err);

/* Make files[0..n) this connection's set to claim from (files NULL: every queued file). Unless
 * w->force, files done by the resume rule are marked in done[] (may be NULL with files NULL)
 * and left out. Each file of the set gets its lease row (pending) if it has none. */
vf_status vfi_store_offer(vf_store *s, const vf_store_work *w, const vf_store_offer *files, int n,
                          unsigned char *done, vf_err *err);

/* Claim the first claimable file of the set, in its order (see vf_claim_kind). Holders on this
 * machine that are gone (core/owner.h) lose their leases at once. */
vf_status vfi_store_claim(vf_store *s, const vf_store_work *w, vf_store_claim *c, vf_err *err);

/* Extend the leases ids[0..n) this worker holds by w->lease_s from now. */
vf_status vfi_store_renew(vf_store *s, const vf_store_work *w, const int64_t *ids, int n,
                          vf_err *err);

/* End a claim without an extraction: done (the file was found done already), or given back
 * pending as if never claimed (a run stopped before finishing it). Nothing happens when the
 * lease has moved on. */
vf_status vfi_store_release(vf_store *s, const vf_store_lease *l, int done, vf_err *err);

/* The state ("pending", "claimed", "done", "failed") and error of each file of the set. */
vf_status vfi_store_work_states(vf_store *s, const vf_store_work *w, vf_store_state_fn fn,
                                void *user, vf_err *err);

/* Copy into s the done extractions of the database `from` (a file of s's kind), with their
 * models, videos and vectors: each file once. A file done in both with the same vectors stays
 * as it is; with other vectors it is a conflict: s's is kept and conflict() told (path,
 * sampling). *merged: the extractions copied. One transaction. */
vf_status vfi_store_merge(vf_store *s, const char *from, vf_store_conflict_fn conflict, void *user,
                          int64_t *merged, vf_err *err);

/* Each model row that has vectors, with how many (m's strings are borrowed for the call). */
vf_status vfi_store_models(vf_store *s, vf_store_model_fn row, void *user, vf_err *err);

/* The vector of model_id (stored as float16 when f16) nearest time t (seconds) in the video
 * stored as `path` into vec (dim floats) and *ref; *found = 0 when there is none. Unless
 * by_name, also as another name of the same file (a link, a relative name): every stored name
 * of the model is then resolved when path's is not there, a cost that grows with the archive and
 * a look at the file system a server's client must not have (by_name: one indexed look-up). */
vf_status vfi_store_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, int by_name,
                              double t, float *vec, int dim, vf_store_ref *ref, int *found,
                              vf_err *err);

/* The k vectors of model_id (float16 when f16) with the highest cosine similarity to q (dim
 * floats), best first (ties: by extraction, then frame), each passed to hit() with its video's
 * path (borrowed for the call); the vector at skip (NULL: none) is left out. Reads every vector
 * once. */
vf_status vfi_store_nearest(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                            const vf_store_ref *skip, vf_store_hit_fn hit, void *user, vf_err *err);

/* Every vector of model_id's done extractions (float16 when f16, dim floats), one call of fn
 * each: the extractions by path, then sampling; each one's vectors by frame index. want (may be
 * NULL: all) chooses the extractions read. One snapshot: a run writing meanwhile adds nothing
 * half-done. Memory does not grow with the table. */
vf_status vfi_store_vectors(vf_store *s, int64_t model_id, int f16, int dim, vf_store_want_fn want,
                            vf_store_vector_fn fn, void *user, vf_err *err);

/* The vectors at refs[0..n) (each's extraction and frame_index; n <= VF_STORE_MAX_REFS) that
 * model_id's done extractions still hold, one call of fn each (in no set order; one that is
 * gone - its extraction redone, removed, not done - is not called): what a search index's
 * candidates are checked and ranked by. */
#define VF_STORE_MAX_REFS 10000
vf_status vfi_store_vectors_at(vf_store *s, int64_t model_id, int f16, int dim,
                               const vf_store_ref *refs, int n, vf_store_ref_fn fn, void *user,
                               vf_err *err);

/* Record a search index (replacing the record of the same path). Needs a database open for
 * writing. */
vf_status vfi_store_index_put(vf_store *s, const vf_store_index *ix, vf_err *err);
/* The indexes recorded for model_id (< 0: all), by path; none in a database older than schema
 * 6. */
vf_status vfi_store_indexes(vf_store *s, int64_t model_id, vf_store_index_fn fn, void *user,
                            vf_err *err);

/* "NAME VERSION" of each compiled-in kind of store, joined by ", ", into buf; returns buf. */
const char *vfi_store_versions(char *buf, size_t size);

#endif /* VIDFEAT_STORE_H */
