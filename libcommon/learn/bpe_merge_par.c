/* bpe_merge_par.c: a merge whose pair occurs in many words, its words
 * rewritten on threads (see bpe_learn.c's top comment): each thread sums its
 * words' changes to the neighbouring pairs in a table of its own, then
 * applies the falls (pairs without the new id) by atomic adds while the pair
 * map is only read; after the join the threads' new pairs are folded into
 * one table and created.  Also the tables for the first pair count. */
#include "learn/bpe_merge_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void bpe_deltas_free(deltas *T)
{
	for (size_t i = 0; i < T->made; i++)
		free(T->d[i].occ);
	free(T->d);
	free(T->slot);
}

int bpe_deltas_grow_index(deltas *T)
{
	size_t n = T->mask ? (T->mask + 1) * 2 : INITIAL_DELTAS;
	uint32_t *slot = calloc(n, sizeof *slot);
	if (!slot)
		return -1;
	for (size_t i = 0; i < T->n; i++) {
		size_t j = key_slot(T->d[i].key, n - 1);
		while (slot[j])
			j = (j + 1) & (n - 1);
		slot[j] = (uint32_t)i + 1;
		T->d[i].slot = (uint32_t)j;
	}
	free(T->slot);
	T->slot = slot;
	T->mask = n - 1;
	return 0;
}

/* The change of pair key in T, made (zero) when absent; NULL on failure. */
static delta *deltas_at(deltas *T, uint64_t key)
{
	if (T->failed)
		return NULL;
	size_t j = key_slot(key, T->mask);
	uint32_t v;
	while ((v = T->slot[j]) && T->d[v - 1].key != key)
		j = (j + 1) & T->mask;
	if (v)
		return &T->d[v - 1];
	if (T->n == T->cap) {
		size_t cap = T->cap ? T->cap * 2 : INITIAL_DELTAS;
		delta *nd = realloc(T->d, cap * sizeof *nd);
		if (!nd) {
			T->failed = 1;
			return NULL;
		}
		T->d = nd;
		T->cap = cap;
	}
	if (T->n == T->made) /* a fresh entry, no occ buffer yet */
		T->d[T->made++] = (delta){ 0 };
	delta *d = &T->d[T->n];
	d->key = key;
	d->f = 0;
	d->n_occ = 0;
	d->slot = (uint32_t)j;
	T->slot[j] = (uint32_t)++T->n;
	if (T->n * 2 > T->mask + 1 && bpe_deltas_grow_index(T)) {
		T->failed = 1;
		return NULL;
	}
	return &T->d[T->n - 1];
}

/* Make room in d's list for need words (or set T's failure). */
static void delta_occ_grow(deltas *T, delta *d, uint64_t need)
{
	if (need > UINT32_MAX / 2) {
		T->failed = 1;
		return;
	}
	uint32_t cap = d->cap_occ ? d->cap_occ : FIRST_OCC_CAP;
	while (cap < need)
		cap *= 2;
	uint32_t *o = realloc(d->occ, (size_t)cap * sizeof *o);
	if (!o) {
		T->failed = 1;
		return;
	}
	d->occ = o;
	d->cap_occ = cap;
}

/* Append the words w[0 .. n) (no two alike in a row) to d's list. */
static void delta_occ(deltas *T, delta *d, const uint32_t *w, uint32_t n)
{
	if (n && d->n_occ && d->occ[d->n_occ - 1] == w[0]) {
		w++;
		n--;
	}
	if (!n)
		return;
	if (d->n_occ + (uint64_t)n > d->cap_occ)
		delta_occ_grow(T, d, d->n_occ + (uint64_t)n);
	if (d->n_occ + (uint64_t)n > d->cap_occ)
		return;
	memcpy(d->occ + d->n_occ, w, (size_t)n * sizeof *w);
	d->n_occ += n;
}

/* Add f to pair key's change; w (NONE: none) is a word it was added in. */
void bpe_deltas_add(deltas *T, uint64_t key, int64_t f, uint32_t w)
{
	delta *d = deltas_at(T, key);
	if (!d)
		return;
	d->f += f;
	if (w == NONE || (d->n_occ && d->occ[d->n_occ - 1] == w))
		return;
	if (d->n_occ == d->cap_occ)
		delta_occ_grow(T, d, d->n_occ + 1);
	if (d->n_occ < d->cap_occ)
		d->occ[d->n_occ++] = w;
}

/* Replace each (a, b) in word w by c, left to right, the changes to the
 * neighbouring pairs summed into T (the count of (a, b) itself is the
 * caller's).  A word whose list entry is stale (no (a, b) left, as for
 * nearly half the words a merge visits) is only read. */
static void merge_word_deltas(learner *L, uint32_t w, uint32_t a, uint32_t b, uint32_t c,
			      deltas *T)
{
	wrec *wd = word_at(L, w);
	uint32_t *s = wd->id, n = wd->len, i = 0;
	while (i + 1 < n && !(s[i] == a && s[i + 1] == b))
		i++;
	if (i + 1 >= n)
		return;
	int64_t f = (int64_t)wd->count;
	uint32_t o = i;
	while (i < n) {
		if (i + 1 < n && s[i] == a && s[i + 1] == b) {
			if (o > 0) {
				bpe_deltas_add(T, pair_key(s[o - 1], a), -f, NONE);
				bpe_deltas_add(T, pair_key(s[o - 1], c), f, w);
			}
			if (i + 2 < n) {
				bpe_deltas_add(T, pair_key(b, s[i + 2]), -f, NONE);
				bpe_deltas_add(T, pair_key(c, s[i + 2]), f, w);
			}
			s[o++] = c;
			i += 2;
		} else {
			s[o++] = s[i++];
		}
	}
	wd->len = o;
}

