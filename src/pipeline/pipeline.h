/*
 * pipeline.h - what the rest of the library needs from the pipeline (pipeline.c) beyond the
 * public API.
 */
#ifndef VIDFEAT_PIPELINE_H
#define VIDFEAT_PIPELINE_H

#include <stddef.h>

#include "core/status.h"
#include "store/store_sqlite.h"
#include "vidfeat.h"

/* The database row that identifies the pipeline's model and what its vectors mean: name, the
 * ONNX file's sha256, layer, dimension, dtype and preprocessing. *m points into sha and prep,
 * the caller's buffers. VF_ERR_IO when the model file cannot be read. */
vf_status vfi_pipeline_model_row(const vf_pipeline *p, vf_store_model *m, char sha[65], char *prep,
                                 size_t prep_size, vf_err *err);

#endif /* VIDFEAT_PIPELINE_H */
