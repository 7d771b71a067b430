/*
 * onnx_loader.h - the ONNX loader's state, shared by the two files that see protobuf-c: onnx.c
 * (reading the file, the operator table, the graph-level steps) and onnx_node.c (the node being
 * converted and the API operator handlers use, onnx_handlers.h). Nothing else includes it.
 */
#ifndef VIDFEAT_ONNX_LOADER_H
#define VIDFEAT_ONNX_LOADER_H

#include "core/strmap.h"
#include "engine/onnx_handlers.h"
#include "onnx.pb-c.h"

typedef struct loader {
    vf_graph *g;
    Onnx__GraphProto *gp;
    vf_strmap *inits;     /* initializer name -> index in gp->initializer */
    const char *base_dir; /* for external data; NULL: forbidden */
    int64_t opset;        /* default-domain opset version */
    int input_size;
    int64_t fixed_hw[2]; /* the file's fixed input plane when run at another size, else 0 */
    vf_err *err;
    const Onnx__NodeProto *node; /* the node being converted, for messages */
    vf_strmap *ramp_names;       /* numbers of the images (vf_onnx_ramp): name -> index */
    vf_onnx_ramp *ramps;
    int n_ramps, cap_ramps;
} loader;

/* The node being converted, for messages: its name, else its first output's. */
const char *vfi_onnx_node_label(const loader *L);

#define NFAIL(L, code, fmt, ...)                                                                   \
    vfi_fail((L)->err, code, "node '%s' (%s): " fmt, vfi_onnx_node_label(L), (L)->node->op_type,   \
             ##__VA_ARGS__)

#endif /* VIDFEAT_ONNX_LOADER_H */
