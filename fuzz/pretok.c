/* pretok.c: fuzz a pre-token file (man 5 lmpipe-pretok): encode it with a
 * tokenizer of the 256 bytes and <|endoftext|>, the ids going
 * to a sink that only counts them. */
#include "fuzz.h"
#include "tok/bpe.h"
#include "tok/bpe_pre.h"

static int count(void *ctx, const uint32_t *ids, size_t n, lm_err *e)
{
	(void)ids;
	(void)e;
	*(size_t *)ctx += n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bpe_tokenizer t;
	static bpe_encoder *enc;
	lm_err e;
	if (!enc) {
		uint32_t id;
		if (bpe_pre_tokenizer(&t, &e) || bpe_add_special(&t, "<|endoftext|>", 13, &id, &e) ||
		    !(enc = bpe_encoder_new(&t, 1, &e)))
			return 0;
	}
	const char *path = fuzz_path("x.pre");
	if (fuzz_write_file(path, data, size))
		return 0;
	size_t n = 0;
	bpe_pre_encode(enc, path, count, &n, &e);
	return 0;
}
