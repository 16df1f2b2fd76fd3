/* bpe_word_layout.c: the merge learner's words laid out (bpe_learn.c's
 * setup): their records in the order of their first bytes, so that words
 * alike lie side by side, on threads.
 *
 * A merge visits the words its pair is in, in the order they lie; in the
 * count table's order (by hash) those are scattered over all the records,
 * a cache miss each.  Words that share bytes share pairs, so laid out by
 * their bytes the words of a merge come in runs, several to a cache line
 * or a page.  The order changes no merge (counts are sums and ties go by
 * bytes, see bpe_learn.c), and it is the same whatever the threads: an LSD
 * radix sort by the first KEY_BYTES bytes, each pass stable (each thread
 * scatters its run of the entries after those of the runs before it), so
 * words alike that far keep the table's order.  Then each record's place
 * follows from the lengths in that order (one pass on one thread), and the
 * threads write the records, each its run. */
#include "learn/bpe_learn_internal.h"
#include "learn/bpe_merge_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum {
	KEY_BYTES = 8,              /* bytes of a word sorted on */
	DIGIT_BITS = 8,             /* bits of the key a pass sorts on: 256 buckets a
				     * pass, few enough for the writes to stream */
	DIGITS = 1 << DIGIT_BITS,
	PASSES = KEY_BYTES * 8 / DIGIT_BITS,
	PAR_LAYOUT_WORDS = 1 << 15, /* a thread for each this many words */
};

/* The first KEY_BYTES bytes of s[0 .. n) as a number, the first byte
 * highest, 0 past the end. */
static uint64_t word_key(const uint8_t *s, uint32_t n)
{
	uint64_t k = 0;
	for (uint32_t i = 0; i < KEY_BYTES; i++)
		k = k << 8 | (i < n ? s[i] : 0);
	return k;
}

static inline size_t digit(uint64_t key, int pass)
{
	return (size_t)(key >> (unsigned)(pass * DIGIT_BITS)) & (DIGITS - 1);
}

/* Sorting state shared by the threads: keys and entry numbers, each with
 * a twin that a pass writes to; hist: a thread's count of each digit, then
 * where its next entry of the digit goes. */
typedef struct sorter {
	uint64_t *key, *key2;
	uint32_t *ord, *ord2;
	size_t *hist;
	size_t n;
	int k;
	int skip; /* this pass would move nothing: one digit for all */
} sorter;

/* Thread t's share of a pass, between barriers. */
static void pass_count(sorter *S, int t, size_t lo, size_t hi, int pass)
{
	size_t *h = S->hist + (size_t)t * DIGITS;
	memset(h, 0, DIGITS * sizeof *h);
	for (size_t i = lo; i < hi; i++)
		h[digit(S->key[i], pass)]++;
}

/* On one thread: each (digit, thread) its first place, digits in order and
 * threads in order within a digit. */
static void pass_places(sorter *S)
{
	size_t sum = 0;
	S->skip = 0;
	for (size_t d = 0; d < DIGITS; d++) {
		size_t first = sum;
		for (int t = 0; t < S->k; t++) {
			size_t *h = &S->hist[(size_t)t * DIGITS + d];
			size_t m = *h;
			*h = sum;
			sum += m;
		}
		if (sum - first == S->n)
			S->skip = 1;
	}
}

static void pass_scatter(sorter *S, int t, size_t lo, size_t hi, int pass)
{
	size_t *h = S->hist + (size_t)t * DIGITS;
	for (size_t i = lo; i < hi; i++) {
		size_t to = h[digit(S->key[i], pass)]++;
		S->key2[to] = S->key[i];
		S->ord2[to] = S->ord[i];
	}
}

static void pass_swap(sorter *S)
{
	uint64_t *k = S->key;
	S->key = S->key2;
	S->key2 = k;
	uint32_t *o = S->ord;
	S->ord = S->ord2;
	S->ord2 = o;
}

