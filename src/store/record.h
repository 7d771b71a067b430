/*
 * record.h - what a stored record means, the same for every kind of store: the sampling key, the
 * model's identity, the file's identity and the rule that decides a file is already done.
 * Any thread.
 */
#ifndef VIDFEAT_RECORD_H
#define VIDFEAT_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/status.h"
#include "engine/manifest.h"
#include "store/store.h"
#include "vidfeat.h"

/* The frames view (schema 4 in both stores): each vector of a done extraction with what it is,
 * the one place a reader needs (docs/output.md). Standard SQL that SQLite and PostgreSQL both
 * take, so the two views are the same. */
#define VFI_FRAMES_VIEW_SQL                                                                        \
    "CREATE VIEW frames AS SELECT v.path AS path, m.name AS model, m.layer AS layer,"              \
    " m.dim AS dim, m.dtype AS dtype, e.sampling AS sampling, f.t AS t,"                           \
    " f.frame_index AS frame_index, f.pts AS pts, f.vec AS vec, e.id AS extraction_id"             \
    " FROM features f JOIN extractions e ON e.id = f.extraction_id"                                \
    " JOIN videos v ON v.id = e.video_id JOIN models m ON m.id = e.model_id"                       \
    " WHERE e.status = 'done';"

/* Schema 9: a clip model's vectors are windows of frames: each row's frame_index, pts and t are
 * its first frame's, t_end its last frame's time (NULL for a frame's vector); the frames view
 * shows it. */
#define VFI_WINDOW_END_SQL                                                                         \
    "ALTER TABLE features ADD COLUMN t_end double precision;"                                      \
    "DROP VIEW frames;"                                                                            \
    "CREATE VIEW frames AS SELECT v.path AS path, m.name AS model, m.layer AS layer,"              \
    " m.dim AS dim, m.dtype AS dtype, e.sampling AS sampling, f.t AS t,"                           \
    " f.frame_index AS frame_index, f.pts AS pts, f.vec AS vec, e.id AS extraction_id,"            \
    " f.t_end AS t_end"                                                                            \
    " FROM features f JOIN extractions e ON e.id = f.extraction_id"                                \
    " JOIN videos v ON v.id = e.video_id JOIN models m ON m.id = e.model_id"                       \
    " WHERE e.status = 'done';"

/* What vf_db_inspect reads, the same SQL in both stores: the counts (one row), every
 * extraction with its model (each store appends its ORDER BY: by path in byte order, then model)
 * and the benchmark runs in the order they were recorded. */
/* vf_db_summary's counts of a database at schema `version`: files queued (schema 3) and not
 * started by any model are the pending ones (older schemas have no queue: 0). */
#define VFI_INSPECT_COUNTS_SQL_AT(version)                                                         \
    ((version) >= 3 ? VFI_INSPECT_COUNTS_SQL(VFI_INSPECT_PENDING_SQL) : VFI_INSPECT_COUNTS_SQL("0"))
#define VFI_INSPECT_COUNTS_SQL(pending)                                                            \
    "SELECT (SELECT count(*) FROM videos), (SELECT count(*) FROM models),"                         \
    " (SELECT count(*) FROM extractions WHERE status = 'done'),"                                   \
    " (SELECT count(*) FROM extractions WHERE status = 'failed'),"                                 \
    " (SELECT count(*) FROM extractions WHERE status = 'running'),"                                \
    " (SELECT count(*) FROM features), " pending
#define VFI_INSPECT_PENDING_SQL                                                                    \
    "(SELECT count(*) FROM queue q WHERE NOT EXISTS (SELECT 1 FROM videos v"                       \
    " JOIN extractions e ON e.video_id = v.id WHERE v.path = q.path))"
#define VFI_INSPECT_EXTRACTIONS_SQL(weights)                                                       \
    "SELECT e.status, e.frames, coalesce(e.infer_fps, 0), m.name, m.layer, m.dim, m.dtype,"        \
    " e.sampling, v.path, e.error, " weights " FROM extractions e"                                 \
    " JOIN videos v ON v.id = e.video_id JOIN models m ON m.id = e.model_id"
/* Schema 5 in both stores: the models column saying whose weights (vf_weights_str; NULL when
 * not known). Inspecting an older schema reads NULL in its place: the extractions query for a
 * database at `schema`, with the store's ORDER BY appended. */
#define VFI_WEIGHTS_COLUMN_SQL "ALTER TABLE models ADD COLUMN weights TEXT;"
/* Schema 7: a CLIP model's text tower paired with the image tower a row's vectors came from
 * (its SHA-256; NULL when not known), what a text query is checked against. */
#define VFI_TEXT_COLUMN_SQL "ALTER TABLE models ADD COLUMN text_sha256 TEXT;"
/* Schema 8: each index file's SHA-256 when it was written, checked before a search trusts it
 * (an index file is untrusted: one whose id map was changed would rank the wrong frames). */
#define VFI_INDEX_SHA_COLUMN_SQL "ALTER TABLE indexes ADD COLUMN sha256 TEXT;"
/* Schema 10 in both stores: the shots an extraction found (--shots, docs/shots.md), numbered
 * from 0 in their order: frames first_frame..last_frame, from start_t (the first frame's time)
 * to end_t (the next shot's start; the last one's, the end of its last frame), in seconds.
 * Written with the extraction's end, gone with its vectors. */
