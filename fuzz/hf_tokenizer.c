/* hf_tokenizer.c: fuzz the Hugging Face tokenizer.json reader (bpe_load_hf);
 * one that loads then encodes a short text with and without its special
 * tokens, as the tokenizer harness does for lmpipe's own file. */
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_tokenizer(data, size, "tokenizer.json", bpe_load_hf);
}