/* Word w of entry en at record start u, its ids bytes after base. */
static void write_word(learner *L, uint32_t w, uint32_t u, const bpe_counts *c,
		       const bpe_count_ent *en, uint32_t base)
{
	L->wofs[w] = u;
	wrec *wd = word_at(L, u);
	const uint8_t *s = c->bytes + en->off;
	wd->count = en->count;
	wd->len = en->len;
	for (uint32_t i = 0; i < en->len; i++)
		wd->id[i] = base + s[i];
}

int bpe_lay_words(learner *L, const bpe_counts *c, int threads)
{
	size_t n = c->n, k = n / PAR_LAYOUT_WORDS;
	if (k > (size_t)threads)
		k = (size_t)threads;
	if (k < 1)
		k = 1;
	sorter S = { malloc((n ? n : 1) * sizeof *S.key), malloc((n ? n : 1) * sizeof *S.key2),
		     malloc((n ? n : 1) * sizeof *S.ord), malloc((n ? n : 1) * sizeof *S.ord2),
		     malloc(k * DIGITS * sizeof *S.hist), n, (int)k, 0 };
	/* at[i]: the record start of the i-th entry in the order, at[n] the end;
	 * an entry of fewer than 2 bytes (no pair to merge) has no record */
	uint32_t *at = malloc((n + 1) * sizeof *at);
	/* word of the i-th entry in the order */
	uint32_t *word = malloc((n ? n : 1) * sizeof *word);
	int rc = 0;
	if (!S.key || !S.key2 || !S.ord || !S.ord2 || !S.hist || !at || !word) {
		L->failed = 1;
		rc = lm_seterr(L->e, "out of memory (layout of %zu words)", n);
		goto out;
	}
	uint32_t base = L->n_tok - 256; /* byte ids follow the specials */
#pragma omp parallel num_threads(S.k)
	{
		int t = omp_get_thread_num();
		size_t lo = n * (size_t)t / k, hi = n * (size_t)(t + 1) / k;
		for (size_t i = lo; i < hi; i++) {
			S.key[i] = word_key(c->bytes + c->ent[i].off, c->ent[i].len);
			S.ord[i] = (uint32_t)i;
		}
		for (int pass = 0; pass < PASSES; pass++) {
			pass_count(&S, t, lo, hi, pass);
#pragma omp barrier
#pragma omp single
			pass_places(&S);
			/* (single's barrier: every place is known) */
			if (!S.skip)
				pass_scatter(&S, t, lo, hi, pass);
#pragma omp barrier
#pragma omp single
			if (!S.skip)
				pass_swap(&S);
		}
		/* in this order the entries are scattered: fetch them early */
		for (size_t i = lo; i < hi; i++) {
			if (i + PREFETCH_AHEAD < hi)
				__builtin_prefetch(&c->ent[S.ord[i + PREFETCH_AHEAD]]);
			uint32_t len = c->ent[S.ord[i]].len;
			at[i] = len < 2 ? 0 : (uint32_t)wrec_units(len);
		}
#pragma omp barrier
#pragma omp single
		{
			uint32_t u = 0, w = 0; /* setup checked that the records fit */
			for (size_t i = 0; i < n; i++) {
				uint32_t m = at[i];
				at[i] = u;
				word[i] = w;
				w += m != 0;
				u += m;
			}
			at[n] = u;
			L->n_units = u;
			L->n_words = w;
		}
		for (size_t i = lo; i < hi; i++) {
			if (i + 2 * PREFETCH_AHEAD < hi)
				__builtin_prefetch(&c->ent[S.ord[i + 2 * PREFETCH_AHEAD]]);
			if (i + PREFETCH_AHEAD < hi)
				__builtin_prefetch(c->bytes + c->ent[S.ord[i + PREFETCH_AHEAD]].off);
			if (at[i + 1] != at[i])
				write_word(L, word[i], at[i], c, &c->ent[S.ord[i]], base);
		}
	}
out:
	free(S.key);
	free(S.key2);
	free(S.ord);
	free(S.ord2);
	free(S.hist);
	free(at);
	free(word);
	return rc;
}
