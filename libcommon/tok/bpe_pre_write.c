/* bpe_pre_write.c: pre-tokens out (see bpe_pre.h): each distinct one kept
 * once in a hash table with its count, the text as their indices, written
 * as the pre-token file (bpe_pre_internal.h). */
#include "tok/bpe_pre_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/grow.h"
#include "base/io.h"
#include "base/le.h"
#include "tok/bpe_build.h"
#include "tok/bpe_encode_internal.h"

enum {
	MIN_SLOTS = 1 << 12,
	SEQ_BUF = 1 << 14,   /* sequence values buffered before a write */
};

/* A word's first 8 bytes (zero padded), hash, length and index + 1 (0: a
 * free slot): most pieces are told apart, or found, without their bytes. */
typedef struct pre_slot {
	uint64_t key8;
	uint32_t h32, len, idx1;
} pre_slot;

struct bpe_pre {
	const bpe_encoder *enc;
	FILE *fp;
	const char *name;
	uint32_t crc;
	uint64_t n_seq;
	uint8_t *bytes;          /* the distinct pre-tokens, back to back */
	size_t n_bytes, bytes_cap;
	uint64_t *off;           /* word i: bytes[off[i] .. off[i + 1]) */
	size_t n_words, off_cap;
	uint64_t *count;         /* word i's occurrences */
	size_t count_cap;
	pre_slot *slot;          /* the words by hash */
	size_t mask;
	uint8_t buf[4 * SEQ_BUF];
	size_t buf_n;
};

/* Up to 8 bytes of s as a number, zero padded. */
static inline uint64_t key8_of(const uint8_t *s, size_t n)
{
	uint64_t x = 0;
	memcpy(&x, s, n < 8 ? n : 8);
	return x;
}

static inline uint32_t hash_word(const uint8_t *s, size_t n, uint64_t key8)
{
	uint64_t h = (n * HASH_MUL) ^ key8;
	for (size_t i = 8; i < n; i += 8) {
		h = (h * HASH_MUL2) ^ key8_of(s + i, n - i);
		h ^= h >> 32;
	}
	h *= HASH_MUL2;
	return (uint32_t)((h ^ (h >> 29)) >> 32);
}

static int put(bpe_pre *p, const void *b, size_t n, lm_err *e)
{
	p->crc = crc32c(p->crc, b, n);
	return io_write_all(p->fp, b, n, p->name, e);
}

