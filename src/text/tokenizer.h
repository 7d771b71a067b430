/*
 * tokenizer.h - CLIP's byte-level BPE tokenizer, giving the ids OpenAI's reference tokenizer
 * (simple_tokenizer.py) gives, for the text towers of CLIP models.
 *
 * What a text goes through, in the reference's order: NFC (the last step of the reference's
 * ftfy.fix_text; its other repairs of broken text are not made), HTML character references
 * resolved twice (html.unescape), surrounding space removed (str.strip), every run of white space
 * made one space, stripped again, lowercased (str.lower), cut into pieces by the pattern
 *
 *     <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+
 *
 * (case-insensitive, leftmost alternative first, white space between pieces dropped), each
 * piece's UTF-8 bytes merged by the vocabulary's ranked pairs (lowest rank first, every
 * occurrence left to right) with the end-of-word mark on its last byte. The ids are the start
 * token, the pieces' ids, the end token; a text with more than context - 2 ids of its own keeps
 * its first context - 2, then the end token (the reference's truncate=True).
 *
 * A tokenizer is read-only once made: any number of threads may encode with it at once.
 */
#ifndef VIDFEAT_TOKENIZER_H
#define VIDFEAT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* CLIP's vocabulary: 256 bytes, 256 bytes ending a word, 48,894 merges, two special tokens. */
#define VF_CLIP_VOCAB_SIZE 49408
/* CLIP's text context: ids a text tower reads. */
#define VF_CLIP_CONTEXT 77

typedef struct vf_tokenizer vf_tokenizer;

/* Read a BPE vocabulary: a merges file as OpenAI's CLIP ships it (bpe_simple_vocab_16e6.txt.gz,
 * gzip or plain text: a first line that is skipped, then one merge a line, "left right", each
 * side made of the byte stand-ins, "</w>" ending a word), giving vocab_size ids (its first
 * vocab_size - 514 merges are used, as the reference does). VF_ERR_IO (cannot read), VF_ERR_MODEL
 * (not such a file: too few merges, a merge of tokens not defined before it, a token twice),
 * VF_ERR_INVALID (vocab_size out of range), VF_ERR_NOMEM. */
vf_status vfi_tokenizer_create(const char *path, int vocab_size, vf_tokenizer **out, vf_err *err);
void vfi_tokenizer_free(vf_tokenizer **pt);

/* The number of ids (the vocabulary's size), and the start and end tokens' ids (its last two). */
int vfi_tokenizer_vocab_size(const vf_tokenizer *t);
int32_t vfi_tokenizer_start(const vf_tokenizer *t);
int32_t vfi_tokenizer_end(const vf_tokenizer *t);

/* The ids of text (UTF-8, NUL-terminated) into ids[0..*n), at most `context` (>= 2) of them;
 * *truncated (may be NULL) is 1 when the text had more and was cut. VF_ERR_INVALID (text that
 * is not UTF-8: the message names the byte; context < 2), VF_ERR_NOMEM. */
vf_status vfi_tokenizer_encode(const vf_tokenizer *t, const char *text, int context, int32_t *ids,
                               int *n, int *truncated, vf_err *err);

/* The text (UTF-8, with the end-of-word mark as "</w>") of token id into buf; "" for an id
 * outside the vocabulary. For messages and tests. */
void vfi_tokenizer_token(const vf_tokenizer *t, int32_t id, char *buf, size_t size);

#endif /* VIDFEAT_TOKENIZER_H */
