/* bpe_encode.c: encoding text with a bpe_tokenizer (see bpe_encode.h):
 * the pair-rank table, special-token matching, the per-piece merge (a scan
 * for short pieces, a heap for long ones) and the per-thread cache. */
#include "bpe_encode.h"

#include <stdlib.h>
#include <string.h>

#include "pretok.h"

enum {
	SMALL_PIECE = 64,        /* longer pieces merge with a heap */
	CACHE_SLOTS_LOG2 = 16,   /* per-thread cache: 65536 slots ... */
	CACHE_ARENA_WORDS = 1 << 20, /* ... and 4 MiB of keys and ids */
	CACHE_MAX_PIECE = 64,    /* longer pieces are not cached */
	WORD = 4,                /* bytes per arena word */
};
#define NO_RANK 0xFFFFFFFFu
#define EMPTY_KEY 0xFFFFFFFFFFFFFFFFull
#define HASH_MUL 0x9E3779B97F4A7C15ull   /* golden-ratio multiplier */
#define HASH_MUL2 0xC2B2AE3D27D4EB4Full  /* a large odd constant (xxhash's) */

typedef struct pair_slot {
	uint64_t key;            /* left << 32 | right, EMPTY_KEY when free */
	uint32_t rank, result;
} pair_slot;

typedef struct special {
	const uint8_t *s;
	size_t len;
	uint32_t id;
} special;

struct bpe_encoder {
	const bpe_tokenizer *t;
	pair_slot *pairs;
	unsigned pair_shift;     /* 64 - log2(table size) */
	size_t pair_mask;
	special *spec;           /* longest first */
	size_t n_spec;
	uint8_t spec_first[256]; /* some special starts with this byte */
	int one_first;           /* all specials start with the same byte */
};

typedef struct cache_slot {
	uint64_t h;
	uint32_t off;            /* arena word of the key; ids follow it */
	uint16_t len, nid;       /* nid 0: empty */
} cache_slot;

struct bpe_worker {
	const bpe_encoder *enc;
	cache_slot *slots;
	size_t n_used;
	uint32_t *arena;
	size_t arena_used;
	uint32_t *tok, *prev;    /* heap merge scratch */
	uint64_t *heap;
	size_t scratch_cap, heap_cap;
};

int bpe_ids_reserve(bpe_ids *ids, size_t more, lm_err *e)
{
	if (ids->cap - ids->n >= more)
		return 0;
	size_t c = ids->cap ? ids->cap : 1024;
	while (c - ids->n < more)
		c *= 2;
	uint32_t *v = realloc(ids->v, c * sizeof *v);
	if (!v)
		return lm_seterr(e, "out of memory (%zu token ids)", c);
	ids->v = v;
	ids->cap = c;
	return 0;
}

void bpe_ids_free(bpe_ids *ids)
{
	free(ids->v);
	memset(ids, 0, sizeof *ids);
}

/* ---- tables ---- */

static inline size_t pair_index(const bpe_encoder *E, uint64_t key)
{
	return (size_t)((key * HASH_MUL) >> E->pair_shift);
}

static inline uint32_t pair_rank(const bpe_encoder *E, uint32_t l, uint32_t r, uint32_t *result)
{
	uint64_t key = (uint64_t)l << 32 | r;
	for (size_t i = pair_index(E, key);; i = (i + 1) & E->pair_mask) {
		const pair_slot *p = &E->pairs[i];
		if (p->key == key) {
			*result = p->result;
			return p->rank;
		}
		if (p->key == EMPTY_KEY)
			return NO_RANK;
	}
}

static int by_len_desc(const void *a, const void *b)
{
	size_t x = ((const special *)a)->len, y = ((const special *)b)->len;
	return x > y ? -1 : x < y;
}

