/* bpe_merge_internal.h: the merge learner's tables, shared by bpe_learn.c (the
 * learner, its heap, the merges one after another), bpe_pairs.c (the pair
 * map and lists), bpe_merge_words.c (a merge's words rewritten, on one
 * thread or several) and bpe_first_count.c (the first pair count, on
 * threads); not for programs. */
#ifndef LMPIPE_BPE_MERGE_INTERNAL_H
#define LMPIPE_BPE_MERGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "learn/bpe_learn.h"

enum {
	NONE = 0xFFFFFFFFu,
	INITIAL_MAP = 1 << 16,      /* slots of the first pair map */
	MAX_MAP_LOG2 = 32,          /* and of the largest: a slot's hash is 32 bits */
	PAR_CHUNK_WORDS = 64,       /* words a thread takes at a time in a parallel merge */
	PREFETCH_AHEAD = 8,         /* words ahead whose entry and ids are fetched early */
	RECORD_TAIL = 48,           /* bytes into a record fetched too: most end before */
	SLOT_AHEAD = 8,             /* pairs ahead whose slot in the map is fetched early */
	LIST_BLOCK = 1 << 20,       /* words of a block of the lists' arena */
};

/* A pair of adjacent ids, its count over the words, and its words. */
typedef struct pair {
	uint32_t a, b;
	int64_t count;
	uint32_t *occ;   /* words it (may) occur in */
	uint32_t n_occ;
	uint32_t own_occ; /* occ is its own allocation (the first count's), else in the arena */
} pair;

/* A distinct pre-token: its count and its ids id[0 .. len), in one record,
 * so that a merge reaching a word touches one place (a cache line or two),
 * not an entry and then its ids.  Records lie back to back, 8-byte
 * aligned, the ids right after the length (12 bytes in); a word is named
 * by where its record starts, in 8-byte units (word_at). */
typedef struct wrec {
	uint64_t count;
	uint32_t len;
	uint32_t id[];
} wrec;

/* A slot of the pair map, 8 bytes: the key's hash (key_hash: its home in
 * any map of up to 2^32 slots, so the map grows without reading a pair)
 * and the pair; a probe whose hash matches is told by the pair's ids. */
typedef struct mslot {
	uint32_t hash;
	uint32_t val; /* pair index + 1, 0: empty */
} mslot;

/* A heap entry: a pair and its count when it was pushed. */
typedef struct hent {
	int64_t count;
	uint32_t p;
} hent;

typedef struct learner {
	/* words */
	unsigned char *rec; /* the words' records (wrec) back to back */
	size_t n_units;     /* of rec used, in 8-byte units */
	uint32_t *wofs;     /* each word's name (its record's start), in order */
	size_t n_words;
	/* tokens */
	uint8_t *tbytes;
	uint64_t *toff;     /* token id's bytes: tbytes[toff[id] .. toff[id + 1]) */
	uint32_t n_tok;
	/* pairs: map from (a << 32 | b) to index + 1 */
	pair *pairs;
	size_t n_pairs, cap_pairs;
	mslot *map;
	size_t mmask;
	hent *heap;
	size_t n_heap;
	/* the pairs below the heap's floor, by bucket (bpe_learn.c) */
	int64_t heap_floor;       /* every heap key is at least this */
	uint32_t low_head[64];    /* bucket k's first pair: counts in [2^k, 2^(k+1)) */
	uint32_t *low_next;       /* by pair: the next pair of its bucket */
	uint32_t par_words; /* a merge goes parallel past this many words a thread */
	/* the lists of the pairs merges make, in blocks never freed before the
	 * end (a list is written once, when its pair is made; all of them
	 * together are at most two words an id the merges remove) */
	uint32_t **blk;
	size_t n_blk;
	uint32_t *arena;    /* the last block's free part */
	size_t arena_left;
	lm_err *e;
	int failed;
} learner;

/* One side of a merge's changes (bpe_merge_words.c): the neighbour ids in
 * the order first touched (touched), idx[x] the place of id x there + 1
 * (0: not touched yet); by place j, f[j] the summed count of the
 * occurrences beside touched[j] and n_of[j] its entries; and the
 * (neighbour's place, word) entries in the order noted. */
typedef struct nbr_side {
	uint32_t *idx;                /* by id */
	uint32_t *touched, *n_of;     /* by place */
	int64_t *f;                   /* by place */
	uint32_t n_touched;
	uint32_t *ent_j, *ent_w;
	size_t n_ent, cap_ent;
} nbr_side;

/* A thread's changes of one merge (a, b) -> c: side[0] the left
 * neighbours x ((x, a) -> (x, c)), side[1] the right ones y
 * ((b, y) -> (c, y)); arrays for cap_ids ids, grown with the ids as they
 * are made (the merges on many threads are the early ones, when there are
 * few ids, so a thread's table stays small). */
typedef struct nbr_tab {
	nbr_side side[2];
	uint32_t cap_ids;
	int failed;
} nbr_tab;

/* Word w's record. */
static inline wrec *word_at(const learner *L, uint32_t w)
{
	return (wrec *)(void *)(L->rec + (size_t)w * 8);
}

/* 8-byte units of a record of n ids. */
static inline size_t wrec_units(size_t n)
{
	return (offsetof(wrec, id) + n * sizeof(uint32_t) + 7) / 8;
}

static inline uint64_t pair_key(uint32_t a, uint32_t b)
{
	return (uint64_t)a << 32 | b;
}

static const uint64_t KEY_MUL = 0x7FB5D329728EA185ull; /* an odd constant that mixes well */

static inline uint32_t key_hash(uint64_t k)
{
	k ^= k >> 31;
	k *= KEY_MUL;
	k ^= k >> 27;
	return (uint32_t)k;
}

/* in bpe_pairs.c */
/* realloc, or NULL with L's error set (once) */
void *bpe_xrealloc(learner *L, void *p, size_t n);
/* Make the pair map anew, twice as large (or INITIAL_MAP slots). */
int bpe_map_grow(learner *L);
/* Index of pair (a, b), created with count 0 when absent; NONE on error. */
uint32_t bpe_pair_get(learner *L, uint32_t a, uint32_t b);
/* Room for a list of n words in the arena, or NULL with L's error set. */
uint32_t *bpe_list_room(learner *L, size_t n);

/* in bpe_word_layout.c */
/* The words of c (those of 2 bytes or more) laid out in L's records and
 * names, by their first bytes (the table's order among alike), on up to
 * threads threads; L's rec and wofs have room for every entry, its tokens
 * are the specials and bytes. */
int bpe_lay_words(learner *L, const bpe_counts *c, int threads);

/* in bpe_first_count.c */
/* Every pair of the words (of bytes: no merge yet) made, counted and
 * listed, on k threads; the map must have no pair yet. */
int bpe_count_first(learner *L, int k);

/* in bpe_merge_words.c */
/* Room in T (zeroed, or empty) for ids below n_ids; -1 when out of memory. */
int bpe_nbr_reserve(nbr_tab *T, uint32_t n_ids);
void bpe_nbr_free(nbr_tab *T);
/* Rewrite the words occ[0 .. n_occ) of the merge (a, b) -> c on the
 * calling thread, their changes noted in T, then applied. */
int bpe_merge_words(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a, uint32_t b,
		    uint32_t c, nbr_tab *T);
/* The same on k threads, one table each (tabs[0 .. k)). */
int bpe_merge_words_par(learner *L, const uint32_t *occ, uint32_t n_occ, uint32_t a,
			uint32_t b, uint32_t c, nbr_tab *tabs, int k);

#endif
