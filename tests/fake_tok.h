/* fake_tok.h: the tokenizer of the generation tests: token i is byte i
 * for i < 256, ids above are two-byte strings "#A", "#B", ...; V tokens
 * at most FAKE_TOK_MAX, end of text eot. */
#ifndef LMPIPE_FAKE_TOK_H
#define LMPIPE_FAKE_TOK_H

#include <stdint.h>

#include "tok/bpe.h"

enum { FAKE_TOK_MAX = 1024 };

static inline void fake_tokenizer(bpe_tokenizer *tok, int V, uint32_t eot)
{
	static uint8_t bytes[256 + 2 * FAKE_TOK_MAX];
	static uint64_t off[FAKE_TOK_MAX + 1];
	uint64_t o = 0;
	for (int i = 0; i < V; i++) {
		off[i] = o;
		if (i < 256) {
			bytes[o++] = (uint8_t)i;
			tok->byte_id[i] = (uint32_t)i;
		} else {
			bytes[o++] = '#';
			bytes[o++] = (uint8_t)('A' + (i - 256) % 26);
		}
	}
	off[V] = o;
	tok->n_vocab = (uint32_t)V;
	tok->bytes = bytes;
	tok->off = off;
	tok->eot = eot;
}

#endif
