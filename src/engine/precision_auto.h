/*
 * precision_auto.h - what --precision auto (VF_PRECISION_AUTO) runs a model at: bf16 where this
 * CPU has bf16 instructions, runs the model measurably faster in it and its bf16 features keep a
 * cosine of at least 0.999 to its f32 ones; f32 everywhere else (no bf16 instructions, the
 * reference backend, a GPU). The measure (both precisions on the same generated batch, timed)
 * is made once per model file, layer, batch, thread count, CPU and instruction cap, and kept in
 * the plan cache (plan_cache.h), so that every later run, and every worker, makes the same
 * choice and resumes what the others did.
 */
#ifndef VIDFEAT_PRECISION_AUTO_H
#define VIDFEAT_PRECISION_AUTO_H

#include "engine/backend.h"
#include "engine/graph.h"

/* What the choice is for. */
typedef struct vfi_auto_model {
    const char *path;    /* the model file: its fingerprint is the model's part of the key */
    const char *backend; /* the backend asked for ("auto", "cpu", "ref", "gpu", ...) */
    int batch;           /* the batch the model is prepared for */
    int n_threads;       /* 0: the backend's default */
} vfi_auto_model;

/* The precision auto means for m (VF_PRECISION_F32 or VF_PRECISION_BF16) into *out. g is the
 * finished graph the extractor will run: borrowed, its weights left as they are (a measure
 * prepares both precisions without releasing them). *detail (size bytes) says why in a few
 * words ("bf16: 2.1 ms an image against f32's 4.3 ms, worst cosine 0.99962"). Any failure while
 * measuring gives f32, not kept; errors are only those of opening the backend (VF_ERR_NO_DEVICE,
 * VF_ERR_INVALID, ...) and VF_ERR_NOMEM, in err. */
vf_status vfi_precision_auto(vf_graph *g, const vfi_auto_model *m, vf_precision *out, char *detail,
                             size_t size, vf_err *err);

#endif /* VIDFEAT_PRECISION_AUTO_H */
