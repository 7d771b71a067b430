/*
 * utf8.c - see utf8.h.
 */
#include "core/utf8.h"

#include <string.h>

#include "core/mem.h"

size_t vfi_utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : n;
}

/* Is the valid 4-byte sequence at s one of the characters bytes are written as? */
static int is_byte_char(const unsigned char *s)
{
    /* U+10FF80..U+10FFFF: F4 8F BE|BF xx */
    return s[0] == 0xf4 && s[1] == 0x8f && (s[2] == 0xbe || s[2] == 0xbf);
}

int vfi_utf8_is_plain(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = vfi_utf8_len(p);
        if (!n || (n == 4 && is_byte_char(p)))
            return 0;
        p += n;
    }
    return 1;
}

char *vfi_utf8_from_bytes(const char *s)
{
    size_t len = strlen(s);
    char *out = vfi_mallocarray(len + 1, 4); /* each byte may become 4 */
    if (!out)
        return NULL;
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = vfi_utf8_len(p);
        if (n == 4 && is_byte_char(p))
            n = 0; /* its bytes are written one by one, so that they read back as bytes */
        if (n) {
            memcpy(out + j, p, n);
            j += n;
            p += n;
            continue;
        }
        unsigned cp = VF_UTF8_BYTE_PLANE + *p++;
        out[j++] = (char)(0xf0 | cp >> 18);
        out[j++] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[j++] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[j++] = (char)(0x80 | (cp & 0x3f));
    }
    out[j] = '\0';
    return out;
}

char *vfi_utf8_to_bytes(const char *s)
{
    char *out = vfi_strdup(s); /* never longer */
    if (!out)
        return NULL;
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = vfi_utf8_len(p);
        if (n == 4 && is_byte_char(p)) {
            out[j++] = (char)(((p[2] & 0x3f) << 6 | (p[3] & 0x3f)) & 0xff);
            p += 4;
        } else { /* text that is not ours (or not UTF-8) is kept as it is */
            n = n ? n : 1;
            memcpy(out + j, p, n);
            j += n;
            p += n;
        }
    }
    out[j] = '\0';
    return out;
}
