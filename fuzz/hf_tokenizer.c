/* hf_tokenizer.c: fuzz the Hugging Face tokenizer.json reader (bpe_load_hf);
 * one that loads then encodes a short text with and without its special
 * tokens, as the tokenizer harness does for lmpipe's own file. */
#include "fuzz.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

static const char TEXT[] = "Hello, world! It's 2026: <|endoftext|> caf\xc3\xa9  \n\tend";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path("tokenizer.json");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	bpe_tokenizer t;
	if (bpe_load_hf(&t, path, &e))
		return 0;
	for (int sp = 0; sp < 2; sp++) {
		bpe_encoder *enc = bpe_encoder_new(&t, sp, &e);
		bpe_worker *w = enc ? bpe_worker_new(enc, &e) : NULL;
		bpe_ids ids = { 0 };
		if (w)
			bpe_encode(w, (const uint8_t *)TEXT, sizeof TEXT - 1, &ids, &e);
		bpe_ids_free(&ids);
		if (w)
			bpe_worker_free(w);
		if (enc)
			bpe_encoder_free(enc);
	}
	bpe_free(&t);
	return 0;
}
