/* docs_span.c: fuzz a plain text file read by byte range in place
 * (docs_span_open, bpe-encode -r) against the same range copied
 * (docs_copy, doc-cat -r): the first two bytes of the input place START
 * and END in the file made of the rest (255 as END: to the end).  Both
 * must fail with the same message or give the same bytes; a disagreement
 * aborts.  (A file that starts as a compressed one is left out: docs_copy
 * would run its decompressor, and in place it is refused by design.) */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "text/docs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t n = size - 2;
	const char *path = fuzz_path("x.txt");
	if (fuzz_write_file(path, data + 2, n))
		return 0;
	docs_codec codec;
	lm_err e1, e2;
	if (docs_codec_of(path, &codec, &e1) || codec != DOCS_PLAIN)
		return 0;
	docs_opts o = { DOCS_TEXT, DOCS_SEP_EOT, NULL, "<|endoftext|>", (uint64_t)data[0] * n / 254,
			data[1] == 255 ? DOCS_TO_END : (uint64_t)data[1] * n / 254 };
	char *copy = NULL;
	size_t copy_n = 0;
	FILE *out = open_memstream(&copy, &copy_n);
	if (!out)
		return 0;
	docs_stats st = { 0 };
	int rc1 = docs_copy(&o, path, out, "<memory>", &st, &e1);
	fclose(out);
	docs_span s;
	int rc2 = docs_span_open(&o, path, &s, &e2);
	if (rc1 != rc2 || (rc1 && strcmp(e1.msg, e2.msg)) ||
	    (!rc1 && (s.n != copy_n || (copy_n && memcmp(s.p, copy, copy_n)))))
		abort();
	if (!rc2)
		docs_span_free(&s);
	free(copy);
	return 0;
}
