/* bpe_merge_words.c: one merge (a, b) -> c rewriting the words on its
 * pair's list, on one thread or on several (see bpe_learn.c's top comment).
 *
 * Within one merge a and b are fixed, so every pair whose count changes is
 * known from one id beside an occurrence: a left neighbour x turns (x, a)
 * into (x, c), a right neighbour y turns (b, y) into (c, y).  So the
 * changes are summed per neighbour id, each id given a place (in the
 * order first seen) by an array indexed by id (no hashing), beside the
 * (neighbour's place, word) entries that the new pairs' word lists are
 * made from, counted by place as they are noted, so that grouping them by
 * neighbour is one pass.  At the end the falls ((x, a), (b, y): pairs that
 * exist and only lose occurrences) and the rises ((x, c), (c, y): pairs
 * this merge creates) are applied once per neighbour.
 *
 * On k threads each rewrites its share of the words into a table of its
 * own and applies its falls by atomic adds while the pair map is only
 * read; after the join the tables are folded into the first (sums, and the
 * entries in thread order) and the rises made once each.  Counts are sums,
 * so the threads' shares and order change none of them.  A new pair's
 * words are listed in thread order (a word list is a set to visit: its
 * order changes no merge), and pairs are told apart by ids, never by
 * their index in the map, so neither does the order they are made in. */
#include "learn/bpe_merge_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { FIRST_ENTRIES = 1 << 10 };

int bpe_nbr_reserve(nbr_tab *T, uint32_t n_ids)
{
	if (n_ids <= T->cap_ids)
		return 0;
	size_t cap = T->cap_ids ? T->cap_ids : 512;
	while (cap < n_ids)
		cap *= 2;
	for (int s = 0; s < 2; s++) {
		nbr_side *d = &T->side[s];
		int64_t *f = realloc(d->f, cap * sizeof *f);
		if (f)
			d->f = f;
		uint32_t *idx = f ? realloc(d->idx, cap * sizeof *idx) : NULL;
		if (idx)
			d->idx = idx;
		uint32_t *t = idx ? realloc(d->touched, cap * sizeof *t) : NULL;
		if (t)
			d->touched = t;
		uint32_t *m = t ? realloc(d->n_of, cap * sizeof *m) : NULL;
		if (m)
			d->n_of = m;
		if (!m)
			return -1;
		memset(d->idx + T->cap_ids, 0, (cap - T->cap_ids) * sizeof *idx);
	}
	T->cap_ids = (uint32_t)cap;
	return 0;
}

void bpe_nbr_free(nbr_tab *T)
{
	for (int s = 0; s < 2; s++) {
		nbr_side *d = &T->side[s];
		free(d->f);
		free(d->idx);
		free(d->touched);
		free(d->n_of);
		free(d->ent_j);
		free(d->ent_w);
	}
	memset(T, 0, sizeof *T);
}

/* Room in d's entries for need of them (0), or -1 out of memory. */
static int ents_room(nbr_side *d, size_t need)
{
	if (need <= d->cap_ent)
		return 0;
	size_t cap = d->cap_ent ? d->cap_ent : FIRST_ENTRIES;
	while (cap < need)
		cap *= 2;
	uint32_t *j = realloc(d->ent_j, cap * sizeof *j);
	if (j)
		d->ent_j = j;
	uint32_t *ww = j ? realloc(d->ent_w, cap * sizeof *ww) : NULL;
	if (ww)
		d->ent_w = ww;
	if (!j || !ww)
		return -1;
	d->cap_ent = cap;
	return 0;
}

/* The place of id x among d's touched ids (in the order first touched),
 * given one with no count and no entry when x is new. */
static inline uint32_t touch(nbr_side *d, uint32_t x)
{
	uint32_t j = d->idx[x];
	if (j)
		return j - 1;
	j = d->n_touched++;
	d->touched[j] = x;
	d->f[j] = 0;
	d->n_of[j] = 0;
	d->idx[x] = j + 1;
	return j;
}

/* Neighbour x of an occurrence in word w (count f). */
static inline void note(nbr_tab *T, nbr_side *d, uint32_t x, int64_t f, uint32_t w)
{
	uint32_t j = touch(d, x);
	d->f[j] += f;
	if (d->n_ent && d->ent_j[d->n_ent - 1] == j && d->ent_w[d->n_ent - 1] == w)
		return; /* the same neighbour twice in one word */
	if (d->n_ent == d->cap_ent && ents_room(d, d->n_ent + 1)) {
		T->failed = 1;
		return;
	}
	d->ent_j[d->n_ent] = j;
	d->ent_w[d->n_ent++] = w;
	d->n_of[j]++;
}

/* Ids x, y as they lie side by side in memory, read as one number (one
 * compare a place in the search for a pair, not two). */
static inline uint64_t ids_of(uint32_t x, uint32_t y)
{
	uint32_t two[2] = { x, y };
	uint64_t v;
	memcpy(&v, two, sizeof v);
	return v;
}

