/* bpe_encode_internal.h: the encoder's tables and per-thread state, shared by
 * bpe_encode.c (texts, cache) and bpe_merge.c (merging one pre-token).
 * Internal to libcommon. */
#ifndef LMPIPE_BPE_ENCODE_INTERNAL_H
#define LMPIPE_BPE_ENCODE_INTERNAL_H

#include "tok/bpe_encode.h"

enum {
	SMALL_PIECE = 64,        /* longer pieces merge with a heap */
	HUGE_PIECE = 1 << 16,    /* longer ones by rank buckets when ordered */
	CACHE_MIN_LOG2 = 14,     /* per-thread cache: 16Ki slots, growing to */
	CACHE_MAX_LOG2 = 18,     /* ... 256Ki slots (8 MiB) ... */
	CACHE_ARENA_WORDS = 1 << 20, /* ... and 4 MiB of key tails and ids */
	CACHE_MAX_PIECE = SMALL_PIECE, /* longer pieces are not cached */
	CACHE_INLINE_IDS = 3,
	CACHE_FILL_NUM = 3, CACHE_FILL_DEN = 4, /* cleared when 3/4 full */
	WORD = 4,                /* bytes per arena word */
	PIECE_BATCH = 16,        /* pieces pre-tokenized ahead */
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
	size_t huge_piece;       /* see bpe_encoder_set_huge_piece */
	int ordered;             /* each merge's parts come from earlier merges
				    and each token from at most one merge */
	uint32_t *vocab_slot;    /* id + 1 of the non-special tokens of at
				    most CACHE_MAX_PIECE bytes, by piece hash */
	size_t vocab_mask;
	uint8_t *self;           /* per id: SELF_UNKNOWN, or whether a piece
				    equal to the token encodes as that token
				    alone; filled by all threads as they go */
};

enum { SELF_UNKNOWN = 0, SELF_YES = 1, SELF_NO = 2 };

/* A cached piece: its first 8 bytes inline, the rest in the arena; up to
 * CACHE_INLINE_IDS ids inline, more in the arena (ids[0] is their offset). */
typedef struct cache_slot {
	uint64_t key8;
	uint32_t h32;
	uint32_t key_off;
	uint8_t len, nid;        /* nid 0: empty */
	uint16_t pad;
	uint32_t ids[3];
} cache_slot;

struct bpe_worker {
	const bpe_encoder *enc;
	cache_slot *slots;
	size_t cache_mask;
	size_t n_used;
	uint32_t *arena;
	size_t arena_used;
	uint32_t *tok, *prev;    /* heap merge scratch */
	uint64_t *heap;
	size_t scratch_cap, heap_cap;
	uint32_t *head, *tail;   /* rank buckets of huge merges: pool entries */
	uint32_t *pool_pos, *pool_next, *gather;
	size_t pool_cap, gather_cap;
	struct bpe_pre *pre;     /* set: pre-tokens are interned, not merged
				    (bpe_pre.h) */
};

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

size_t bpe_merge_small(const bpe_encoder *E, const uint8_t *s, size_t n, uint32_t *out);
/* Merge a piece longer than SMALL_PIECE, appending its ids to out (room
 * for n ids reserved by the caller). */
int bpe_merge_long(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e);
/* Encode one pre-token (n >= 1 bytes, as pre-tokenized), appending its ids
 * to out (room for n ids reserved by the caller): what encoding a text
 * gives for it. */
int bpe_encode_piece(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e);
/* Free the scratch space of long merges. */
void bpe_merge_free(bpe_worker *w);

#endif
