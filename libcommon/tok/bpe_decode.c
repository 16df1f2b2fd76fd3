/* bpe_decode.c: token ids to bytes (see bpe_decode.h). */
#include "tok/bpe_decode.h"

#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "data/tokstream.h"

enum { DECODE_BATCH = 1 << 16, ID_DIGITS_MAX = 10 };

typedef struct decoder {
	const bpe_tokenizer *t;
	const char *name;
	FILE *out;
	const char *out_name;
	unsigned long long pos;  /* ids decoded so far */
} decoder;

static int put_ids(decoder *d, const uint32_t *ids, size_t n, unsigned long long line, lm_err *e)
{
	const bpe_tokenizer *t = d->t;
	for (size_t i = 0; i < n; i++, d->pos++) {
		if (ids[i] >= t->n_vocab) {
			if (line)
				return lm_seterr(e, "%s:%llu: token %llu: id %u is outside the vocabulary of %u",
						 d->name, line, d->pos, ids[i], t->n_vocab);
			return lm_seterr(e, "%s: token %llu: id %u is outside the vocabulary of %u", d->name,
					 d->pos, ids[i], t->n_vocab);
		}
		if (io_write_all(d->out, bpe_token_bytes(t, ids[i]), bpe_token_len(t, ids[i]), d->out_name, e))
			return -1;
	}
	return 0;
}

static int decode_stream(decoder *d, FILE *in, lm_err *e)
{
	tokstream_reader r;
	uint32_t *ids = malloc(DECODE_BATCH * sizeof *ids);
	if (!ids)
		return lm_seterr(e, "out of memory");
	int rc = -1;
	if (tsr_open(&r, in, d->name, e))
		goto out_free;
	if (r.info.vocab_size != d->t->n_vocab) {
		lm_seterr(e, "%s: the stream's vocabulary has %u tokens, the tokenizer's %u", d->name,
			  r.info.vocab_size, d->t->n_vocab);
		goto out;
	}
	for (;;) {
		long long n = tsr_read(&r, ids, DECODE_BATCH, e);
		if (n < 0)
			goto out;
		if (n == 0)
			break;
		if (put_ids(d, ids, (size_t)n, 0, e))
			goto out;
	}
	rc = 0;
out:
	tsr_close(&r);
out_free:
	free(ids);
	return rc;
}

static int decode_text(decoder *d, FILE *in, lm_err *e)
{
	unsigned long long line = 1;
	char digits[ID_DIGITS_MAX + 2];
	size_t nd = 0;
	int c;
	do {
		c = getc(in);
		if (c != EOF && c != ' ' && c != '\n' && c != '\t' && c != '\r') {
			if (c < '0' || c > '9' || nd > ID_DIGITS_MAX)
				return lm_seterr(e, "%s:%llu: token %llu: expected a decimal token id", d->name,
						 line, d->pos);
			digits[nd++] = (char)c;
			continue;
		}
		if (nd) {
			digits[nd] = 0;
			unsigned long long v = strtoull(digits, NULL, 10);
			uint32_t id = v > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)v;
			if (put_ids(d, &id, 1, line, e))
				return -1;
			nd = 0;
		}
		line += c == '\n';
	} while (c != EOF);
	if (ferror(in))
		return lm_seterr(e, "%s: read error:", d->name);
	return 0;
}

int bpe_decode_file(const bpe_tokenizer *t, FILE *in, const char *name, int text, FILE *out,
		    const char *out_name, lm_err *e)
{
	decoder d = { t, name, out, out_name, 0 };
	return text ? decode_text(&d, in, e) : decode_stream(&d, in, e);
}
