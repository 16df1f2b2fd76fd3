/* bpe_output.c: writing encoded ids as a token stream or as decimal text
 * (see bpe_output.h). */
#include "tok/bpe_output.h"

#include <string.h>

#include "base/io.h"

enum { ID_TEXT_MAX = 11 };  /* "4294967295 " */

int bpe_output_open(bpe_output *o, FILE *fp, const char *name, int text, uint32_t vocab_size,
		    uint32_t eot, const uint32_t *tok_crc, lm_err *e)
{
	memset(o, 0, sizeof *o);
	o->text = text;
	o->fp = fp;
	o->name = name;
	o->eot = eot;
	return text ? 0 : tsw_open_tok(&o->w, fp, name, vocab_size, eot, tok_crc, e);
}

int bpe_output_ids(void *ctx, const uint32_t *ids, size_t n, lm_err *e)
{
	bpe_output *o = ctx;
	o->n_ids += n;
	if (!o->text)
		return tsw_write(&o->w, ids, n, e);
	char buf[1 << 16];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k + ID_TEXT_MAX + 1 > sizeof buf) {
			if (io_write_all(o->fp, buf, k, o->name, e))
				return -1;
			k = 0;
		}
		if (o->mid_line)
			buf[k++] = ' ';
		char d[ID_TEXT_MAX];
		int nd = 0;
		uint32_t v = ids[i];
		do {
			d[nd++] = (char)('0' + v % 10);
			v /= 10;
		} while (v);
		while (nd)
			buf[k++] = d[--nd];
		o->mid_line = ids[i] != o->eot;
		if (!o->mid_line)
			buf[k++] = '\n';
	}
	return io_write_all(o->fp, buf, k, o->name, e);
}

int bpe_output_close(bpe_output *o, lm_err *e)
{
	if (!o->text)
		return tsw_close(&o->w, e);
	if (o->mid_line && io_write_all(o->fp, "\n", 1, o->name, e))
		return -1;
	o->mid_line = 0;
	return fflush(o->fp) ? lm_seterr(e, "%s: write error:", o->name) : 0;
}
