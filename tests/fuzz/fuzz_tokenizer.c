/*
 * fuzz_tokenizer.c - libFuzzer target over CLIP's tokenizer: any bytes are a text (the first
 * byte also chooses the context, 2..77) that encodes, or fails as not UTF-8 with a message;
 * never a crash, hang or leak; and what it gives is always ids of the vocabulary, the start token
 * first and the end token last, no more than the context, cut only when the context is full,
 * the same twice.
 *
 * The vocabulary is $VIDFEAT_CLIP_VOCAB, else the one the build was configured with; without
 * it only the text's cleaning (UTF-8, NFC, references, lowercase) is fuzzed.
 */
#include <stdlib.h>

#include "core/mem.h"
#include "fuzz_common.h"
#include "text/html.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vf_tokenizer *tok;
static int tried;

static void drop_tokenizer(void)
{
    vfi_tokenizer_free(&tok);
}

static const vf_tokenizer *tokenizer(void)
{
    if (!tried) {
        tried = 1;
        const char *path = getenv("VIDFEAT_CLIP_VOCAB");
        if (!path || !*path)
            path = VF_CLIP_VOCAB;
        vf_err err = {0};
        if (vfi_tokenizer_create(path, VF_CLIP_VOCAB_SIZE, &tok, &err) == VF_OK)
            atexit(drop_tokenizer);
        else
            fprintf(stderr, "fuzz_tokenizer: %s: the cleaning only\n", err.msg);
    }
    return tok;
}

/* Without a vocabulary: the cleaning steps, each bounded as promised. */
static void clean_only(const char *text)
{
    vf_err err = {0};
    uint32_t *c = NULL, *a = NULL, *b = NULL;
    size_t n = 0, na = 0, nb = 0;
    if (vfi_unicode_decode(text, &c, &n, &err) != VF_OK) {
        if (!err.msg[0])
            abort();
        return;
    }
    if (vfi_unicode_nfc(c, n, &a, &na, &err) == VF_OK &&
        vfi_html_unescape(a, na, &b, &nb, &err) == VF_OK && nb > na)
        abort(); /* resolving references never lengthens a text */
    vfi_free(b);
    b = NULL;
    if (a && vfi_unicode_lower(a, na, &b, &nb, &err) == VF_OK && nb > 3 * na)
        abort();
    vfi_free(c);
    vfi_free(a);
    vfi_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    if (size < 1)
        return 0;
    int context = 2 + data[0] % (VF_CLIP_CONTEXT - 1);
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    const vf_tokenizer *t = tokenizer();
    if (!t) {
        clean_only(text);
        free(text);
        return 0;
    }
    int32_t ids[VF_CLIP_CONTEXT], again[VF_CLIP_CONTEXT];
    int n = -1, m = -1, cut = 0, cut2 = 0;
    vf_err err = {0};
    vf_status rc = vfi_tokenizer_encode(t, text, context, ids, &n, &cut, &err);
    if (rc != VF_OK) {
        if (rc != VF_ERR_INVALID || !err.msg[0] || n != 0)
            abort(); /* only text that is not UTF-8 fails, and it says why */
        free(text);
        return 0;
    }
    int vocab = vfi_tokenizer_vocab_size(t);
    if (n < 2 || n > context || ids[0] != vfi_tokenizer_start(t) ||
        ids[n - 1] != vfi_tokenizer_end(t) || (cut && n != context))
        abort();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            abort();
    if (vfi_tokenizer_encode(t, text, context, again, &m, &cut2, &err) != VF_OK || m != n ||
        cut2 != cut || memcmp(ids, again, (size_t)n * sizeof(int32_t)))
        abort();
    free(text);
    return 0;
}
