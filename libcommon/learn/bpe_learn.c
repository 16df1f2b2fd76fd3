/* bpe_learn.c: learning the merges from pre-token counts (see bpe_learn.h).
 *
 * Each distinct pre-token ("word") is an array of token ids with a count.
 * Every adjacent pair of ids has an entry with its total count and the list
 * of words it occurs in (a superset: entries may be stale, and are checked).
 * A merge rewrites only the words on the merged pair's list, adjusting the
 * counts of the neighbouring pairs as it goes.
 *
 * A 4-ary max-heap orders the pairs by (count, left bytes, right bytes),
 * lazily: each pair with a nonzero count has one heap entry whose key is its
 * count when it was pushed, at least its count now, since a count only grows
 * in the merge that creates its pair (every pair whose count grows holds the
 * new id).  So a merge costs no heap work for the counts it lowers; it pushes
 * the pairs it created, once each, when it ends.  The top entry is the pair
 * to merge when its key is its count (every other pair's count is at most
 * its key); otherwise it goes back with its count as key (or out, at 0).
 *
 * On several threads, a merge whose pair occurs in many words rewrites them
 * in parallel: each thread rewrites its share of the words and sums the
 * changes to the neighbouring pairs in a table of its own (one entry per
 * pair, with the words a new pair occurs in).  Then each thread applies the
 * falls of its table (the pairs without the new id, which exist and only
 * lose occurrences) by atomic adds, while the map of pairs is only read;
 * the pairs with the new id, created by this merge, are made and counted
 * after the join, one table after another.  The first count of every pair
 * is made the same way, each thread over a run of words (and applied after
 * the join).  Counts are sums and the heap's
 * order is total (ties of count and bytes go to the lower ids), so the
 * merges are the same whatever the number of threads. */
#include "learn/bpe_learn_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"

enum {
	NONE = 0xFFFFFFFFu, INITIAL_MAP = 1 << 16, FIRST_OCC_CAP = 4, PREFETCH_AHEAD = 8,
	/* a merge goes parallel past this many words a thread (LMPIPE_BPE_PAR_WORDS
	 * sets it): a thread's share of rewriting costs well over the fork and
	 * join; its table's falls are applied on the thread, its new pairs
	 * (a few dozen) after the join */
	PAR_WORDS_PER_THREAD = 128,
	PAR_CHUNK_WORDS = 64,        /* words a thread takes at a time */
	/* children of a heap node: a 4-ary heap has half the levels of a
	 * binary one, and a node's children share a cache line or two */
	HEAP_ARITY = 4,
	PAR_COUNT_WORDS = 4096,      /* the first pair count, likewise */
	INITIAL_DELTAS = 1 << 10,   /* slots of a thread's table of pair changes */
};

typedef struct pair {
	uint32_t a, b;
	int64_t count;
	uint32_t *occ;   /* words it (may) occur in */
	uint32_t n_occ, cap_occ;
} pair;

/* A distinct pre-token: its ids are sym[start .. start + len). */
typedef struct word {
	uint64_t start, count;
	uint32_t len, stamp; /* stamp: last merge that rewrote it */
} word;

/* A heap entry: a pair and its count when it was pushed. */
typedef struct hent {
	int64_t count;
	uint32_t p;
} hent;

typedef struct learner {
	/* words */
	uint32_t *sym;      /* all words' ids back to back */
	word *words;
	size_t n_words, n_sym;
	/* tokens */
	uint8_t *tbytes;
	uint64_t *toff;     /* token id's bytes: tbytes[toff[id] .. toff[id + 1]) */
	uint32_t n_tok;
	/* pairs: map from (a << 32 | b) to index + 1 */
	pair *pairs;
	size_t n_pairs, cap_pairs;
	uint64_t *mkey;
	uint32_t *mval;
	size_t mmask;
	hent *heap;
	size_t n_heap;
	uint32_t stamp;  /* merges done, marks the words rewritten */
	uint32_t par_words; /* a merge goes parallel past this many words a thread */
	lm_err *e;
	int failed;
} learner;

