/*
 * tokenizer.c - CLIP's BPE tokenizer (see tokenizer.h for what a text goes through). zlib reads
 * the vocabulary (this is the one file that calls it); unicode.c gives the character classes and
 * mappings, html.c the references.
 *
 * Ids. The vocabulary's order is the reference's: the 256 byte stand-ins (the bytes printable in
 * Latin-1 first, standing for themselves, then the others in order, standing for U+0100 on), the
 * same 256 ending a word ("</w>" after the stand-in), one id per merge (its two sides joined), the
 * start and end tokens. So a merge's result is id 512 + its rank, and BPE works on ids: a pair of
 * ids has a rank when the vocabulary merges them.
 *
 * BPE. The reference repeatedly takes the pair of adjacent symbols with the lowest rank and
 * merges its every occurrence, left to right. Here each adjacent pair with a rank is a candidate
 * in a heap ordered by (rank, position); popping one merges it if both symbols are still there,
 * then the pairs it makes with its neighbours become candidates. That is the same merges in the
 * same order - a merge's result only pairs into merges of higher rank, which the loader makes
 * sure of (a merge may only use tokens defined before it) - in O(n log n) for a piece of n bytes
 * where the reference takes O(n^2).
 */
#include "text/tokenizer.h"

#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include "core/mem.h"
#include "core/strmap.h"
#include "text/html.h"
#include "text/unicode.h"

#define END_OF_WORD   "</w>"
#define N_BYTE_TOKENS 512 /* the byte stand-ins, alone and ending a word */
#define MAX_VOCAB     (1 << 20)
/* A vocabulary file larger than this (uncompressed) is not one. */
#define MAX_FILE_SIZE (64u << 20)

static const char *const specials[2] = {"<|startoftext|>", "<|endoftext|>"};

struct vf_tokenizer {
    int vocab_size, n_merges;
    int32_t byte_id[256];  /* byte -> its stand-in's id */
    uint64_t *pair_key;    /* open addressing: (left << 32 | right), EMPTY where free */
    int32_t *pair_rank;    /* the merge's rank */
    size_t pair_mask;      /* slots - 1 */
    char *text;            /* every token's text, NUL-terminated, one after the other */
    uint32_t *text_offset; /* id -> offset into text */
};

#define EMPTY UINT64_MAX

static uint64_t mix(uint64_t k)
{
    /* splitmix64's finaliser: pairs of small ids spread over the table. */
    k ^= k >> 30;
    k *= UINT64_C(0xbf58476d1ce4e5b9);
    k ^= k >> 27;
    k *= UINT64_C(0x94d049bb133111eb);
    return k ^ (k >> 31);
}

static uint64_t pair_of(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

/* The rank of merging a then b, or -1. */
static int32_t rank_of(const vf_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = pair_of(a, b);
    for (size_t i = mix(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        if (t->pair_key[i] == key)
            return t->pair_rank[i];
        if (t->pair_key[i] == EMPTY)
            return -1;
    }
}

/* Byte b's stand-in character (the reference's bytes_to_unicode). */
static uint32_t stand_in(int b, int *index)
{
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int n_printable = 0, n_other = 0;
    for (int x = 0; x < b; x++) {
        int p = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
        n_printable += p;
        n_other += !p;
    }
    /* 188 printable bytes come first in the vocabulary, then the 68 others. */
    *index = printable ? n_printable : 188 + n_other;
    return printable ? (uint32_t)b : 256u + (uint32_t)n_other;
}

/* The whole (uncompressed) file into a new NUL-terminated buffer. */
static vf_status read_all(const char *path, char **out, size_t *size, vf_err *err)
{
    *out = NULL;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: cannot open", path);
    size_t cap = 1 << 21, len = 0;
    char *buf = vfi_malloc(cap + 1);
    vf_status rc = VF_OK;
    if (!buf) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_SIZE) {
                rc = vfi_fail(err, VF_ERR_MODEL, "%s: larger than %u MiB: not a vocabulary", path,
                              MAX_FILE_SIZE >> 20);
                goto done;
            }
            char *bigger = vfi_realloc(buf, 2 * cap + 1);
            if (!bigger) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                goto done;
            }
            buf = bigger;
            cap *= 2;
        }
        int got = gzread(f, buf + len, (unsigned)(cap - len));
        if (got < 0) {
            int zerr;
            const char *why = gzerror(f, &zerr);
            rc = vfi_fail(err, zerr == Z_MEM_ERROR ? VF_ERR_NOMEM : VF_ERR_IO, "%s: %s", path,
                          zerr == Z_ERRNO ? "read error" : why);
            goto done;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    buf[len] = '\0';
    *out = buf;
    *size = len;
    buf = NULL;
done:
    gzclose(f);
    vfi_free(buf);
    return rc;
}

