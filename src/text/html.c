/*
 * html.c - Python's html.unescape() on code points. A reference is '&' followed by one of
 *
 *     #DIGITS[;]   #xHEX[;] (x or X)   NAME[;]  (NAME: 1..32 characters, none of \t \n \f space
 *                                                < & # ;)
 *
 * tried in that order at each '&'. A number becomes its character, the one HTML reads it as
 * (html_charrefs), U+FFFD (a surrogate or past U+10FFFF) or nothing (html_dropped). A name with
 * its ';' (or without, as matched) that the list holds becomes its text; else the longest of its
 * first 2..len-1 characters that the list holds (names HTML accepts without ';'), followed by the
 * rest; else it stays as written. Scanning goes on after what the reference took.
 */
#include "text/html.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "text/html_entities.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int is_digit(uint32_t c)
{
    return c >= '0' && c <= '9';
}

static int hex_value(uint32_t c)
{
    if (is_digit(c))
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

static int in_name(uint32_t c)
{
    return c != '\t' && c != '\n' && c != '\f' && c != ' ' && c != '<' && c != '&' && c != '#' &&
           c != ';';
}

static int cmp_charref(const void *key, const void *elem)
{
    unsigned k = *(const unsigned *)key, e = ((const struct html_charref *)elem)->number;
    return k < e ? -1 : k > e;
}

static int cmp_unsigned(const void *key, const void *elem)
{
    unsigned k = *(const unsigned *)key, e = *(const unsigned *)elem;
    return k < e ? -1 : k > e;
}

static int cmp_entity(const void *key, const void *elem)
{
    return strcmp(key, ((const struct html_entity *)elem)->name);
}

/* Numeric reference `num` (saturated: anything past U+10FFFF is past it) appended to out; returns
 * how many code points (0 or 1). */
static size_t put_number(uint64_t num, uint32_t *out)
{
    unsigned key = num > 0x10ffff ? 0x110000u : (unsigned)num;
    const struct html_charref *r =
        bsearch(&key, html_charrefs, N_ELEMS(html_charrefs), sizeof(html_charrefs[0]), cmp_charref);
    if (r) {
        *out = r->replacement;
        return 1;
    }
    if ((key >= 0xd800 && key <= 0xdfff) || key > 0x10ffff) {
        *out = 0xfffd;
        return 1;
    }
    if (bsearch(&key, html_dropped, N_ELEMS(html_dropped), sizeof(html_dropped[0]), cmp_unsigned))
        return 0;
    *out = key;
    return 1;
}

/* The entity named by name[0..len) (ASCII; at most HTML_ENTITY_LONGEST + 1 characters), or
 * NULL. */
static const struct html_entity *find_entity(const uint32_t *name, size_t len)
{
    char key[HTML_ENTITY_LONGEST + 2];
    if (len > HTML_ENTITY_LONGEST + 1)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (name[i] >= 0x80)
            return NULL; /* every name is ASCII */
        key[i] = (char)name[i];
    }
    key[len] = '\0';
    return bsearch(key, html_entities, N_ELEMS(html_entities), sizeof(html_entities[0]),
                   cmp_entity);
}

/* An entity's text (UTF-8, valid: it comes from the generated table) appended to out. */
static size_t put_text(const char *text, uint32_t *out)
{
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        uint32_t c;
        size_t len;
        if (*p < 0x80) {
            c = *p;
            len = 1;
        } else if (*p < 0xe0) {
            c = *p & 0x1f;
            len = 2;
        } else if (*p < 0xf0) {
            c = *p & 0x0f;
            len = 3;
        } else {
            c = *p & 0x07;
            len = 4;
        }
        for (size_t i = 1; i < len; i++)
            c = c << 6 | (p[i] & 0x3f);
        out[k++] = c;
        p += len;
    }
    return k;
}

vf_status vfi_html_unescape(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out,
                            vf_err *err)
{
    uint32_t *o = vfi_mallocarray(n + 1, sizeof(uint32_t));
    if (!o)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    size_t k = 0, i = 0;
    while (i < n) {
        if (in[i] != '&') {
            o[k++] = in[i++];
            continue;
        }
        size_t j = i + 1;
        if (j < n && in[j] == '#') {
            int hex = j + 1 < n && (in[j + 1] == 'x' || in[j + 1] == 'X') && j + 2 < n &&
                      hex_value(in[j + 2]) >= 0;
            size_t d = hex ? j + 2 : j + 1;
            if (!hex && !(d < n && is_digit(in[d]))) {
                o[k++] = in[i++]; /* "&#" and no number: as written */
                continue;
            }
            uint64_t num = 0;
            for (; d < n && (hex ? hex_value(in[d]) >= 0 : is_digit(in[d])); d++) {
                uint64_t v = hex ? (uint64_t)hex_value(in[d]) : in[d] - '0';
                num = num > 0x10ffff ? num : num * (hex ? 16 : 10) + v;
            }
            if (d < n && in[d] == ';')
                d++;
            k += put_number(num, o + k);
            i = d;
            continue;
        }
        size_t len = 0;
        while (len < HTML_ENTITY_LONGEST && j + len < n && in_name(in[j + len]))
            len++;
        if (len == 0) {
            o[k++] = in[i++];
            continue;
        }
        if (j + len < n && in[j + len] == ';')
            len++;
        const struct html_entity *e = find_entity(in + j, len);
        size_t taken = len;
        for (size_t x = len - 1; !e && x >= 2; x--) {
            e = find_entity(in + j, x);
            taken = x;
        }
        if (!e) { /* not a reference: '&' and the name as written */
            o[k++] = '&';
            memcpy(o + k, in + j, len * sizeof(uint32_t));
            k += len;
        } else {
            k += put_text(e->text, o + k);
            memcpy(o + k, in + j + taken, (len - taken) * sizeof(uint32_t));
            k += len - taken;
        }
        i = j + len;
    }
    *out = o;
    *n_out = k;
    return VF_OK;
}