bpe_encoder *bpe_encoder_new(const bpe_tokenizer *t, int use_specials, lm_err *e)
{
	bpe_encoder *E = calloc(1, sizeof *E);
	if (!E) {
		lm_seterr(e, "out of memory");
		return NULL;
	}
	E->t = t;
	unsigned bits = 4;
	while (((size_t)1 << bits) < 2 * (size_t)t->n_merges + 2)
		bits++;
	E->pair_shift = 64 - bits;
	E->pair_mask = ((size_t)1 << bits) - 1;
	E->pairs = malloc(((size_t)1 << bits) * sizeof *E->pairs);
	E->spec = calloc(t->n_special ? t->n_special : 1, sizeof *E->spec);
	if (!E->pairs || !E->spec) {
		bpe_encoder_free(E);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i <= E->pair_mask; i++)
		E->pairs[i].key = EMPTY_KEY;
	for (uint32_t m = 0; m < t->n_merges; m++) {
		uint64_t key = (uint64_t)t->merges[m].left << 32 | t->merges[m].right;
		size_t i = pair_index(E, key);
		while (E->pairs[i].key != EMPTY_KEY && E->pairs[i].key != key)
			i = (i + 1) & E->pair_mask;
		if (E->pairs[i].key == key)
			continue;       /* loaders reject duplicates; keep the first */
		E->pairs[i] = (pair_slot){ key, m, t->merges[m].result };
	}
	if (use_specials) {
		for (uint32_t i = 0; i < t->n_special; i++) {
			uint32_t id = t->special[i];
			E->spec[E->n_spec++] = (special){ bpe_token_bytes(t, id), bpe_token_len(t, id), id };
			E->spec_first[bpe_token_bytes(t, id)[0]] = 1;
		}
		qsort(E->spec, E->n_spec, sizeof *E->spec, by_len_desc);
		int firsts = 0;
		for (int c = 0; c < 256; c++)
			firsts += E->spec_first[c];
		E->one_first = firsts == 1;
	}
	return E;
}

void bpe_encoder_free(bpe_encoder *E)
{
	if (!E)
		return;
	free(E->pairs);
	free(E->spec);
	free(E);
}

const bpe_tokenizer *bpe_encoder_tokenizer(const bpe_encoder *E)
{
	return E->t;
}

bpe_worker *bpe_worker_new(const bpe_encoder *enc, lm_err *e)
{
	bpe_worker *w = calloc(1, sizeof *w);
	if (w) {
		w->enc = enc;
		w->slots = calloc((size_t)1 << CACHE_SLOTS_LOG2, sizeof *w->slots);
		w->arena = malloc(CACHE_ARENA_WORDS * sizeof *w->arena);
	}
	if (!w || !w->slots || !w->arena) {
		bpe_worker_free(w);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	return w;
}

static void free_scratch(bpe_worker *w)
{
	free(w->tok);
	free(w->prev);
	free(w->heap);
	w->tok = w->prev = NULL;
	w->heap = NULL;
	w->scratch_cap = w->heap_cap = 0;
}

void bpe_worker_free(bpe_worker *w)
{
	if (!w)
		return;
	free(w->slots);
	free(w->arena);
	free_scratch(w);
	free(w);
}

/* ---- merging one pre-token ---- */

/* Scan merge for n <= SMALL_PIECE: ids into out, returns their count. */
static size_t merge_small(const bpe_encoder *E, const uint8_t *s, size_t n, uint32_t *out)
{
	uint32_t rank[SMALL_PIECE], res[SMALL_PIECE];
	const uint32_t *byte_id = E->t->byte_id;
	for (size_t i = 0; i < n; i++)
		out[i] = byte_id[s[i]];
	for (size_t i = 0; i + 1 < n; i++)
		rank[i] = pair_rank(E, out[i], out[i + 1], &res[i]);
	size_t m = n;
	while (m > 1) {
		uint32_t best = NO_RANK;
		size_t bi = 0;
		for (size_t i = 0; i + 1 < m; i++)
			if (rank[i] < best) {
				best = rank[i];
				bi = i;
			}
		if (best == NO_RANK)
			break;
		out[bi] = res[bi];
		/* drop symbol bi+1 and pair bi+1 */
		memmove(out + bi + 1, out + bi + 2, (m - bi - 2) * sizeof *out);
		if (m >= bi + 3) {
			memmove(rank + bi + 1, rank + bi + 2, (m - bi - 3) * sizeof *rank);
			memmove(res + bi + 1, res + bi + 2, (m - bi - 3) * sizeof *res);
		}
		m--;
		if (bi > 0)
			rank[bi - 1] = pair_rank(E, out[bi - 1], out[bi], &res[bi - 1]);
		if (bi + 1 < m)
			rank[bi] = pair_rank(E, out[bi], out[bi + 1], &res[bi]);
	}
	return m;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= v)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], v = h[--*n];
	size_t i = 0, len = *n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= len)
			break;
		if (c + 1 < len && h[c + 1] < h[c])
			c++;
		if (h[c] >= v)
			break;
		h[i] = h[c];
		i = c;
	}
	if (len)
		h[i] = v;
	return top;
}