static inline uint64_t ids_at(const uint32_t *s)
{
	uint64_t v;
	memcpy(&v, s, sizeof v);
	return v;
}

/* Replace each (a, b) in word w by c, left to right, noting the
 * neighbours in T.  A word whose list entry is stale (no (a, b) left, as
 * for nearly half the words a merge visits) is only read. */
static void merge_word(learner *L, uint32_t w, uint32_t a, uint32_t b, uint32_t c, nbr_tab *T)
{
	wrec *wd = word_at(L, w);
	uint32_t *s = wd->id, n = wd->len, i = 0;
	uint64_t ab = ids_of(a, b);
	while (i + 1 < n && ids_at(s + i) != ab)
		i++;
	if (i + 1 >= n)
		return;
	int64_t f = (int64_t)wd->count;
	uint32_t o = i;
	while (i < n) {
		if (i + 1 < n && s[i] == a && s[i + 1] == b) {
			if (o > 0)
				note(T, &T->side[0], s[o - 1], f, w);
			if (i + 2 < n)
				note(T, &T->side[1], s[i + 2], f, w);
			s[o++] = c;
			i += 2;
		} else {
			s[o++] = s[i++];
		}
	}
	wd->len = o;
}

/* The pair of side s with neighbour x: (x, y) on the left, (y, x) on the right. */
static inline uint64_t side_key(int s, uint32_t x, uint32_t y)
{
	return s == 0 ? pair_key(x, y) : pair_key(y, x);
}

/* The map's slot for key fetched early (the keys of a merge's pairs are
 * scattered over the map). */
#define fetch_slot(L, k) __builtin_prefetch(&(L)->map[key_hash(k) & (L)->mmask])

/* Index of pair key, NONE when absent; reads the map only, so threads may
 * call it together while no pair is created. */
static uint32_t pair_find(const learner *L, uint64_t k)
{
	uint32_t h = key_hash(k);
	for (size_t j = h & L->mmask; L->map[j].val; j = (j + 1) & L->mmask) {
		const mslot m = L->map[j];
		if (m.hash == h && pair_key(L->pairs[m.val - 1].a, L->pairs[m.val - 1].b) == k)
			return m.val - 1;
	}
	return NONE;
}

/* The falls of T: (x, a) and (b, y) lose what the merge took (atomically
 * when other threads apply theirs beside).  But for x = c: the left
 * neighbour of an occurrence right after another ("a b a b") is the c just
 * written, and (c, a) is a pair this merge makes, so its fall is taken
 * from its rise (rises). */
static void falls(learner *L, nbr_tab *T, uint32_t a, uint32_t b, uint32_t c, int atomic)
{
	for (int s = 0; s < 2 && !T->failed; s++) {
		const nbr_side *d = &T->side[s];
		uint32_t y = s == 0 ? a : b;
		for (uint32_t j = 0; j < d->n_touched; j++) {
			uint32_t x = d->touched[j];
			if (j + SLOT_AHEAD < d->n_touched)
				fetch_slot(L, side_key(s, d->touched[j + SLOT_AHEAD], y));
			if (s == 0 && x == c)
				continue;
			uint32_t p = pair_find(L, side_key(s, x, y));
			if (p == NONE) { /* a pair seen in a word is in the map */
				T->failed = 1;
				return;
			}
			if (atomic)
				__atomic_fetch_add(&L->pairs[p].count, -d->f[j], __ATOMIC_RELAXED);
			else
				L->pairs[p].count -= d->f[j];
		}
	}
}

/* src's sums and entries added to dst (entries after dst's, their
 * neighbours' places made dst's), src emptied. */
static int fold(nbr_tab *dst, nbr_tab *src)
{
	for (int s = 0; s < 2; s++) {
		nbr_side *d = &dst->side[s], *o = &src->side[s];
		for (uint32_t j = 0; j < o->n_touched; j++) {
			uint32_t x = o->touched[j], k = touch(d, x);
			d->f[k] += o->f[j];
			d->n_of[k] += o->n_of[j];
			o->n_of[j] = k; /* now the place in dst */
			o->idx[x] = 0;
		}
		o->n_touched = 0;
		if (ents_room(d, d->n_ent + o->n_ent))
			return -1;
		for (size_t e = 0; e < o->n_ent; e++)
			d->ent_j[d->n_ent + e] = o->n_of[o->ent_j[e]];
		if (o->n_ent) /* (an empty side may have no arrays at all) */
			memcpy(d->ent_w + d->n_ent, o->ent_w, o->n_ent * sizeof *o->ent_w);
		d->n_ent += o->n_ent;
		o->n_ent = 0;
	}
	return 0;
}

/* The words of d's entries into words, grouped by neighbour in the order
 * of its places and in entry order within a group (a stable counting sort:
 * each place's entries were counted as they were noted); then n_of[j] is
 * the end of place j's group. */
