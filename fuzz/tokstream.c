/* tokstream.c: fuzz a token stream (man 5 lmpipe-tokens), as a pipe reader
 * sees it: headers, blocks, concatenated streams, the end marker. */
#include "data/tokstream.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *fp = fuzz_stream(data, size);
	if (!fp)
		return 0;
	lm_err e;
	tokstream_reader r;
	if (tsr_open(&r, fp, "in", &e) == 0) {
		uint32_t ids[257];
		while (tsr_read(&r, ids, sizeof ids / sizeof ids[0], &e) > 0)
			;
		tsr_close(&r);
	}
	fclose(fp);
	return 0;
}
