/*
 * json.h - JSON through jansson, the only file that sees it: reading model manifests and int8
 * calibration files, and building the documents vidfeat writes (calibration files, the command
 * line's --json lines). Any thread; a document is used by one thread at a time.
 *
 * A vf_json is a jansson value. Values returned by the getters are borrowed from their document;
 * a value made by a vfi_json_new_* function is owned by the caller until it is added to another
 * (the add/push functions take it over, also when they fail) and freed with vfi_json_free.
 */
#ifndef VIDFEAT_JSON_H
#define VIDFEAT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef struct json_t vf_json;

/* ---- reading ---------------------------------------------------------------------------- */

/* Parse text (length len), refusing duplicate keys. On failure (VF_ERR_INVALID) the message
 * says where ("json LINE:COLUMN: ..."). */
vf_status vfi_json_parse(const char *text, size_t len, vf_json **out, vf_err *err);
/* Read and parse the file at path (at most max_size bytes: VF_ERR_INVALID beyond); VF_ERR_IO
 * when it cannot be read. Messages start with the path. */
vf_status vfi_json_load(const char *path, size_t max_size, vf_json **out, vf_err *err);
void vfi_json_free(vf_json **pj);

int vfi_json_is_object(const vf_json *v);
/* The number of elements when v is an array, else -1. */
long vfi_json_array_len(const vf_json *v);
/* Element i of an array, or NULL. */
const vf_json *vfi_json_at(const vf_json *array, size_t i);
/* Member of an object by name, or NULL. */
const vf_json *vfi_json_get(const vf_json *obj, const char *key);
/* The member's string, or def when absent or not a string. */
const char *vfi_json_str(const vf_json *obj, const char *key, const char *def);
/* The member's number (integer or real), or def. */
double vfi_json_num(const vf_json *obj, const char *key, double def);
/* The member's boolean (1 or 0), or def when absent; -1 when it is something else. */
int vfi_json_bool(const vf_json *obj, const char *key, int def);
/* v's number as a float, when v is a number a float holds (finite, |x| <= FLT_MAX): 1 and *out
 * set; else 0 (converting a larger double to float is undefined behaviour). */
int vfi_json_float(const vf_json *v, float *out);
/* Call fn on each member of an object in document order until it returns non-zero, which is
 * returned (0 when all were visited or obj is not an object). */
int vfi_json_each(const vf_json *obj, int (*fn)(void *user, const char *key, const vf_json *v),
                  void *user);

/* ---- writing ---------------------------------------------------------------------------- */

/* New empty object or array; NULL when out of memory. */
vf_json *vfi_json_new_object(void);
vf_json *vfi_json_new_array(void);
/* Set obj[key]. In a string that is not valid UTF-8 (a file name in another encoding) each
 * stray byte B is written as \uDCBB, which surrogateescape decoders turn back into B (json.c);
 * NULL s writes null. Reals
 * are written with at most `decimals` digits after the point (0..9). Each returns 0, or -1 when
 * out of memory (or obj is NULL). */
int vfi_json_add_str(vf_json *obj, const char *key, const char *s);
int vfi_json_add_int(vf_json *obj, const char *key, int64_t v);
int vfi_json_add_real(vf_json *obj, const char *key, double v, int decimals);
/* A float written so that reading it back gives the same float (9 significant digits). */
int vfi_json_add_float(vf_json *obj, const char *key, float v);
int vfi_json_add_bool(vf_json *obj, const char *key, int v);
/* obj[key] = child; the child is taken over. */
int vfi_json_add(vf_json *obj, const char *key, vf_json *child);
/* Append to an array. */
int vfi_json_push(vf_json *array, vf_json *child);
int vfi_json_push_real(vf_json *array, double v, int decimals);
int vfi_json_push_float(vf_json *array, float v);
int vfi_json_push_int(vf_json *array, int64_t v);

/* Write v to f as ASCII (other characters escaped): on one line (indent 0) or indented by that
 * many spaces, members in the order they were added, then a newline. -1 on a write error. */
int vfi_json_write(FILE *f, const vf_json *v, int indent);

#endif /* VIDFEAT_JSON_H */
