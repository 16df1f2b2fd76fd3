/* bpe_first_count.c: the first count of every pair (bpe_learn.c's
 * count_pairs), on k threads, straight into the pair map and lists.
 *
 * Before any merge a word's ids are bytes (after the specials), so a pair
 * is one of 256 x 256 and is counted in a flat array indexed by its two
 * bytes, with no hashing.  Each thread takes a run of words (the runs in
 * word order) and reads it twice: first it sums each pair's count and the
 * words it is in; then every pair gets its list of words at its exact size
 * and each thread its place in it, after the threads of the runs before its
 * own; then each thread writes its words there.  So a list holds each word
 * once, in word order, as one thread makes it, whatever k is, and nothing
 * is applied or copied after the join (a thread's own table applied to the
 * map after another's was the serial part of this count).  Left on one
 * thread is making the pairs in the map, one for each byte pair that
 * occurs: a few thousand in English text, 65536 at most, whatever the size
 * of the text.  The pairs are made in the order of their bytes, so the map
 * is the same for any k (the merges do not depend on that order: see
 * bpe_learn.c). */
#include "learn/bpe_merge_internal.h"

#include <omp.h>
#include <stdlib.h>

enum { BYTE_PAIRS = 256 * 256 };

/* A byte pair in one thread's run of words. */
typedef struct cell {
	int64_t count;  /* summed over the run */
	uint32_t n;     /* words it is in; then where the run's words go in its list */
	uint32_t last;  /* the last word it was seen in + 1 (0: none yet) */
} cell;

/* A byte pair over all runs. */
typedef struct total {
	uint32_t *occ;  /* its list, n words */
	int64_t count;
	uint32_t n;
} total;

/* The byte pair of ids x, y (bytes are ids base .. base + 255). */
static inline uint32_t byte_pair(uint32_t x, uint32_t y, uint32_t base)
{
	return (x - base) << 8 | (y - base);
}

/* First reading of words [lo, hi): counts and words per pair in C. */
static void count_run(const learner *L, size_t lo, size_t hi, uint32_t base, cell *C)
{
	for (size_t i = lo; i < hi; i++) {
		uint32_t w = L->wofs[i];
		const wrec *wd = word_at(L, w);
		int64_t f = (int64_t)wd->count;
		for (uint32_t j = 0; j + 1 < wd->len; j++) {
			cell *c = &C[byte_pair(wd->id[j], wd->id[j + 1], base)];
			c->count += f;
			if (c->last != w + 1) { /* a word with a pair twice is listed once */
				c->last = w + 1;
				c->n++;
			}
		}
	}
}

/* Second reading: the run's words written at their places in the lists. */
static void list_run(const learner *L, size_t lo, size_t hi, uint32_t base, cell *C,
		     const total *T)
{
	for (size_t i = lo; i < hi; i++) {
		uint32_t w = L->wofs[i];
		const wrec *wd = word_at(L, w);
		for (uint32_t j = 0; j + 1 < wd->len; j++) {
			uint32_t q = byte_pair(wd->id[j], wd->id[j + 1], base);
			cell *c = &C[q];
			if (c->last != w + 1) {
				c->last = w + 1;
				T[q].occ[c->n++] = w;
			}
		}
	}
}

/* Pair q's sums over the k runs (cells[t] run t's) into T[q], its list
 * made, and each run's cell set for the second reading; 0 or -1 when out
 * of memory.  A cell no run touched is not written (the arrays are calloc's
 * pages, mapped when first written). */
static int sum_pair(cell *const *cells, int k, uint32_t q, total *T)
{
	uint32_t n = 0;
	int64_t f = 0;
	for (int t = 0; t < k; t++) {
		cell *c = &cells[t][q];
		uint32_t m = c->n;
		if (!m)
			continue;
		f += c->count;
		c->n = n;    /* run t's words follow those of the runs before it */
		c->last = 0;
		n += m;
	}
	if (!n)
		return 0;
	T[q] = (total){ malloc((size_t)n * sizeof *T[q].occ), f, n };
	return T[q].occ ? 0 : -1;
}

/* The pairs in the map, in the order of their bytes, with their counts and
 * lists (taken from T). */
static int make_pairs(learner *L, uint32_t base, total *T)
{
	for (uint32_t q = 0; q < BYTE_PAIRS; q++) {
		if (!T[q].n)
			continue;
		uint32_t p = bpe_pair_get(L, base + (q >> 8), base + (q & 0xFF));
		if (p == NONE)
			return -1;
		pair *x = &L->pairs[p];
		x->count = T[q].count;
		x->occ = T[q].occ;
		x->n_occ = T[q].n;
		x->own_occ = 1;
		T[q].occ = NULL;
	}
	return 0;
}

int bpe_count_first(learner *L, int k)
{
	uint32_t base = L->n_tok - 256;
	cell **cells = calloc((size_t)k, sizeof *cells);
	total *T = calloc(BYTE_PAIRS, sizeof *T);
	int failed = !cells || !T;
	for (int t = 0; !failed && t < k; t++)
		failed = !(cells[t] = calloc(BYTE_PAIRS, sizeof *cells[t]));
	if (!failed) {
#pragma omp parallel num_threads(k)
		{
			int t = omp_get_thread_num();
			size_t lo = L->n_words * (size_t)t / (size_t)k,
			       hi = L->n_words * (size_t)(t + 1) / (size_t)k;
			count_run(L, lo, hi, base, cells[t]);
#pragma omp barrier
#pragma omp for schedule(static)
			for (uint32_t q = 0; q < BYTE_PAIRS; q++)
				if (sum_pair(cells, k, q, T))
					__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			/* (the loop's barrier: every list is made, or failed is set) */
			if (!__atomic_load_n(&failed, __ATOMIC_RELAXED))
				list_run(L, lo, hi, base, cells[t], T);
		}
	}
	int rc = 0;
	if (failed) {
		L->failed = 1;
		rc = lm_seterr(L->e, "out of memory (pair counts)");
	} else
		rc = make_pairs(L, base, T);
	for (uint32_t q = 0; T && q < BYTE_PAIRS; q++)
		free(T[q].occ);
	for (int t = 0; cells && t < k; t++)
		free(cells[t]);
	free(cells);
	free(T);
	return rc;
}
