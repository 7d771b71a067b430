/*
 * json.c - vidfeat's JSON, read and written by jansson. Any thread (jansson's values are not
 * shared between threads here).
 */
#include "core/json.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/mem.h"
#include "core/utf8.h"

/* Reals are written with 15 significant digits: enough for every rounded value and 9-digit
 * float written here to come out as its short decimal form. */
#define WRITE_FLAGS (JSON_REAL_PRECISION(15) | JSON_PRESERVE_ORDER)

vf_status vfi_json_parse(const char *text, size_t len, vf_json **out, vf_err *err)
{
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*out)
        return vfi_fail(err, VF_ERR_INVALID, "json %d:%d: %s", je.line, je.column, je.text);
    return VF_OK;
}

vf_status vfi_json_load(const char *path, size_t max_size, vf_json **out, vf_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    char *buf = vfi_malloc(max_size + 1);
    if (!buf) {
        fclose(f);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, max_size + 1, f);
    int bad = ferror(f);
    fclose(f);
    vf_status rc = VF_OK;
    if (bad)
        rc = vfi_fail(err, VF_ERR_IO, "%s: read error", path);
    else if (n > max_size)
        rc = vfi_fail(err, VF_ERR_INVALID, "%s: larger than %zu KiB", path, max_size / 1024);
    if (rc >= 0) {
        rc = vfi_json_parse(buf, n, out, err);
        if (rc < 0)
            vfi_err_prefix(err, "%s", path);
    }
    vfi_free(buf);
    return rc;
}

void vfi_json_free(vf_json **pj)
{
    if (!pj || !*pj)
        return;
    json_decref(*pj);
    *pj = NULL;
}

int vfi_json_is_object(const vf_json *v)
{
    return v && json_is_object(v);
}

long vfi_json_array_len(const vf_json *v)
{
    return v && json_is_array(v) ? (long)json_array_size(v) : -1;
}

const vf_json *vfi_json_at(const vf_json *array, size_t i)
{
    return array ? json_array_get(array, i) : NULL;
}

const vf_json *vfi_json_get(const vf_json *obj, const char *key)
{
    return obj ? json_object_get(obj, key) : NULL;
}

const char *vfi_json_str(const vf_json *obj, const char *key, const char *def)
{
    const json_t *v = vfi_json_get(obj, key);
    return v && json_is_string(v) ? json_string_value(v) : def;
}

double vfi_json_num(const vf_json *obj, const char *key, double def)
{
    const json_t *v = vfi_json_get(obj, key);
    return v && json_is_number(v) ? json_number_value(v) : def;
}

int vfi_json_bool(const vf_json *obj, const char *key, int def)
{
    const json_t *v = vfi_json_get(obj, key);
    return !v ? def : json_is_boolean(v) ? json_is_true(v) : -1;
}

int vfi_json_float(const vf_json *v, float *out)
{
    if (!v || !json_is_number(v))
        return 0;
    double x = json_number_value(v);
    if (!(fabs(x) <= FLT_MAX))
        return 0;
    *out = (float)x;
    return 1;
}

int vfi_json_each(const vf_json *obj, int (*fn)(void *user, const char *key, const vf_json *v),
                  void *user)
{
    if (!vfi_json_is_object(obj))
        return 0;
    const char *key;
    json_t *v;
    /* jansson's iteration macro takes a non-const object; nothing here modifies it */
    json_object_foreach((json_t *)obj, key, v)
    {
        int rc = fn(user, key, v);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

vf_json *vfi_json_new_object(void)
{
    return json_object();
}

vf_json *vfi_json_new_array(void)
{
    return json_array();
}

/*
 * Bytes that are not UTF-8. A file name is bytes, and an archive has names in other encodings;
 * JSON text is Unicode. Such a byte B is written as the escape \uDCBB, a lone low surrogate:
 * what Python's "surrogateescape" (PEP 383) and similar decoders turn back into the byte, so the
 * name survives the round trip. jansson holds only valid UTF-8, so until it is written the byte
 * is the character utf8.h makes of it, U+10FF00 + B, which jansson (asked for ASCII output)
 * escapes as the pair \uDBFF\uDFBB in one piece; vfi_json_write turns that piece into \uDCBB.
 */
static json_t *string_value(const char *s)
{
    if (vfi_utf8_is_plain(s))
        return json_string(s);
    char *text = vfi_utf8_from_bytes(s);
    json_t *v = text ? json_string(text) : NULL;
    vfi_free(text);
    return v;
}

static json_t *real_value(double v, int decimals)
{
    if (!isfinite(v))
        return json_null();
    double scale = pow(10, decimals < 0 ? 0 : decimals > 9 ? 9 : decimals);
    double r = round(v * scale) / scale;
    return json_real(isfinite(r) ? r : v);
}

static json_t *float_value(float v)
{
    if (!isfinite(v))
        return json_null();
    char text[32];
    snprintf(text, sizeof(text), "%.9g", v); /* 9 digits identify a float */
    return json_real(strtod(text, NULL));
}

int vfi_json_add(vf_json *obj, const char *key, vf_json *child)
{
    if (!obj || !child) {
        json_decref(child);
        return -1;
    }
    return json_object_set_new(obj, key, child);
}

int vfi_json_add_str(vf_json *obj, const char *key, const char *s)
{
    return vfi_json_add(obj, key, s ? string_value(s) : json_null());
}

int vfi_json_add_int(vf_json *obj, const char *key, int64_t v)
{
    return vfi_json_add(obj, key, json_integer((json_int_t)v));
}

int vfi_json_add_real(vf_json *obj, const char *key, double v, int decimals)
{
    return vfi_json_add(obj, key, real_value(v, decimals));
}

int vfi_json_add_float(vf_json *obj, const char *key, float v)
{
    return vfi_json_add(obj, key, float_value(v));
}

int vfi_json_add_bool(vf_json *obj, const char *key, int v)
{
    return vfi_json_add(obj, key, json_boolean(v));
}

int vfi_json_push(vf_json *array, vf_json *child)
{
    if (!array || !child) {
        json_decref(child);
        return -1;
    }
    return json_array_append_new(array, child);
}

int vfi_json_push_real(vf_json *array, double v, int decimals)
{
    return vfi_json_push(array, real_value(v, decimals));
}

int vfi_json_push_float(vf_json *array, float v)
{
    return vfi_json_push(array, float_value(v));
}

int vfi_json_push_int(vf_json *array, int64_t v)
{
    return vfi_json_push(array, json_integer((json_int_t)v));
}

/* jansson's output on its way to the file: a byte's escaped pair (see string_value) becomes
 * \uDCBB. */
static int write_piece(const char *buf, size_t size, void *user)
{
    FILE *f = user;
    if (size == 12 && !memcmp(buf, "\\uDBFF\\uDF", 10)) {
        char esc[6] = {'\\', 'u', 'D', 'C', buf[10], buf[11]};
        return fwrite(esc, 1, sizeof(esc), f) == sizeof(esc) ? 0 : -1;
    }
    return fwrite(buf, 1, size, f) == size ? 0 : -1;
}

int vfi_json_write(FILE *f, const vf_json *v, int indent)
{
    size_t flags = WRITE_FLAGS | JSON_ENCODE_ANY | JSON_ENSURE_ASCII;
    if (indent > 0)
        flags |= JSON_INDENT(indent > 31 ? 31 : indent);
    else
        flags |= JSON_COMPACT;
    if (json_dump_callback(v, write_piece, f, flags) != 0 || fputc('\n', f) == EOF)
        return -1;
    return 0;
}
