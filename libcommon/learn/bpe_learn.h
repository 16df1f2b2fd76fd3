/* bpe_learn.h: learning a byte-level BPE vocabulary (what bpe-learn does).
 *
 * Two stages.  Counting: text is cut at special tokens, pre-tokenized with
 * the GPT-2 regex (pretok.h) and the distinct pre-tokens are counted in a
 * hash table (bpe_counts), in parallel and streaming, so memory grows with
 * the number of distinct pre-tokens, not with the input.  Count tables can be
 * saved and merged (man 5 lmpipe-bpe-counts), so a corpus can be counted in
 * pieces.  Learning: merges are applied incrementally to the distinct
 * pre-tokens, with pair counts in a priority queue updated only where the
 * merged pair occurs.  Ties between equal counts go to the lexicographically
 * greater pair of byte strings (compare left strings, then right), as in
 * CS336.
 *
 * Id layout of a learned tokenizer: the special tokens first (0..S-1, in the
 * order given), then the 256 single bytes in byte order (S..S+255), then one
 * id per merge in merge order.  This matches CS336's reference vocabulary
 * (<|endoftext|> is 0, the first merge is 257). */
#ifndef LMPIPE_BPE_LEARN_H
#define LMPIPE_BPE_LEARN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "tok/bpe.h"

/* A set of special tokens (byte strings, not NUL-terminated). */
typedef struct bpe_specials {
	size_t n;
	const uint8_t **s;
	const size_t *len;
} bpe_specials;

/* Distinct pre-tokens with their counts. */
typedef struct bpe_counts bpe_counts;

bpe_counts *bpe_counts_new(lm_err *e);
void bpe_counts_free(bpe_counts *c);
/* Add k to the count of the pre-token s[0..n). */
int bpe_counts_add(bpe_counts *c, const uint8_t *s, size_t n, uint64_t k, lm_err *e);
/* Add every count of src into dst. */
int bpe_counts_merge(bpe_counts *dst, const bpe_counts *src, lm_err *e);
size_t bpe_counts_size(const bpe_counts *c);   /* distinct pre-tokens */
uint64_t bpe_counts_total(const bpe_counts *c); /* sum of counts */
/* Visit every pre-token (in no particular order). */
void bpe_counts_each(const bpe_counts *c,
		     void (*fn)(const uint8_t *s, size_t n, uint64_t count, void *arg), void *arg);

/* The counts file (man 5 lmpipe-bpe-counts): records the special tokens the
 * text was cut at, so that files counted with other specials are refused.
 * Save is whole-or-nothing (atomic.h).  Load adds into c and checks that the
 * file's specials equal sp. */
int bpe_counts_save(const bpe_counts *c, const bpe_specials *sp, const char *path, lm_err *e);
int bpe_counts_load(bpe_counts *c, const bpe_specials *sp, const char *path, lm_err *e);
/* Load n counts files into c on up to `threads` threads (pretoken_load.c),
 * merged by hash partition: c's entries come out in an order that depends on
 * what c held and the files in order, never on `threads`.  Each file is read
 * whole into memory, a batch of `threads` files at a time.  An error names
 * the first bad file in the order given. */
int bpe_counts_load_many(bpe_counts *c, const bpe_specials *sp, const char *const *paths,
			 int n, int threads, lm_err *e);

/* Progress callback: bytes read so far (counting) or merges done
 * (learning).  May be NULL. */
typedef void (*bpe_progress_fn)(uint64_t done, void *arg);

typedef struct bpe_count_opts {
	int threads;            /* >= 1 */
	size_t chunk;           /* bytes per parallel piece; 0: default */
	bpe_progress_fn progress;
	void *progress_arg;
} bpe_count_opts;

/* Count the pre-tokens of a whole text in memory (cut at sp). */
int bpe_count_text(bpe_counts *c, const uint8_t *s, size_t n, const bpe_specials *sp,
		   const bpe_count_opts *o, lm_err *e);
/* Count the pre-tokens of a stream, reading it in bounded pieces.  name is
 * used in messages.  *bytes gets the number of bytes read. */
int bpe_count_stream(bpe_counts *c, FILE *fp, const char *name, const bpe_specials *sp,
		     const bpe_count_opts *o, uint64_t *bytes, lm_err *e);

/* Learn a tokenizer of vocab_size ids (specials included) from counts.
 * Fewer merges result when no pair is left to merge.  t is filled with
 * malloc'd tables (free with bpe_free). */
int bpe_learn(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
	      bpe_progress_fn progress, void *progress_arg, bpe_tokenizer *t, lm_err *e);
/* The same on up to threads threads (a merge of a pair found in many words
 * rewrites them in parallel); the tokenizer does not depend on threads. */
int bpe_learn_threads(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
		      int threads, bpe_progress_fn progress, void *progress_arg,
		      bpe_tokenizer *t, lm_err *e);
/* Where bpe_learn_threads spends its time, in wall seconds: the words made
 * from the counts, the first count of every pair (and the heap), the merges. */
typedef struct bpe_learn_times {
	double setup_s, pairs_s, merges_s;
} bpe_learn_times;
/* bpe_learn_threads, filling *times (when not NULL). */
int bpe_learn_timed(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
		    int threads, bpe_progress_fn progress, void *progress_arg,
		    bpe_learn_times *times, bpe_tokenizer *t, lm_err *e);

/* Check specials: none empty, none a single byte (each byte is a token
 * already, and token byte strings are unique), none repeated.  A usage
 * error (code 2) names the problem. */
int bpe_specials_check(const bpe_specials *sp, lm_err *e);

#endif