static void *xrealloc(learner *L, void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q && !L->failed) {
		L->failed = 1;
		lm_seterr(L->e, "out of memory (%zu bytes)", n);
	}
	return q;
}

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

/* Push pair p with its count now (the heap has room: at most one entry a
 * pair). */
static void heap_push(learner *L, uint32_t p)
{
	L->heap[L->n_heap] = (hent){ L->pairs[p].count, p };
	sift_up(L, L->n_heap++);
}

/* The pair to merge next, out of the heap; NONE when no pair is left. */
static uint32_t heap_take(learner *L)
{
	while (L->n_heap > 0) {
		hent top = L->heap[0];
		int64_t now = L->pairs[top.p].count;
		if (now == top.count || now <= 0) {
			L->heap[0] = L->heap[--L->n_heap];
			if (L->n_heap > 0)
				sift_down(L, 0);
			if (now > 0)
				return top.p;
			continue;
		}
		L->heap[0].count = now; /* lower than its key: back in its place */
		sift_down(L, 0);
	}
	return NONE;
}

/* ---- pairs ---- */

static uint64_t pair_key(uint32_t a, uint32_t b)
{
	return (uint64_t)a << 32 | b;
}

static const uint64_t KEY_MUL = 0x7FB5D329728EA185ull; /* an odd constant that mixes well */

static size_t key_slot(uint64_t k, size_t mask)
{
	k ^= k >> 31;
	k *= KEY_MUL;
	k ^= k >> 27;
	return (size_t)k & mask;
}

static int map_grow(learner *L)
{
	size_t n = L->mmask ? (L->mmask + 1) * 2 : INITIAL_MAP;
	uint64_t *key = malloc(n * sizeof *key);
	uint32_t *val = calloc(n, sizeof *val);
	if (!key || !val) {
		free(key);
		free(val);
		L->failed = 1;
		return lm_seterr(L->e, "out of memory (pair table of %zu entries)", n);
	}
	for (size_t i = 0; i < L->n_pairs; i++) {
		uint64_t k = pair_key(L->pairs[i].a, L->pairs[i].b);
		size_t j = key_slot(k, n - 1);
		while (val[j])
			j = (j + 1) & (n - 1);
		key[j] = k;
		val[j] = (uint32_t)i + 1;
	}
	free(L->mkey);
	free(L->mval);
	L->mkey = key;
	L->mval = val;
	L->mmask = n - 1;
	return 0;
}

/* Index of pair (a, b), created with count 0 when absent; NONE on error. */
static uint32_t pair_get(learner *L, uint32_t a, uint32_t b)
{
	uint64_t k = pair_key(a, b);
	size_t j = key_slot(k, L->mmask);
	for (uint32_t v; (v = L->mval[j]); j = (j + 1) & L->mmask)
		if (L->mkey[j] == k)
			return v - 1;
	if (L->n_pairs == L->cap_pairs) {
		/* the heap never holds more than every pair */
		size_t cap = L->cap_pairs ? L->cap_pairs * 2 : INITIAL_MAP;
		pair *np = xrealloc(L, L->pairs, cap * sizeof *np);
		if (np)
			L->pairs = np;
		hent *h = xrealloc(L, L->heap, cap * sizeof *h);
		if (h)
			L->heap = h;
		if (!np || !h)
			return NONE;
		L->cap_pairs = cap;
	}
	uint32_t p = (uint32_t)L->n_pairs++;
	L->pairs[p] = (pair){ a, b, 0, NULL, 0, 0 };
	L->mkey[j] = k;
	L->mval[j] = p + 1;
	if (L->n_pairs * 2 > L->mmask + 1 && map_grow(L))
		return NONE;
	return p;
}

