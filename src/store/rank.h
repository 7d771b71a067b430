/*
 * rank.h - the exact nearest-vector search every store does the same way: cosine similarity in
 * double precision, the k best kept in order (ties: by extraction, then frame), and which stored
 * video a query path names. One thread at a time.
 */
#ifndef VIDFEAT_RANK_H
#define VIDFEAT_RANK_H

#include "core/status.h"
#include "store/store.h"

typedef struct vf_rank vf_rank;

/* A ranking of at most k vectors against query q (dim floats; copied). NULL when out of memory. */
vf_rank *vfi_rank_create(const float *q, int dim, int k);
/* Offer stored vector v at ref. */
void vfi_rank_offer(vf_rank *r, const vf_store_ref *ref, const float *v);
/* The ranked vectors, best first: *n of them. */
const vf_store_ref *vfi_rank_get(const vf_rank *r, int i, double *similarity);
int vfi_rank_count(const vf_rank *r);
void vfi_rank_free(vf_rank **pr);

/* Is the video stored as `stored` the file a query names as `path`? Yes when stored is path or
 * its absolute name (name), or when both resolve to the same file (want: realpath(path), NULL
 * when it does not resolve). */
int vfi_rank_same_file(const char *stored, const char *path, const char *name, const char *want);

#endif /* VIDFEAT_RANK_H */