bpe_pre *bpe_pre_open(const bpe_encoder *enc, FILE *fp, const char *name, lm_err *e)
{
	bpe_pre *p = calloc(1, sizeof *p);
	if (!p) {
		lm_seterr(e, "out of memory");
		return NULL;
	}
	p->enc = enc;
	p->fp = fp;
	p->name = name;
	p->mask = MIN_SLOTS - 1;
	p->slot = calloc(MIN_SLOTS, sizeof *p->slot);
	if (!p->slot || lm_grow((void **)&p->off, &p->off_cap, 1, sizeof *p->off, e)) {
		free(p->slot);
		free(p);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	p->off[0] = 0;
	uint8_t h[BPE_PRE_HEADER_LEN];
	memcpy(h, BPE_PRE_MAGIC, sizeof BPE_PRE_MAGIC);
	le_put32(h + 8, BPE_PRE_VERSION);
	le_put32(h + 12, BPE_PRE_HEADER_LEN);
	if (put(p, h, sizeof h, e)) {
		bpe_pre_free(p);
		return NULL;
	}
	return p;
}

static int grow_slots(bpe_pre *p, lm_err *e)
{
	size_t n = (p->mask + 1) * 2;
	pre_slot *s = calloc(n, sizeof *s);
	if (!s)
		return lm_seterr(e, "out of memory");
	for (size_t k = 0; k <= p->mask; k++) {
		if (!p->slot[k].idx1)
			continue;
		size_t i = p->slot[k].h32 & (n - 1);
		while (s[i].idx1)
			i = (i + 1) & (n - 1);
		s[i] = p->slot[k];
	}
	free(p->slot);
	p->slot = s;
	p->mask = n - 1;
	return 0;
}

int bpe_pre_tokenizer(bpe_tokenizer *t, lm_err *e)
{
	bpe_builder b;
	if (bb_init(&b, t, e))
		return -1;
	for (int c = 0; c < 256; c++) {
		uint8_t byte = (uint8_t)c;
		if (bb_add_token(&b, &byte, 1, e)) {
			bb_discard(&b);
			bpe_free(t);
			return -1;
		}
	}
	if (bb_finish(&b, e)) {
		bpe_free(t);
		return -1;
	}
	return 0;
}

/* Look up (or add) the word s[0..n) of this key8 and hash. */
static int intern(bpe_pre *p, const uint8_t *s, size_t n, uint64_t key8, uint32_t h32, uint32_t *index,
		  lm_err *e)
{
	size_t i = h32 & p->mask;
	for (; p->slot[i].idx1; i = (i + 1) & p->mask) {
		const pre_slot *c = &p->slot[i];
		if (c->key8 == key8 && c->h32 == h32 && c->len == n &&
		    (n <= 8 || !memcmp(p->bytes + p->off[c->idx1 - 1] + 8, s + 8, n - 8))) {
			*index = c->idx1 - 1;
			p->count[*index]++;
			return 0;
		}
	}
	if (p->n_words >= BPE_PRE_SPECIAL - 1 || n > UINT32_MAX)
		return lm_seterr(e, "more than %u distinct pre-tokens", BPE_PRE_SPECIAL - 1);
	if (lm_grow((void **)&p->bytes, &p->bytes_cap, p->n_bytes + n, 1, e) ||
	    lm_grow((void **)&p->off, &p->off_cap, p->n_words + 2, sizeof *p->off, e) ||
	    lm_grow((void **)&p->count, &p->count_cap, p->n_words + 1, sizeof *p->count, e))
		return -1;
	p->count[p->n_words] = 1;
	memcpy(p->bytes + p->n_bytes, s, n);
	p->n_bytes += n;
	p->slot[i] = (pre_slot){ key8, h32, (uint32_t)n, (uint32_t)p->n_words + 1 };
	*index = (uint32_t)p->n_words++;
	p->off[p->n_words] = p->n_bytes;
	if (p->n_words * 2 > p->mask)
		return grow_slots(p, e);
	return 0;
}

int bpe_pre_intern(bpe_pre *p, const uint8_t *s, const size_t *off, const size_t *len, size_t k,
		   uint32_t *index, lm_err *e)
{
	uint64_t key8[BPE_PRE_BATCH];
	uint32_t h32[BPE_PRE_BATCH];
	for (size_t i = 0; i < k; i++) {
		key8[i] = key8_of(s + off[i], len[i]);
		h32[i] = hash_word(s + off[i], len[i], key8[i]);
		__builtin_prefetch(&p->slot[h32[i] & p->mask]);
	}
	for (size_t i = 0; i < k; i++)
		if (intern(p, s + off[i], len[i], key8[i], h32[i], &index[i], e))
			return -1;
	return 0;
}

int bpe_pre_sink(void *ctx, const uint32_t *v, size_t n, lm_err *e)
{
	bpe_pre *p = ctx;
	for (size_t i = 0; i < n; i++) {
		if (p->buf_n == sizeof p->buf) {
			if (put(p, p->buf, p->buf_n, e))
				return -1;
			p->buf_n = 0;
		}
		le_put32(p->buf + p->buf_n, v[i]);
		p->buf_n += 4;
	}
	p->n_seq += n;
	return 0;
}

static int put_string(bpe_pre *p, const uint8_t *s, size_t n, lm_err *e)
{
	uint8_t len[4];
	le_put32(len, (uint32_t)n);
	return put(p, len, 4, e) || put(p, s, n, e) ? -1 : 0;
}

int bpe_pre_close(bpe_pre *p, lm_err *e)
{
	const bpe_encoder *E = p->enc;
	int rc = p->buf_n ? put(p, p->buf, p->buf_n, e) : 0;
	for (size_t w = 0; !rc && w < p->n_words; w++)
		rc = put_string(p, p->bytes + p->off[w], p->off[w + 1] - p->off[w], e);
	for (size_t k = 0; !rc && k < E->n_spec; k++)
		rc = put_string(p, E->spec[k].s, E->spec[k].len, e);
	uint8_t t[BPE_PRE_TRAILER_LEN];
	le_put64(t, p->n_seq);
	le_put64(t + 8, p->n_words);
	le_put32(t + 16, (uint32_t)E->n_spec);
	if (!rc)
		rc = put(p, t, 20, e);
	le_put32(t + 20, p->crc);
	if (!rc)
		rc = io_write_all(p->fp, t + 20, 4, p->name, e);
	return rc;
}

int bpe_pre_each(const bpe_pre *p, bpe_pre_word_fn fn, void *ctx, lm_err *e)
{
	for (size_t w = 0; w < p->n_words; w++)
		if (fn(ctx, p->bytes + p->off[w], p->off[w + 1] - p->off[w], p->count[w], e))
			return -1;
	return 0;
}

void bpe_pre_free(bpe_pre *p)
{
	if (!p)
		return;
	free(p->bytes);
	free(p->off);
	free(p->count);
	free(p->slot);
	free(p);
}