/* Append token text s (len bytes) as id `id`. */
static vf_status add_token(vf_tokenizer *t, vf_strmap *ids, size_t *used, size_t cap, int id,
                           const char *s, size_t len, vf_err *err)
{
    if (*used + len + 1 > cap)
        return vfi_fail(err, VF_ERR_INTERNAL, "token text overflows its buffer");
    char *dst = t->text + *used;
    memcpy(dst, s, len);
    dst[len] = '\0';
    t->text_offset[id] = (uint32_t)*used;
    *used += len + 1;
    vf_status rc = vfi_strmap_put(ids, dst, id);
    if (rc == VF_ERR_INVALID)
        return vfi_fail(err, VF_ERR_MODEL, "the token '%s' is defined twice", dst);
    if (rc < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    return VF_OK;
}

static vf_status put_pair(vf_tokenizer *t, int32_t a, int32_t b, int32_t rank)
{
    uint64_t key = pair_of(a, b);
    size_t i = mix(key) & t->pair_mask;
    while (t->pair_key[i] != EMPTY) {
        if (t->pair_key[i] == key)
            return VF_ERR_INVALID;
        i = (i + 1) & t->pair_mask;
    }
    t->pair_key[i] = key;
    t->pair_rank[i] = rank;
    return VF_OK;
}

vf_status vfi_tokenizer_create(const char *path, int vocab_size, vf_tokenizer **out, vf_err *err)
{
    *out = NULL;
    if (vocab_size < N_BYTE_TOKENS + 2 || vocab_size > MAX_VOCAB)
        return vfi_fail(err, VF_ERR_INVALID, "vocabulary size %d is out of range", vocab_size);
    char *file = NULL;
    size_t file_size = 0;
    vf_strmap *ids = NULL;
    vf_tokenizer *t = vfi_calloc(1, sizeof(*t));
    vf_status rc = VF_OK;
    if (!t)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    t->vocab_size = vocab_size;
    t->n_merges = vocab_size - N_BYTE_TOKENS - 2;
    TRY(read_all(path, &file, &file_size, err));

    size_t slots = 1;
    while (slots < 2 * (size_t)t->n_merges)
        slots *= 2;
    t->pair_mask = slots - 1;
    t->pair_key = vfi_mallocarray(slots, sizeof(uint64_t));
    t->pair_rank = vfi_mallocarray(slots, sizeof(int32_t));
    t->text_offset = vfi_mallocarray((size_t)vocab_size, sizeof(uint32_t));
    /* Every token's text is at most its merge line's bytes, or a stand-in's. */
    size_t text_cap = file_size + (size_t)N_BYTE_TOKENS * 8 + 64;
    t->text = vfi_malloc(text_cap);
    if (!t->pair_key || !t->pair_rank || !t->text_offset || !t->text ||
        vfi_strmap_create(&ids) < 0) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memset(t->pair_key, 0xff, slots * sizeof(uint64_t));

    size_t used = 0;
    for (int b = 0; b < 256; b++) {
        int index;
        unsigned char s[8];
        size_t len = vfi_unicode_encode(stand_in(b, &index), s);
        t->byte_id[b] = index;
        TRY(add_token(t, ids, &used, text_cap, index, (const char *)s, len, err));
        memcpy(s + len, END_OF_WORD, 4);
        TRY(add_token(t, ids, &used, text_cap, 256 + index, (const char *)s, len + 4, err));
    }

    /* The merges: lines 2 .. n_merges + 1. */
    char *line = strchr(file, '\n');
    for (int r = 0; r < t->n_merges; r++) {
        if (!line || !line[1]) {
            rc = vfi_fail(err, VF_ERR_MODEL, "%s: %d merges, %d expected for %d ids", path, r,
                          t->n_merges, vocab_size);
            goto fail;
        }
        line++;
        char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len && line[len - 1] == '\r')
            len--;
        char *space = memchr(line, ' ', len);
        if (!space || space == line || space + 1 == line + len ||
            memchr(space + 1, ' ', len - (size_t)(space + 1 - line))) {
            rc = vfi_fail(err, VF_ERR_MODEL, "%s: line %d is not a merge ('left right')", path,
                          r + 2);
            goto fail;
        }
        *space = '\0';
        line[len] = '\0'; /* over the line's end: eol still finds the next line */
        int32_t a = vfi_strmap_get(ids, line, -1), b = vfi_strmap_get(ids, space + 1, -1);
        if (a < 0 || b < 0) {
            rc = vfi_fail(err, VF_ERR_MODEL,
                          "%s: line %d merges a token that no earlier line defines ('%s')", path,
                          r + 2, a < 0 ? line : space + 1);
            goto fail;
        }
        /* The merged token: both sides joined (written over the space). */
        memmove(space, space + 1, (size_t)(line + len - space));
        TRY(add_token(t, ids, &used, text_cap, N_BYTE_TOKENS + r, line, len - 1, err));
        if (put_pair(t, a, b, r) < 0) {
            rc = vfi_fail(err, VF_ERR_MODEL, "%s: line %d repeats a merge", path, r + 2);
            goto fail;
        }
        line = eol;
    }
    for (int i = 0; i < 2; i++)
        TRY(add_token(t, ids, &used, text_cap, vocab_size - 2 + i, specials[i], strlen(specials[i]),
                      err));
    vfi_strmap_free(&ids);
    vfi_free(file);
    *out = t;
    return VF_OK;
fail:
    vfi_strmap_free(&ids);
    vfi_free(file);
    vfi_tokenizer_free(&t);
    return rc;
}