#define VFI_SHOTS_TABLE_SQL                                                                        \
    "CREATE TABLE shots (extraction_id bigint NOT NULL REFERENCES extractions(id)"                 \
    " ON DELETE CASCADE, shot integer NOT NULL, first_frame bigint NOT NULL,"                      \
    " last_frame bigint NOT NULL, start_t double precision NOT NULL,"                              \
    " end_t double precision NOT NULL, PRIMARY KEY (extraction_id, shot));"
/* Schema 6: the search indexes built over a model row's vectors (vfi_store_index_put). */
#define VFI_INDEXES_TABLE_SQL                                                                      \
    "CREATE TABLE indexes (path text NOT NULL PRIMARY KEY, model_id bigint NOT NULL"               \
    " REFERENCES models(id), kind text NOT NULL, vectors bigint NOT NULL, files bigint NOT NULL,"  \
    " built_at text NOT NULL, host text);"
#define VFI_INSPECT_EXTRACTIONS_SQL_AT(schema, order)                                              \
    ((schema) >= 5 ? VFI_INSPECT_EXTRACTIONS_SQL("m.weights") order                                \
                   : VFI_INSPECT_EXTRACTIONS_SQL("NULL") order)
#define VFI_INSPECT_RUNS_SQL                                                                       \
    "SELECT started_at, host, device, precision, batch_size, mode, model,"                         \
    " coalesce(end_to_end_fps, 0), coalesce(infer_fps, 0), coalesce(device_name, '')"              \
    " FROM runs ORDER BY id"

/* A model row's frames per vector when its vectors are spans of time (t_end set): a clip
 * model's frames per window (its preprocessing's "frames=N"), an audio model's log-mel frames
 * per patch (its preprocessing starts "sound=": its "patch=N"); else 0. */
int vfi_record_frames(const char *preprocessing);
/* Is a model row's preprocessing an audio model's (its vectors patches of a file's sound)? */
int vfi_record_is_sound(const char *preprocessing);

/* The sampling key an extraction is recorded with: "all", "fps=1", "every=5" or "keyframes",
 * then ";start=S", ";duration=D", ";max=N" when set, and a clip model's (frames > 0)
 * ";window=N;stride=S"; an audio model's (audio not NULL): "sound;patch=P;hop=H" (log-mel
 * frames) instead of the frame sampling, then ";start", ";duration" and ";max" likewise. Two
 * runs whose keys are equal keep the same frames of a file. */
void vfi_record_sampling(const vf_config *c, int frames, const vf_audio_spec *audio, char *buf,
                         size_t size);

/* The model row identifying what the vectors mean: the name, the ONNX file's SHA-256, the
 * layer, dimension, dtype and the preprocessing (an audio model's: its front end, audio); and whose
 * weights the file has (with the frame conversion's definition, so a version that converts
 * differently starts a new row instead of mixing vectors). *m points into sha and prep, the
 * caller's buffers. VF_ERR_IO when the model file cannot be read. */
vf_status vfi_record_model(const vf_model_info *info, const vf_audio_spec *audio, int store_f16,
                           vf_store_model *m, char sha[65], char *prep, size_t prep_size,
                           vf_err *err);
/* A CLIP model's row also records its text tower (info->text_tower), by its SHA-256 into
 * text_sha (m->text_sha256 then points to it); nothing for other models. VF_ERR_IO when the
 * tower cannot be read. */
vf_status vfi_record_text_tower(const vf_model_info *info, vf_store_model *m, char text_sha[65],
                                vf_err *err);

/* A file's identity: recorded under its absolute name (as of vfi_record_file_init: a run names
 * its files at its start), compared by size and modification time. */
typedef struct vf_record_file {
    char *name;       /* owned; NULL when the path is "" */
    const char *path; /* as given; borrowed */
} vf_record_file;

/* name = the absolute form of path. VF_ERR_NOMEM only. */
vf_status vfi_record_file_init(vf_record_file *f, const char *path);

/* With root (an absolute directory, vfi_record_root): name = path relative to root, so that
 * machines mounting an archive at different places record its files alike; without, as
 * vfi_record_file_init. VF_ERR_INVALID (err names the file) when path is not under root. */
vf_status vfi_record_file_init_root(vf_record_file *f, const char *path, const char *root,
                                    vf_err *err);

/* root's absolute form without a trailing slash, in a new string; NULL when out of memory. */
char *vfi_record_root(const char *root);

/* Where the file recorded as name is on this machine (root/name, or name), in a new string. */
char *vfi_record_locate(const char *name, const char *root);
void vfi_record_file_clear(vf_record_file *f);
/* The name the file is recorded under. */
const char *vfi_record_name(const vf_record_file *f);

/* Modification time in seconds, as stored. */
double vfi_record_mtime(const struct stat *st);

/* A cheap fingerprint of a regular file's content, "fnv64:" and 16 hex digits: FNV-1a over its
 * size and first and last 64 KiB (a file that cannot be read: over its size alone). Never
 * called on a pipe, whose bytes belong to the decoder. */
void vfi_record_content_hash(const char *path, int64_t size, char out[32]);

/* Is a stage rate worth storing? A rate is frames/s when measured (> 0 and finite); anything
 * else means "not measured" and is stored as NULL. */
int vfi_record_measured(double rate);

/* The resume rule (applied by each store's vfi_store_offer, for a whole set of files at once):
 * a file as it is now is done when the store has a finished extraction of it by the model with
 * this sampling, computed in this precision, recorded under its name or (databases written
 * before names were absolute) under the path as given, with the file's size and mtime. */

#endif /* VIDFEAT_RECORD_H */