/* Heap merge for long pieces: symbols are identified by their first byte;
 * the next symbol starts where this one's bytes end.  Each merge costs
 * O(log n), stale heap entries are skipped when popped. */
static int merge_large(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	const bpe_encoder *E = w->enc;
	const bpe_tokenizer *t = E->t;
	if (n >= NO_RANK)
		return lm_seterr(e, "a pre-token of %zu bytes is too long (limit 4 GiB)", n);
	if (w->scratch_cap < n) {
		free_scratch(w);
		w->tok = malloc(n * sizeof *w->tok);
		w->prev = malloc(n * sizeof *w->prev);
		w->heap_cap = n;
		w->heap = malloc(n * sizeof *w->heap);
		if (!w->tok || !w->prev || !w->heap) {
			free_scratch(w);
			return lm_seterr(e, "out of memory (pre-token of %zu bytes)", n);
		}
		w->scratch_cap = n;
	}
	uint32_t *tok = w->tok, *prev = w->prev, res = 0;
	size_t hn = 0;
	for (size_t i = 0; i < n; i++) {
		tok[i] = t->byte_id[s[i]];
		prev[i] = (uint32_t)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t r = pair_rank(E, tok[i], tok[i + 1], &res);
		if (r != NO_RANK)
			w->heap[hn++] = (uint64_t)r << 32 | i;
	}
	for (size_t i = hn / 2; i-- > 0;) {   /* heapify */
		size_t k = hn;
		uint64_t v = w->heap[i];
		size_t j = i;
		for (;;) {
			size_t c = 2 * j + 1;
			if (c >= k)
				break;
			if (c + 1 < k && w->heap[c + 1] < w->heap[c])
				c++;
			if (w->heap[c] >= v)
				break;
			w->heap[j] = w->heap[c];
			j = c;
		}
		w->heap[j] = v;
	}
	while (hn > 0) {
		uint64_t top = heap_pop(w->heap, &hn);
		uint32_t rank = (uint32_t)(top >> 32), pos = (uint32_t)top;
		if (tok[pos] == BPE_NO_TOKEN)
			continue;
		size_t nx = pos + bpe_token_len(t, tok[pos]);
		if (nx >= n || pair_rank(E, tok[pos], tok[nx], &res) != rank)
			continue;
		tok[pos] = res;
		tok[nx] = BPE_NO_TOKEN;
		size_t nn = pos + bpe_token_len(t, res);
		if (hn + 2 > w->heap_cap) {
			uint64_t *h = realloc(w->heap, 2 * w->heap_cap * sizeof *h);
			if (!h)
				return lm_seterr(e, "out of memory (pre-token of %zu bytes)", n);
			w->heap = h;
			w->heap_cap *= 2;
		}
		if (nn < n)
			prev[nn] = pos;
		if (prev[pos] != BPE_NO_TOKEN) {
			uint32_t r = pair_rank(E, tok[prev[pos]], tok[pos], &res);
			if (r != NO_RANK)
				heap_push(w->heap, &hn, (uint64_t)r << 32 | prev[pos]);
		}
		if (nn < n) {
			uint32_t r = pair_rank(E, tok[pos], tok[nn], &res);
			if (r != NO_RANK)
				heap_push(w->heap, &hn, (uint64_t)r << 32 | pos);
		}
	}
	for (size_t i = 0; i < n; i += bpe_token_len(t, tok[i]))
		out->v[out->n++] = tok[i];
	if (n > (size_t)SMALL_PIECE << 16)
		free_scratch(w);         /* do not keep a giant pre-token's memory */
	return 0;
}

/* ---- the cache ---- */

static inline uint64_t hash_piece(const uint8_t *s, size_t n)
{
	uint64_t h = n * HASH_MUL, x;
	while (n >= 8) {
		memcpy(&x, s, 8);
		h = (h ^ x) * HASH_MUL2;
		h ^= h >> 32;
		s += 8;
		n -= 8;
	}
	if (n >= 4) {
		uint32_t a, b;
		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		x = (uint64_t)a << 32 | b;
	} else {
		x = n ? (uint64_t)s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16 : 0;
	}
	h = (h ^ x) * HASH_MUL2;
	return h ^ (h >> 29);
}

