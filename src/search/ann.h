/*
 * ann.h - approximate nearest-neighbour indexes over vectors, by FAISS (ann_faiss.cpp, the only
 * file that sees it, and the only C++ in vidfeat). The index compares vectors by Euclidean
 * distance; the caller gives unit-length vectors, so that its order is cosine similarity's
 * (|a - b|^2 = 2 - 2 cos). Each vector carries the caller's 64-bit id. One thread at a time per
 * index; FAISS's own threads (OpenMP) work inside each call.
 */
#ifndef VIDFEAT_ANN_H
#define VIDFEAT_ANN_H

#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vf_ann vf_ann;

/* The OPENBLAS_CORETYPE this CPU should run under when the process's OpenBLAS took it for an
 * old generic core (a CPU newer than OpenBLAS: its AVX-512 or AVX2 kernels left unused), or NULL
 * (right already, chosen by the variable, or not OpenBLAS). OpenBLAS reads the variable when it
 * loads: the command starts itself again with it (cli/main.c); vfi_ann_create says so once an
 * index is made. */
const char *vfi_ann_blas_coretype(void);
/* For a program's main, before it starts a thread: when vfi_ann_blas_coretype() names a kind,
 * run this program again from the start with OPENBLAS_CORETYPE set to it (/proc/self/exe, the
 * same arguments). Returns only when it did not (nothing to set, or the exec failed). */
void vfi_ann_blas_restart(char **argv);

/* A new empty index of dim-float vectors described in FAISS's index_factory words ("Flat",
 * "HNSW32", "IVF1024,Flat", "PCAR256,IVF4096,PQ64", ...); kinds without ids of their own are
 * given an id map. VF_ERR_INVALID with FAISS's reason for a description it refuses. */
vf_status vfi_ann_create(const char *description, int dim, vf_ann **out, vf_err *err);
void vfi_ann_free(vf_ann **pa);

/* Does it need vfi_ann_train before vectors can be added? */
int vfi_ann_needs_training(const vf_ann *a);
/* Train on n vectors x (n x dim floats): IVF's centroids, PQ's codebooks, a PCA. */
vf_status vfi_ann_train(vf_ann *a, int64_t n, const float *x, vf_err *err);
/* Add n vectors x with their ids. */
vf_status vfi_ann_add(vf_ann *a, int64_t n, const float *x, const int64_t *ids, vf_err *err);
/* Remove the vectors whose ids are in [lo, hi); *removed (may be NULL) says how many.
 * VF_ERR_UNSUPPORTED for kinds that cannot remove (HNSW): the caller then filters them out. */
vf_status vfi_ann_remove_range(vf_ann *a, int64_t lo, int64_t hi, int64_t *removed, vf_err *err);
/* The k nearest of the vector q: ids[0..k) (-1 where there are fewer) and their squared
 * distances, nearest first. probe > 0 sets how much of the index is looked at: IVF's lists
 * (nprobe), HNSW's candidate list (efSearch); 0 keeps the index's own. An IVF reads its nearest
 * lists until they hold about as many codes as nprobe lists of average length (lists differ in
 * length, and a query falls most often where they are long), at most nprobe lists. */
vf_status vfi_ann_search(vf_ann *a, const float *q, int k, int probe, int64_t *ids, float *dist,
                         vf_err *err);
/* The same for n vectors q (n x dim floats) at once, FAISS's threads sharing them: row i of
 * ids and dist (k each) for q's row i. */
vf_status vfi_ann_search_many(vf_ann *a, int64_t n, const float *q, int k, int probe, int64_t *ids,
                              float *dist, vf_err *err);
/* The same through FAISS's own scan of an IVF's lists, where vidfeat scans them itself (its
 * IVF-PQ: ann_faiss.cpp): the oracle of that scan, for tests. */
vf_status vfi_ann_search_many_faiss(vf_ann *a, int64_t n, const float *q, int k, int probe,
                                    int64_t *ids, float *dist, vf_err *err);
/* Vectors held. */
int64_t vfi_ann_count(const vf_ann *a);
/* Every id it holds given to fn in turn; the first nonzero fn returns ends the walk and is
 * returned (0 when all were seen). What a file's ids name is its reader's to check. */
int vfi_ann_each_id(const vf_ann *a, int (*fn)(void *user, int64_t id), void *user);
/* The dimension of the vectors it takes. */
int vfi_ann_dim(const vf_ann *a);
/* The vectors or codes the last search compared with its queries, all of them together (IVF: the
 * lengths of the lists read; exact kinds: every vector a query); -1 where the kind does not count
 * them (HNSW) or before a search. */
int64_t vfi_ann_codes_read(const vf_ann *a);
/* Which probe setting the kind has: "nprobe", "efSearch", or NULL (exact kinds). */
const char *vfi_ann_probe_name(const vf_ann *a);

/* Write the index at f's position; read one from f's position (as written). VF_ERR_IO with the
 * reason; reading something that is not an index: VF_ERR_INVALID. */
vf_status vfi_ann_write(const vf_ann *a, FILE *f, vf_err *err);
vf_status vfi_ann_read(FILE *f, vf_ann **out, vf_err *err);

/* "FAISS 1.7.3" into buf. */
void vfi_ann_version(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* VIDFEAT_ANN_H */
