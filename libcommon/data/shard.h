/* shard.h: one token shard file (man 5 lmpipe-shard): its writer, and the
 * reader of its header, frame index and frames.
 *
 *   header (64 bytes in version 1, 72 in version 2, little-endian):
 *     0 "LMSH" | 4 u16 version (1 or 2) | 6 u16 header length (64 or 72) |
 *     8 u8 dtype (2 or 4) | 9 3 zero bytes | 12 u32 vocab size |
 *     16 u32 end-of-text id (0xFFFFFFFF: none) | 20 u32 frame tokens F |
 *     24 u64 tokens | 32 u64 documents (end-of-text ids in this shard) |
 *     40 u64 frames | 48 u64 index offset | 56 u32 CRC-32C of the index |
 *     version 2 only: 60 u32 identity CRC-32C of the tokenizer that made
 *     the ids (bpe_identity.h) | 64 u32 zero |
 *     last 4 bytes: u32 CRC-32C of header bytes [0, header length - 4)
 *   Version 2 is written only when the tokenizer is known (the token
 *   stream named it), so shards without one stay version 1.
 *   frames: from the header length on, one zstd frame per F tokens (the
 *     last may hold fewer), each the little-endian ids of dtype
 *   index (at index offset, ending at the end of the file): per frame
 *     u64 byte offset | u32 compressed size | u32 CRC-32C of those bytes
 *
 * Every byte is covered: the header by its checksum, the index by the
 * checksum in the header, each frame by its index entry, and the file
 * size by the index offset. */
#ifndef LMPIPE_SHARD_H
#define LMPIPE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum {
	SHARD_VERSION = 1,
	SHARD_HEADER_LEN = 64,
	SHARD_VERSION_TOK = 2,      /* with the tokenizer identity */
	SHARD_HEADER_TOK_LEN = 72,
	SHARD_INDEX_ENTRY = 16,
	SHARD_DEFAULT_FRAME_TOKENS = 8192,
	SHARD_MAX_FRAME_TOKENS = 1 << 24,
	SHARD_DEFAULT_LEVEL = 3,
	SHARD_U16_VOCAB_MAX = 1 << 16, /* larger vocabularies use u32 ids */
};
#define SHARD_MAGIC "LMSH"
#define SHARD_EXT ".lms"
#define SHARD_NO_EOT 0xFFFFFFFFu

typedef struct shard_meta {
	int dtype;              /* bytes per id: 2 or 4 */
	uint32_t vocab_size;
	uint32_t eot;           /* SHARD_NO_EOT if none */
	uint32_t frame_tokens;  /* F */
	uint64_t n_tokens, n_docs, n_frames;
	uint64_t index_offset;
	uint64_t file_size;
	uint32_t header_len;    /* 64 (version 1) or 72 (version 2) */
	int has_tok;            /* version 2: the tokenizer's identity CRC-32C */
	uint32_t tok_crc;
} shard_meta;

/* ---- writing one shard ---- */

typedef struct shard_writer_config {
	uint32_t vocab_size, eot;
	uint32_t frame_tokens;  /* 0: SHARD_DEFAULT_FRAME_TOKENS */
	int level;              /* zstd level */
	int threads;            /* frames compressed in parallel; <= 1: one */
	int has_tok;            /* record the tokenizer's identity (version 2) */
	uint32_t tok_crc;
} shard_writer_config;

typedef struct shard_writer shard_writer;

/* Create path under a temporary name (atomic.h); it appears only on commit. */
int shard_writer_open(shard_writer **w, const char *path,
		      const shard_writer_config *cfg, lm_err *e);
/* Append ids (each < vocab size); memory stays a few frames per thread. */
int shard_writer_put(shard_writer *w, const uint32_t *ids, size_t n, lm_err *e);
uint64_t shard_writer_tokens(const shard_writer *w);
uint64_t shard_writer_bytes(const shard_writer *w); /* compressed so far */
/* Finish the file and rename it into place; frees w either way. */
int shard_writer_commit(shard_writer *w, lm_err *e);
/* Remove the unfinished file; frees w (NULL is fine). */
void shard_writer_abort(shard_writer *w);

/* ---- reading one shard ---- */

typedef struct shard_file {
	char *path;
	int fd;
	shard_meta m;
	uint64_t *frame_off;
	uint32_t *frame_size, *frame_crc;
	size_t max_frame_size;  /* largest compressed frame */
	uint32_t header_crc;    /* the header's own checksum: names the shard's content */
} shard_file;

/* Open, check the header and its checksum, the index and its checksum and
 * the file size.  Messages name the file: "x.lms: truncated ...". */
int shard_file_open(shard_file *f, const char *path, lm_err *e);
void shard_file_close(shard_file *f);
/* Bytes of the largest decompressed frame: the frame size, or the whole
 * shard when it holds fewer tokens (never more than the file can hold). */
size_t shard_frame_bytes(const shard_file *f);
/* Tokens in frame k. */
uint32_t shard_frame_tokens(const shard_file *f, uint64_t k);
/* Read frame k into comp (max_frame_size bytes), verify its checksum,
 * decompress its ids into raw (shard_frame_bytes bytes) with dctx (a
 * ZSTD_DCtx *) and check that every id is below the vocabulary size.  Safe to call from several threads with their own
 * buffers.  Errors name the file and the frame. */
int shard_read_frame(const shard_file *f, uint64_t k, void *dctx, uint8_t *comp,
		     uint8_t *raw, lm_err *e);
/* Convert n little-endian ids of dtype from raw to out. */
void shard_ids_from_raw(const uint8_t *raw, int dtype, size_t n, uint32_t *out);

#endif