static int occ_add(learner *L, pair *x, uint32_t w)
{
	if (x->n_occ && x->occ[x->n_occ - 1] == w)
		return 0;
	if (x->n_occ == x->cap_occ) {
		uint32_t cap = x->cap_occ ? x->cap_occ * 2 : FIRST_OCC_CAP;
		uint32_t *o = xrealloc(L, x->occ, cap * sizeof *o);
		if (!o)
			return -1;
		x->occ = o;
		x->cap_occ = cap;
	}
	x->occ[x->n_occ++] = w;
	return 0;
}

/* Append the words w[0 .. n) (no two alike in a row) to x's list. */
static int occ_append(learner *L, pair *x, const uint32_t *w, uint32_t n)
{
	if (n && x->n_occ && x->occ[x->n_occ - 1] == w[0]) {
		w++;
		n--;
	}
	if (!n)
		return 0;
	if ((uint64_t)x->n_occ + n > UINT32_MAX)
		return lm_seterr(L->e, "pair list too long");
	if (x->n_occ + n > x->cap_occ) {
		uint32_t cap = x->cap_occ ? x->cap_occ : FIRST_OCC_CAP;
		while (cap < x->n_occ + n)
			cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
		uint32_t *o = xrealloc(L, x->occ, (size_t)cap * sizeof *o);
		if (!o)
			return -1;
		x->occ = o;
		x->cap_occ = cap;
	}
	memcpy(x->occ + x->n_occ, w, (size_t)n * sizeof *w);
	x->n_occ += n;
	return 0;
}

/* Add f to pair (a, b), which occurs in word w. */
static int pair_add(learner *L, uint32_t a, uint32_t b, int64_t f, uint32_t w)
{
	uint32_t p = pair_get(L, a, b);
	if (p == NONE)
		return -1;
	pair *x = &L->pairs[p];
	x->count += f;
	return occ_add(L, x, w);
}

/* Take f from pair (a, b), which exists (its heap key stays: see above). */
static void pair_sub(learner *L, uint32_t a, uint32_t b, int64_t f)
{
	L->pairs[pair_get(L, a, b)].count -= f;
}

/* ---- setup ---- */

static void add_word(const uint8_t *s, size_t n, uint64_t count, void *arg)
{
	learner *L = arg;
	if (n < 2)  /* no pair to merge */
		return;
	size_t w = L->n_words++;
	L->words[w] = (word){ L->n_sym, count, (uint32_t)n, 0 };
	uint32_t *sy = L->sym + L->n_sym;
	for (size_t i = 0; i < n; i++)
		sy[i] = L->n_tok - 256 + s[i]; /* byte ids follow the specials */
	L->n_sym += n;
}

/* Every pair count is at most the sum over words of count x (length - 1),
 * and merges only lower that sum: when it fits int64_t, no pair count can
 * overflow, now or after any merge. */
static int check_pair_total(learner *L)
{
	int64_t total = 0;
	for (size_t w = 0; w < L->n_words; w++) {
		const word *wd = &L->words[w];
		int64_t pairs;
		if (wd->count > INT64_MAX || ck_mul_i64((int64_t)wd->count, wd->len - 1, &pairs) ||
		    ck_add_i64(total, pairs, &total))
			return lm_seterr(L->e, "pre-token counts too large: the pair counts would "
					 "overflow 64-bit arithmetic (beyond 2^63 - 1)");
	}
	return 0;
}

static int setup(learner *L, const bpe_counts *c, const bpe_specials *sp, uint32_t vocab)
{
	size_t n = c->n;
	L->sym = malloc((c->n_bytes ? c->n_bytes : 1) * sizeof *L->sym);
	L->words = malloc((n ? n : 1) * sizeof *L->words);
	L->toff = malloc(((size_t)vocab + 1) * sizeof *L->toff);
	size_t tcap = 256;
	for (size_t i = 0; i < sp->n; i++)
		tcap += sp->len[i];
	L->tbytes = malloc(tcap);
	if (!L->sym || !L->words || !L->toff ||
	    !L->tbytes || map_grow(L))
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
	bpe_counts_each(c, add_word, L);
	return check_pair_total(L);
}

/* ---- merging ---- */

