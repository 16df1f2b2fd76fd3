/* bpe_gpt2_internal.h: GPT-2's byte-to-unicode strings, shared by the
 * readers and writers of GPT-2's vocab.json + merges.txt (bpe_gpt2.c) and of
 * Hugging Face's tokenizer.json (bpe_hf.c). */
#ifndef LMPIPE_BPE_GPT2_INTERNAL_H
#define LMPIPE_BPE_GPT2_INTERNAL_H

#include <stdio.h>

#include "tok/bpe_build.h"

enum { GPT2_ALPHABET = 256 + 68, GPT2_SHIFTED = 256 };

/* byte -> code point, and back (-1: not in the alphabet). */
void gpt2_tables(uint32_t enc[256], int dec[GPT2_ALPHABET]);
/* Decode a GPT-2 string into bytes (out has room for len bytes). */
int gpt2_decode(const int *dec, const uint8_t *s, size_t len, uint8_t *out, size_t *olen,
		lm_err *e);
/* Write bytes as a GPT-2 string; json: escape '"' and '\'. */
void gpt2_put(FILE *fp, const uint32_t *enc, const uint8_t *s, size_t len, int json);
/* Append the tokens of a vocabulary object {"STRING": id, ...} (ids 0..n-1,
 * each once) to b; a token "<|endoftext|>" becomes special.  The messages
 * name path. */
int gpt2_add_vocab(bpe_builder *b, const int *dec, const void *json_object, const char *path,
		   lm_err *e);
/* Append the merge of two GPT-2 strings; tmp has room for both decoded.
 * Messages carry no position (the caller prefixes one). */
int gpt2_add_merge(bpe_builder *b, const int *dec, const uint8_t *l, size_t ll,
		   const uint8_t *r, size_t rl, uint8_t *tmp, lm_err *e);

#endif
