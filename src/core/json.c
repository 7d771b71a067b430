/*
 * json.c - recursive-descent JSON parser (RFC 8259 grammar) with a nesting limit, for model
 * manifests. Single-threaded; the tree is owned by the caller.
 */
#include "core/json.h"

#include <float.h>
#include <math.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

#define MAX_DEPTH 64

typedef struct parser {
    const char *p, *start, *end;
    vf_err *err;
} parser;

static vf_status perr(parser *ps, const char *what)
{
    int line = 1, col = 1;
    for (const char *q = ps->start; q < ps->p && q < ps->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return vfi_fail(ps->err, VF_ERR_INVALID, "json %d:%d: %s", line, col, what);
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static void json_clear(vf_json *j)
{
    vfi_free(j->string);
    vfi_free(j->key);
    for (size_t i = 0; i < j->n_items; i++)
        json_clear(&j->items[i]);
    vfi_free(j->items);
    memset(j, 0, sizeof(*j));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static vf_status parse_string(parser *ps, char **out)
{
    ps->p++; /* opening quote */
    size_t cap = 16, len = 0;
    char *s = vfi_malloc(cap);
    if (!s)
        return vfi_fail(ps->err, VF_ERR_NOMEM, "out of memory");
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned cp = (unsigned char)*ps->p++;
        int escaped = cp == '\\'; /* a \u code point is encoded as UTF-8, other bytes copied */
        if (cp < 0x20) {
            vfi_free(s);
            return perr(ps, "control character in string");
        }
        if (escaped) {
            if (ps->p >= ps->end)
                break;
            char e = *ps->p++;
            switch (e) {
            case 'n':
                cp = '\n';
                break;
            case 't':
                cp = '\t';
                break;
            case 'r':
                cp = '\r';
                break;
            case 'b':
                cp = '\b';
                break;
            case 'f':
                cp = '\f';
                break;
            case '/':
            case '\\':
            case '"':
                cp = (unsigned char)e;
                break;
            case 'u': {
                cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = ps->p < ps->end ? hexval(*ps->p++) : -1;
                    if (h < 0) {
                        vfi_free(s);
                        return perr(ps, "bad \\u escape");
                    }
                    cp = cp * 16 + (unsigned)h;
                }
                break;
            }
            default:
                vfi_free(s);
                return perr(ps, "bad escape");
            }
        }
        if (len + 4 >= cap) {
            cap *= 2;
            char *ns = vfi_realloc(s, cap);
            if (!ns) {
                vfi_free(s);
                return vfi_fail(ps->err, VF_ERR_NOMEM, "out of memory");
            }
            s = ns;
        }
        if (cp < 0x80 || !escaped) {
            s[len++] = (char)cp;
        } else if (cp < 0x800) {
            s[len++] = (char)(0xc0 | (cp >> 6));
            s[len++] = (char)(0x80 | (cp & 0x3f));
        } else {
            s[len++] = (char)(0xe0 | (cp >> 12));
            s[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            s[len++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    if (ps->p >= ps->end) {
        vfi_free(s);
        return perr(ps, "unterminated string");
    }
    ps->p++;
    s[len] = '\0';
    *out = s;
    return VF_OK;
}

static vf_status parse_value(parser *ps, vf_json *j, int depth);

static vf_status append(parser *ps, vf_json *j, vf_json *item)
{
    vf_json *items = vfi_realloc(j->items, (j->n_items + 1) * sizeof(*items));
    if (!items)
        return vfi_fail(ps->err, VF_ERR_NOMEM, "out of memory");
    j->items = items;
    j->items[j->n_items++] = *item;
    return VF_OK;
}

static vf_status parse_container(parser *ps, vf_json *j, int depth, char close)
{
    vf_status rc;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return VF_OK;
    }
    for (;;) {
        vf_json item;
        memset(&item, 0, sizeof(item));
        skip_ws(ps);
        if (close == '}') {
            if (ps->p >= ps->end || *ps->p != '"')
                return perr(ps, "expected a member name");
            rc = parse_string(ps, &item.key);
            if (rc < 0)
                return rc;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                json_clear(&item);
                return perr(ps, "expected ':'");
            }
            ps->p++;
        }
        rc = parse_value(ps, &item, depth + 1);
        if (rc >= 0)
            rc = append(ps, j, &item);
        if (rc < 0) {
            json_clear(&item);
            return rc;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return VF_OK;
        }
        return perr(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static vf_status parse_value(parser *ps, vf_json *j, int depth)
{
    if (depth > MAX_DEPTH)
        return perr(ps, "nested too deeply");
    skip_ws(ps);
    if (ps->p >= ps->end)
        return perr(ps, "unexpected end");
    char ch = *ps->p;
    if (ch == '{') {
        j->type = VF_JSON_OBJECT;
        return parse_container(ps, j, depth, '}');
    }
    if (ch == '[') {
        j->type = VF_JSON_ARRAY;
        return parse_container(ps, j, depth, ']');
    }
    if (ch == '"') {
        j->type = VF_JSON_STRING;
        return parse_string(ps, &j->string);
    }
    static const struct {
        const char *word;
        vf_json_type type;
        double value;
    } words[] = {{"null", VF_JSON_NULL, 0}, {"true", VF_JSON_BOOL, 1}, {"false", VF_JSON_BOOL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, words[i].word, n)) {
            j->type = words[i].type;
            j->number = words[i].value;
            ps->p += n;
            return VF_OK;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        char buf[64];
        size_t n = 0;
        while (ps->p + n < ps->end && n < sizeof(buf) - 1 && strchr("+-0123456789.eE", ps->p[n]))
            n++;
        memcpy(buf, ps->p, n);
        buf[n] = '\0';
        char *endp;
        j->number = strtod(buf, &endp);
        if (endp != buf + n || n == 0)
            return perr(ps, "bad number");
        j->type = VF_JSON_NUMBER;
        ps->p += n;
        return VF_OK;
    }
    return perr(ps, "unexpected character");
}

vf_status vfi_json_parse(const char *text, size_t len, vf_json **out, vf_err *err)
{
    parser ps = {text, text, text + len, err};
    vf_json *j = vfi_calloc(1, sizeof(*j));
    if (!j)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_status rc = parse_value(&ps, j, 0);
    if (rc >= 0) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            rc = perr(&ps, "trailing characters");
    }
    if (rc < 0) {
        vfi_json_free(&j);
        return rc;
    }
    *out = j;
    return VF_OK;
}

void vfi_json_free(vf_json **pj)
{
    if (!pj || !*pj)
        return;
    json_clear(*pj);
    vfi_free(*pj);
    *pj = NULL;
}

const vf_json *vfi_json_get(const vf_json *obj, const char *key)
{
    if (!obj || obj->type != VF_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n_items; i++) {
        if (!strcmp(obj->items[i].key, key))
            return &obj->items[i];
    }
    return NULL;
}

const char *vfi_json_str(const vf_json *obj, const char *key, const char *def)
{
    const vf_json *v = vfi_json_get(obj, key);
    return v && v->type == VF_JSON_STRING ? v->string : def;
}

double vfi_json_num(const vf_json *obj, const char *key, double def)
{
    const vf_json *v = vfi_json_get(obj, key);
    return v && v->type == VF_JSON_NUMBER ? v->number : def;
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

int vfi_json_float(const vf_json *v, float *out)
{
    if (!v || v->type != VF_JSON_NUMBER || !(fabs(v->number) <= FLT_MAX))
        return 0;
    *out = (float)v->number;
    return 1;
}
