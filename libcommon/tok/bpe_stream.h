/* bpe_stream.h: encoding a whole input stream with bounded memory and
 * several threads, the output in input order.
 *
 * The input is read in batches of chunks (a few per thread); a pool of
 * worker threads encodes one batch while the caller writes the previous
 * one and reads the next.  Chunks are cut
 * only where encoding the two sides apart gives the same ids as encoding
 * them together: between two printable ASCII characters of different
 * pre-tokenizer classes (letter, number, other; not after an apostrophe), or
 * after a lone newline, tab or CR between two such characters, and never
 * inside a possible special token; with doc_per_line after any newline.  A
 * stretch with no such point (one giant pre-token) grows the buffer until it
 * fits: memory is bounded by the batch size plus the longest such stretch. */
#ifndef LMPIPE_BPE_STREAM_H
#define LMPIPE_BPE_STREAM_H

#include <stdio.h>

#include "tok/bpe_encode.h"

/* Receives the ids of each chunk, in input order. */
typedef int (*bpe_sink_fn)(void *ctx, const uint32_t *ids, size_t n, lm_err *e);

typedef struct bpe_stream_opts {
	int threads;             /* >= 1 */
	size_t chunk;            /* target chunk size in bytes (0: default) */
	int doc_per_line;        /* each line is a document: eot after it, newline dropped */
	uint32_t eot;            /* the end-of-text id (doc_per_line) */
	struct bpe_pre *pre;     /* set: the sink gets pre-token indices, on
				    one thread, not ids (bpe_pre.h) */
} bpe_stream_opts;

enum { BPE_DEFAULT_CHUNK = 256 << 10, BPE_CHUNKS_PER_THREAD = 4 };

typedef struct bpe_stream bpe_stream;

bpe_stream *bpe_stream_new(const bpe_encoder *enc, const bpe_stream_opts *o, lm_err *e);
/* Encode one input to its end; the file boundary ends any pre-token. */
int bpe_stream_file(bpe_stream *st, FILE *in, const char *name, bpe_sink_fn sink, void *ctx, lm_err *e);
void bpe_stream_free(bpe_stream *st);

/* Bytes read so far (for progress). */
unsigned long long bpe_stream_bytes(const bpe_stream *st);

#endif
