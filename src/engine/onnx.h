/*
 * onnx.h - ONNX ModelProto -> vf_graph. The only module that sees the protobuf-c types.
 */
#ifndef VIDFEAT_ONNX_H
#define VIDFEAT_ONNX_H

#include <stddef.h>

#include "engine/graph.h"

/* Deepest message nesting accepted in a model file (real CNN exports need about 6). */
#define VF_ONNX_MAX_DEPTH 32
/* Largest model file accepted (the protobuf format itself stops at 2 GiB). */
#define VF_ONNX_MAX_FILE ((size_t)1 << 31)

typedef struct vf_onnx_opts {
    /* Input plane size (0: the file's own). A dynamic height/width needs it; a fixed one is
     * replaced by it and every shape inferred again, so a file exported at 224 runs at 299 when
     * nothing in it depends on the size (a node that does fails, named). */
    int input_size;
} vf_onnx_opts;

/* Load an ONNX file. External-data files are resolved relative to the model's directory. On
 * VF_OK *out is a graph whose input is [N, C, H, W] (an NHWC model input gets a transpose), whose
 * output is the model's first graph output, and which holds only supported ops. Every error names
 * the file and, where one is involved, the node. */
vf_status vfi_onnx_load(const char *path, const vf_onnx_opts *opts, vf_graph **out, vf_err *err);

/* The same from memory (the fuzz target); base_dir resolves external data, NULL forbids it. */
vf_status vfi_onnx_load_mem(const void *data, size_t size, const char *base_dir,
                            const vf_onnx_opts *opts, vf_graph **out, vf_err *err);

/* The value of metadata_props entry `key` of the ONNX file at path into buf (truncated to size),
 * reading only the model's top-level fields (the graph is skipped, not parsed). VF_OK when the
 * key is there, VF_EOF when not, VF_ERR_IO / VF_ERR_MODEL when the file cannot be read or is
 * not a protobuf. */
vf_status vfi_onnx_metadata(const char *path, const char *key, char *buf, size_t size, vf_err *err);

#endif /* VIDFEAT_ONNX_H */
