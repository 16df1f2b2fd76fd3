/* tokstream.h: the token stream that flows through pipes between programs
 * (man 5 lmpipe-tokens).
 *
 * A stream is a 16- or 20-byte header followed by blocks and an end marker:
 *
 *   header: "LMTS" | u8 version (1) | u8 dtype bytes (2 or 4) |
 *           u16 header length (16 or 20) | u32 vocab size | u32 end-of-text
 *           id (0xFFFFFFFF: none) | [header length >= 20: u32 the identity
 *           CRC-32C of the tokenizer that made the ids (bpe_identity.h)]
 *                                                     -- all little-endian
 *   block:  u32 n (1 <= n <= TOKSTREAM_MAX_BLOCK), then n ids of dtype
 *   end:    u32 0
 *
 * dtype is u16 when vocab size <= 65536, else u32.  Concatenated streams are
 * valid: after an end marker comes either end of input or another header
 * (the same vocabulary, end-of-text id, dtype and tokenizer identity).
 * A stream cut short (no end marker) is an error: "truncated".  Readers
 * reject other versions, a header length below 16 (and skip the extra bytes
 * of a longer one), unknown dtypes and ids >= vocab size, naming the
 * stream and the byte offset. */
#ifndef LMPIPE_TOKSTREAM_H
#define LMPIPE_TOKSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

enum {
	TOKSTREAM_VERSION = 1,
	TOKSTREAM_HEADER_LEN = 16,
	TOKSTREAM_HEADER_TOK_LEN = 20, /* with the tokenizer identity */
	TOKSTREAM_MAX_BLOCK = 1 << 24,
};
#define TOKSTREAM_MAGIC "LMTS"
#define TOKSTREAM_NO_EOT 0xFFFFFFFFu

typedef struct tokstream_info {
	uint32_t vocab_size;
	uint32_t eot;         /* TOKSTREAM_NO_EOT if none */
	int dtype;            /* 2 or 4 bytes */
	int has_tok;          /* the header names the tokenizer: */
	uint32_t tok_crc;     /* its identity CRC-32C (bpe_identity_crc) */
} tokstream_info;

typedef struct tokstream_writer {
	FILE *fp;
	const char *name;
	tokstream_info info;
	uint32_t *buf;
	size_t n, cap;
} tokstream_writer;

/* Write the header; dtype follows from vocab_size. */
int tsw_open(tokstream_writer *w, FILE *fp, const char *name,
	     uint32_t vocab_size, uint32_t eot, lm_err *e);
/* The same, naming the tokenizer by its identity CRC (NULL: none). */
int tsw_open_tok(tokstream_writer *w, FILE *fp, const char *name, uint32_t vocab_size,
		 uint32_t eot, const uint32_t *tok_crc, lm_err *e);
int tsw_write(tokstream_writer *w, const uint32_t *ids, size_t n, lm_err *e);
/* Write pending ids as a block now (e.g. before a pipe consumer waits). */
int tsw_flush(tokstream_writer *w, lm_err *e);
/* Flush, write the end marker, free the buffer (does not close fp). */
int tsw_close(tokstream_writer *w, lm_err *e);

typedef struct tokstream_reader {
	FILE *fp;
	const char *name;
	tokstream_info info;  /* of the first stream; later ones must match */
	uint64_t offset;      /* bytes consumed, for messages */
	uint64_t left;        /* ids left in the current block */
	int state;            /* internal */
	uint8_t *raw;
	size_t raw_cap;
} tokstream_reader;

/* Read and check the first header.  An empty input is an error. */
int tsr_open(tokstream_reader *r, FILE *fp, const char *name, lm_err *e);
/* Read up to max ids.  Returns the count, 0 at the end of the last
 * concatenated stream, -1 on error. */
long long tsr_read(tokstream_reader *r, uint32_t *ids, size_t max, lm_err *e);
void tsr_close(tokstream_reader *r);

#endif
