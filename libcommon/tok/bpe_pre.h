/* bpe_pre.h: text cut into pre-tokens once, encoded later (man 5
 * lmpipe-pretok).
 *
 * The first half of encoding, the cut of the text at special tokens and
 * into GPT-2 pre-tokens, needs no merges.  bpe_pre keeps each distinct
 * pre-token once, with its count (the counts a BPE is learned from), and
 * the text as the sequence of their indices; bpe_pre_encode later encodes
 * each distinct pre-token once with the learned tokenizer and gives the
 * sequence's ids: the same ids, in the same order, as bpe_stream_file on
 * the text.  So a pipeline pre-tokenizes its text once, for the counts and
 * for the encoding. */
#ifndef LMPIPE_BPE_PRE_H
#define LMPIPE_BPE_PRE_H

#include <stdint.h>
#include <stdio.h>

#include "tok/bpe_encode.h"
#include "tok/bpe_stream.h"

/* A value of the sequence: a pre-token's index, or this flag and a special
 * token's index in the file's list. */
#define BPE_PRE_SPECIAL 0x80000000u

typedef struct bpe_pre bpe_pre;

/* A tokenizer of the 256 bytes alone, to which the special tokens are then
 * added (bpe_add_special): enough to pre-tokenize. */
int bpe_pre_tokenizer(bpe_tokenizer *t, lm_err *e);

/* Pre-tokens of the text streamed through a one-thread bpe_stream whose
 * opts.pre is this writer, written to fp (name for messages; a pipe will
 * do).  enc's tokenizer gives the special tokens (its merges are not used:
 * bpe_pre_tokenizer's will do). */
bpe_pre *bpe_pre_open(const bpe_encoder *enc, FILE *fp, const char *name, lm_err *e);
/* A bpe_sink_fn for the stream (ctx is the bpe_pre). */
int bpe_pre_sink(void *ctx, const uint32_t *v, size_t n, lm_err *e);
/* Write the pre-tokens and the special tokens: the file is complete. */
int bpe_pre_close(bpe_pre *p, lm_err *e);
/* Each distinct pre-token with its number of occurrences, in order of
 * first appearance (the counts bpe-learn --counts-out makes of the text). */
typedef int (*bpe_pre_word_fn)(void *ctx, const uint8_t *s, size_t n, uint64_t count, lm_err *e);
int bpe_pre_each(const bpe_pre *p, bpe_pre_word_fn fn, void *ctx, lm_err *e);
void bpe_pre_free(bpe_pre *p);

/* Make w intern pre-tokens into p instead of merging them (the stream does,
 * given opts.pre). */
void bpe_worker_set_pre(bpe_worker *w, bpe_pre *p);
/* The indices of k <= BPE_PRE_BATCH pre-tokens s[off[i] .. off[i] + len[i])
 * (used by the stream's worker; a batch, so that their lookups overlap). */
enum { BPE_PRE_BATCH = 16 };
int bpe_pre_intern(bpe_pre *p, const uint8_t *s, const size_t *off, const size_t *len, size_t k,
		   uint32_t *index, lm_err *e);

/* The ids of the pre-token file path, encoded with enc (whose special tokens
 * must be the file's), given to sink in order.  The file is read whole. */
int bpe_pre_encode(const bpe_encoder *enc, const char *path, bpe_sink_fn sink, void *ctx, lm_err *e);

#endif
