/* shard_pack.h: what the shard-pack program does, as library calls: pack
 * token streams into shards with a validation split, and list, test or
 * decompress shards (man 1 shard-pack, man 5 lmpipe-shard). */
#ifndef LMPIPE_SHARD_PACK_H
#define LMPIPE_SHARD_PACK_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

enum { SHARD_DEFAULT_SHARD_TOKENS = 100000000 };

typedef struct shard_pack_opts {
	const char *prefix;      /* PREFIX-000000.lms ..., PREFIX-val-000000.lms ... */
	uint64_t shard_tokens;   /* tokens per shard (the last holds fewer) */
	uint32_t frame_tokens;   /* 0: default */
	uint64_t val_docs;       /* 0: none; else this many documents */
	double val_fraction;     /* 0: none; else each document with this probability */
	uint64_t seed;
	int val_by_content;      /* key each document by its ids, not its position */
	int allow_empty;         /* no tokens, or no training documents, is no error */
	int level, threads;
	int force;               /* replace existing shards of the prefix */
	int progress;            /* --progress */
} shard_pack_opts;

/* What a run packed, for the program to report. */
typedef struct shard_pack_summary {
	uint64_t in_tokens, docs;
	unsigned train_shards, val_shards;
	uint64_t train_tokens, val_tokens;
	uint64_t bytes;          /* of all the shards written */
} shard_pack_summary;

/* Pack the token streams of inputs ("-": stdin; n = 0: stdin), then write
 * PREFIX.manifest, last and atomically (data/shard_set.h): the set exists
 * for readers only from then on.  With force over a set with a manifest,
 * the next generation is written beside it and the old one removed after
 * the manifest switched.  On success *sum (when not NULL) says what was
 * written.  On error no shard of this run is left behind; while it runs,
 * the abort list of base/atomic.h removes its committed shards too, so a
 * signal (lm_init's handlers), die() or exit leave none either.  Temporary
 * files of killed runs on the same prefix are removed first. */
int shard_pack(const shard_pack_opts *o, const char *const *inputs, int n,
	       shard_pack_summary *sum, lm_err *e);

/* Write PREFIX.manifest for a set written before manifests: every shard
 * PREFIX-000000.lms ... and PREFIX-val-000000.lms ... is verified
 * (shard_test) and named.  Refused when the set has a manifest, or a shard
 * is out of sequence.  Only the user knows that the run finished: a killed
 * run's shards look the same. */
int shard_seal(const char *prefix, lm_err *e);

/* Listing (-l): a header line, one line per file, a total line. */
typedef struct shard_list_total {
	uint64_t files, tokens, docs, frames, bytes, raw_bytes;
} shard_list_total;
void shard_list_header(FILE *out);
int shard_list_one(const char *path, shard_list_total *t, FILE *out, lm_err *e);
void shard_list_footer(const shard_list_total *t, FILE *out);
/* Verify one shard: header, index, every frame checksum, ids < vocab size,
 * token and document counts. */
int shard_test(const char *path, lm_err *e);
/* Write the ids of the shards, in order, as one token stream on out. */
int shard_decompress(const char *const *paths, int n, FILE *out, lm_err *e);

#endif
