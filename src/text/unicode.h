/*
 * unicode.h - what the tokenizer needs to know about characters, from ICU (the only file that
 * sees ICU is unicode.c): UTF-8 in and out, NFC, Python's str.lower() (full case mapping, final
 * sigma), and the character classes CLIP's splitting pattern and Python's str methods use.
 *
 * Texts are arrays of code points (uint32_t), allocated with vfi_malloc; the caller frees them.
 * Every function is thread-safe (ICU's data is read-only once loaded).
 */
#ifndef VIDFEAT_UNICODE_H
#define VIDFEAT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The code points of the UTF-8 string s into *out (n of them). Text that is not valid UTF-8
 * (RFC 3629: no overlong forms, surrogates, or values past U+10FFFF) is VF_ERR_INVALID naming
 * the offset of the first bad byte; VF_ERR_NOMEM. */
vf_status vfi_unicode_decode(const char *s, uint32_t **out, size_t *n, vf_err *err);

/* Canonical composition (NFC) of in (n code points) into a new array *out (*n_out). */
vf_status vfi_unicode_nfc(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out, vf_err *err);

/* in lowercased as Python's str.lower() does it: the full mappings of Unicode's SpecialCasing
 * that hold in every language (U+0130 becomes i and a combining dot) and the final sigma, into a
 * new array *out (*n_out). */
vf_status vfi_unicode_lower(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out,
                            vf_err *err);

/* \p{L}: a letter (general category Lu, Ll, Lt, Lm or Lo). */
int vfi_unicode_is_letter(uint32_t c);
/* \p{N}: a number (Nd, Nl or No). */
int vfi_unicode_is_number(uint32_t c);
/* \s of Python's regex module: the White_Space property. */
int vfi_unicode_is_white_space(uint32_t c);
/* Python's str.isspace() (what str.strip() removes): bidirectional class WS, B or S, or
 * general category Zs; U+001C..U+001F among them, which White_Space lacks. */
int vfi_unicode_is_py_space(uint32_t c);
/* The simple case folding of c (what a case-insensitive match compares: U+017F LONG S folds to
 * s). */
uint32_t vfi_unicode_fold(uint32_t c);

/* The UTF-8 bytes of code point c (at most 4) into out; returns how many. c must be a Unicode
 * scalar value. */
size_t vfi_unicode_encode(uint32_t c, unsigned char out[4]);

/* ICU's Unicode version ("15.0") into buf, for --version. */
void vfi_unicode_version(char *buf, size_t size);

#endif /* VIDFEAT_UNICODE_H */
