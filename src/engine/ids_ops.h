/*
 * ids_ops.h - the loops of a text tower's operators over token ids (graph.h: LOOKUP, ARGMAX,
 * TAKE) on plain row-major buffers, the one definition the reference backend runs and the oneDNN
 * backend's host steps run between its primitives. Pure functions: any thread.
 *
 * `valid` is how many of the rows are real inputs; the rest are a plan's padding, whose indices
 * (earlier inputs' or zeros) are never refused: an index out of range there reads row 0.
 */
#ifndef VIDFEAT_IDS_OPS_H
#define VIDFEAT_IDS_OPS_H

#include <stdint.h>

#include "core/status.h"
#include "engine/graph.h"

/* LOOKUP: out[i] = table[ids[i]] for count ids (a negative id counts from the end, as ONNX's
 * Gather), rows of `row` floats out of `rows`; of them the first `valid` are real. An id out of
 * range among those: VF_ERR_INVALID naming node nd. */
vf_status vfi_ids_lookup(const vf_node *nd, const int64_t *ids, int64_t count, int64_t valid,
                         const float *table, int64_t rows, int64_t row, float *out, vf_err *err);

/* How node nd's input (an ARGMAX's at batch n, a TAKE's per image) splits at its axis: the
 * entries before it, along it, after it. */
void vfi_ids_split(const vf_graph *g, const vf_node *nd, int64_t n, int64_t *outer, int64_t *len,
                   int64_t *inner);

/* ARGMAX of x ([outer, len, inner], float or int64 as x_i64 says) along len: the first index of
 * the largest value, into out ([outer, inner]). */
void vfi_ids_argmax(const void *x, int x_i64, int64_t outer, int64_t len, int64_t inner,
                    int64_t *out);

/* TAKE: from each of n images' part of x ([outer, len, inner] floats each) the entry k[i] along
 * len, into y ([outer, inner] each); the first `valid` images are real. k[i] out of 0..len-1
 * among those: VF_ERR_INVALID naming nd. */
vf_status vfi_ids_take(const vf_node *nd, const float *x, const int64_t *k, int n, int valid,
                       int64_t outer, int64_t len, int64_t inner, float *y, vf_err *err);

#endif /* VIDFEAT_IDS_OPS_H */
