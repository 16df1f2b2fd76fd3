/* gpt2.c: fuzz the GPT-2 import (vocab.json + merges.txt): the input is the
 * vocabulary, a NUL byte, then the merges (no NUL: merges only, with an
 * empty vocabulary). */
#include <string.h>

#include "fuzz.h"
#include "tok/bpe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t nv = nul ? (size_t)(nul - data) : 0;
	const uint8_t *m = nul ? nul + 1 : data;
	const char *vocab = fuzz_path("vocab.json"), *merges = fuzz_path("merges.txt");
	if (fuzz_write_file(vocab, data, nv) ||
	    fuzz_write_file(merges, m, size - (size_t)(m - data)))
		return 0;
	lm_err e;
	bpe_tokenizer t;
	if (bpe_load_gpt2(&t, vocab, merges, &e) == 0)
		bpe_free(&t);
	return 0;
}
