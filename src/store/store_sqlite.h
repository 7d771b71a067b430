/*
 * store_sqlite.h - the feature database (SQLite): schema and migrations, WAL, one transaction per
 * batch, resumable extractions. The only module that sees SQLITE_* codes. One owner thread at a
 * time (the pipeline's store thread while a run is going).
 *
 * Schema (user_version 1):
 *   videos(id, path UNIQUE, size, mtime, content_hash, duration, width, height, rotation, codec,
 *          frame_rate)
 *   models(id, name, file_sha256, layer, dim, dtype, preprocessing)
 *   extractions(id, video_id, model_id, sampling, status running|done|failed, error, device,
 *               precision, batch_size, frames, started_at, finished_at, decode_fps, convert_fps,
 *               infer_fps, store_fps)             UNIQUE(video_id, model_id, sampling)
 *   features(extraction_id, frame_index, pts, t, vec)   vec: little-endian float32 (or float16)
 * Added in user_version 2 (a version-1 file is migrated when opened for writing):
 *   runs(id, started_at, host, vidfeat_version, device, device_name, backend, model, layer,
 *        precision, batch_size, threads, mode pipeline|per_frame|infer_only, input, frames,
 *        end_to_end_fps, decode_fps, convert_fps, infer_fps, store_fps, peak_rss_mb)
 */
#ifndef VIDFEAT_STORE_SQLITE_H
#define VIDFEAT_STORE_SQLITE_H

#include <stdint.h>

#include "core/status.h"
#include "vidfeat.h"

#define VF_STORE_SCHEMA_VERSION 2

typedef struct vf_store vf_store;

typedef struct vf_store_video {
    const char *path;
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
} vf_store_model;

typedef struct vf_store_run {
    const char *device;
    const char *precision;
    int batch_size;
} vf_store_run;

/* Open or create the database; migrates older schemas, refuses newer ones and non-databases
 * (VF_ERR_STORE, file untouched). */
vf_status vfi_store_open(const char *path, vf_store **out, vf_err *err);
void vfi_store_close(vf_store **ps);

/* Find or insert the model row. */
vf_status vfi_store_model(vf_store *s, const vf_store_model *m, int64_t *model_id, vf_err *err);

/* Is there a finished extraction of this file (same path, size and mtime) by this model with
 * this sampling, computed in this precision? (One computed otherwise is redone, and replaced.) */
vf_status vfi_store_is_done(vf_store *s, const char *path, int64_t size, double mtime,
                            int64_t model_id, const char *sampling, const char *precision,
                            int *done, vf_err *err);

/* Record the video and start its extraction (status running), replacing any earlier unfinished
 * or forced one with its features. */
vf_status vfi_store_begin(vf_store *s, const vf_store_video *v, int64_t model_id,
                          const char *sampling, const vf_store_run *run, int64_t *ext_id,
                          vf_err *err);

/* Write n vectors of dim floats in one transaction. */
vf_status vfi_store_batch(vf_store *s, int64_t ext_id, int n, int dim, int f16,
                          const int64_t *frame_index, const int64_t *pts, const double *t,
                          const float *vecs, vf_err *err);

/* Mark the extraction done (ok) or failed (with error) with its stage rates (decode, convert,
 * infer, store frames/s; may be NULL). The frame count is taken from the committed rows in the
 * same statement, so "done" always matches them. */
vf_status vfi_store_finish(vf_store *s, int64_t ext_id, int ok, const char *error,
                           const double *stage_fps, vf_err *err);

/* Append one benchmark result (vidfeat bench -o) to the runs table. */
vf_status vfi_store_add_run(vf_store *s, const vf_bench_record *r, const char *version,
                            vf_err *err);

/* Summarise a database read-only, one line per call of line(). */
vf_status vfi_store_describe(const char *path, void (*line)(void *user, const char *text),
                             void *user, vf_err *err);

/* ---- reading vectors back (similarity search) -------------------------------------------- */

/* Open an existing database read-only (it may be written by a run meanwhile: WAL). VF_ERR_STORE
 * when it is missing, not a vidfeat database or of a newer schema. */
vf_status vfi_store_open_read(const char *path, vf_store **out, vf_err *err);

/* Each model row that has vectors, with how many (m's strings are borrowed for the call). */
vf_status vfi_store_models(vf_store *s,
                           void (*row)(void *user, int64_t id, const vf_store_model *m,
                                       int64_t vectors),
                           void *user, vf_err *err);

/* Where a stored vector is. */
typedef struct vf_store_ref {
    int64_t extraction, frame_index, pts;
    double t;
} vf_store_ref;

/* The vector of model_id (stored as float16 when f16) nearest time t (seconds) in the video
 * stored as `path`, or as another name of the same file, into vec (dim floats) and *ref;
 * *found = 0 when there is none. */
vf_status vfi_store_vector_at(vf_store *s, int64_t model_id, int f16, const char *path, double t,
                              float *vec, int dim, vf_store_ref *ref, int *found, vf_err *err);

/* The k vectors of model_id (float16 when f16) with the highest cosine similarity to q (dim
 * floats), best first
 * (ties: by extraction, then frame), each passed to hit() with its video's path (borrowed for
 * the call); the vector at skip (NULL: none) is left out. Reads every vector once. */
vf_status vfi_store_nearest(vf_store *s, int64_t model_id, int f16, const float *q, int dim, int k,
                            const vf_store_ref *skip,
                            void (*hit)(void *user, const char *path, const vf_store_ref *ref,
                                        double similarity),
                            void *user, vf_err *err);

/* SQLite's version string. */
const char *vfi_store_version(void);

#endif /* VIDFEAT_STORE_SQLITE_H */
