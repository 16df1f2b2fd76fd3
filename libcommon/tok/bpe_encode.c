/* bpe_encode.c: encoding text with a bpe_tokenizer (see bpe_encode.h):
 * the pair-rank table, special-token matching, the per-piece merge (a scan
 * for short pieces, a heap for long ones) and the per-thread cache. */
#include "tok/bpe_encode.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "text/pretok.h"
#include "tok/bpe_encode_internal.h"
#include "tok/bpe_pre.h"

int bpe_ids_reserve(bpe_ids *ids, size_t more, lm_err *e)
{
	if (ids->cap - ids->n >= more)
		return 0;
	if (more > SIZE_MAX - ids->n)
		return lm_seterr(e, "%zu more token ids do not fit in memory", more);
	return lm_grow((void **)&ids->v, &ids->cap, ids->n + more, sizeof *ids->v, e);
}

void bpe_ids_free(bpe_ids *ids)
{
	free(ids->v);
	memset(ids, 0, sizeof *ids);
}

/* ---- tables ---- */

static int by_len_desc(const void *a, const void *b)
{
	size_t x = ((const special *)a)->len, y = ((const special *)b)->len;
	return x > y ? -1 : x < y;
}

/* Are the merges ordered (see struct bpe_encoder)?  Then merging by rank
 * never lowers the smallest rank present, which the huge-piece merge uses. */
static int merges_ordered(const bpe_tokenizer *t)
{
	int64_t *made = malloc(t->n_vocab * sizeof *made);
	int ok = made != NULL;
	for (uint32_t i = 0; ok && i < t->n_vocab; i++)
		made[i] = -1;
	for (uint32_t m = 0; ok && m < t->n_merges; m++) {
		const bpe_merge *mg = &t->merges[m];
		ok = made[mg->left] < (int64_t)m && made[mg->right] < (int64_t)m && made[mg->result] < 0;
		made[mg->result] = m;
	}
	free(made);
	return ok;
}

static int build_vocab_index(bpe_encoder *E);

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
	E->ordered = merges_ordered(t);
	if (build_vocab_index(E)) {
		bpe_encoder_free(E);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	E->huge_piece = HUGE_PIECE;
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
	free(E->vocab_slot);
	free(E->self);
	free(E);
}

void bpe_encoder_set_huge_piece(bpe_encoder *E, size_t bytes)
{
	E->huge_piece = bytes;
}

bpe_worker *bpe_worker_new(const bpe_encoder *enc, lm_err *e)
{
	bpe_worker *w = calloc(1, sizeof *w);
	if (w) {
		w->enc = enc;
		w->cache_mask = ((size_t)1 << CACHE_MIN_LOG2) - 1;
		w->slots = calloc(w->cache_mask + 1, sizeof *w->slots);
		w->arena = malloc(CACHE_ARENA_WORDS * sizeof *w->arena);
	}
	if (!w || !w->slots || !w->arena) {
		bpe_worker_free(w);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	return w;
}

void bpe_worker_free(bpe_worker *w)
{
	if (!w)
		return;
	free(w->slots);
	free(w->arena);
	bpe_merge_free(w);
	free(w);
}

/* ---- the cache ---- */

/* Up to 8 bytes of a piece as a number (zero padded), read without
 * running past s[n). */
static inline uint64_t load_key8(const uint8_t *s, size_t n)
{
	uint64_t x = 0;
	if (n >= 8) {
		memcpy(&x, s, 8);
	} else if (n >= 4) {
		uint32_t a, b;
		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		x = (uint64_t)a | (uint64_t)b << ((n - 4) * 8);
	} else {
		for (size_t i = 0; i < n; i++)
			x |= (uint64_t)s[i] << (8 * i);
	}
	return x;
}

static inline uint64_t hash_piece(const uint8_t *s, size_t n, uint64_t key8)
{
	uint64_t h = (n * HASH_MUL) ^ key8, x;
	for (size_t i = 8; i < n; i += 8) {
		x = load_key8(s + i, n - i < 8 ? n - i : 8);
		h = (h * HASH_MUL2) ^ x;
		h ^= h >> 32;
	}
	h *= HASH_MUL2;
	return h ^ (h >> 29);
}

/* A slot keeps h32 = the hash's high half; its index is taken from h32's
 * high bits, so the table can be resized without the pieces. */
static inline uint32_t cache_h32(uint64_t h)
{
	return (uint32_t)(h >> 32);
}

static inline size_t cache_index(const bpe_worker *w, uint32_t h32)
{
	return (size_t)(h32 >> 8) & w->cache_mask;
}

static inline size_t vocab_index(const bpe_encoder *E, uint64_t h)
{
	return (size_t)(h >> 24) & E->vocab_mask;
}

static int build_vocab_index(bpe_encoder *E)
{
	const bpe_tokenizer *t = E->t;
	size_t size = 16;
	while (size < 2 * (size_t)t->n_vocab)
		size *= 2;
	E->vocab_mask = size - 1;
	E->vocab_slot = calloc(size, sizeof *E->vocab_slot);
	E->self = calloc(t->n_vocab, 1);
	if (!E->vocab_slot || !E->self)
		return -1;
	for (uint32_t k = 0; k < t->n_special; k++)
		E->self[t->special[k]] = SELF_NO;   /* never looked up: not indexed */
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		size_t n = bpe_token_len(t, id);
		const uint8_t *s = bpe_token_bytes(t, id);
		if (n < 2 || n > CACHE_MAX_PIECE || E->self[id] == SELF_NO)
			continue;
		size_t i = vocab_index(E, hash_piece(s, n, load_key8(s, n < 8 ? n : 8)));
		while (E->vocab_slot[i])
			i = (i + 1) & E->vocab_mask;
		E->vocab_slot[i] = id + 1;
	}
	return 0;
}

