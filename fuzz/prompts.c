/* prompts.c: fuzz the prompt reader of lm-sample, as JSON Lines and as text
 * lines. */
#include "fuzz.h"
#include "gen/prompts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int jsonl = 0; jsonl < 2; jsonl++) {
		FILE *fp = fuzz_stream(data, size);
		if (!fp)
			return 0;
		lm_err e;
		prompt_reader r;
		prompt_reader_stream(&r, fp, "in", jsonl);
		for (int i = 0; i < 4096; i++) {
			prompt_rec rec;
			int got = prompt_next(&r, &rec, &e);
			if (got == PROMPT_OK)
				prompt_rec_free(&rec);
			else if (got != PROMPT_BAD)
				break;
		}
		prompt_reader_free(&r);
		fclose(fp);
	}
	return 0;
}