void vfi_tokenizer_free(vf_tokenizer **pt)
{
    if (!pt || !*pt)
        return;
    vf_tokenizer *t = *pt;
    vfi_free(t->pair_key);
    vfi_free(t->pair_rank);
    vfi_free(t->text);
    vfi_free(t->text_offset);
    vfi_free(t);
    *pt = NULL;
}

int vfi_tokenizer_vocab_size(const vf_tokenizer *t)
{
    return t->vocab_size;
}

int32_t vfi_tokenizer_start(const vf_tokenizer *t)
{
    return t->vocab_size - 2;
}

int32_t vfi_tokenizer_end(const vf_tokenizer *t)
{
    return t->vocab_size - 1;
}

void vfi_tokenizer_token(const vf_tokenizer *t, int32_t id, char *buf, size_t size)
{
    if (size == 0)
        return;
    if (id < 0 || id >= t->vocab_size) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, size, "%s", t->text + t->text_offset[id]);
}

/* ---- BPE ---------------------------------------------------------------------------------- */

typedef struct candidate {
    int32_t rank;
    int32_t pos;         /* the left symbol's original position */
    int32_t left, right; /* the ids it merges, to tell whether it still applies */
} candidate;

static int before(const candidate *a, const candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(candidate *h, size_t *n, candidate c)
{
    size_t i = (*n)++;
    while (i > 0 && before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static candidate heap_pop(candidate *h, size_t *n)
{
    candidate top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* Work space for one piece, grown as pieces need. */
typedef struct bpe_work {
    int32_t *sym, *next, *prev;
    candidate *heap;
    size_t cap;
} bpe_work;

static void work_free(bpe_work *w)
{
    vfi_free(w->sym);
    vfi_free(w->next);
    vfi_free(w->prev);
    vfi_free(w->heap);
}

static vf_status work_reserve(bpe_work *w, size_t n, vf_err *err)
{
    if (n <= w->cap)
        return VF_OK;
    if (n > INT32_MAX / 4)
        return vfi_fail(err, VF_ERR_INVALID, "a word of %zu bytes is too long", n);
    work_free(w);
    memset(w, 0, sizeof(*w));
    w->sym = vfi_mallocarray(n, sizeof(int32_t));
    w->next = vfi_mallocarray(n, sizeof(int32_t));
    w->prev = vfi_mallocarray(n, sizeof(int32_t));
    /* The first pairs, then at most two new ones per merge. */
    w->heap = vfi_mallocarray(3 * n, sizeof(candidate));
    if (!w->sym || !w->next || !w->prev || !w->heap)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    w->cap = n;
    return VF_OK;
}

static void consider(const vf_tokenizer *t, bpe_work *w, size_t *n_heap, int32_t pos)
{
    if (pos < 0)
        return;
    int32_t nx = w->next[pos];
    if (nx < 0)
        return;
    int32_t r = rank_of(t, w->sym[pos], w->sym[nx]);
    if (r >= 0)
        heap_push(w->heap, n_heap, (candidate){r, pos, w->sym[pos], w->sym[nx]});
}

/* The ids of one piece (bytes s[0..len)), appended to ids[*n] while *n < max; *more set when one
 * did not fit. */
static vf_status bpe(const vf_tokenizer *t, bpe_work *w, const unsigned char *s, size_t len,
                     int32_t *ids, int *n, int max, int *more, vf_err *err)
{
    vf_status rc = work_reserve(w, len, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < len; i++) {
        w->sym[i] = t->byte_id[s[i]];
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < len ? (int32_t)i + 1 : -1;
    }
    w->sym[len - 1] += 256; /* the same byte, ending the word */
    size_t n_heap = 0;
    for (size_t i = 0; i + 1 < len; i++)
        consider(t, w, &n_heap, (int32_t)i);
    while (n_heap > 0) {
        candidate c = heap_pop(w->heap, &n_heap);
        int32_t nx = w->next[c.pos];
        /* Stale: the left symbol was merged into its left neighbour (sym -1), or either side
         * changed since the candidate was made. */
        if (w->sym[c.pos] != c.left || nx < 0 || w->sym[nx] != c.right)
            continue;
        w->sym[c.pos] = N_BYTE_TOKENS + c.rank;
        w->sym[nx] = -1;
        w->next[c.pos] = w->next[nx];
        if (w->next[nx] >= 0)
            w->prev[w->next[nx]] = c.pos;
        consider(t, w, &n_heap, w->prev[c.pos]);
        consider(t, w, &n_heap, c.pos);
    }
    for (int32_t i = 0; i >= 0; i = w->next[i]) {
        if (*n >= max) {
            *more = 1;
            break;
        }
        ids[(*n)++] = w->sym[i];
    }
    return VF_OK;
}

/* ---- cleaning and splitting --------------------------------------------------------------- */

/* Does text[i..) start with lit (lowercase ASCII), compared as the case-insensitive pattern
 * does (simple case folding)? */
static int starts_with(const uint32_t *c, size_t n, size_t i, const char *lit)
{
    size_t len = strlen(lit);
    if (n - i < len)
        return 0;
    for (size_t k = 0; k < len; k++)
        if (vfi_unicode_fold(c[i + k]) != (unsigned char)lit[k])
            return 0;
    return 1;
}

/* Is c (at least strlen(lit) code points) lit itself? */
static int exactly(const uint32_t *c, const char *lit)
{
    for (size_t k = 0; lit[k]; k++)
        if (c[k] != (unsigned char)lit[k])
            return 0;
    return 1;
}

/* Length of the contraction ('s 't 're 've 'm 'll 'd) at c[i], or 0. */
static size_t contraction(const uint32_t *c, size_t n, size_t i)
{
    static const char *const forms[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t k = 0; k < sizeof(forms) / sizeof(forms[0]); k++)
        if (starts_with(c, n, i, forms[k]))
            return strlen(forms[k]);
    return 0;
}

/* The piece the pattern takes at c[i] (alternatives in the pattern's order, the first that
 * matches): its length, 0 at white space (which no piece takes). *special is the special
 * token's index (0 start, 1 end) when the piece is one written exactly, else -1: a piece the
 * case-insensitive pattern takes for one ("<|ſtartoftext|>") is encoded like any other, as the
 * reference looks special tokens up by their exact text. */
static size_t piece_at(const uint32_t *c, size_t nc, size_t i, int *special)
{
    *special = -1;
    for (int s = 0; s < 2; s++) {
        if (starts_with(c, nc, i, specials[s])) {
            if (exactly(c + i, specials[s]))
                *special = s;
            return strlen(specials[s]);
        }
    }
    size_t len = contraction(c, nc, i);
    if (len)
        return len;
    if (vfi_unicode_is_letter(c[i])) {
        while (i + len < nc && vfi_unicode_is_letter(c[i + len]))
            len++;
    } else if (vfi_unicode_is_number(c[i])) {
        len = 1;
    } else if (!vfi_unicode_is_white_space(c[i])) {
        while (i + len < nc && !vfi_unicode_is_white_space(c[i + len]) &&
               !vfi_unicode_is_letter(c[i + len]) && !vfi_unicode_is_number(c[i + len]))
            len++;
    }
    return len;
}

/* The reference's cleaning of the decoded text c (n code points): NFC, references resolved
 * twice, strip, white space runs made one space, strip, lowercase; into a new array. */
static vf_status clean(const uint32_t *c, size_t n, uint32_t **out, size_t *n_out, vf_err *err)
{
    uint32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    vf_status rc = vfi_unicode_nfc(c, n, &a, &na, err);
    if (rc >= 0)
        rc = vfi_html_unescape(a, na, &b, &nb, err);
    vfi_free(a);
    a = NULL;
    if (rc >= 0)
        rc = vfi_html_unescape(b, nb, &a, &na, err);
    vfi_free(b);
    b = NULL;
    if (rc < 0)
        goto fail;
    /* Strip (str.isspace), collapse runs of White_Space into one space, strip again. */
    size_t lo = 0, hi = na;
    while (lo < hi && vfi_unicode_is_py_space(a[lo]))
        lo++;
    while (hi > lo && vfi_unicode_is_py_space(a[hi - 1]))
        hi--;
    size_t k = 0;
    int in_run = 0;
    for (size_t i = lo; i < hi; i++) { /* k <= i: written in place */
        int space = vfi_unicode_is_white_space(a[i]);
        if (!space || !in_run)
            a[k++] = space ? ' ' : a[i];
        in_run = space;
    }
    lo = 0;
    while (lo < k && vfi_unicode_is_py_space(a[lo]))
        lo++;
    while (k > lo && vfi_unicode_is_py_space(a[k - 1]))
        k--;
    rc = vfi_unicode_lower(a + lo, k - lo, out, n_out, err);
fail:
    vfi_free(a);
    vfi_free(b);
    return rc;
}

vf_status vfi_tokenizer_encode(const vf_tokenizer *t, const char *text, int context, int32_t *ids,
                               int *n, int *truncated, vf_err *err)
{
    *n = 0;
    if (truncated)
        *truncated = 0;
    if (context < 2)
        return vfi_fail(err, VF_ERR_INVALID, "a context of %d ids holds no text", context);
    uint32_t *dec = NULL, *c = NULL;
    unsigned char *bytes = NULL;
    size_t n_dec = 0, nc = 0;
    bpe_work w = {0};
    vf_status rc = vfi_unicode_decode(text, &dec, &n_dec, err);
    if (rc >= 0)
        rc = clean(dec, n_dec, &c, &nc, err);
    if (rc < 0)
        goto done;
    bytes = vfi_mallocarray(nc + 1, 4);
    if (!bytes) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }

    ids[(*n)++] = vfi_tokenizer_start(t);
    int max = context - 1; /* room for the end token */
    int more = 0;
    for (size_t i = 0; i < nc && !more;) {
        int special;
        size_t len = piece_at(c, nc, i, &special);
        if (!len) { /* white space between pieces */
            i++;
            continue;
        }
        if (special >= 0 && *n < max) {
            ids[(*n)++] = t->vocab_size - 2 + special;
        } else if (special >= 0) {
            more = 1;
        } else {
            size_t nb = 0;
            for (size_t k = 0; k < len; k++)
                nb += vfi_unicode_encode(c[i + k], bytes + nb);
            rc = bpe(t, &w, bytes, nb, ids, n, max, &more, err);
            if (rc < 0)
                goto done;
        }
        i += len;
    }
    ids[(*n)++] = vfi_tokenizer_end(t);
    if (truncated)
        *truncated = more;
done:
    work_free(&w);
    vfi_free(bytes);
    vfi_free(dec);
    vfi_free(c);
    if (rc < 0)
        *n = 0;
    return rc;
}
