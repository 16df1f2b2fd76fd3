/* bpe_open.c: a tokenizer file of either kind, lmpipe's or Hugging Face's
 * tokenizer.json, told apart by its first non-blank byte (see bpe.h).  A
 * file of its own so that the readers do not call each other. */
#include "tok/bpe.h"

#include <stdio.h>

#include "base/io.h"

int bpe_load_any(bpe_tokenizer *t, const char *path, lm_err *e)
{
	FILE *fp = io_open_read(path, e);
	if (!fp)
		return -1;
	int c;
	while ((c = getc(fp)) == ' ' || c == '\t' || c == '\r' || c == '\n')
		;
	io_close_read(fp);
	return c == '{' ? bpe_load_hf(t, path, e) : bpe_load(t, path, e);
}