/* Replace each (a, b) in word w by c, left to right.  The count of (a, b)
 * itself is left alone: the caller zeroes it. */
static int merge_word(learner *L, uint32_t w, uint32_t a, uint32_t b, uint32_t c)
{
	word *wd = &L->words[w];
	uint32_t *s = L->sym + wd->start, n = wd->len, o = 0;
	int64_t f = (int64_t)wd->count;
	for (uint32_t i = 0; i < n;) {
		if (i + 1 < n && s[i] == a && s[i + 1] == b) {
			if (o > 0) {
				pair_sub(L, s[o - 1], a, f);
				if (pair_add(L, s[o - 1], c, f, w))
					return -1;
			}
			if (i + 2 < n) {
				pair_sub(L, b, s[i + 2], f);
				if (pair_add(L, c, s[i + 2], f, w))
					return -1;
			}
			s[o++] = c;
			i += 2;
		} else {
			s[o++] = s[i++];
		}
	}
	L->words[w].len = o;
	return 0;
}

/* ---- merging on threads ---- */

/* One pair's net change in the merge in progress, as one thread saw it, with
 * the words it was added in (new pairs only). */
typedef struct delta {
	uint64_t key;
	int64_t f;
	uint32_t *occ;
	uint32_t n_occ, cap_occ;
	uint32_t slot;   /* its slot in the thread's index, cleared for the next merge */
} delta;

/* A thread's table of pair changes: an open-addressing index over deltas
 * (their occ buffers are kept for the next merges). */
typedef struct deltas {
	uint32_t *slot;  /* delta index + 1, 0 empty */
	size_t mask;
	delta *d;
	size_t n, cap, made;
	int failed;
} deltas;

static void deltas_free(deltas *T)
{
	for (size_t i = 0; i < T->made; i++)
		free(T->d[i].occ);
	free(T->d);
	free(T->slot);
}

static int deltas_grow_index(deltas *T)
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
	if (T->n * 2 > T->mask + 1 && deltas_grow_index(T)) {
		T->failed = 1;
		return NULL;
	}
	return &T->d[T->n - 1];
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
	if ((uint64_t)d->n_occ + n > UINT32_MAX / 2) {
		T->failed = 1;
		return;
	}
	if (d->n_occ + n > d->cap_occ) {
		uint32_t cap = d->cap_occ ? d->cap_occ : FIRST_OCC_CAP;
		while (cap < d->n_occ + n)
			cap *= 2;
		uint32_t *o = realloc(d->occ, (size_t)cap * sizeof *o);
		if (!o) {
			T->failed = 1;
			return;
		}
		d->occ = o;
		d->cap_occ = cap;
	}
	memcpy(d->occ + d->n_occ, w, (size_t)n * sizeof *w);
	d->n_occ += n;
}

/* Add f to pair key's change; w (NONE: none) is a word it was added in. */
static void deltas_add(deltas *T, uint64_t key, int64_t f, uint32_t w)
{
	delta *d = deltas_at(T, key);
	if (!d)
		return;
	d->f += f;
	if (w != NONE)
		delta_occ(T, d, &w, 1);
}

/* merge_word, with the pair changes summed into T instead of applied. */
static void merge_word_deltas(learner *L, uint32_t w, uint32_t a, uint32_t b, uint32_t c,
			      deltas *T)
{
	word *wd = &L->words[w];
	uint32_t *s = L->sym + wd->start, n = wd->len, o = 0;
	int64_t f = (int64_t)wd->count;
	for (uint32_t i = 0; i < n;) {
		if (i + 1 < n && s[i] == a && s[i + 1] == b) {
			if (o > 0) {
				deltas_add(T, pair_key(s[o - 1], a), -f, NONE);
				deltas_add(T, pair_key(s[o - 1], c), f, w);
			}
			if (i + 2 < n) {
				deltas_add(T, pair_key(b, s[i + 2]), -f, NONE);
				deltas_add(T, pair_key(c, s[i + 2]), f, w);
			}
			s[o++] = c;
			i += 2;
		} else {
			s[o++] = s[i++];
		}
	}
	wd->len = o;
}

