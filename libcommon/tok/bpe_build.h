/* bpe_build.h: building a bpe_tokenizer token by token and merge by merge,
 * with the checks every loader shares (internal to bpe.c and bpe_gpt2.c).
 *
 * Tokens are appended in id order; a hash of their byte strings finds
 * duplicates and the result of a merge; a set of merged pairs finds
 * duplicate merges.  Errors carry no file position: the loader prefixes
 * one. */
#ifndef LMPIPE_BPE_BUILD_H
#define LMPIPE_BPE_BUILD_H

#include "tok/bpe.h"

typedef struct bpe_builder {
	bpe_tokenizer *t;
	size_t bytes_cap, off_cap, merges_cap, special_cap;
	uint32_t *tok_slot;      /* id + 1 by hash of bytes; 0 empty */
	size_t tok_mask;
	uint64_t *pair_slot;     /* (left << 32 | right) + 1; 0 empty */
	size_t pair_mask;
} bpe_builder;

/* Start an empty tokenizer in t (pre-tokenizer "gpt2"). */
int bb_init(bpe_builder *b, bpe_tokenizer *t, lm_err *e);
/* Append a token with the next id; a duplicate byte string is an error. */
int bb_add_token(bpe_builder *b, const uint8_t *s, size_t len, lm_err *e);
/* Id of the token with these bytes, or BPE_NO_TOKEN. */
uint32_t bb_find(const bpe_builder *b, const uint8_t *s, size_t len);
/* Mark an existing token special. */
int bb_mark_special(bpe_builder *b, uint32_t id, lm_err *e);
/* Append the merge left+right; its result is the token of the joined bytes. */
int bb_add_merge(bpe_builder *b, uint32_t left, uint32_t right, lm_err *e);
/* Check that every byte has a single-byte token, find <|endoftext|>, free
 * the builder's tables.  On failure the caller still calls bpe_free. */
int bb_finish(bpe_builder *b, lm_err *e);
void bb_discard(bpe_builder *b);

/* A token's bytes for messages: printable ASCII as is, the rest \xHH,
 * cut short with "..." (buf of at least BB_SHOW_MAX bytes). */
enum { BB_SHOW_MAX = 64 };
const char *bb_show(const uint8_t *s, size_t len, char *buf);

/* Length of the well-formed UTF-8 character at s[0..n), or 0 if none. */
size_t bb_utf8_char(const uint8_t *s, size_t n, uint32_t *cp);

#define BPE_EOT_TEXT "<|endoftext|>"

#endif
