/*
 * passes.h - graph rewrites run after loading, before a backend sees the graph.
 */
#ifndef VIDFEAT_PASSES_H
#define VIDFEAT_PASSES_H

#include "engine/graph.h"

/* Make value `v` the graph output, as [N, D]. With pool_maps a 4-D map [N, C, H, W] is
 * global-average-pooled to [N, C] when H*W > 1 (*pooled says so: what a feature vector of a conv
 * layer is); otherwise everything is flattened. Everything not needed for the output is then
 * pruned, so nothing past the feature layer is computed. */
vf_status vfi_pass_set_output(vf_graph *g, int v, int pool_maps, int *pooled, vf_err *err);

/* The standard pipeline: cancel inverse transposes, fold zero Pad into Conv, fold per-channel
 * affine (BatchNorm) into the preceding Conv, fuse activations into Conv/Gemm, prune. */
vf_status vfi_pass_optimize(vf_graph *g, vf_err *err);

#endif /* VIDFEAT_PASSES_H */
