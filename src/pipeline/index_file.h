/*
 * index_file.h - a search index file (index.h says the format) and the index in memory: opened
 * from its file, written to it, and what it holds. The struct's fields are index.c's and
 * index_file.c's; everything else includes index.h, which includes this.
 */
#ifndef VIDFEAT_INDEX_FILE_H
#define VIDFEAT_INDEX_FILE_H

#include <stdint.h>

#include "core/status.h"
#include "pipeline/held.h"
#include "store/store.h"
#include "search/ann.h"

typedef struct vfi_index vfi_index;

/* Open the index file at path for the model row `row` of a database: header, what it covers
 * and (with_ann) the ANN index itself. VF_ERR_STORE (cannot be read, or not whole: corrupt),
 * VF_ERR_INVALID (another model row, layer or vector size), both naming the file. */
vf_status vfi_index_open(const char *path, const vfi_held_model *row, int with_ann, vfi_index **out,
                         vf_err *err);
void vfi_index_free(vfi_index **pix);

/* Its default probe (0: the kind has none). */
int vfi_index_probe(const vfi_index *ix);
/* Its file, its kind (FAISS's words); the vectors and extractions it holds (not hidden). */
const char *vfi_index_path(const vfi_index *ix);
const char *vfi_index_kind(const vfi_index *ix);
int64_t vfi_index_vectors(const vfi_index *ix);
int64_t vfi_index_files(const vfi_index *ix);

/* The vectors it holds of extraction ext (0: none, or hidden). */
int64_t vfi_index_covers(const vfi_index *ix, int64_t ext);

#define FLAG_HIDDEN 1 /* gone from the database, still in an ANN index that cannot remove */

/* What the index holds of one extraction. */
typedef struct ext_entry {
    int64_t id, vectors, flags;
} ext_entry;

struct vfi_index {
    char *path;
    int64_t model_id;
    char *kind;
    int probe;
    int dim;
    ext_entry *ext; /* by id */
    int n_ext, cap_ext;
    vf_ann *ann;
};

/* qsort/bsearch order of entries: by extraction id. */
int vfi_index_ext_cmp(const void *a, const void *b);
/* The entry of extraction id (the table is sorted), or NULL. */
ext_entry *vfi_index_ext_find(const vfi_index *ix, int64_t id);
/* Appended (ids must come in increasing order); -1 when out of memory. */
int vfi_index_ext_add(vfi_index *ix, int64_t id, int64_t vectors, int64_t flags);

/* Write ix (of the model row `row`, of the database named `database`) to path: a temporary
 * file, synced and renamed when whole; *bytes its size. VF_ERR_IO naming path, VF_ERR_NOMEM. */
vf_status vfi_index_write(const vfi_index *ix, const vfi_held_model *row, const char *path,
                          const char *database, int64_t *bytes, vf_err *err);

/* Temporary files beside path of builds that died (PATH.tmpPID whose process is gone): removed,
 * so that a build killed midway leaves nothing behind once another has run. */
void vfi_index_clear_temporaries(const char *path);

#endif /* VIDFEAT_INDEX_FILE_H */
