/* fuzz_tok.h: what the two tokenizer harnesses share: write the input as a
 * file, load it with the reader under test, then encode a short text with
 * and without the tokenizer's special tokens. */
#ifndef LMPIPE_FUZZ_TOK_H
#define LMPIPE_FUZZ_TOK_H

#include "fuzz.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

static const char FUZZ_TOK_TEXT[] = "Hello, world! It's 2026: <|endoftext|> caf\xc3\xa9  \n\tend";

static inline int fuzz_tokenizer(const uint8_t *data, size_t size, const char *name,
				 int (*load)(bpe_tokenizer *t, const char *path, lm_err *e))
{
	const char *path = fuzz_path(name);
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	bpe_tokenizer t;
	if (load(&t, path, &e))
		return 0;
	for (int sp = 0; sp < 2; sp++) {
		bpe_encoder *enc = bpe_encoder_new(&t, sp, &e);
		bpe_worker *w = enc ? bpe_worker_new(enc, &e) : NULL;
		bpe_ids ids = { 0 };
		if (w)
			bpe_encode(w, (const uint8_t *)FUZZ_TOK_TEXT, sizeof FUZZ_TOK_TEXT - 1, &ids, &e);
		bpe_ids_free(&ids);
		if (w)
			bpe_worker_free(w);
		if (enc)
			bpe_encoder_free(enc);
	}
	bpe_free(&t);
	return 0;
}

#endif