/* The non-special token with the bytes of the piece, or BPE_NO_TOKEN. */
static uint32_t vocab_find(const bpe_encoder *E, const uint8_t *s, size_t n, uint64_t h)
{
	const bpe_tokenizer *t = E->t;
	for (size_t i = vocab_index(E, h);; i = (i + 1) & E->vocab_mask) {
		uint32_t v = E->vocab_slot[i];
		if (!v)
			return BPE_NO_TOKEN;
		if (bpe_token_len(t, v - 1) == n && !memcmp(bpe_token_bytes(t, v - 1), s, n))
			return v - 1;
	}
}

/* Merge a piece that missed the cache.  A piece that is itself a token
 * usually encodes as that token: whether it does is worked out once and
 * shared by all threads (a benign race: every writer stores the same
 * value). */
static size_t merge_missed(const bpe_encoder *E, const uint8_t *s, size_t n, uint64_t h, uint32_t *dst)
{
	uint32_t id = vocab_find(E, s, n, h);
	if (id == BPE_NO_TOKEN)
		return bpe_merge_small(E, s, n, dst);
	uint8_t self = __atomic_load_n(&E->self[id], __ATOMIC_RELAXED);
	if (self == SELF_YES) {
		dst[0] = id;
		return 1;
	}
	size_t m = bpe_merge_small(E, s, n, dst);
	if (self == SELF_UNKNOWN)
		__atomic_store_n(&E->self[id], m == 1 && dst[0] == id ? SELF_YES : SELF_NO, __ATOMIC_RELAXED);
	return m;
}

static void cache_clear(bpe_worker *w)
{
	memset(w->slots, 0, (w->cache_mask + 1) * sizeof *w->slots);
	w->n_used = 0;
	w->arena_used = 0;
}

/* Make room: double the table while it may grow (a thread that sees little
 * text touches little memory), else start afresh. */
static void cache_make_room(bpe_worker *w)
{
	size_t n = (w->cache_mask + 1) * 2;
	cache_slot *slots = n <= ((size_t)1 << CACHE_MAX_LOG2) ? calloc(n, sizeof *slots) : NULL;
	if (!slots) {
		cache_clear(w);
		return;
	}
	cache_slot *old = w->slots;
	size_t old_n = w->cache_mask + 1;
	w->slots = slots;
	w->cache_mask = n - 1;
	for (size_t k = 0; k < old_n; k++) {
		if (!old[k].nid)
			continue;
		size_t i = cache_index(w, old[k].h32);
		while (slots[i].nid)
			i = (i + 1) & w->cache_mask;
		slots[i] = old[k];
	}
	free(old);
}

/* Does slot c hold the piece s[0..n)? */
static inline int slot_is(const bpe_worker *w, const cache_slot *c, const uint8_t *s, size_t n,
			  uint64_t key8, uint32_t h32)
{
	if (c->key8 != key8 || c->len != n || c->h32 != h32)
		return 0;
	return n <= 8 || !memcmp(w->arena + c->key_off, s + 8, n - 8);
}

/* Ids of a piece of 2..CACHE_MAX_PIECE bytes, whose key8 and hash are
 * known, from the cache or by merging (then cached). */
