/* bpe_pairs.c: the merge learner's pairs (bpe_merge_internal.h): the map from
 * (left id, right id) to a pair, and the arena that holds the lists of
 * words of the pairs that merges make; used by the learner (bpe_learn.c),
 * its first count (bpe_first_count.c) and its merges (bpe_merge_words.c). */
#include "learn/bpe_merge_internal.h"

#include <stdlib.h>
#include <string.h>

void *bpe_xrealloc(learner *L, void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q && !L->failed) {
		L->failed = 1;
		lm_seterr(L->e, "out of memory (%zu bytes)", n);
	}
	return q;
}

/* The old map's slots moved into map (n slots), in the old map's order:
 * a key's slot in a map twice as large is its old home or that plus the
 * old size, so the writes run in two streams and the pairs are not read
 * (walking the pairs instead wrote every slot at random, a cache miss
 * each: a tenth of the merges' time on a 10000-token vocabulary).  Any
 * order of insertion makes a valid map: a probe never meets a hole
 * between a key's home and its slot, as no key is removed. */
static void map_move(const learner *L, mslot *map, size_t n)
{
	for (size_t i = 0; L->mmask && i <= L->mmask; i++) {
		mslot m = L->map[i];
		if (!m.val)
			continue;
		size_t j = m.hash & (n - 1);
		while (map[j].val)
			j = (j + 1) & (n - 1);
		map[j] = m;
	}
}

int bpe_map_grow(learner *L)
{
	size_t n = L->mmask ? (L->mmask + 1) * 2 : INITIAL_MAP;
	/* (past 2^32 slots, about 2^31 pairs and 64 GiB of them, a hash would
	 * not tell a slot) */
	mslot *map = (uint64_t)n >> MAX_MAP_LOG2 ? NULL : calloc(n, sizeof *map);
	if (!map) {
		L->failed = 1;
		return lm_seterr(L->e, "out of memory (pair table of %zu entries)", n);
	}
	map_move(L, map, n);
	free(L->map);
	L->map = map;
	L->mmask = n - 1;
	return 0;
}

/* Index of pair (a, b), created with count 0 when absent; NONE on error. */
uint32_t bpe_pair_get(learner *L, uint32_t a, uint32_t b)
{
	uint32_t hash = key_hash(pair_key(a, b));
	size_t j = hash & L->mmask;
	for (uint32_t v; (v = L->map[j].val); j = (j + 1) & L->mmask)
		if (L->map[j].hash == hash && L->pairs[v - 1].a == a && L->pairs[v - 1].b == b)
			return v - 1;
	if (L->n_pairs == L->cap_pairs) {
		/* the heap never holds more than every pair */
		size_t cap = L->cap_pairs ? L->cap_pairs * 2 : INITIAL_MAP;
		pair *np = bpe_xrealloc(L, L->pairs, cap * sizeof *np);
		if (np)
			L->pairs = np;
		hent *h = bpe_xrealloc(L, L->heap, cap * sizeof *h);
		if (h)
			L->heap = h;
		uint32_t *next = bpe_xrealloc(L, L->low_next, cap * sizeof *next);
		if (next)
			L->low_next = next;
		if (!np || !h || !next)
			return NONE;
		L->cap_pairs = cap;
	}
	uint32_t p = (uint32_t)L->n_pairs++;
	L->pairs[p] = (pair){ a, b, 0, NULL, 0, 0 };
	L->map[j] = (mslot){ hash, p + 1 };
	if (L->n_pairs * 2 > L->mmask + 1 && bpe_map_grow(L))
		return NONE;
	return p;
}

uint32_t *bpe_list_room(learner *L, size_t n)
{
	if (n > L->arena_left) {
		size_t cap = n > LIST_BLOCK ? n : LIST_BLOCK;
		uint32_t **blk = bpe_xrealloc(L, L->blk, (L->n_blk + 1) * sizeof *blk);
		if (!blk)
			return NULL;
		L->blk = blk;
		uint32_t *room = bpe_xrealloc(L, NULL, cap * sizeof *room);
		if (!room)
			return NULL;
		L->blk[L->n_blk++] = room;
		L->arena = room;
		L->arena_left = cap;
	}
	uint32_t *r = L->arena;
	L->arena += n;
	L->arena_left -= n;
	return r;
}
