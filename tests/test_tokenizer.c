/*
 * test_tokenizer.c - CLIP's tokenizer: HTML references and the Unicode steps on their own, then
 * (with the vocabulary) each rule of the reference, and every line of the jsonl files given as
 * arguments (../shared's 1,200 reference tokenizations, and tests/python/clip_tokens.py's random
 * texts) id for id.
 *
 *     test_tokenizer VOCAB [FILE.jsonl...]
 *
 * Without the vocabulary file the rules that need it skip (exit 77 after the others pass).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"
#include "core/mem.h"
#include "text/html.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

/* ---- code points in and out ---- */

static uint32_t *decode(const char *s, size_t *n)
{
    vf_err err = {0};
    uint32_t *c = NULL;
    CHECK_OK(vfi_unicode_decode(s, &c, n, &err), err.msg);
    return c;
}

static char *encode(const uint32_t *c, size_t n)
{
    char *s = malloc(4 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += vfi_unicode_encode(c[i], (unsigned char *)s + k);
    s[k] = '\0';
    return s;
}

static void check_unescape(const char *in, const char *want)
{
    size_t n, m;
    uint32_t *c = decode(in, &n), *out = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_html_unescape(c, n, &out, &m, &err), err.msg);
    CHECK(m <= n);
    char *got = encode(out, m);
    CHECK_MSG(!strcmp(got, want), "unescape('%s') = '%s', want '%s'", in, got, want);
    free(got);
    vfi_free(out);
    vfi_free(c);
}

/* What Python's html.unescape gives (each checked with Python 3.11). */
static void test_html(void)
{
    check_unescape("no references", "no references");
    check_unescape("&amp; &lt;b&gt;", "& <b>");
    check_unescape("&amp;lt;", "&lt;"); /* once: the tokenizer runs it twice */
    check_unescape("caf&eacute; caf&#233; caf&#xE9; caf&#XE9", "café café café café");
    check_unescape("&amp", "&");       /* accepted without ';' */
    check_unescape("&ampx;", "&x;");   /* the longest name HTML accepts without ';' */
    check_unescape("&notit;", "¬it;"); /* "notin;" is a name, "notit;" is not: "not" */
    check_unescape("&notin;", "∉");
    check_unescape("&foo; & &; &#; &#x;", "&foo; & &; &#; &#x;");
    check_unescape("&#150;&#128;&#x9d;", "–€\xc2\x9d"); /* Windows-1252 where HTML says */
    check_unescape("&#0;&#xD800;&#1114112;&#99999999999999999999;", "\xef\xbf\xbd\xef\xbf\xbd"
                                                                    "\xef\xbf\xbd\xef\xbf\xbd");
    check_unescape("a&#1;b&#xFFFE;c&#x1FFFF;d", "abcd"); /* dropped */
    check_unescape("&#13;", "\r");
    check_unescape("&#128512;&#x1F600", "😀😀");
    check_unescape("&#0x41;", "\xef\xbf\xbdx41;");    /* "#0" is the number */
    check_unescape("&NotNestedGreaterGreater;", "⪢̸"); /* two characters */
    check_unescape("&abcdefghijklmnopqrstuvwxyzabcdefghij;",
                   "&abcdefghijklmnopqrstuvwxyzabcdefghij;");
    check_unescape("&AMP;&COPY&copy2023", "&©©2023");
    check_unescape("&&amp;", "&&");
    check_unescape("&é;", "&é;");
    check_unescape("&ampé", "&é");
}

static void check_lower(const char *in, const char *want)
{
    size_t n, m;
    uint32_t *c = decode(in, &n), *out = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_unicode_lower(c, n, &out, &m, &err), err.msg);
    char *got = encode(out, m);
    CHECK_MSG(!strcmp(got, want), "lower('%s') = '%s', want '%s'", in, got, want);
    free(got);
    vfi_free(out);
    vfi_free(c);
}

