/*
 * api.h - what the pipeline needs from the extractor behind the public API.
 */
#ifndef VIDFEAT_API_H
#define VIDFEAT_API_H

#include "backend.h"
#include "vidfeat.h"

/* The compiled backend of an extractor (borrowed; lives as long as ex). */
vf_backend *vfi_extractor_backend(vf_extractor *ex);

#endif /* VIDFEAT_API_H */
