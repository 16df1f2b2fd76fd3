/* bpe_learn_internal.h: the inside of the pre-token count table, shared by the files that
 * implement bpe_learn.h (not for programs). */
#ifndef LMPIPE_BPE_LEARN_INTERNAL_H
#define LMPIPE_BPE_LEARN_INTERNAL_H

#include "learn/bpe_learn.h"

typedef struct bpe_count_ent {
	uint64_t off;    /* bytes at bytes[off .. off + len) */
	uint64_t count;
	uint64_t hash;
	uint32_t len;
} bpe_count_ent;

struct bpe_counts {
	uint32_t *slot;   /* open addressing: entry index + 1, 0 empty */
	size_t mask;      /* slots - 1 (a power of two) */
	bpe_count_ent *ent;
	size_t n, cap_ent;
	uint8_t *bytes;
	size_t n_bytes, cap_bytes;
	uint64_t total;
};

uint64_t bpe_hash(const uint8_t *s, size_t n);
int bpe_counts_add_hashed(bpe_counts *c, const uint8_t *s, size_t n, uint64_t h, uint64_t k,
			  lm_err *e);
/* Build c's hash index anew for its entries (c->ent[0 .. c->n), distinct),
 * on up to threads threads (pretoken_table.c). */
int bpe_counts_reindex(bpe_counts *c, int threads, lm_err *e);

/* Called for each entry of a counts file, in file order; nonzero stops. */
typedef int (*bpe_counts_visit)(const uint8_t *s, uint32_t len, uint64_t count, void *arg,
				lm_err *e);
/* Parse the counts file b[0 .. n) (name for messages), checking it all
 * (pretoken_file.c); fn sees the entries before the trailer is checked. */
int bpe_counts_parse(const uint8_t *b, size_t n, const char *name, const bpe_specials *sp,
		     bpe_counts_visit fn, void *arg, lm_err *e);

#endif
