/*
 * unicode.c - characters through ICU (its C API: ustring, unorm2, uchar), the one file that
 * calls it. ICU works in UTF-16; the tokenizer in code points: each operation converts on the way
 * in and out, which costs little next to the network a text is then run through.
 */
#include "text/unicode.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/uversion.h>

#include "core/mem.h"
#include "core/utf8.h"

/* Longest text converted at once: ICU counts in int32_t UTF-16 units (two per code point at
 * most, and a lowercase mapping makes at most three of one). */
#define MAX_UNITS (INT32_MAX / 4)

static vf_status icu_fail(vf_err *err, UErrorCode e, const char *what)
{
    if (e == U_MEMORY_ALLOCATION_ERROR)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    return vfi_fail(err, VF_ERR_INTERNAL, "%s: ICU: %s", what, u_errorName(e));
}

/* UTF-16 of in (n code points) into a new array. */
static vf_status to_utf16(const uint32_t *in, size_t n, UChar **out, int32_t *len, vf_err *err)
{
    *out = NULL;
    if (n > MAX_UNITS / 2)
        return vfi_fail(err, VF_ERR_INVALID, "text of %zu characters is too long", n);
    UChar *u = vfi_mallocarray(2 * n + 1, sizeof(UChar));
    if (!u)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    UErrorCode e = U_ZERO_ERROR;
    int32_t got = 0;
    u_strFromUTF32(u, (int32_t)(2 * n + 1), &got, (const UChar32 *)in, (int32_t)n, &e);
    if (U_FAILURE(e)) {
        vfi_free(u);
        return icu_fail(err, e, "UTF-32 to UTF-16");
    }
    *out = u;
    *len = got;
    return VF_OK;
}

/* The code points of u (len units) into a new array. */
static vf_status from_utf16(const UChar *u, int32_t len, uint32_t **out, size_t *n, vf_err *err)
{
    *out = NULL;
    uint32_t *c = vfi_mallocarray((size_t)len + 1, sizeof(uint32_t));
    if (!c)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    UErrorCode e = U_ZERO_ERROR;
    int32_t got = 0;
    u_strToUTF32((UChar32 *)c, len + 1, &got, u, len, &e);
    if (U_FAILURE(e)) {
        vfi_free(c);
        return icu_fail(err, e, "UTF-16 to UTF-32");
    }
    *out = c;
    *n = (size_t)got;
    return VF_OK;
}

vf_status vfi_unicode_decode(const char *s, uint32_t **out, size_t *n, vf_err *err)
{
    *out = NULL;
    *n = 0;
    size_t len = strlen(s);
    /* Find the first byte that does not start a valid sequence, to name it. */
    for (size_t i = 0; i < len;) {
        size_t k = vfi_utf8_len((const unsigned char *)s + i);
        if (k == 0)
            return vfi_fail(err, VF_ERR_INVALID, "not valid UTF-8 (byte %zu, 0x%02x)", i,
                            (unsigned char)s[i]);
        i += k;
    }
    if (len > MAX_UNITS / 2)
        return vfi_fail(err, VF_ERR_INVALID, "text of %zu bytes is too long", len);
    /* At most one code point per byte. */
    uint32_t *c = vfi_mallocarray(len + 1, sizeof(uint32_t));
    UChar *u = vfi_mallocarray(len + 1, sizeof(UChar));
    vf_status rc = VF_OK;
    if (!c || !u) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    UErrorCode e = U_ZERO_ERROR;
    int32_t units = 0, got = 0;
    u_strFromUTF8(u, (int32_t)len + 1, &units, s, (int32_t)len, &e);
    if (U_SUCCESS(e))
        u_strToUTF32((UChar32 *)c, (int32_t)len + 1, &got, u, units, &e);
    if (U_FAILURE(e)) {
        rc = icu_fail(err, e, "UTF-8");
        goto fail;
    }
    vfi_free(u);
    *out = c;
    *n = (size_t)got;
    return VF_OK;
fail:
    vfi_free(c);
    vfi_free(u);
    return rc;
}

