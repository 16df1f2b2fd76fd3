/* bpe_build.c: the shared checks and tables behind every tokenizer loader
 * (see bpe_build.h). */
#include "tok/bpe_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

enum { BB_INIT_SLOTS = 1024, BB_INIT_BYTES = 4096 };

static uint64_t hash_bytes(const uint8_t *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;           /* FNV-1a offset basis */
	for (size_t i = 0; i < len; i++)
		h = (h ^ s[i]) * 1099511628211ull;     /* FNV-1a prime */
	return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t k)
{
	k *= 0x9E3779B97F4A7C15ull;                    /* golden-ratio multiplier */
	return k ^ (k >> 31);
}

int bb_init(bpe_builder *b, bpe_tokenizer *t, lm_err *e)
{
	memset(b, 0, sizeof *b);
	memset(t, 0, sizeof *t);
	b->t = t;
	t->eot = BPE_NO_TOKEN;
	for (int i = 0; i < 256; i++)
		t->byte_id[i] = BPE_NO_TOKEN;
	snprintf(t->pretokenizer, sizeof t->pretokenizer, "gpt2");
	b->tok_slot = calloc(BB_INIT_SLOTS, sizeof *b->tok_slot);
	b->pair_slot = calloc(BB_INIT_SLOTS, sizeof *b->pair_slot);
	if (!b->tok_slot || !b->pair_slot || lm_grow((void **)&t->off, &b->off_cap, 1, sizeof *t->off, e) ||
	    lm_grow((void **)&t->bytes, &b->bytes_cap, BB_INIT_BYTES, 1, e)) {
		bb_discard(b);
		return lm_seterr(e, "out of memory");
	}
	b->tok_mask = b->pair_mask = BB_INIT_SLOTS - 1;
	t->off[0] = 0;
	return 0;
}

void bb_discard(bpe_builder *b)
{
	free(b->tok_slot);
	free(b->pair_slot);
	b->tok_slot = NULL;
	b->pair_slot = NULL;
}

uint32_t bb_find(const bpe_builder *b, const uint8_t *s, size_t len)
{
	const bpe_tokenizer *t = b->t;
	for (size_t i = hash_bytes(s, len) & b->tok_mask;; i = (i + 1) & b->tok_mask) {
		uint32_t v = b->tok_slot[i];
		if (!v)
			return BPE_NO_TOKEN;
		if (bpe_token_len(t, v - 1) == len && !memcmp(bpe_token_bytes(t, v - 1), s, len))
			return v - 1;
	}
}

static void tok_insert(bpe_builder *b, uint32_t id)
{
	const bpe_tokenizer *t = b->t;
	size_t i = hash_bytes(bpe_token_bytes(t, id), bpe_token_len(t, id)) & b->tok_mask;
	while (b->tok_slot[i])
		i = (i + 1) & b->tok_mask;
	b->tok_slot[i] = id + 1;
}

int bb_add_token(bpe_builder *b, const uint8_t *s, size_t len, lm_err *e)
{
	bpe_tokenizer *t = b->t;
	char show[BB_SHOW_MAX];
	if (len == 0)
		return lm_seterr(e, "empty token");
	if (t->n_vocab >= BPE_NO_TOKEN - 1)
		return lm_seterr(e, "too many tokens");
	uint32_t dup = bb_find(b, s, len);
	if (dup != BPE_NO_TOKEN)
		return lm_seterr(e, "token \"%s\" appears twice (ids %u and %u)",
				 bb_show(s, len, show), dup, t->n_vocab);
	uint64_t end = t->off[t->n_vocab];
	if (lm_grow((void **)&t->bytes, &b->bytes_cap, end + len, 1, e) ||
	    lm_grow((void **)&t->off, &b->off_cap, (size_t)t->n_vocab + 2, sizeof *t->off, e))
		return -1;
	memcpy(t->bytes + end, s, len);
	t->off[t->n_vocab + 1] = end + len;
	uint32_t id = t->n_vocab++;
	if (len == 1 && t->byte_id[s[0]] == BPE_NO_TOKEN)
		t->byte_id[s[0]] = id;
	if ((size_t)t->n_vocab * 2 > b->tok_mask) {
		size_t n = (b->tok_mask + 1) * 2;
		uint32_t *slots = calloc(n, sizeof *slots);
		if (!slots)
			return lm_seterr(e, "out of memory");
		free(b->tok_slot);
		b->tok_slot = slots;
		b->tok_mask = n - 1;
		for (uint32_t i = 0; i < t->n_vocab; i++)
			tok_insert(b, i);
	} else {
		tok_insert(b, id);
	}
	return 0;
}

static int is_special(const bpe_tokenizer *t, uint32_t id)
{
	for (uint32_t i = 0; i < t->n_special; i++)
		if (t->special[i] == id)
			return 1;
	return 0;
}

