/*
 * int8_file.h - where a model's int8 calibration file is, and when one is used: the file named
 * by the user, else MODEL.onnx.int8 beside the model, else one in the user's cache directory
 * (for a read-only models directory) named with the model's fingerprint. A file is used when it
 * was made from the same model file and preprocessing and has every tensor of this graph;
 * one with another layer's tensors is kept and added to. What the backend observes while it
 * calibrates is saved there (the first place that can be written). One thread at a time.
 */
#ifndef VIDFEAT_INT8_FILE_H
#define VIDFEAT_INT8_FILE_H

#include <stdint.h>

#include "core/status.h"
#include "engine/graph.h"

typedef struct vf_int8_file vf_int8_file;

/* What the ranges depend on, and where the user asked for them (NULL: the default places). */
typedef struct vf_int8_source {
    const char *model_path; /* the ONNX file */
    const char *model_name; /* named in the file, for people reading it */
    const char *requested;  /* vf_config.int8_scales */
    int recalibrate;        /* ignore an existing file (it is overwritten) */
    int input_size;
    float mean[3], std[3];
} vf_int8_source;

/* Look for a fitting file. Found: *ranges gets g's ranges (indexed like g->values; the caller
 * frees them) and the file's name and frame count are kept. Not found: *ranges is NULL and the
 * result waits for vfi_int8_file_save. Unreadable or unfitting files are logged and passed over.
 * VF_ERR_IO when the model file cannot be read, VF_ERR_NOMEM. */
vf_status vfi_int8_file_open(const vf_int8_source *src, const vf_graph *g, vf_int8_file **out,
                             float **ranges, vf_err *err);

/* Save the ranges the backend observed on n images (complete: they are final, and nothing more
 * is saved after). Does nothing when n is what was last saved. A file that cannot be written is
 * a warning (the next run calibrates again). */
void vfi_int8_file_save(vf_int8_file *f, const vf_graph *g, const float *ranges, int64_t n,
                        int complete);

/* The file the scales were read from or saved to (NULL: neither yet), and its frame count. */
const char *vfi_int8_file_path(const vf_int8_file *f);
int64_t vfi_int8_file_frames(const vf_int8_file *f);

void vfi_int8_file_free(vf_int8_file **pf);

#endif /* VIDFEAT_INT8_FILE_H */