/* Apply a thread's summed changes to the pairs, and empty T. */
static int deltas_apply(learner *L, deltas *T)
{
	for (size_t i = 0; i < T->n; i++) {
		delta *d = &T->d[i];
		T->slot[d->slot] = 0;
		uint32_t p = pair_get(L, (uint32_t)(d->key >> 32), (uint32_t)d->key);
		if (p == NONE)
			return -1;
		pair *x = &L->pairs[p];
		x->count += d->f;
		if (occ_append(L, x, d->occ, d->n_occ))
			return -1;
	}
	T->n = 0;
	return 0;
}

/* Index of pair (a, b), NONE when absent; reads the map only, so threads may
 * call it together while no pair is created. */
static uint32_t pair_find(const learner *L, uint32_t a, uint32_t b)
{
	uint64_t k = pair_key(a, b);
	for (size_t j = key_slot(k, L->mmask); L->mval[j]; j = (j + 1) & L->mmask)
		if (L->mkey[j] == k)
			return L->mval[j] - 1;
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
	for (size_t i = 0; i < T->n; i++) {
		delta *d = &T->d[i];
		T->slot[d->slot] = 0;
		if (!holds(d->key, c))
			continue;
		uint32_t p = pair_get(L, (uint32_t)(d->key >> 32), (uint32_t)d->key);
		if (p == NONE)
			return -1;
		pair *x = &L->pairs[p];
		x->count += d->f;
		if (occ_append(L, x, d->occ, d->n_occ))
			return -1;
	}
	T->n = 0;
	return 0;
}

/* Rewrite the words of occ on k threads; each thread then applies the falls
 * of its table (no pair is created until all are done); after the join the
 * pairs with c are folded into the first table, then created and counted.
 * Counts are sums, so neither the order of the words nor that of the
 * tables changes them. */
