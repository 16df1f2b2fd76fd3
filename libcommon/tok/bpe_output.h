/* bpe_output.h: where encoded ids go: a token stream (tokstream.h) or
 * decimal text, one document per line (a newline after each end-of-text
 * id and at the end). */
#ifndef LMPIPE_BPE_OUTPUT_H
#define LMPIPE_BPE_OUTPUT_H

#include <stdio.h>

#include "data/tokstream.h"

typedef struct bpe_output {
	int text;
	FILE *fp;
	const char *name;
	uint32_t eot;
	int mid_line;            /* text: ids written since the last newline */
	tokstream_writer w;
	unsigned long long n_ids;
} bpe_output;

/* tok_crc: the identity of the tokenizer (bpe_identity_crc), recorded in
 * the stream's header; NULL: none. */
int bpe_output_open(bpe_output *o, FILE *fp, const char *name, int text, uint32_t vocab_size,
		    uint32_t eot, const uint32_t *tok_crc, lm_err *e);
/* A bpe_sink_fn (ctx is the bpe_output). */
int bpe_output_ids(void *ctx, const uint32_t *ids, size_t n, lm_err *e);
int bpe_output_close(bpe_output *o, lm_err *e);

#endif
