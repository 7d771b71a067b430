/*
 * precision.c - the library's version, the names of the precisions (f32, bf16, f16, tf32, int8,
 * and auto, which the extractor resolves to f32 or bf16) and of the kinds of model weights,
 * which every layer uses: the backends, the store's records, the command line.
 */
#include <string.h>
#include <strings.h>

#include "vidfeat.h"

#ifndef VF_VERSION_STRING
#define VF_VERSION_STRING "0.1.0"
#endif

const char *vf_version(void)
{
    return VF_VERSION_STRING;
}

const char *vf_precision_str(vf_precision p)
{
    switch (p) {
    case VF_PRECISION_F32:
        return "f32";
    case VF_PRECISION_BF16:
        return "bf16";
    case VF_PRECISION_F16:
        return "f16";
    case VF_PRECISION_TF32:
        return "tf32";
    case VF_PRECISION_INT8:
        return "int8";
    case VF_PRECISION_AUTO:
        return "auto";
    }
    return "?";
}

const char *vf_weights_str(vf_weights_kind w)
{
    switch (w) {
    case VF_WEIGHTS_OFFICIAL:
        return "official";
    case VF_WEIGHTS_OTHER:
        return "other file";
    case VF_WEIGHTS_RANDOM:
        return "random weights";
    case VF_WEIGHTS_UNKNOWN:
        break;
    }
    return "unknown";
}

vf_status vf_precision_parse(const char *text, vf_precision *out)
{
    if (text &&
        (!strcasecmp(text, "f32") || !strcasecmp(text, "fp32") || !strcasecmp(text, "float32"))) {
        *out = VF_PRECISION_F32;
        return VF_OK;
    }
    if (text && (!strcasecmp(text, "bf16") || !strcasecmp(text, "bfloat16"))) {
        *out = VF_PRECISION_BF16;
        return VF_OK;
    }
    if (text &&
        (!strcasecmp(text, "f16") || !strcasecmp(text, "fp16") || !strcasecmp(text, "float16"))) {
        *out = VF_PRECISION_F16;
        return VF_OK;
    }
    if (text && (!strcasecmp(text, "int8") || !strcasecmp(text, "i8"))) {
        *out = VF_PRECISION_INT8;
        return VF_OK;
    }
    if (text && !strcasecmp(text, "auto")) {
        *out = VF_PRECISION_AUTO;
        return VF_OK;
    }
    if (text && !strcasecmp(text, "tf32")) {
        *out = VF_PRECISION_TF32;
        return VF_OK;
    }
    return VF_ERR_INVALID;
}