static void test_unicode(void)
{
    /* Python's str.lower(): full mappings, final sigma, no language rules. */
    check_lower("A RED CAR", "a red car");
    check_lower("İstanbul", "i\xcc\x87stanbul");
    check_lower("ΟΔΟΣ ΣΑ", "οδος σα");
    check_lower("STRASSE Straße ẞ", "strasse straße ß");
    check_lower("ǅ ſ", "ǆ ſ");

    size_t n, m;
    uint32_t *c = decode("e\xcc\x81 \xe1\x84\x80\xe1\x85\xa1 A\xcc\x8a", &n), *out = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_unicode_nfc(c, n, &out, &m, &err), err.msg);
    char *got = encode(out, m);
    CHECK(!strcmp(got, "é 가 Å"));
    free(got);
    vfi_free(out);
    vfi_free(c);

    CHECK(vfi_unicode_is_letter('a') && vfi_unicode_is_letter(0x6771) &&
          !vfi_unicode_is_letter('1'));
    CHECK(vfi_unicode_is_number('7') && vfi_unicode_is_number(0xbd) &&
          vfi_unicode_is_number(0x2160));
    CHECK(!vfi_unicode_is_number('a') && !vfi_unicode_is_letter(0x1f600));
    /* White_Space (regex's \s) and str.isspace differ on U+001C..U+001F; U+180E and U+200B are
     * neither. */
    CHECK(vfi_unicode_is_white_space(0x3000) && vfi_unicode_is_py_space(0x3000));
    CHECK(!vfi_unicode_is_white_space(0x1c) && vfi_unicode_is_py_space(0x1c));
    CHECK(!vfi_unicode_is_white_space(0x180e) && !vfi_unicode_is_py_space(0x180e));
    CHECK(!vfi_unicode_is_white_space(0x200b) && !vfi_unicode_is_py_space(0x200b));
    CHECK(vfi_unicode_is_white_space(0x85) && vfi_unicode_is_py_space(0x85));
    CHECK_EQ(vfi_unicode_fold(0x17f), 's');
    CHECK_EQ(vfi_unicode_fold('S'), 's');

    /* Invalid UTF-8, named by its first bad byte. */
    static const char *const bad[] = {"ab\xff", "\xc0\x80", "\xed\xa0\x80", "a\xe2\x82",
                                      "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint32_t *x = NULL;
        CHECK_EQ(vfi_unicode_decode(bad[i], &x, &n, &err), VF_ERR_INVALID);
        CHECK(strstr(err.msg, "UTF-8") && strstr(err.msg, "byte"));
        CHECK(x == NULL);
    }
}

/* ---- with the vocabulary ---- */

static int encode_ids(const vf_tokenizer *t, const char *text, int context, int32_t *ids,
                      int *truncated)
{
    int n = 0;
    vf_err err = {0};
    CHECK_OK(vfi_tokenizer_encode(t, text, context, ids, &n, truncated, &err), err.msg);
    return n;
}

