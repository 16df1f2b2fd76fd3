/* pretoken_table.c: the table of distinct pre-tokens and their counts (see
 * bpe_learn.h): an open-addressing hash index over a dense array of entries,
 * whose bytes live back to back in one arena. */
#include "learn/bpe_learn_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/grow.h"

enum { INITIAL_SLOTS = 1 << 12, MAX_LOAD_PCT = 50 };

static const uint64_t HASH_SEED = 0x9E3779B97F4A7C15ull;
static const uint64_t HASH_MUL = 0xFF51AFD7ED558CCDull;

uint64_t bpe_hash(const uint8_t *s, size_t n)
{
	uint64_t h = HASH_SEED ^ (n * HASH_MUL), w;
	while (n >= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * HASH_MUL;
		h ^= h >> 29;
		s += 8;
		n -= 8;
	}
	w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * HASH_MUL;
	h ^= h >> 32;
	h *= HASH_SEED;
	h ^= h >> 29;
	return h;
}

bpe_counts *bpe_counts_new(lm_err *e)
{
	bpe_counts *c = calloc(1, sizeof *c);
	if (!c || !(c->slot = calloc(INITIAL_SLOTS, sizeof *c->slot))) {
		free(c);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	c->mask = INITIAL_SLOTS - 1;
	return c;
}

void bpe_counts_free(bpe_counts *c)
{
	if (!c)
		return;
	free(c->slot);
	free(c->ent);
	free(c->bytes);
	free(c);
}

static int grow_index(bpe_counts *c, lm_err *e)
{
	size_t n = (c->mask + 1) * 2;
	uint32_t *slot = calloc(n, sizeof *slot);
	if (!slot)
		return lm_seterr(e, "out of memory (pre-token table of %zu entries)", c->n);
	for (size_t i = 0; i < c->n; i++) {
		size_t j = c->ent[i].hash & (n - 1);
		while (slot[j])
			j = (j + 1) & (n - 1);
		slot[j] = (uint32_t)i + 1;
	}
	free(c->slot);
	c->slot = slot;
	c->mask = n - 1;
	return 0;
}

int bpe_counts_add_hashed(bpe_counts *c, const uint8_t *s, size_t n, uint64_t h, uint64_t k,
			  lm_err *e)
{
	size_t j = h & c->mask;
	for (uint32_t id; (id = c->slot[j]); j = (j + 1) & c->mask) {
		bpe_count_ent *x = &c->ent[id - 1];
		if (x->hash == h && x->len == n && !memcmp(c->bytes + x->off, s, n)) {
			if (ck_add_u64(x->count, k, &x->count) || ck_add_u64(c->total, k, &c->total))
				return lm_seterr(e, "pre-token count overflow (beyond 2^64 - 1)");
			return 0;
		}
	}
	if (ck_add_u64(c->total, k, &c->total))
		return lm_seterr(e, "pre-token count overflow (beyond 2^64 - 1)");
	if (n > UINT32_MAX || c->n >= UINT32_MAX - 1)
		return lm_seterr(e, "pre-token table too large");
	if (lm_grow((void **)&c->ent, &c->cap_ent, c->n + 1, sizeof *c->ent, e) ||
	    lm_grow((void **)&c->bytes, &c->cap_bytes, c->n_bytes + n, 1, e))
		return -1;
	bpe_count_ent *x = &c->ent[c->n];
	x->hash = h;
	x->off = c->n_bytes;
	x->len = (uint32_t)n;
	x->count = k;
	memcpy(c->bytes + c->n_bytes, s, n);
	c->n_bytes += n;
	c->slot[j] = (uint32_t)++c->n;
	if (c->n * 100 > (c->mask + 1) * MAX_LOAD_PCT)
		return grow_index(c, e);
	return 0;
}

int bpe_counts_reindex(bpe_counts *c, int threads, lm_err *e)
{
	size_t n = INITIAL_SLOTS;
	while (c->n * 100 > n * MAX_LOAD_PCT)
		n *= 2;
	uint32_t *slot = calloc(n, sizeof *slot);
	if (!slot)
		return lm_seterr(e, "out of memory (pre-token table of %zu entries)", c->n);
	size_t mask = n - 1;
	/* The entries are distinct, so each claims the first free slot from its
	 * hash; which of two colliding entries gets which slot may vary, and
	 * no lookup depends on it. */
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
	for (size_t i = 0; i < c->n; i++) {
		for (size_t j = c->ent[i].hash & mask;; j = (j + 1) & mask) {
			uint32_t free_ = 0;
			if (__atomic_compare_exchange_n(&slot[j], &free_, (uint32_t)i + 1, 0,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		}
	}
	free(c->slot);
	c->slot = slot;
	c->mask = mask;
	return 0;
}

int bpe_counts_add(bpe_counts *c, const uint8_t *s, size_t n, uint64_t k, lm_err *e)
{
	return bpe_counts_add_hashed(c, s, n, bpe_hash(s, n), k, e);
}

int bpe_counts_merge(bpe_counts *dst, const bpe_counts *src, lm_err *e)
{
	for (size_t i = 0; i < src->n; i++) {
		const bpe_count_ent *x = &src->ent[i];
		if (bpe_counts_add_hashed(dst, src->bytes + x->off, x->len, x->hash, x->count, e))
			return -1;
	}
	return 0;
}

size_t bpe_counts_size(const bpe_counts *c)
{
	return c->n;
}

uint64_t bpe_counts_total(const bpe_counts *c)
{
	return c->total;
}

void bpe_counts_each(const bpe_counts *c,
		     void (*fn)(const uint8_t *s, size_t n, uint64_t count, void *arg), void *arg)
{
	for (size_t i = 0; i < c->n; i++)
		fn(c->bytes + c->ent[i].off, c->ent[i].len, c->ent[i].count, arg);
}