static int merge_words_par(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a,
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
			if (__atomic_exchange_n(&L->words[w].stamp, stamp, __ATOMIC_RELAXED) == stamp)
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

/* The pairs of every word, counted, then the heap.  On k > 1 threads each
 * thread sums the pairs of its run of words into its table of changes, and
 * the tables are applied in word order (so each pair lists its words in
 * increasing order, as one thread would); the tables are then emptied. */
static int count_pairs(learner *L, deltas *tds, int threads)
{
	int k = threads;
	if ((size_t)k * PAR_COUNT_WORDS > L->n_words)
		k = (int)(L->n_words / PAR_COUNT_WORDS);
	if (k > 1) {
#pragma omp parallel num_threads(k)
		{
			int t = omp_get_thread_num();
			size_t lo = L->n_words * (size_t)t / (size_t)k,
			       hi = L->n_words * (size_t)(t + 1) / (size_t)k;
			for (size_t w = lo; w < hi; w++) {
				const word *wd = &L->words[w];
				const uint32_t *sy = L->sym + wd->start;
				for (uint32_t i = 0; i + 1 < wd->len; i++)
					deltas_add(&tds[t], pair_key(sy[i], sy[i + 1]),
						   (int64_t)wd->count, (uint32_t)w);
			}
		}
		for (int t = 0; t < k; t++) {
			if (tds[t].failed) {
				L->failed = 1;
				return lm_seterr(L->e, "out of memory (pair counts)");
			}
			if (deltas_apply(L, &tds[t]))
				return -1;
			/* emptied, and small again for the merges' changes */
			deltas_free(&tds[t]);
			memset(&tds[t], 0, sizeof tds[t]);
			if (deltas_grow_index(&tds[t]))
				return lm_seterr(L->e, "out of memory");
		}
	} else {
		for (size_t w = 0; w < L->n_words; w++) {
			const word *wd = &L->words[w];
			const uint32_t *sy = L->sym + wd->start;
			for (uint32_t i = 0; i + 1 < wd->len; i++)
				if (pair_add(L, sy[i], sy[i + 1], (int64_t)wd->count, (uint32_t)w))
					return -1;
		}
	}
	if (L->failed)
		return -1;
	for (size_t p = 0; p < L->n_pairs; p++)
		if (L->pairs[p].count > 0)
			L->heap[L->n_heap++] = (hent){ L->pairs[p].count, (uint32_t)p };
	for (size_t i = (L->n_heap + HEAP_ARITY - 2) / HEAP_ARITY; i-- > 0;)
		sift_down(L, i);
	return 0;
}

/* Append the bytes of a then b as token id n_tok. */
static int add_token(learner *L, uint32_t a, uint32_t b)
{
	uint64_t na = L->toff[a + 1] - L->toff[a], nb = L->toff[b + 1] - L->toff[b];
	uint64_t end = L->toff[L->n_tok];
	uint8_t *t = xrealloc(L, L->tbytes, end + na + nb);
	if (!t)
		return -1;
	L->tbytes = t;
	memcpy(t + end, t + L->toff[a], na);
	memcpy(t + end + na, t + L->toff[b], nb);
	L->toff[++L->n_tok] = end + na + nb;
	return 0;
}

/* Do merges until vocab ids exist or no pair is left; fills merges.  tds:
 * one table of changes per thread (threads > 1). */
static int run_merges(learner *L, uint32_t vocab, bpe_merge *merges, uint32_t *n_merges,
		      int threads, deltas *tds, bpe_progress_fn progress, void *arg)
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
		L->stamp++;
		uint32_t *occ = x->occ, n_occ = x->n_occ;
		x->occ = NULL;
		x->n_occ = x->cap_occ = 0;
		int k = (int)(n_occ / L->par_words);
		if (k > threads)
			k = threads;
		if (k > 1) {
			if (merge_words_par(L, occ, n_occ, a, b, c, tds, k)) {
				free(occ);
				return -1;
			}
			n_occ = 0; /* done */
		}
		for (uint32_t i = 0; i < n_occ; i++) {
			uint32_t w = occ[i];
			/* the words are scattered: fetch the next ones early */
			if (i + 2 * PREFETCH_AHEAD < n_occ)
				__builtin_prefetch(&L->words[occ[i + 2 * PREFETCH_AHEAD]]);
			if (i + PREFETCH_AHEAD < n_occ)
				__builtin_prefetch(L->sym + L->words[occ[i + PREFETCH_AHEAD]].start);
			if (L->words[w].stamp == L->stamp)
				continue;
			L->words[w].stamp = L->stamp;
			if (merge_word(L, w, a, b, c)) {
				free(occ);
				return -1;
			}
		}
		free(occ);
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
	free(L->sym);
	free(L->words);
	free(L->tbytes);
	free(L->toff);
	for (size_t i = 0; i < L->n_pairs; i++)
		free(L->pairs[i].occ);
	free(L->pairs);
	free(L->mkey);
	free(L->mval);
	free(L->heap);
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
	deltas *tds = threads > 1 ? calloc((size_t)threads, sizeof *tds) : NULL;
	int fail = !merges || (threads > 1 && !tds);
	for (int i = 0; !fail && i < threads && tds; i++)
		fail = deltas_grow_index(&tds[i]);
	uint32_t n_merges = 0;
	int rc = -1;
	if (fail)
		lm_seterr(e, "out of memory");
	else {
		double t0 = omp_get_wtime();
		rc = setup(&L, c, sp, vocab) ? -1 : 0;
		double t1 = omp_get_wtime();
		if (!rc)
			rc = count_pairs(&L, tds, threads) ? -1 : 0;
		double t2 = omp_get_wtime();
		if (!rc)
			rc = run_merges(&L, vocab, merges, &n_merges, threads, tds, progress,
					progress_arg) ? -1 : 0;
		if (times)
			*times = (bpe_learn_times){ t1 - t0, t2 - t1, omp_get_wtime() - t2 };
	}
	for (int i = 0; tds && i < threads; i++)
		deltas_free(&tds[i]);
	free(tds);
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