static void encode_cached(bpe_worker *w, const uint8_t *s, size_t n, uint64_t key8, uint64_t h, bpe_ids *out)
{
	const bpe_encoder *E = w->enc;
	uint32_t h32 = cache_h32(h);
	size_t i = cache_index(w, h32);
	uint32_t *dst = out->v + out->n;
	for (;; i = (i + 1) & w->cache_mask) {
		const cache_slot *c = &w->slots[i];
		if (!c->nid)
			break;
		if (slot_is(w, c, s, n, key8, h32)) {
			const uint32_t *ids = c->nid <= CACHE_INLINE_IDS ? c->ids : w->arena + c->ids[0];
			for (unsigned k = 0; k < c->nid; k++)
				dst[k] = ids[k];
			out->n += c->nid;
			return;
		}
	}
	size_t m = merge_missed(E, s, n, h, dst);
	out->n += m;
	size_t words = (n > 8 ? (n - 8 + WORD - 1) / WORD : 0) + (m > CACHE_INLINE_IDS ? m : 0);
	int full = w->n_used * CACHE_FILL_DEN >= w->cache_mask * CACHE_FILL_NUM;
	if (full || w->arena_used + words > CACHE_ARENA_WORDS) {
		if (full)
			cache_make_room(w);
		else
			cache_clear(w);
		for (i = cache_index(w, h32); w->slots[i].nid; i = (i + 1) & w->cache_mask)
			;
	}
	cache_slot *c = &w->slots[i];
	*c = (cache_slot){ .key8 = key8, .h32 = h32, .len = (uint8_t)n, .nid = (uint8_t)m };
	if (n > 8) {
		c->key_off = (uint32_t)w->arena_used;
		memcpy(w->arena + w->arena_used, s + 8, n - 8);
		w->arena_used += (n - 8 + WORD - 1) / WORD;
	}
	if (m <= CACHE_INLINE_IDS) {
		memcpy(c->ids, dst, m * sizeof *dst);
	} else {
		c->ids[0] = (uint32_t)w->arena_used;
		memcpy(w->arena + w->arena_used, dst, m * sizeof *dst);
		w->arena_used += m;
	}
	w->n_used++;
}

/* ---- texts ---- */

int bpe_encode_piece(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	if (n == 1) {
		out->v[out->n++] = w->enc->t->byte_id[s[0]];
		return 0;
	}
	if (n > CACHE_MAX_PIECE)
		return bpe_merge_long(w, s, n, out, e);
	uint64_t key8 = load_key8(s, n < 8 ? n : 8);
	out->n += merge_missed(w->enc, s, n, hash_piece(s, n, key8), out->v + out->n);
	return 0;
}

void bpe_worker_set_pre(bpe_worker *w, bpe_pre *p)
{
	w->pre = p;
}

/* The pre-tokens of s[0..n) as their indices in w->pre (bpe_pre.h). */
static int intern_plain(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	size_t off[BPE_PRE_BATCH], len[BPE_PRE_BATCH];
	for (size_t p = 0; p < n;) {
		size_t k = 0;
		for (; k < BPE_PRE_BATCH && p < n; k++) {
			off[k] = p;
			p += len[k] = pretok_next(s + p, n - p);
		}
		if (bpe_pre_intern(w->pre, s, off, len, k, out->v + out->n, e))
			return -1;
		out->n += k;
	}
	return 0;
}

/* Pre-tokenize a batch of pieces ahead, prefetching their cache slots, so
 * that the cache's memory latency overlaps. */
static int encode_plain(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	if (w->pre)
		return intern_plain(w, s, n, out, e);
	size_t off[PIECE_BATCH], len[PIECE_BATCH];
	uint64_t key8[PIECE_BATCH], h[PIECE_BATCH];
	const uint32_t *byte_id = w->enc->t->byte_id;
	for (size_t p = 0; p < n;) {
		size_t k = 0;
		for (; k < PIECE_BATCH && p < n; k++) {
			size_t l = pretok_next(s + p, n - p);
			off[k] = p;
			len[k] = l;
			if (l > 1 && l <= CACHE_MAX_PIECE) {
				key8[k] = load_key8(s + p, l < 8 ? l : 8);
				h[k] = hash_piece(s + p, l, key8[k]);
				__builtin_prefetch(&w->slots[cache_index(w, cache_h32(h[k]))]);
			}
			p += l;
		}
		for (size_t i = 0; i < k; i++) {
			const uint8_t *q = s + off[i];
			if (len[i] == 1)
				out->v[out->n++] = byte_id[q[0]];
			else if (len[i] <= CACHE_MAX_PIECE)
				encode_cached(w, q, len[i], key8[i], h[i], out);
			else if (bpe_merge_long(w, q, len[i], out, e))
				return -1;
		}
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
		out->v[out->n++] = w->pre ? BPE_PRE_SPECIAL | (uint32_t)(sp - E->spec) : sp->id;
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
