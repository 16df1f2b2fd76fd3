/* tokenizer.c: fuzz a tokenizer file (man 5 lmpipe-tokenizer); one that
 * loads then encodes a short text with and without its special tokens. */
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_tokenizer(data, size, "x.tok", bpe_load);
}