/* An ICU transformation of UTF-16 (normalisation, case mapping): the length it needs when dst
 * is NULL (cap 0), else the text written into dst. */
typedef int32_t (*u16_transform)(const void *arg, const UChar *src, int32_t len, UChar *dst,
                                 int32_t cap, UErrorCode *e);

static int32_t nfc(const void *arg, const UChar *src, int32_t len, UChar *dst, int32_t cap,
                   UErrorCode *e)
{
    return unorm2_normalize(arg, src, len, dst, cap, e);
}

static int32_t lower(const void *arg, const UChar *src, int32_t len, UChar *dst, int32_t cap,
                     UErrorCode *e)
{
    (void)arg;
    /* the root locale (""): the mappings every language shares, as Python's lower() */
    return u_strToLower(dst, cap, src, len, "", e);
}

/* fn over in (n code points), ICU's way: ask the length, then fill; into a new array. */
static vf_status transform(const uint32_t *in, size_t n, u16_transform fn, const void *arg,
                           const char *what, uint32_t **out, size_t *n_out, vf_err *err)
{
    UChar *u = NULL, *v = NULL;
    int32_t len = 0;
    vf_status rc = to_utf16(in, n, &u, &len, err);
    if (rc < 0)
        return rc;
    UErrorCode e = U_ZERO_ERROR;
    int32_t need = fn(arg, u, len, NULL, 0, &e);
    if (e == U_BUFFER_OVERFLOW_ERROR)
        e = U_ZERO_ERROR;
    if (U_SUCCESS(e) && !(v = vfi_mallocarray((size_t)need + 1, sizeof(UChar)))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (U_SUCCESS(e))
        need = fn(arg, u, len, v, need + 1, &e);
    rc = U_FAILURE(e) ? icu_fail(err, e, what) : from_utf16(v, need, out, n_out, err);
done:
    vfi_free(u);
    vfi_free(v);
    return rc;
}

vf_status vfi_unicode_nfc(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out, vf_err *err)
{
    UErrorCode e = U_ZERO_ERROR;
    const UNormalizer2 *n2 = unorm2_getNFCInstance(&e);
    if (U_FAILURE(e))
        return icu_fail(err, e, "NFC");
    return transform(in, n, nfc, n2, "NFC", out, n_out, err);
}

vf_status vfi_unicode_lower(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out,
                            vf_err *err)
{
    return transform(in, n, lower, NULL, "lowercase", out, n_out, err);
}

int vfi_unicode_is_letter(uint32_t c)
{
    switch (u_charType((UChar32)c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
        return 1;
    default:
        return 0;
    }
}

int vfi_unicode_is_number(uint32_t c)
{
    switch (u_charType((UChar32)c)) {
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
        return 1;
    default:
        return 0;
    }
}

int vfi_unicode_is_white_space(uint32_t c)
{
    return u_hasBinaryProperty((UChar32)c, UCHAR_WHITE_SPACE) != 0;
}

int vfi_unicode_is_py_space(uint32_t c)
{
    if (u_charType((UChar32)c) == U_SPACE_SEPARATOR)
        return 1;
    switch (u_charDirection((UChar32)c)) {
    case U_WHITE_SPACE_NEUTRAL:
    case U_BLOCK_SEPARATOR:
    case U_SEGMENT_SEPARATOR:
        return 1;
    default:
        return 0;
    }
}

uint32_t vfi_unicode_fold(uint32_t c)
{
    return (uint32_t)u_foldCase((UChar32)c, U_FOLD_CASE_DEFAULT);
}

size_t vfi_unicode_encode(uint32_t c, unsigned char out[4])
{
    if (c < 0x80) {
        out[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (unsigned char)(0xc0 | (c >> 6));
        out[1] = (unsigned char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (c >> 12));
        out[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (c >> 18));
    out[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (c & 0x3f));
    return 4;
}

void vfi_unicode_version(char *buf, size_t size)
{
    UVersionInfo v;
    char text[U_MAX_VERSION_STRING_LENGTH];
    u_getUnicodeVersion(v);
    u_versionToString(v, text);
    snprintf(buf, size, "%s (ICU %s)", text, U_ICU_VERSION);
}
