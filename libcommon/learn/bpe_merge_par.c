/* bpe_merge_par.c: the tables of pair changes that the first pair count
 * fills on threads (bpe_learn.c's count_pairs), one per thread: an
 * open-addressing index from a pair's key to its summed count and the
 * words it was seen in, applied to the pair map after the join. */
#include "learn/bpe_merge_internal.h"

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

/* Apply a thread's summed changes to the pairs, and empty T. */
int bpe_deltas_apply(learner *L, deltas *T)
{
	for (size_t i = 0; i < T->n; i++) {
		delta *d = &T->d[i];
		T->slot[d->slot] = 0;
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
