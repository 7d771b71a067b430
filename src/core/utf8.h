/*
 * utf8.h - file names (bytes) in places that hold only UTF-8 text: JSON, PostgreSQL's text.
 *
 * A name is bytes, and archives hold names in other encodings (Latin-1). Such a name is made
 * text by writing each byte B that is not part of valid UTF-8 as the character U+10FF00 + B (only
 * bytes 0x80..0xFF are ever invalid, so U+10FF80..U+10FFFF, the end of plane 16's private use);
 * a name that really holds one of those characters has that character's own bytes written so
 * too, so the text always gives the name back. A valid UTF-8 name without them is its own text.
 */
#ifndef VIDFEAT_UTF8_H
#define VIDFEAT_UTF8_H

#include <stddef.h>

#define VF_UTF8_BYTE_PLANE 0x10ff00u /* + byte: the character a byte is written as */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the byte there does not start one
 * (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). s is NUL-terminated. */
size_t vfi_utf8_len(const unsigned char *s);

/* Is s its own text (valid UTF-8 without U+10FF80..U+10FFFF)? */
int vfi_utf8_is_plain(const char *s);

/* The text for the name s, and the name for the text s: new strings (vfi_free); NULL only when
 * out of memory. vfi_utf8_to_bytes(vfi_utf8_from_bytes(x)) is x for every x. */
char *vfi_utf8_from_bytes(const char *s);
char *vfi_utf8_to_bytes(const char *s);

#endif /* VIDFEAT_UTF8_H */
