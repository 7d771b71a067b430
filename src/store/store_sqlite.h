/*
 * store_sqlite.h - the SQLite store (store.h's interface, for -o FILE): schema and migrations,
 * WAL, one transaction per batch, resumable extractions. The only module that sees SQLite. One
 * owner thread at a time (the pipeline's store thread while a run is going).
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
 * Added in user_version 3, leased work (store.h):
 *   queue(id, path UNIQUE, added_at)
 *   leases(id, path, model_id, sampling, state pending|claimed|done|failed, owner, token,
 *          expires, attempts, finished_at, error)   UNIQUE(path, model_id, sampling)
 *   (expires and finished_at: seconds since the epoch, this machine's clock)
 * Added in user_version 4, a view for readers:
 *   frames(path, model, layer, dim, dtype, sampling, t, frame_index, pts, vec, extraction_id)
 *          the vectors of done extractions only
 */
#ifndef VIDFEAT_STORE_SQLITE_H
#define VIDFEAT_STORE_SQLITE_H

#include "store/store.h"

/* The SQLite kind of store: a database file (WAL); claims every target that is not a URI. */
extern const vf_store_ops vfi_store_sqlite;

#endif /* VIDFEAT_STORE_SQLITE_H */