int bb_mark_special(bpe_builder *b, uint32_t id, lm_err *e)
{
	bpe_tokenizer *t = b->t;
	if (id >= t->n_vocab)
		return lm_seterr(e, "special token id %u outside the vocabulary of %u", id, t->n_vocab);
	if (is_special(t, id))
		return lm_seterr(e, "token %u is marked special twice", id);
	if (lm_grow((void **)&t->special, &b->special_cap, (size_t)t->n_special + 1, sizeof *t->special, e))
		return -1;
	t->special[t->n_special++] = id;
	if (bpe_token_len(t, id) == 1 && t->byte_id[t->bytes[t->off[id]]] == id)
		t->byte_id[t->bytes[t->off[id]]] = BPE_NO_TOKEN;
	return 0;
}

static int pair_insert(bpe_builder *b, uint64_t key)
{
	for (size_t i = hash_pair(key) & b->pair_mask;; i = (i + 1) & b->pair_mask) {
		if (!b->pair_slot[i]) {
			b->pair_slot[i] = key + 1;
			return 1;
		}
		if (b->pair_slot[i] == key + 1)
			return 0;
	}
}

/* "<before>merge "LEFT" "RIGHT"<after>" into e (made only on error). */
static int merge_err(const bpe_tokenizer *t, uint32_t left, uint32_t right, const char *before,
		     const char *after, lm_err *e)
{
	char s1[BB_SHOW_MAX], s2[BB_SHOW_MAX];
	return lm_seterr(e, "%smerge \"%s\" \"%s\"%s", before,
			 bb_show(bpe_token_bytes(t, left), bpe_token_len(t, left), s1),
			 bb_show(bpe_token_bytes(t, right), bpe_token_len(t, right), s2), after);
}

int bb_add_merge(bpe_builder *b, uint32_t left, uint32_t right, lm_err *e)
{
	bpe_tokenizer *t = b->t;
	if (left >= t->n_vocab || right >= t->n_vocab)
		return lm_seterr(e, "merge of unknown token id %u", left >= t->n_vocab ? left : right);
	size_t ll = bpe_token_len(t, left), rl = bpe_token_len(t, right);
	if (is_special(t, left) || is_special(t, right))
		return merge_err(t, left, right, "", " uses a special token", e);
	uint8_t small[256], *joined = ll + rl <= sizeof small ? small : malloc(ll + rl);
	if (!joined)
		return lm_seterr(e, "out of memory");
	memcpy(joined, bpe_token_bytes(t, left), ll);
	memcpy(joined + ll, bpe_token_bytes(t, right), rl);
	uint32_t result = bb_find(b, joined, ll + rl);
	if (joined != small)
		free(joined);
	if (result == BPE_NO_TOKEN)
		return merge_err(t, left, right, "", ": the joined token is not in the vocabulary", e);
	if (is_special(t, result))
		return merge_err(t, left, right, "", " makes a special token", e);
	if ((size_t)(t->n_merges + 1) * 2 > b->pair_mask) {
		size_t n = (b->pair_mask + 1) * 2, old = b->pair_mask + 1;
		uint64_t *slots = calloc(n, sizeof *slots), *prev = b->pair_slot;
		if (!slots)
			return lm_seterr(e, "out of memory");
		b->pair_slot = slots;
		b->pair_mask = n - 1;
		for (size_t i = 0; i < old; i++)
			if (prev[i])
				pair_insert(b, prev[i] - 1);
		free(prev);
	}
	if (!pair_insert(b, (uint64_t)left << 32 | right))
		return merge_err(t, left, right, "duplicate ", "", e);
	if (lm_grow((void **)&t->merges, &b->merges_cap, (size_t)t->n_merges + 1, sizeof *t->merges, e))
		return -1;
	t->merges[t->n_merges++] = (bpe_merge){ left, right, result };
	return 0;
}

int bb_finish(bpe_builder *b, lm_err *e)
{
	bpe_tokenizer *t = b->t;
	bb_discard(b);
	for (int c = 0; c < 256; c++)
		if (t->byte_id[c] == BPE_NO_TOKEN)
			return lm_seterr(e, "no token for the byte 0x%02x (a byte-level vocabulary needs all 256)", c);
	static const char eot[] = BPE_EOT_TEXT;
	for (uint32_t i = 0; i < t->n_special; i++) {
		uint32_t id = t->special[i];
		if (bpe_token_len(t, id) == sizeof eot - 1 && !memcmp(bpe_token_bytes(t, id), eot, sizeof eot - 1))
			t->eot = id;
	}
	return 0;
}

const char *bb_show(const uint8_t *s, size_t len, char *buf)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (o + 8 >= BB_SHOW_MAX) {
			memcpy(buf + o, "...", 4);
			return buf;
		}
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
			buf[o++] = (char)s[i];
		else
			o += (size_t)snprintf(buf + o, BB_SHOW_MAX - o, "\\x%02x", s[i]);
	}
	buf[o] = 0;
	return buf;
}

size_t bb_utf8_char(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t c = s[0];
	size_t len;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xC2 && c <= 0xDF) {
		len = 2; v = c & 0x1F; min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3; v = c & 0x0F; min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4; v = c & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return len;
}