static void cache_clear(bpe_worker *w)
{
	memset(w->slots, 0, ((size_t)1 << CACHE_SLOTS_LOG2) * sizeof *w->slots);
	w->n_used = 0;
	w->arena_used = 0;
}

static int encode_piece(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	const bpe_encoder *E = w->enc;
	if (n == 1) {
		out->v[out->n++] = E->t->byte_id[s[0]];
		return 0;
	}
	if (n > CACHE_MAX_PIECE)
		return n <= SMALL_PIECE ? (out->n += merge_small(E, s, n, out->v + out->n), 0)
				       : merge_large(w, s, n, out, e);
	uint64_t h = hash_piece(s, n);
	size_t mask = ((size_t)1 << CACHE_SLOTS_LOG2) - 1, i = (size_t)(h >> 40) & mask;
	for (;; i = (i + 1) & mask) {
		cache_slot *c = &w->slots[i];
		if (!c->nid)
			break;
		if (c->h == h && c->len == n && !memcmp(w->arena + c->off, s, n)) {
			const uint32_t *ids = w->arena + c->off + (n + WORD - 1) / WORD;
			for (unsigned k = 0; k < c->nid; k++)
				out->v[out->n + k] = ids[k];
			out->n += c->nid;
			return 0;
		}
	}
	uint32_t *ids = out->v + out->n;
	size_t m = merge_small(E, s, n, ids);
	out->n += m;
	size_t words = (n + WORD - 1) / WORD + m;
	if (w->n_used * 2 >= mask || w->arena_used + words > CACHE_ARENA_WORDS) {
		cache_clear(w);
		for (i = (size_t)(h >> 40) & mask; w->slots[i].nid; i = (i + 1) & mask)
			;
	}
	cache_slot *c = &w->slots[i];
	*c = (cache_slot){ h, (uint32_t)w->arena_used, (uint16_t)n, (uint16_t)m };
	memcpy(w->arena + w->arena_used, s, n);
	memcpy(w->arena + w->arena_used + (n + WORD - 1) / WORD, ids, m * sizeof *ids);
	w->arena_used += words;
	w->n_used++;
	return 0;
}

/* ---- texts ---- */

static int encode_plain(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	for (size_t p = 0; p < n;) {
		size_t len = pretok_next(s + p, n - p);
		if (encode_piece(w, s + p, len, out, e))
			return -1;
		p += len;
	}
	return 0;
}

int bpe_encode_ordinary(bpe_worker *w, const uint8_t *text, size_t n, bpe_ids *out, lm_err *e)
{
	if (bpe_ids_reserve(out, n, e))
		return -1;
	return encode_plain(w, text, n, out, e);
}

/* The longest special token at s[0..n), or NULL. */
static const special *special_at(const bpe_encoder *E, const uint8_t *s, size_t n)
{
	for (size_t k = 0; k < E->n_spec; k++)
		if (E->spec[k].len <= n && !memcmp(E->spec[k].s, s, E->spec[k].len))
			return &E->spec[k];
	return NULL;
}

int bpe_encode(bpe_worker *w, const uint8_t *text, size_t n, bpe_ids *out, lm_err *e)
{
	const bpe_encoder *E = w->enc;
	if (bpe_ids_reserve(out, n, e))
		return -1;
	if (!E->n_spec)
		return encode_plain(w, text, n, out, e);
	size_t seg = 0, i = 0;
	while (i < n) {
		if (E->one_first) {
			const uint8_t *q = memchr(text + i, E->spec[0].s[0], n - i);
			if (!q)
				break;
			i = (size_t)(q - text);
		} else if (!E->spec_first[text[i]]) {
			i++;
			continue;
		}
		const special *sp = special_at(E, text + i, n - i);
		if (!sp) {
			i++;
			continue;
		}
		if (encode_plain(w, text + seg, i - seg, out, e))
			return -1;
		out->v[out->n++] = sp->id;
		i += sp->len;
		seg = i;
	}
	return encode_plain(w, text + seg, n - seg, out, e);
}

int bpe_special_spans(const bpe_encoder *E, const uint8_t *text, size_t n, size_t p)
{
	for (size_t k = 0; k < E->n_spec; k++) {
		const special *sp = &E->spec[k];
		for (size_t off = 1; off < sp->len && off <= p; off++) {
			size_t start = p - off, avail = n - start < sp->len ? n - start : sp->len;
			if (!memcmp(text + start, sp->s, avail))
				return 1;
		}
	}
	return 0;
}
