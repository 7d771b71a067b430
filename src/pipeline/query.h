/*
 * query.h - a query taken from a file the database does not hold: its frames extracted now with
 * the model the stored vectors came from (checked to be that model: the same file, the same
 * preprocessing), and the vectors that model gives frames that show nothing (uniform colours,
 * black), which similarity search must not count as evidence of reuse.
 */
#ifndef VIDFEAT_QUERY_H
#define VIDFEAT_QUERY_H

#include <stdint.h>

#include "vidfeat.h"
#include "core/status.h"
#include "pipeline/held.h"

/* Frames of a query file: n vectors of dim floats (as extracted, not scaled), their frame
 * indexes and times. Owned: vfi_query_frames_free. */
typedef struct vfi_query_frames {
    int dim;
    int64_t n, cap;
    float *vec;
    int64_t *frame_index;
    double *t;
} vfi_query_frames;

void vfi_query_frames_free(vfi_query_frames *q);

/* The frames of path from `at` seconds on, sampled as cfg says (its --fps, --every; one frame
 * when max_frames is 1), at most max_frames (0: all), extracted with row's model (cfg->model
 * names its file, else the row's name) into *out. VF_ERR_MODEL when the model file is not the
 * one row's vectors came from; VF_ERR_DECODE when no frame is there; pipeline errors. */
vf_status vfi_query_extract(const vf_config *cfg, const vfi_held_model *row, const char *path,
                            double at, int64_t max_frames, vfi_query_frames *out, vf_err *err);

/* The text tower paired with row's vectors (cfg->model names the CLIP model, else the row's
 * name does), made for batches of up to `batch` texts, into *out (vf_text_encoder_free it).
 * The pair is checked: the tower must be the one the row records, or (none recorded) the image
 * tower beside it must be the file the row's vectors came from. VF_ERR_MODEL (not a CLIP
 * model's image embeddings, another pair, another size), vf_text_encoder_create's statuses. */
vf_status vfi_query_text_tower(const vf_config *cfg, const vfi_held_model *row, const char *db,
                               int batch, vf_text_encoder **out, vf_err *err);
/* Texts' embeddings by te (vfi_query_text_tower's for row): n x row->dim floats into *out
 * (vfi_free it), *ms the time the encoding took. VF_ERR_INVALID (a text that is not UTF-8 or
 * holds no words). */
vf_status vfi_query_encode(vf_text_encoder *te, const vfi_held_model *row, const char *const *texts,
                           int n, float **out, double *ms, vf_err *err);
/* The vectors row's model gives what shows nothing, at unit length: an image or clip model's of
 * uniform images (black, white, greys, primary and mixed colours), an audio model's of silence
 * and of hiss at -70 to -40 dB of full scale (through its own front end). *n of them, row->dim
 * floats each, into *refs (vfi_free it). */
vf_status vfi_query_flat_refs(const vf_config *cfg, const vfi_held_model *row, float **refs, int *n,
                              vf_err *err);

#endif /* VIDFEAT_QUERY_H */