static int holds(uint64_t key, uint32_t c);

/* Apply T's summed changes to the pairs (with only set, those of the pairs
 * that hold c), and empty T. */
static int apply(learner *L, deltas *T, int only, uint32_t c)
{
	for (size_t i = 0; i < T->n; i++) {
		delta *d = &T->d[i];
		T->slot[d->slot] = 0;
		if (only && !holds(d->key, c))
			continue;
		uint32_t p = bpe_pair_get(L, (uint32_t)(d->key >> 32), (uint32_t)d->key);
		if (p == NONE)
			return -1;
		pair *x = &L->pairs[p];
		x->count += d->f;
		if (bpe_occ_append(L, x, d->occ, d->n_occ))
			return -1;
	}
	T->n = 0;
	return 0;
}

/* Apply a thread's summed changes to the pairs, and empty T. */
int bpe_deltas_apply(learner *L, deltas *T)
{
	return apply(L, T, 0, 0);
}

/* Index of pair (a, b), NONE when absent; reads the map only, so threads may
 * call it together while no pair is created. */
static uint32_t pair_find(const learner *L, uint32_t a, uint32_t b)
{
	uint64_t k = pair_key(a, b);
	for (size_t j = key_slot(k, L->mmask); L->map[j].val; j = (j + 1) & L->mmask)
		if (L->map[j].key == k)
			return L->map[j].val - 1;
	return NONE;
}

static int holds(uint64_t key, uint32_t c)
{
	return (uint32_t)(key >> 32) == c || (uint32_t)key == c;
}

/* The falls of T (the pairs without c, which existed before the merge and
 * only lose occurrences), applied to their counts atomically, on the
 * calling thread, beside the other threads' tables. */
static void deltas_fall(learner *L, deltas *T, uint32_t c)
{
	for (size_t i = 0; i < T->n && !T->failed; i++) {
		delta *d = &T->d[i];
		if (holds(d->key, c))
			continue;
		uint32_t p = pair_find(L, (uint32_t)(d->key >> 32), (uint32_t)d->key);
		if (p == NONE) /* a pair seen in a word is in the map */
			T->failed = 1;
		else
			__atomic_fetch_add(&L->pairs[p].count, d->f, __ATOMIC_RELAXED);
	}
}

/* The pairs of src that hold c added into dst (words in order: dst's, then
 * src's), then src emptied: a small table to a small table, in cache, so
 * that the pair map is searched once a new pair, not once a thread. */
static void deltas_fold(deltas *dst, deltas *src, uint32_t c)
{
	for (size_t i = 0; i < src->n; i++) {
		delta *s = &src->d[i];
		src->slot[s->slot] = 0;
		if (!holds(s->key, c))
			continue;
		delta *d = deltas_at(dst, s->key);
		if (!d)
			return;
		d->f += s->f;
		delta_occ(dst, d, s->occ, s->n_occ);
	}
	src->n = 0;
}

/* The rest of T after deltas_fall: the pairs that hold c, created by this
 * merge, with the words they occur in; then T is empty. */
static int deltas_rise(learner *L, deltas *T, uint32_t c)
{
	return apply(L, T, 1, c);
}

/* Rewrite the words of occ on the calling thread, their changes summed in T
 * (small, in cache: a neighbouring pair recurs in many words, so the pair
 * map is searched once a pair, not four times a word), then applied. */
int bpe_merge_words(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a, uint32_t b,
		    uint32_t c, deltas *T)
{
	for (uint32_t i = 0; i < n_occ; i++) {
		uint32_t w = occ[i];
		/* the words are scattered: fetch the next ones early */
		if (i + PREFETCH_AHEAD < n_occ)
			__builtin_prefetch(word_at(L, occ[i + PREFETCH_AHEAD]));
		wrec *wd = word_at(L, w);
		if (wd->stamp == L->stamp)
			continue; /* listed twice */
		wd->stamp = L->stamp;
		merge_word_deltas(L, w, a, b, c, T);
	}
	if (T->failed) {
		L->failed = 1;
		return lm_seterr(L->e, "out of memory (pair changes of a merge)");
	}
	return bpe_deltas_apply(L, T);
}

/* Rewrite the words of occ on k threads; each thread then applies the falls
 * of its table (no pair is created until all are done); after the join the
 * pairs with c are folded into the first table, then created and counted.
 * Counts are sums, so neither the order of the words nor that of the
 * tables changes them. */
int bpe_merge_words_par(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a,
			   uint32_t b, uint32_t c, deltas *tds, int k)
{
	uint32_t stamp = L->stamp;
#pragma omp parallel num_threads(k)
	{
		deltas *T = &tds[omp_get_thread_num()];
#pragma omp for schedule(dynamic, PAR_CHUNK_WORDS)
		for (uint32_t i = 0; i < n_occ; i++) {
			uint32_t w = occ[i];
			/* a word listed twice is rewritten once, by whichever thread is first */
			if (__atomic_exchange_n(&word_at(L, w)->stamp, stamp, __ATOMIC_RELAXED) == stamp)
				continue;
			merge_word_deltas(L, w, a, b, c, T);
		}
		/* (the loop's barrier: every word is rewritten) */
		deltas_fall(L, T, c);
	}
	for (int t = 1; t < k && !tds[t].failed; t++)
		deltas_fold(&tds[0], &tds[t], c);
	for (int t = 0; t < k; t++) {
		if (tds[t].failed) {
			L->failed = 1;
			return lm_seterr(L->e, "out of memory (pair changes of a merge)");
		}
	}
	return deltas_rise(L, &tds[0], c);
}
