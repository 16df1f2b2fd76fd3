/* bpe_learn.c: learning the merges from pre-token counts (see bpe_learn.h).
 *
 * Each distinct pre-token ("word") is an array of token ids with a count.
 * Every adjacent pair of ids has an entry with its total count and the list
 * of words it occurs in (a superset: entries may be stale, and are checked).
 * A merge rewrites only the words on the merged pair's list
 * (bpe_merge_words.c), summing the changes by neighbouring id (a neighbour
 * recurs in many words), then applies them to the pairs once each.  A word
 * is one record (count, length, ids), so a merge touches one place a word,
 * and the records lie in the order of the words' bytes
 * (bpe_word_layout.c), so that a merge's words lie near each other.
 *
 * A 4-ary max-heap orders the pairs by (count, left bytes, right bytes),
 * lazily: each pair with a nonzero count has one heap entry whose key is its
 * count when it was pushed, at least its count now, since a count only grows
 * in the merge that creates its pair (every pair whose count grows holds the
 * new id).  So a merge costs no heap work for the counts it lowers; it pushes
 * the pairs it created, once each, when it ends.  The top entry is the pair
 * to merge when its key is its count (every other pair's count is at most
 * its key); otherwise it goes back with its count as key (or out, at 0).
 * Only the pairs of counts at or above a floor (a power of two) are in the
 * heap; the others wait in buckets by the power of two of their count,
 * each a list, unordered.  The largest count never grows (a merge's new
 * pairs have at most the merged pair's count), and the ones merged fall
 * far below the most of the pairs: of the 250 K pairs a 10000-token
 * vocabulary of Gutenberg makes, a few thousand at a time are in the heap,
 * and most pairs are never compared.  When the heap is empty, the highest
 * bucket with pairs goes into it, and its power of two becomes the floor;
 * a heap entry whose count falls below the floor goes to its bucket.
 * The merges are the same: the top of the heap is the largest of all
 * (every pair out of it counts less than the floor).
 *
 * On several threads, a merge whose pair occurs in many words rewrites them
 * in parallel: each thread rewrites its share of the words and sums the
 * changes by neighbouring id in a table of its own (with the words a new
 * pair occurs in).  Then each thread applies the falls of its table (the
 * pairs without the new id, which exist and only lose occurrences) by
 * atomic adds, while the map of pairs is only read; after the join the
 * tables are folded into one and the pairs with the new id made and
 * counted.  The first count of every pair is made on threads too, each
 * over a run of words, by byte pair (bpe_first_count.c), the lists of words
 * written in place by each thread.  Counts are sums and the heap's
 * order is total (ties of count and bytes go to the lower ids, never to a
 * pair's place in the map or the heap), so the merges are the same
 * whatever the number of threads. */
#include "learn/bpe_learn_internal.h"
#include "learn/bpe_merge_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"

enum {
	/* a merge goes parallel past this many words a thread (LMPIPE_BPE_PAR_WORDS
	 * sets it): a thread's share of rewriting must cost well over the fork
	 * and join and the serial fold and rises after it.  On the GPU
	 * machine's 16 cores (201 MB Gutenberg, vocabulary 10000: 2.96 M word
	 * visits over 9743 merges, the largest 42 K words) no merge gained
	 * from threads on two hosts: the merges took 0.092-0.096 s on one
	 * thread against 0.105-0.127 at 1024 words a thread (2026-12-03), and
	 * 0.15 s against 0.14-0.19 on the other host; so only a merge of more
	 * than twice this many words (a far larger corpus) goes on threads */
	PAR_WORDS_PER_THREAD = 1 << 17,
	/* the first pair count: a thread (and its table of 1 MiB) for each
	 * this many words */
	PAR_COUNT_WORDS = 4096,
	/* children of a heap node: a 4-ary heap has half the levels of a
	 * binary one, and a node's children share a cache line or two */
	HEAP_ARITY = 4,
};

/* ---- tokens ---- */

