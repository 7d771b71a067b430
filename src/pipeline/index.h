/*
 * index.h - search index files (vf_db_index builds them, vf_db_similar searches them,
 * vf_db_indexes says how current they are): an ANN index (search/ann.h) over one model row's
 * vectors, with what it covers.
 *
 * A vector's id in the index is its extraction's id times 2^32 plus its frame index, so a
 * candidate names its row in the database, where it is checked and ranked. The file:
 *
 *   "VFINDEX\n", u32 format (1), u32 n + n bytes of JSON (the model row: id, name, file_sha256,
 *   layer, dim, dtype, preprocessing; kind, probe, vectors, files, database, built_at),
 *   u64 n + n x (i64 extraction, i64 vectors, i64 flags) in extraction order (flag 1: gone from
 *   the database but still in the ANN index, which cannot remove: hidden from searches), then
 *   the ANN index. Integers little-endian.
 */
#ifndef VIDFEAT_INDEX_H
#define VIDFEAT_INDEX_H

#include <stdint.h>

#include "core/status.h"
#include "pipeline/held.h"
#include "store/store.h"

/* vfi_index, opened from its file (vfi_index_open), freed, and what it holds: index_file.h */
#include "pipeline/index_file.h"

/* Up to k candidates nearest the unit vector q into refs (extraction, frame_index), *n of them,
 * nearest first; hidden ones and `skip` (may be NULL) left out. probe 0: the index's own. */
vf_status vfi_index_search(vfi_index *ix, const float *q, int k, int probe,
                           const vf_store_ref *skip, vf_store_ref *refs, int *n, vf_err *err);

/* The same for n unit vectors q at once (FAISS's threads share them): row i of refs and sim (k
 * each) for q's row i, nearest first; where there are fewer (or hidden ones), extraction -1 and
 * sim -1. sim is the index's estimate of the cosine (exact for Flat, approximate for codes). */
vf_status vfi_index_search_many(vfi_index *ix, int64_t n, const float *q, int k, int probe,
                                vf_store_ref *refs, float *sim, vf_err *err);

/* An exact index (Flat) in memory, of no file, over n unit vectors (n x dim floats) known by
 * refs (extraction, frame_index; each extraction's in a row): what is searched where no index
 * file covers a model row. */
vf_status vfi_index_memory(int dim, int64_t n, const float *vecs, const vf_store_ref *refs,
                           vfi_index **out, vf_err *err);

/* The index file to search for row: the one path names (NULL: the first the database records
 * for the row whose file is on this machine), opened; *ix NULL when there is none. A file that
 * is there but cannot be used fails (VF_ERR_STORE / VF_ERR_INVALID naming it and saying what
 * to do). */
vf_status vfi_index_find(vf_store *s, const vfi_held_model *row, const char *path, vfi_index **ix,
                         vf_err *err);

/* FAISS's words for a kind ("auto", "flat", "hnsw", "ivf", "ivfsq8", "ivfpq", or FAISS's own
 * words) for n vectors of dim floats, and its default probe (0: none); VF_ERR_INVALID when too
 * few for it. text: the vectors are a CLIP model's image embeddings, searched by words (auto
 * then keeps 8 bits a value instead of PQ's codes, see index.c). The training sample a kind that
 * trains takes: vfi_index_train_size. */
vf_status vfi_index_choose_kind(const char *kind, int64_t n, int dim, int text, char *out,
                                size_t size, int *probe, vf_err *err);
int64_t vfi_index_train_size(int64_t n, int dim);

/* Candidates an index proposes for k neighbours, then ranked by their exact cosine: enough that
 * the exact order of the first k rarely depends on the index's approximate one. */
#define VFI_INDEX_CANDIDATES(k) ((k)*10 < 100 ? 100 : (k)*10)

/* v scaled to length 1 (a zero vector stays zero) into out; both dim floats. */
void vfi_index_unit(const float *v, int dim, float *out);

#endif /* VIDFEAT_INDEX_H */
