/* bpe_encode.h: text to token ids with a bpe_tokenizer.
 *
 * An encoder holds read-only tables built once from a tokenizer (merge
 * ranks by pair, special tokens) and is shared by all threads; each thread
 * encodes with its own bpe_worker (a cache from pre-token to ids and
 * scratch space).  Encoding a text: special tokens are found first (at each
 * position the longest special wins), the text between them is split by the
 * GPT-2 pre-tokenizer (pretok.h), and each pre-token is merged on its own:
 * repeatedly the adjacent pair with the earliest merge, leftmost first.
 * Long pre-tokens are merged with a heap in O(n log n). */
#ifndef LMPIPE_BPE_ENCODE_H
#define LMPIPE_BPE_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "tok/bpe.h"

typedef struct bpe_encoder bpe_encoder;
typedef struct bpe_worker bpe_worker;

/* A growable array of ids. */
typedef struct bpe_ids {
	uint32_t *v;
	size_t n, cap;
} bpe_ids;

int bpe_ids_reserve(bpe_ids *ids, size_t more, lm_err *e);
void bpe_ids_free(bpe_ids *ids);

/* Build the tables.  With use_specials = 0 special-token text is ordinary
 * text (like tiktoken's encode_ordinary).  t must outlive the encoder. */
bpe_encoder *bpe_encoder_new(const bpe_tokenizer *t, int use_specials, lm_err *e);
void bpe_encoder_free(bpe_encoder *enc);

/* Pieces longer than this many bytes merge by rank buckets (when the merges
 * are ordered) instead of a heap; both give the same ids.  For tests. */
void bpe_encoder_set_huge_piece(bpe_encoder *enc, size_t bytes);

bpe_worker *bpe_worker_new(const bpe_encoder *enc, lm_err *e);
void bpe_worker_free(bpe_worker *w);

/* Append the ids of text[0..n) to out (special tokens recognised). */
int bpe_encode(bpe_worker *w, const uint8_t *text, size_t n, bpe_ids *out, lm_err *e);
/* The same without special tokens. */
int bpe_encode_ordinary(bpe_worker *w, const uint8_t *text, size_t n, bpe_ids *out, lm_err *e);

/* Does some special token occurrence span the point between text[p-1] and
 * text[p] (text[0..n) known)?  Used to cut text where encoding may be split. */
int bpe_special_spans(const bpe_encoder *enc, const uint8_t *text, size_t n, size_t p);

#endif