static void group_words(nbr_side *d, uint32_t *words)
{
	uint32_t *n_of = d->n_of, sum = 0;
	for (uint32_t j = 0; j < d->n_touched; j++) {
		uint32_t m = n_of[j];
		n_of[j] = sum;
		sum += m;
	}
	const uint32_t *ent_j = d->ent_j, *ent_w = d->ent_w;
	for (size_t e = 0, n = d->n_ent; e < n; e++)
		words[n_of[ent_j[e]]++] = ent_w[e];
}

/* The rises of T: each new pair (x, c) or (c, y) made and counted once,
 * with its words in entry order (group_words, straight into the arena: a
 * pair with c is new, its list empty, and no pair is made twice); then T
 * is empty.  (c, a) rises by the occurrences of a right after one and
 * falls by those of (a, b) right after one (falls): the second are a part
 * of the first, so its net count is not below 0. */
static int rises(learner *L, nbr_tab *T, uint32_t a, uint32_t c)
{
	const nbr_side *left = &T->side[0];
	int64_t ca_fall = left->idx[c] ? left->f[left->idx[c] - 1] : 0;
	for (int s = 0; s < 2; s++) {
		nbr_side *d = &T->side[s];
		uint32_t n = d->n_touched;
		if (d->n_ent > UINT32_MAX)
			return lm_seterr(L->e, "pair list too long");
		uint32_t *words = d->n_ent ? bpe_list_room(L, d->n_ent) : NULL;
		if (d->n_ent && !words)
			return -1;
		group_words(d, words);
		uint32_t from = 0;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t x = d->touched[j];
			uint64_t k = side_key(s, x, c);
			if (j + SLOT_AHEAD < n)
				fetch_slot(L, side_key(s, d->touched[j + SLOT_AHEAD], c));
			uint32_t p = bpe_pair_get(L, (uint32_t)(k >> 32), (uint32_t)k);
			if (p == NONE)
				return -1;
			pair *q = &L->pairs[p];
			q->count += d->f[j] - (s == 1 && x == a ? ca_fall : 0);
			q->occ = words + from;
			q->n_occ = d->n_of[j] - from;
			from = d->n_of[j];
			d->idx[x] = 0;
		}
		d->n_touched = 0;
		d->n_ent = 0;
	}
	return 0;
}

/* Word occ[i] is the one before it too.  A list holds a word twice only
 * side by side: a first count's list holds each word once, and a merge's
 * entries of one word are together and keep their order in the sort
 * (rises), so its entries of one neighbour are together in the list (a
 * word with the neighbour twice, not one after the other in the word, as
 * x in "x a b y a b x a b").  So no mark in the word is needed, and a
 * word whose entry is stale is only read, never written. */
static inline int listed_before(const uint32_t *occ, uint32_t i)
{
	return i > 0 && occ[i - 1] == occ[i];
}

static int failed(learner *L)
{
	L->failed = 1;
	return lm_seterr(L->e, "out of memory (pair changes of a merge)");
}

int bpe_merge_words(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a, uint32_t b,
		    uint32_t c, nbr_tab *T)
{
	for (uint32_t i = 0; i < n_occ; i++) {
		uint32_t w = occ[i];
		/* the words are scattered: fetch the next ones early, and the
		 * line after a record's first, that most records reach into */
		if (i + PREFETCH_AHEAD < n_occ) {
			const char *r = (const char *)word_at(L, occ[i + PREFETCH_AHEAD]);
			__builtin_prefetch(r);
			__builtin_prefetch(r + RECORD_TAIL);
		}
		if (listed_before(occ, i))
			continue;
		merge_word(L, w, a, b, c, T);
	}
	if (!T->failed)
		falls(L, T, a, b, c, 0);
	if (T->failed)
		return failed(L);
	return rises(L, T, a, c);
}

int bpe_merge_words_par(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a, uint32_t b,
			uint32_t c, nbr_tab *tabs, int k)
{
#pragma omp parallel num_threads(k)
	{
		nbr_tab *T = &tabs[omp_get_thread_num()];
#pragma omp for schedule(dynamic, PAR_CHUNK_WORDS)
		for (uint32_t i = 0; i < n_occ; i++) {
			uint32_t w = occ[i];
			/* fetched early as on one thread (the words ahead may be
			 * another thread's: then only a wasted fetch) */
			if (i + PREFETCH_AHEAD < n_occ) {
				const char *r = (const char *)word_at(L, occ[i + PREFETCH_AHEAD]);
				__builtin_prefetch(r);
				__builtin_prefetch(r + RECORD_TAIL);
			}
			/* a word listed twice is rewritten once, by the thread of
			 * its first place, whichever thread has the one before */
			if (listed_before(occ, i))
				continue;
			merge_word(L, w, a, b, c, T);
		}
		/* (the loop's barrier: every word is rewritten) */
		if (!T->failed)
			falls(L, T, a, b, c, 1);
	}
	for (int t = 0; t < k; t++)
		if (tabs[t].failed)
			return failed(L);
	for (int t = 1; t < k; t++)
		if (fold(&tabs[0], &tabs[t]))
			return failed(L);
	return rises(L, &tabs[0], a, c);
}
