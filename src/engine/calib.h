/*
 * calib.h - int8 calibration scales on disk (MODEL.onnx.int8): the largest |x| of every tensor
 * of a network, observed while it ran in f32 on sample frames, with what those ranges depend on
 * (the model file and the preprocessing). A small JSON document, written atomically, so that
 * an int8 run after the first starts quantized instead of calibrating again.
 */
#ifndef VIDFEAT_CALIB_H
#define VIDFEAT_CALIB_H

#include <stdint.h>

#include "engine/graph.h"
#include "core/status.h"

typedef struct vf_calib {
    char fingerprint[65]; /* vfi_sha256_file_sampled of the model file */
    int input_size;       /* preprocessing the ranges were observed with */
    float mean[3], std[3];
    int64_t images; /* images of the last calibration */
    int n_ranges;
    char **names;  /* owned: tensor names */
    float *ranges; /* max |x| per name */
} vf_calib;

/* An empty set of ranges for this model file and preprocessing. NULL when out of memory. */
vf_calib *vfi_calib_create(const char fingerprint[65], int input_size, const float mean[3],
                           const float std[3]);

/* Read a calibration file. VF_ERR_IO when it cannot be opened (errno says why: ENOENT when there
 * is none), VF_ERR_MODEL when it is not a valid one. */
vf_status vfi_calib_read(const char *path, vf_calib **out, vf_err *err);

/* Write c to path (through a temporary file renamed over it, so a reader never sees half a
 * file). model names the model in the file, for people reading it. VF_ERR_IO on failure. */
vf_status vfi_calib_write(const vf_calib *c, const char *model, const char *path, vf_err *err);

/* Do a and b describe the same model file and preprocessing? */
int vfi_calib_same_source(const vf_calib *a, const vf_calib *b);

/* The range of every activation of g (values not constants, indexed like g->values) into *out
 * (owned by the caller). VF_ERR_MODEL naming the first tensor the file lacks (another layer's
 * graph, a changed optimizer). */
vf_status vfi_calib_ranges(const vf_calib *c, const vf_graph *g, float **out, vf_err *err);

/* Take g's activation ranges (indexed like g->values; 0 = not observed) into c, replacing the
 * ranges of the same names and keeping the others (another layer's tensors). */
vf_status vfi_calib_update(vf_calib *c, const vf_graph *g, const float *ranges, int64_t images);

void vfi_calib_free(vf_calib **pc);

#endif /* VIDFEAT_CALIB_H */