static void check_ids(const vf_tokenizer *t, const char *text, const int32_t *want, int n_want)
{
    int32_t ids[VF_CLIP_CONTEXT];
    int n = encode_ids(t, text, VF_CLIP_CONTEXT, ids, NULL);
    int same = n == n_want;
    for (int i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        fprintf(stderr, "'%s': got", text);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  want");
        for (int i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fputc('\n', stderr);
        exit(1);
    }
}

/* Two texts the reference gives the same ids. */
static void check_same(const vf_tokenizer *t, const char *a, const char *b)
{
    int32_t x[VF_CLIP_CONTEXT], y[VF_CLIP_CONTEXT];
    int n = encode_ids(t, a, VF_CLIP_CONTEXT, x, NULL);
    int m = encode_ids(t, b, VF_CLIP_CONTEXT, y, NULL);
    CHECK_MSG(n == m && !memcmp(x, y, (size_t)n * sizeof(int32_t)), "'%s' and '%s' differ", a, b);
}

static void test_rules(const vf_tokenizer *t)
{
    CHECK_EQ(vfi_tokenizer_vocab_size(t), VF_CLIP_VOCAB_SIZE);
    CHECK_EQ(vfi_tokenizer_start(t), 49406);
    CHECK_EQ(vfi_tokenizer_end(t), 49407);
    char tok[64];
    vfi_tokenizer_token(t, 49407, tok, sizeof(tok));
    CHECK(!strcmp(tok, "<|endoftext|>"));
    vfi_tokenizer_token(t, 320, tok, sizeof(tok));
    CHECK(!strcmp(tok, "a</w>"));

    /* ids of the reference (OpenAI's simple_tokenizer). */
    static const int32_t empty[] = {49406, 49407};
    check_ids(t, "", empty, 2);
    check_ids(t, " \t\n ", empty, 2);
    static const int32_t dog[] = {49406, 320, 1125, 539, 320, 1929, 49407};
    check_ids(t, "a photo of a dog", dog, 7);
    /* Case, white space runs and ends, references (twice) change nothing. */
    check_same(t, "a photo of a dog", "  A PHOTO\t\n of\u3000a  Dog ");
    check_same(t, "a photo of a dog", "a&#32;photo&nbsp;of a&amp;#32;dog"); /* nbsp: \s */
    check_same(t, "cats & dogs", "cats &amp;amp; dogs");
    check_same(t, "café", "cafe\xcc\x81"); /* NFC */
    /* str.strip() takes U+001C..U+001F from the ends; inside, they are not white space. */
    check_same(t, "dog", "\x1c dog\x1f");
    /* The special tokens in a text are theirs, written exactly (after lowercasing). */
    static const int32_t sp[] = {49406, 1929, 49407, 2368, 49407};
    check_ids(t, "dog<|ENDOFTEXT|>cat", sp, 5);
    int32_t a[VF_CLIP_CONTEXT], b[VF_CLIP_CONTEXT];
    int n = encode_ids(t, "<|ſtartoftext|>", VF_CLIP_CONTEXT, a, NULL);
    CHECK(n > 3); /* taken as one piece by the pattern, but not the token */
    for (int i = 1; i < n - 1; i++)
        CHECK(a[i] < 49406);
    /* Contractions are pieces of their own, also after other letters. */
    n = encode_ids(t, "it's", VF_CLIP_CONTEXT, a, NULL);
    int m = encode_ids(t, "it 's", VF_CLIP_CONTEXT, b, NULL);
    CHECK(n == m && !memcmp(a, b, (size_t)n * sizeof(int32_t)));
    /* A number is one digit a piece: "2023" is four pieces, each ending a word. */
    n = encode_ids(t, "2023", VF_CLIP_CONTEXT, a, NULL);
    CHECK_EQ(n, 6);
    m = encode_ids(t, "2 0 2 3", VF_CLIP_CONTEXT, b, NULL);
    CHECK(n == m && !memcmp(a, b, (size_t)n * sizeof(int32_t)));

    /* The context: 75 ids of text at most, then the end token; shorter contexts too. */
    char longtext[4096] = "";
    for (int i = 0; i < 200; i++)
        strcat(longtext, "dog ");
    int truncated = 0;
    n = encode_ids(t, longtext, VF_CLIP_CONTEXT, a, &truncated);
    CHECK_EQ(n, VF_CLIP_CONTEXT);
    CHECK_EQ(truncated, 1);
    CHECK_EQ(a[0], 49406);
    CHECK_EQ(a[76], 49407);
    for (int i = 1; i < 76; i++)
        CHECK_EQ(a[i], 1929);
    n = encode_ids(t, "dog dog dog", 4, a, &truncated);
    CHECK(n == 4 && truncated && a[1] == 1929 && a[2] == 1929 && a[3] == 49407);
    n = encode_ids(t, "dog dog", 4, a, &truncated);
    CHECK(n == 4 && !truncated);
    n = encode_ids(t, "dog", 2, a, &truncated);
    CHECK(n == 2 && truncated && a[1] == 49407);
    /* A long word costs n log n, not n^2: 200,000 letters. */
    size_t big = 200000;
    char *word = malloc(big + 1);
    for (size_t i = 0; i < big; i++)
        word[i] = "abcdefghij"[(i * 7 + i / 3) % 10];
    word[big] = '\0';
    n = encode_ids(t, word, VF_CLIP_CONTEXT, a, &truncated);
    CHECK(n == VF_CLIP_CONTEXT && truncated);
    free(word);

    /* Bad input. */
    vf_err err = {0};
    CHECK_EQ(vfi_tokenizer_encode(t, "caf\xe9", VF_CLIP_CONTEXT, a, &n, NULL, &err),
             VF_ERR_INVALID);
    CHECK(strstr(err.msg, "UTF-8") && strstr(err.msg, "byte 3"));
    CHECK_EQ(n, 0);
    CHECK_EQ(vfi_tokenizer_encode(t, "dog", 1, a, &n, NULL, &err), VF_ERR_INVALID);
}

/* Every {"text", "ids"} line of path: the same ids. */
static void test_file(const vf_tokenizer *t, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        SKIP("%s: cannot read", path);
    static char line[1 << 20];
    int n_lines = 0, n_cut = 0;
    while (fgets(line, sizeof(line), f)) {
        vf_json *doc = NULL;
        vf_err err = {0};
        CHECK_OK(vfi_json_parse(line, strlen(line), &doc, &err), err.msg);
        const char *text = vfi_json_str(doc, "text", NULL);
        const vf_json *want = vfi_json_get(doc, "ids");
        CHECK(text && want && vfi_json_array_len(want) >= 2);
        int32_t ids[VF_CLIP_CONTEXT];
        int n = 0, truncated = 0;
        CHECK_OK(vfi_tokenizer_encode(t, text, VF_CLIP_CONTEXT, ids, &n, &truncated, &err),
                 err.msg);
        long n_want = vfi_json_array_len(want);
        int same = n == n_want;
        for (int i = 0; same && i < n; i++) { /* ids < 2^24: exact as floats */
            float x = -1;
            CHECK(vfi_json_float(vfi_json_at(want, (size_t)i), &x));
            same = (int32_t)x == ids[i];
        }
        if (!same) {
            fprintf(stderr, "%s line %d: %s\n  got ", path, n_lines + 1, line);
            for (int i = 0; i < n; i++)
                fprintf(stderr, " %d", ids[i]);
            fputc('\n', stderr);
            exit(1);
        }
        n_cut += truncated;
        n_lines++;
        vfi_json_free(&doc);
    }
    fclose(f);
    CHECK(n_lines > 0);
    printf("%s: %d texts, the same ids (%d cut to the context)\n", path, n_lines, n_cut);
}

int main(int argc, char **argv)
{
    test_html();
    test_unicode();
    if (argc < 2)
        SKIP("no vocabulary given");
    vf_tokenizer *t = NULL;
    vf_err err = {0};
    vf_status rc = vfi_tokenizer_create(argv[1], VF_CLIP_VOCAB_SIZE, &t, &err);
    if (rc == VF_ERR_IO)
        SKIP("%s", err.msg);
    CHECK_OK(rc, err.msg);
    test_rules(t);
    for (int i = 2; i < argc; i++)
        test_file(t, argv[i]);
    vfi_tokenizer_free(&t);
    CHECK(t == NULL);
    printf("test_tokenizer: ok\n");
    return 0;
}
