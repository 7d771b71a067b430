/*
 * preprocess.h - a decoded frame into its slot of the batch tensor: colour conversion (the
 * source's matrix and range), crop/resize by the model's policy, rotation, normalisation, all
 * into planar float in the model's channel order.
 */
#ifndef VIDFEAT_PREPROCESS_H
#define VIDFEAT_PREPROCESS_H

#include <string.h>

#include "media/decode.h"
#include "vidfeat.h"
#include "media/yuvconv.h"

typedef struct vf_preproc_opts {
    int size; /* the slot is 3 x size x size floats */
    vf_resize_policy resize;
    int resize_short; /* VF_RESIZE_SHORT_CROP: shorter side before the centre crop */
    int resize_to[2]; /* VF_RESIZE_FIXED_CROP: height and width before the centre crop */
    vf_channel_order order;
    float mean[3], std[3]; /* pixel units (0..255), in RGB order */
} vf_preproc_opts;

typedef struct vf_preproc vf_preproc;

vf_status vfi_preproc_create(const vf_preproc_opts *opts, vf_preproc **out, vf_err *err);
/* Convert f into slot (3 x size x size floats), turning it by rotation degrees clockwise.
 * VF_ERR_DECODE if the frame cannot be converted. Allocates only when the source format or size
 * changes (a new scaler). */
vf_status vfi_preproc_frame(vf_preproc *p, const vf_frame *f, int rotation, float *slot,
                            vf_err *err);
/* An 8-bit RGB picture (height rows of width x 3 bytes, no padding; only read) into slot, as
 * vfi_preproc_frame converts the same pixels decoded from a PNG. VF_ERR_INVALID for a size of
 * 0 or beyond 65536. */
vf_status vfi_preproc_rgb(vf_preproc *p, const uint8_t *rgb, int width, int height, float *slot,
                          vf_err *err);
void vfi_preproc_free(vf_preproc **pp);

/* The same conversion as vfi_preproc_frame, described for yuvconv.h's code (the GPU kernel and
 * its host reference): geometry, matrix, range and normalisation of f into a slot. f may be a
 * hardware frame (its picture's format is then its frames context's). planes (may be NULL)
 * receives f's plane addresses and pitches. VF_ERR_UNSUPPORTED for layouts yuvconv.h does not
 * read (RGB, paletted, big-endian, V before U, ...): those go through vfi_preproc_frame. */
vf_status vfi_preproc_yuv(const vf_preproc_opts *o, const vf_frame *f, int rotation,
                          vf_yuv_params *q, vf_yuv_planes *planes, vf_err *err);

/* A clip model's input [3, frames, S, S] holds each colour's planes of its frames in order: put
 * a converted picture (3 planes of plane floats) as frame t of the window at row. */
static inline void vfi_window_put(float *row, int frames, int t, const float *picture, size_t plane)
{
    for (int c = 0; c < 3; c++)
        memcpy(row + ((size_t)c * frames + t) * plane, picture + c * plane, plane * sizeof(float));
}

#endif /* VIDFEAT_PREPROCESS_H */
