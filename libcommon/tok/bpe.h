/* bpe.h: a byte-level BPE tokenizer in memory, and loading/saving it.
 *
 * Token ids run 0..n_vocab-1 and include the special tokens.  Every id has
 * its byte string; a merge joins two ids into a third, and merges are kept in
 * rank order (earlier merges apply first).  GPT-2 files map bytes to ids in
 * their own order, so no id layout is assumed: use the tables. */
#ifndef LMPIPE_BPE_H
#define LMPIPE_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum { BPE_NO_TOKEN = 0xFFFFFFFFu };

typedef struct bpe_merge {
	uint32_t left, right, result;
} bpe_merge;

typedef struct bpe_tokenizer {
	uint32_t n_vocab;
	uint8_t *bytes;          /* all token byte strings, back to back */
	uint64_t *off;           /* id's bytes: bytes[off[id] .. off[id + 1]) */
	uint32_t byte_id[256];   /* id of each single byte */
	uint32_t n_merges;
	bpe_merge *merges;       /* rank order */
	uint32_t n_special;
	uint32_t *special;       /* ids of the special tokens */
	uint32_t eot;            /* id of "<|endoftext|>", or BPE_NO_TOKEN */
	char pretokenizer[16];   /* "gpt2" */
} bpe_tokenizer;

/* lmpipe's tokenizer file (man 5 lmpipe-tokenizer). */
int bpe_load(bpe_tokenizer *t, const char *path, lm_err *e);
int bpe_save(const bpe_tokenizer *t, const char *path, lm_err *e); /* whole or nothing */

/* GPT-2 style vocab.json + merges.txt (byte-to-unicode encoded strings). */
int bpe_load_gpt2(bpe_tokenizer *t, const char *vocab_json, const char *merges_txt, lm_err *e);
int bpe_save_gpt2(const bpe_tokenizer *t, const char *dir, lm_err *e);

/* Hugging Face tokenizers' tokenizer.json of a byte-level BPE (GPT-2's
 * pre-tokenizer). */
int bpe_load_hf(bpe_tokenizer *t, const char *path, lm_err *e);
/* Either file: a tokenizer.json when its first non-blank byte is '{', else
 * an lmpipe tokenizer file (bpe_open.c). */
int bpe_load_any(bpe_tokenizer *t, const char *path, lm_err *e);
/* Write DIR/tokenizer.json, tokenizer_config.json (model_max_length
 * max_length; <|endoftext|> as bos, eos and unk token),
 * special_tokens_map.json, vocab.json and merges.txt, for
 * transformers.AutoTokenizer.from_pretrained(DIR). */
int bpe_save_hf(const bpe_tokenizer *t, const char *dir, int max_length, lm_err *e);

/* Add a special token (its id is n_vocab, appended) unless a special token
 * with the same bytes exists; sets *id either way.  Bytes that are already a
 * regular token are a usage error (code 2), as is an empty token.  Works on
 * a zeroed tokenizer too (then set eot = BPE_NO_TOKEN first). */
int bpe_add_special(bpe_tokenizer *t, const char *s, size_t len, uint32_t *id, lm_err *e);

void bpe_free(bpe_tokenizer *t);

static inline size_t bpe_token_len(const bpe_tokenizer *t, uint32_t id)
{
	return (size_t)(t->off[id + 1] - t->off[id]);
}

static inline const uint8_t *bpe_token_bytes(const bpe_tokenizer *t, uint32_t id)
{
	return t->bytes + t->off[id];
}

#endif
