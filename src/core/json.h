/*
 * json.h - a small JSON reader for model manifests and int8 calibration files: parses a whole
 * document into a tree. Not a general-purpose library: no writer, numbers are doubles, \u escapes
 * outside ASCII are stored as UTF-8.
 */
#ifndef VIDFEAT_JSON_H
#define VIDFEAT_JSON_H

#include <stddef.h>

#include "core/status.h"

typedef enum vf_json_type {
    VF_JSON_NULL = 0,
    VF_JSON_BOOL,
    VF_JSON_NUMBER,
    VF_JSON_STRING,
    VF_JSON_ARRAY,
    VF_JSON_OBJECT,
} vf_json_type;

typedef struct vf_json vf_json;
struct vf_json {
    vf_json_type type;
    double number;  /* NUMBER, BOOL (0/1) */
    char *string;   /* STRING; owned */
    char *key;      /* member name when inside an object; owned */
    vf_json *items; /* ARRAY / OBJECT children; owned */
    size_t n_items;
};

/* Parse text (length len). On failure the message says where (line:column). */
vf_status vfi_json_parse(const char *text, size_t len, vf_json **out, vf_err *err);
/* Read and parse the file at path (at most max_size bytes: VF_ERR_INVALID beyond); VF_ERR_IO
 * when it cannot be read. Messages start with the path. */
vf_status vfi_json_load(const char *path, size_t max_size, vf_json **out, vf_err *err);
void vfi_json_free(vf_json **pj);

/* Member of an object by name, or NULL. */
const vf_json *vfi_json_get(const vf_json *obj, const char *key);
/* The member's string, or def when absent or not a string. */
const char *vfi_json_str(const vf_json *obj, const char *key, const char *def);
/* The member's number, or def. */
double vfi_json_num(const vf_json *obj, const char *key, double def);
/* v's number as a float, when v is a number a float holds (finite, |x| <= FLT_MAX): 1 and *out
 * set; else 0 (converting a larger double to float is undefined behaviour). */
int vfi_json_float(const vf_json *v, float *out);

#endif /* VIDFEAT_JSON_H */