static int tok_cmp(const learner *L, uint32_t x, uint32_t y)
{
	size_t nx = L->toff[x + 1] - L->toff[x], ny = L->toff[y + 1] - L->toff[y];
	int r = memcmp(L->tbytes + L->toff[x], L->tbytes + L->toff[y], nx < ny ? nx : ny);
	return r ? r : (nx > ny) - (nx < ny);
}

/* ---- the heap ---- */

/* x ranks above y: greater count, then greater (left, right) bytes. */
static int above(const learner *L, hent hx, hent hy)
{
	if (hx.count != hy.count)
		return hx.count > hy.count;
	const pair *x = &L->pairs[hx.p], *y = &L->pairs[hy.p];
	int r = x->a == y->a ? 0 : tok_cmp(L, x->a, y->a);
	if (r)
		return r > 0;
	r = x->b == y->b ? 0 : tok_cmp(L, x->b, y->b);
	if (r)
		return r > 0;
	/* two tokens with the same bytes (merged from other halves) */
	return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static void sift_up(learner *L, size_t i)
{
	hent h = L->heap[i];
	while (i > 0) {
		size_t up = (i - 1) / HEAP_ARITY;
		if (!above(L, h, L->heap[up]))
			break;
		L->heap[i] = L->heap[up];
		i = up;
	}
	L->heap[i] = h;
}

static void sift_down(learner *L, size_t i)
{
	hent h = L->heap[i];
	for (;;) {
		size_t first = HEAP_ARITY * i + 1, c = first;
		if (first >= L->n_heap)
			break;
		size_t end = first + HEAP_ARITY < L->n_heap ? first + HEAP_ARITY : L->n_heap;
		for (size_t k = first + 1; k < end; k++)
			if (above(L, L->heap[k], L->heap[c]))
				c = k;
		if (!above(L, L->heap[c], h))
			break;
		L->heap[i] = L->heap[c];
		i = c;
	}
	L->heap[i] = h;
}

/* Bucket of count n > 0: the power of two at or below n. */
static inline unsigned bucket_of(int64_t n)
{
	return 63u - (unsigned)__builtin_clzll((unsigned long long)n);
}

/* Pair p (of count n > 0, below the floor) into its bucket. */
static void low_put(learner *L, uint32_t p, int64_t n)
{
	unsigned k = bucket_of(n);
	L->low_next[p] = L->low_head[k];
	L->low_head[k] = p;
}

/* Push pair p with its count now, into the heap or below its floor (the
 * heap has room: at most one entry a pair). */
static void heap_push(learner *L, uint32_t p)
{
	int64_t n = L->pairs[p].count;
	if (n < L->heap_floor) {
		low_put(L, p, n);
		return;
	}
	L->heap[L->n_heap] = (hent){ n, p };
	sift_up(L, L->n_heap++);
}

/* The heap (empty) made from the highest bucket with a pair: its power of
 * two the floor, the pairs that fell below it (in their buckets now) or to
 * 0 (out) taken out; 0 when no bucket holds a pair. */
static int heap_refill(learner *L)
{
	for (unsigned k = L->heap_floor == INT64_MAX ? 64 : bucket_of(L->heap_floor); k-- > 0;) {
		uint32_t p = L->low_head[k];
		if (p == NONE)
			continue;
		L->low_head[k] = NONE;
		L->heap_floor = (int64_t)1 << k;
		while (p != NONE) {
			uint32_t next = L->low_next[p];
			int64_t n = L->pairs[p].count;
			if (n >= L->heap_floor)
				L->heap[L->n_heap++] = (hent){ n, p };
			else if (n > 0)
				low_put(L, p, n);
			p = next;
		}
		for (size_t i = (L->n_heap + HEAP_ARITY - 2) / HEAP_ARITY; i-- > 0;)
			sift_down(L, i);
		if (L->n_heap)
			return 1;
	}
	return 0;
}

/* The pair to merge next, out of the heap; NONE when no pair is left. */
static uint32_t heap_take(learner *L)
{
	while (L->n_heap > 0 || heap_refill(L)) {
		hent top = L->heap[0];
		int64_t now = L->pairs[top.p].count;
		if (now == top.count || now < L->heap_floor) {
			L->heap[0] = L->heap[--L->n_heap];
			if (L->n_heap > 0)
				sift_down(L, 0);
			if (now == top.count)
				return top.p;
			if (now > 0)
				low_put(L, top.p, now);
			continue;
		}
		L->heap[0].count = now; /* lower than its key: back in its place */
		sift_down(L, 0);
	}
	return NONE;
}

/* ---- setup ---- */

/* Every pair count is at most the sum over words of count x (length - 1),
 * and merges only lower that sum: when it fits int64_t, no pair count can
 * overflow, now or after any merge. */
static int check_pair_total(learner *L)
{
	int64_t total = 0;
	for (size_t w = 0; w < L->n_words; w++) {
		const wrec *wd = word_at(L, L->wofs[w]);
		int64_t pairs;
		if (wd->count > INT64_MAX || ck_mul_i64((int64_t)wd->count, wd->len - 1, &pairs) ||
		    ck_add_i64(total, pairs, &total))
			return lm_seterr(L->e, "pre-token counts too large: the pair counts would "
					 "overflow 64-bit arithmetic (beyond 2^63 - 1)");
	}
	return 0;
}

static int setup(learner *L, const bpe_counts *c, const bpe_specials *sp, uint32_t vocab,
		 int threads)
{
	size_t n = c->n;
	/* at most: a record per entry, an id per byte (and its padding) */
	size_t units = 0;
	for (size_t i = 0; i < n; i++)
		units += wrec_units(c->ent[i].len);
	if (units > UINT32_MAX)
		return lm_seterr(L->e, "too many distinct pre-token bytes to learn from (%zu; "
				 "the limit is about 30 GiB)", c->n_bytes);
	L->rec = malloc((units ? units : 1) * 8);
	L->wofs = malloc((n ? n : 1) * sizeof *L->wofs);
	L->toff = malloc(((size_t)vocab + 1) * sizeof *L->toff);
	size_t tcap = 256;
	for (size_t i = 0; i < sp->n; i++)
		tcap += sp->len[i];
	L->tbytes = malloc(tcap);
	if (!L->rec || !L->wofs || !L->toff ||
	    !L->tbytes || bpe_map_grow(L))
		return L->failed ? -1 : lm_seterr(L->e, "out of memory");
	/* specials, then the 256 bytes */
	uint64_t off = 0;
	for (size_t i = 0; i < sp->n; i++) {
		L->toff[L->n_tok++] = off;
		memcpy(L->tbytes + off, sp->s[i], sp->len[i]);
		off += sp->len[i];
	}
	for (int b = 0; b < 256; b++) {
		L->toff[L->n_tok++] = off;
		L->tbytes[off++] = (uint8_t)b;
	}
	L->toff[L->n_tok] = off;
	return bpe_lay_words(L, c, threads) ? -1 : check_pair_total(L);
}

/* ---- merging ---- */

/* The pairs of every word, counted (bpe_first_count.c), on a thread for
 * every PAR_COUNT_WORDS words up to threads, then put in their buckets. */
static int count_pairs(learner *L, int threads)
{
	size_t k = L->n_words / PAR_COUNT_WORDS;
	if (k > (size_t)threads)
		k = (size_t)threads;
	if (bpe_count_first(L, k > 1 ? (int)k : 1))
		return -1;
	/* every pair in a bucket: the first heap_take makes the heap */
	for (unsigned i = 0; i < 64; i++)
		L->low_head[i] = NONE;
	L->heap_floor = INT64_MAX;
	for (size_t p = L->n_pairs; p-- > 0;)
		if (L->pairs[p].count > 0)
			low_put(L, (uint32_t)p, L->pairs[p].count);
	return 0;
}

/* Append the bytes of a then b as token id n_tok. */
static int add_token(learner *L, uint32_t a, uint32_t b)
{
	uint64_t na = L->toff[a + 1] - L->toff[a], nb = L->toff[b + 1] - L->toff[b];
	uint64_t end = L->toff[L->n_tok];
	uint8_t *t = bpe_xrealloc(L, L->tbytes, end + na + nb);
	if (!t)
		return -1;
	L->tbytes = t;
	memcpy(t + end, t + L->toff[a], na);
	memcpy(t + end + na, t + L->toff[b], nb);
	L->toff[++L->n_tok] = end + na + nb;
	return 0;
}

/* Do merges until vocab ids exist or no pair is left; fills merges.  tabs:
 * one table of a merge's changes per thread. */
static int run_merges(learner *L, uint32_t vocab, bpe_merge *merges, uint32_t *n_merges,
		      int threads, nbr_tab *tabs, bpe_progress_fn progress, void *arg)
{
	*n_merges = 0;
	while (L->n_tok < vocab) {
		uint32_t top = heap_take(L);
		if (top == NONE)
			break;
		size_t first_new = L->n_pairs; /* the pairs this merge creates, from here */
		pair *x = &L->pairs[top];
		uint32_t a = x->a, b = x->b, c = L->n_tok;
		if (add_token(L, a, b))
			return -1;
		merges[(*n_merges)++] = (bpe_merge){ a, b, c };
		uint32_t *occ = x->occ, n_occ = x->n_occ;
		uint32_t *own = x->own_occ ? occ : NULL;
		x->occ = NULL;
		x->n_occ = x->own_occ = 0;
		int k = (int)(n_occ / L->par_words);
		if (k > threads)
			k = threads;
		for (int t = 0; t < (k > 1 ? k : 1); t++)
			if (bpe_nbr_reserve(&tabs[t], L->n_tok)) {
				free(own);
				L->failed = 1;
				return lm_seterr(L->e, "out of memory (pair changes of a merge)");
			}
		int rc = k > 1 ? bpe_merge_words_par(L, occ, n_occ, a, b, c, tabs, k)
			       : bpe_merge_words(L, occ, n_occ, a, b, c, &tabs[0]);
		free(own);
		if (rc)
			return -1;
		L->pairs[top].count = 0; /* every occurrence is merged */
		for (size_t p = first_new; p < L->n_pairs; p++)
			if (L->pairs[p].count > 0)
				heap_push(L, (uint32_t)p);
		if (progress)
			progress(*n_merges, arg);
	}
	return 0;
}

static void learner_free(learner *L)
{
	free(L->rec);
	free(L->wofs);
	free(L->tbytes);
	free(L->toff);
	for (size_t i = 0; i < L->n_pairs; i++)
		if (L->pairs[i].own_occ)
			free(L->pairs[i].occ);
	for (size_t i = 0; i < L->n_blk; i++)
		free(L->blk[i]);
	free(L->blk);
	free(L->pairs);
	free(L->map);
	free(L->heap);
	free(L->low_next);
}

int bpe_specials_check(const bpe_specials *sp, lm_err *e)
{
	for (size_t i = 0; i < sp->n; i++) {
		if (sp->len[i] == 0)
			return lm_usage_err(e, "special token %zu is empty", i + 1);
		if (sp->len[i] == 1) /* every byte is a token already */
			return lm_usage_err(e, "special token '%c' is a single byte, which is a token already",
					    sp->s[i][0] >= ' ' && sp->s[i][0] < 0x7F ? sp->s[i][0] : '?');
		for (size_t j = 0; j < i; j++)
			if (sp->len[i] == sp->len[j] && !memcmp(sp->s[i], sp->s[j], sp->len[i]))
				return lm_usage_err(e, "special token '%.*s' given twice",
						    (int)sp->len[i], (const char *)sp->s[i]);
	}
	return 0;
}

static const char EOT[] = "<|endoftext|>";

int bpe_learn(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
	      bpe_progress_fn progress, void *progress_arg, bpe_tokenizer *t, lm_err *e)
{
	return bpe_learn_threads(c, vocab_size, sp, 1, progress, progress_arg, t, e);
}

int bpe_learn_threads(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
		      int threads, bpe_progress_fn progress, void *progress_arg,
		      bpe_tokenizer *t, lm_err *e)
{
	return bpe_learn_timed(c, vocab_size, sp, threads, progress, progress_arg, NULL, t, e);
}

int bpe_learn_timed(const bpe_counts *c, uint32_t vocab_size, const bpe_specials *sp,
		    int threads, bpe_progress_fn progress, void *progress_arg,
		    bpe_learn_times *times, bpe_tokenizer *t, lm_err *e)
{
	memset(t, 0, sizeof *t);
	if (bpe_specials_check(sp, e))
		return -1;
	if ((uint64_t)vocab_size < 256 + (uint64_t)sp->n)
		return lm_usage_err(e, "vocabulary size %u is below 256 bytes + %zu special tokens",
				    vocab_size, sp->n);
	/* each merge removes at least one id from the words: no more merges
	 * than bytes in the distinct pre-tokens, whatever vocab_size asks */
	uint64_t reachable = 256 + (uint64_t)sp->n + c->n_bytes;
	uint32_t vocab = reachable < vocab_size ? (uint32_t)reachable : vocab_size;
	learner L;
	memset(&L, 0, sizeof L);
	L.e = e;
	const char *pw = getenv("LMPIPE_BPE_PAR_WORDS");
	L.par_words = pw && atol(pw) > 0 && atol(pw) < (long)UINT32_MAX ? (uint32_t)atol(pw)
								     : PAR_WORDS_PER_THREAD;
	bpe_merge *merges = malloc(((size_t)vocab - 256 - sp->n + 1) * sizeof *merges);
	if (threads < 1)
		threads = 1;
	nbr_tab *tabs = calloc((size_t)threads, sizeof *tabs);
	int fail = !merges || !tabs;
	uint32_t n_merges = 0;
	int rc = -1;
	if (fail)
		lm_seterr(e, "out of memory");
	else {
		double t0 = omp_get_wtime();
		rc = setup(&L, c, sp, vocab, threads) ? -1 : 0;
		double t1 = omp_get_wtime();
		if (!rc)
			rc = count_pairs(&L, threads) ? -1 : 0;
		double t2 = omp_get_wtime();
		if (!rc)
			rc = run_merges(&L, vocab, merges, &n_merges, threads, tabs, progress,
					progress_arg) ? -1 : 0;
		if (times)
			*times = (bpe_learn_times){ t1 - t0, t2 - t1, omp_get_wtime() - t2 };
	}
	for (int i = 0; tabs && i < threads; i++)
		bpe_nbr_free(&tabs[i]);
	free(tabs);
	if (rc == 0) {
		t->n_vocab = L.n_tok;
		t->bytes = L.tbytes;
		t->off = L.toff;
		L.tbytes = NULL;
		L.toff = NULL;
		t->n_merges = n_merges;
		t->merges = merges;
		merges = NULL;
		t->n_special = (uint32_t)sp->n;
		t->special = malloc((sp->n ? sp->n : 1) * sizeof *t->special);
		t->eot = BPE_NO_TOKEN;
		for (uint32_t i = 0; t->special && i < sp->n; i++) {
			t->special[i] = i;
			if (sp->len[i] == sizeof EOT - 1 && !memcmp(sp->s[i], EOT, sp->len[i]))
				t->eot = i;
		}
		for (int b = 0; b < 256; b++)
			t->byte_id[b] = (uint32_t)sp->n + (uint32_t)b;
		snprintf(t->pretokenizer, sizeof t->pretokenizer, "gpt2");
		if (!t->special)
			rc = lm_seterr(e, "out of memory");
	}
	free(merges);
	learner_free(&L);
	return rc;
}
