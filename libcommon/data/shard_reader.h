/* shard_reader.h: training and evaluation batches from token shards
 * (man 5 lmpipe-shard), for lm-train.
 *
 * A reader opens a set of shards, either a list of files or a PREFIX
 * (meaning the training shards that PREFIX.manifest names, the set that
 * shard-pack -o PREFIX wrote; its validation set is the prefix PREFIX-val,
 * the validation shards of that manifest: see shard_set.h).  A PREFIX
 * without a manifest is refused: its run did not finish, or it predates
 * manifests (shard-pack --seal).  Every shard's ids are checked against its
 * vocabulary size as its frames are read.  All shards of a set must share
 * vocabulary size, end-of-text id and dtype.
 *
 * Each call of sr_next() fills one batch: B windows of T+1 consecutive
 * tokens, row-major in out[B * (T + 1)] (uint32 ids).  lm-train takes
 * x = out[b][0..T-1] and y = out[b][1..T].  A window never crosses the end
 * of a shard.
 *
 * SR_RANDOM: window k (k = 0, 1, 2, ... over the whole run) starts at a
 *   position drawn uniformly from all sr_starts(r) valid start positions of
 *   the set (shard i of n_i tokens contributes n_i - T of them), using a
 *   counter-based generator: the start of window k is a pure function of
 *   (seed, k, the shard sizes).  So a run is reproducible, and resuming is
 *   exact: store sr_tell() (windows consumed so far) in the checkpoint and
 *   pass it to sr_seek() after reopening with the same seed.  Batch j holds
 *   windows j*B .. j*B + B-1.  With world > 1 data-parallel ranks, each
 *   rank opens the set with the same seed, world and its rank: its batch j
 *   is then windows (j*world + rank)*B .. + B-1 of the global sequence, so
 *   the ranks together draw exactly what one reader with batch world*B
 *   would (and sr_tell() counts the rank's own windows).
 * SR_SEQUENTIAL: for evaluation.  Window k starts at token k*T of the
 *   concatenated set (windows overlap by one token, so every token but the
 *   first of each shard is a target exactly once), shard by shard, in order;
 *   shard i holds floor((n_i - 1) / T) windows, sr_windows() in all.  With
 *   a stride S < T, the windows of a shard start every S tokens instead
 *   (floor((n_i - 1 - T) / S) + 1 of them): a sliding window, whose last S
 *   targets are the ones the windows before it did not reach, so that each
 *   target but those of a shard's first window is scored with at least
 *   T - S tokens before it (sr_window_first tells the first windows).
 *   sr_next() returns the number of windows filled (B, fewer for the last
 *   batch, 0 at the end); sr_seek(r, 0) starts over.
 *
 * Only the frames a window needs are read and decompressed; recently used
 * frames are cached.  With prefetch on, a background thread fills the next
 * batch while the caller trains on the current one; with threads > 1 the
 * windows of a batch are filled in parallel.  Every frame's checksum
 * is verified when it is read: corruption fails sr_next() with a message
 * naming the file and the frame ("a-000003.lms: frame 17: checksum
 * mismatch").  Call the functions of one reader from one thread.
 */
#ifndef LMPIPE_SHARD_READER_H
#define LMPIPE_SHARD_READER_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef enum sr_mode { SR_RANDOM, SR_SEQUENTIAL } sr_mode;

typedef struct sr_config {
	sr_mode mode;
	int batch;            /* B >= 1 */
	int context;          /* T >= 1: windows hold T + 1 tokens */
	uint64_t seed;        /* SR_RANDOM only */
	int prefetch;         /* 1: fill the next batch in a background thread */
	size_t cache_frames;  /* decompressed frames kept per thread; 0: a default */
	int threads;          /* threads that fill one batch; 0: 1.  The
	                       * windows do not depend on it. */
	int world, rank;      /* SR_RANDOM: data-parallel ranks; 0, 0: 1, 0 */
	int stride;           /* SR_SEQUENTIAL: tokens between window starts,
	                       * 1 .. T; 0: T */
} sr_config;

typedef struct shard_reader shard_reader;

/* Open n paths; a path that is not an existing file is taken as a PREFIX.
 * Fails (message in e) when no shard is found, a shard is malformed, the
 * shards disagree, or no shard holds T + 1 tokens. */
int sr_open(shard_reader **r, const char *const *paths, size_t n,
	    const sr_config *cfg, lm_err *e);
void sr_close(shard_reader *r);

/* Fill the next batch.  Returns B (SR_RANDOM), the windows filled
 * (SR_SEQUENTIAL: 0 at the end), or -1 with the message in e. */
int sr_next(shard_reader *r, uint32_t *out, lm_err *e);

/* Windows consumed so far (the position to store in a checkpoint), and
 * a jump to such a position (drops any prefetched batch). */
uint64_t sr_tell(const shard_reader *r);
int sr_seek(shard_reader *r, uint64_t windows, lm_err *e);

/* What was opened. */
uint32_t sr_vocab_size(const shard_reader *r);
uint32_t sr_eot(const shard_reader *r);     /* 0xFFFFFFFF: none */
/* Whether the shards name their tokenizer (version 2); its identity CRC
 * (bpe_identity_crc) into *crc.  Shards of one set that name different
 * tokenizers are refused at open; those that name none are taken along. */
int sr_tokenizer(const shard_reader *r, uint32_t *crc);
uint64_t sr_tokens(const shard_reader *r);  /* all tokens of the set */
uint64_t sr_starts(const shard_reader *r);  /* valid random start positions */
uint64_t sr_windows(const shard_reader *r); /* sequential windows */
/* Whether sequential window k is the first of its shard (all of its T
 * targets new; a later one's are only its last S with a stride S). */
int sr_window_first(const shard_reader *r, uint64_t k);
size_t sr_shards(const shard_reader *r);
/* Shard i of the set (i < sr_shards(r)), in the order the set was opened
 * (the paths in turn, a PREFIX's shards in its manifest's order): its path
 * and its token count. */
const char *sr_shard_path(const shard_reader *r, size_t i);
uint64_t sr_shard_tokens(const shard_reader *r, size_t i);
/* Where this reader's window k (k < sr_tell() for one already handed out)
 * starts in the concatenation of the set's shards in that order: the
 * shards before its own hold that many tokens less.  A pure function of
 * the configuration and k, as the windows are; lm-train --dump-windows
 * writes it. */
uint64_t sr_window_offset(const shard_reader *r, uint64_t k);
/* Bytes the frame caches of all filling threads hold now. */
size_t sr_cache_bytes(const shard_reader *r);

#endif
