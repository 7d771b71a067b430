/*
 * extractor.h - what the pipeline needs from the extractor behind the public API.
 */
#ifndef VIDFEAT_EXTRACTOR_H
#define VIDFEAT_EXTRACTOR_H

#include "engine/backend.h"
#include "engine/manifest.h"
#include "vidfeat.h"

/* Floats of one input of the network: an image (3 x S x S), a clip's window (3 x T x S x S) or
 * a sound's patch of log-mel frames (frames x bands). */
static inline size_t vfi_extractor_input_floats(const vf_model_info *in)
{
    if (in->audio_frames)
        return (size_t)in->audio_frames * (size_t)in->audio_bands;
    return (size_t)3 * (size_t)(in->frames > 0 ? in->frames : 1) * (size_t)in->input_size *
           (size_t)in->input_size;
}

/* An audio model's front end and patches (its manifest's "audio"), or NULL for an image or clip
 * model (borrowed; lives as long as ex). */
const vf_audio_spec *vfi_extractor_audio(const vf_extractor *ex);

/* The compiled backend of an extractor (borrowed; lives as long as ex). */
vf_backend *vfi_extractor_backend(vf_extractor *ex);

/* Run the first n rows of a batch input (vfi_backend_input_alloc's memory) through the backend
 * (on failure the message is in the backend's err), then, for int8, save the calibration once
 * the backend has made it final. */
vf_status vfi_extractor_run_input(vf_extractor *ex, const void *input, float *out, int n);

/* The name an extractor records for a model given as a file: its base name without ".onnx"
 * (*len bytes from the returned pointer into model, which is the whole base name). For a manifest
 * name, the name itself. */
const char *vfi_model_file_name(const char *model, size_t *len);

/* At the end of a pipeline run: an int8 calibration still going on is saved with the frames
 * observed so far. */
void vfi_extractor_end_run(vf_extractor *ex);

#endif /* VIDFEAT_EXTRACTOR_H */
