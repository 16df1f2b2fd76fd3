/* bpe_stream.c: batches of chunks cut at safe points, encoded in parallel,
 * written in order (see bpe_stream.h). */
#include "bpe_stream.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

struct bpe_stream {
	const bpe_encoder *enc;
	bpe_stream_opts o;
	bpe_worker **w;
	uint8_t *buf;
	size_t cap, len;
	size_t *cut;             /* chunk i is buf[cut[i] .. cut[i + 1]) */
	size_t max_chunks;
	bpe_ids *out;
	lm_err *errs;
	unsigned long long bytes;
};

bpe_stream *bpe_stream_new(const bpe_encoder *enc, const bpe_stream_opts *o, lm_err *e)
{
	bpe_stream *st = calloc(1, sizeof *st);
	if (!st)
		goto oom;
	st->enc = enc;
	st->o = *o;
	if (st->o.threads < 1)
		st->o.threads = 1;
	if (!st->o.chunk)
		st->o.chunk = BPE_DEFAULT_CHUNK;
	st->max_chunks = (size_t)st->o.threads * BPE_CHUNKS_PER_THREAD;
	st->cap = st->max_chunks * st->o.chunk;
	st->buf = malloc(st->cap);
	st->cut = calloc(st->max_chunks + 1, sizeof *st->cut);
	st->out = calloc(st->max_chunks, sizeof *st->out);
	st->errs = calloc(st->max_chunks, sizeof *st->errs);
	st->w = calloc((size_t)st->o.threads, sizeof *st->w);
	if (!st->buf || !st->cut || !st->out || !st->errs || !st->w)
		goto oom;
	for (int i = 0; i < st->o.threads; i++)
		if (!(st->w[i] = bpe_worker_new(enc, e))) {
			bpe_stream_free(st);
			return NULL;
		}
	return st;
oom:
	bpe_stream_free(st);
	lm_seterr(e, "out of memory");
	return NULL;
}

void bpe_stream_free(bpe_stream *st)
{
	if (!st)
		return;
	for (int i = 0; st->w && i < st->o.threads; i++)
		bpe_worker_free(st->w[i]);
	for (size_t i = 0; st->out && i < st->max_chunks; i++)
		bpe_ids_free(&st->out[i]);
	free(st->w);
	free(st->buf);
	free(st->cut);
	free(st->out);
	free(st->errs);
	free(st);
}

unsigned long long bpe_stream_bytes(const bpe_stream *st)
{
	return st->bytes;
}

enum { CLS_NONE = 0, CLS_LETTER, CLS_NUMBER, CLS_OTHER };

/* Pre-tokenizer class of a printable ASCII byte, CLS_NONE for the rest. */
static int ascii_class(uint8_t c)
{
	if (c <= ' ' || c >= 0x7f)
		return CLS_NONE;
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
		return CLS_LETTER;
	return c >= '0' && c <= '9' ? CLS_NUMBER : CLS_OTHER;
}

/* May the text be cut between s[p-1] and s[p] (2 <= p < n)? */
static int safe_cut(const bpe_stream *st, const uint8_t *s, size_t n, size_t p)
{
	if (st->o.doc_per_line)
		return s[p - 1] == '\n';
	int b = ascii_class(s[p]);
	if (b == CLS_NONE)
		return 0;
	uint8_t c = s[p - 1];
	if (c == '\n' || c == '\t' || c == '\r') {
		if (ascii_class(s[p - 2]) == CLS_NONE)
			return 0;
	} else {
		int a = ascii_class(c);
		if (a == CLS_NONE || a == b || c == '\'')
			return 0;
	}
	return !bpe_special_spans(st->enc, s, n, p);
}

/* Cut buf[0..len) into chunks; the rest (from the returned offset) waits
 * for more input unless at_eof. */
static size_t cut_chunks(bpe_stream *st, int at_eof, size_t *n_chunks)
{
	size_t pos = 0, k = 0, chunk = st->o.chunk;
	st->cut[0] = 0;
	while (pos < st->len && k < st->max_chunks) {
		size_t left = st->len - pos, end = 0;
		if (at_eof && left <= chunk) {
			end = st->len;
		} else {
			size_t target = pos + (chunk < left ? chunk : left - 1);
			for (size_t p = target; p >= pos + 2 && !end; p--)
				if (safe_cut(st, st->buf, st->len, p))
					end = p;
			for (size_t p = target + 1; p + 1 < st->len && !end; p++)
				if (safe_cut(st, st->buf, st->len, p))
					end = p;
			if (!end) {
				if (!at_eof)
					break;
				end = st->len;
			}
		}
		st->cut[++k] = end;
		pos = end;
	}
	*n_chunks = k;
	return pos;
}

static int encode_chunks(bpe_stream *st, size_t n_chunks)
{
	int failed = 0;
	#pragma omp parallel for schedule(dynamic, 1) num_threads(st->o.threads) reduction(|:failed)
	for (size_t i = 0; i < n_chunks; i++) {
		bpe_worker *w = st->w[omp_get_thread_num()];
		const uint8_t *s = st->buf + st->cut[i];
		size_t n = st->cut[i + 1] - st->cut[i];
		bpe_ids *out = &st->out[i];
		lm_err *e = &st->errs[i];
		out->n = 0;
		e->msg[0] = 0;
		if (!st->o.doc_per_line) {
			failed |= bpe_encode(w, s, n, out, e) != 0;
			continue;
		}
		for (size_t p = 0; p < n && !failed;) {
			const uint8_t *nl = memchr(s + p, '\n', n - p);
			size_t len = nl ? (size_t)(nl - (s + p)) : n - p;
			failed |= bpe_encode(w, s + p, len, out, e) != 0 || bpe_ids_reserve(out, 1, e) != 0;
			if (!failed)
				out->v[out->n++] = st->o.eot;
			p += len + 1;
		}
	}
	return failed ? -1 : 0;
}

int bpe_stream_file(bpe_stream *st, FILE *in, const char *name, bpe_sink_fn sink, void *ctx, lm_err *e)
{
	int at_eof = 0;
	st->len = 0;
	while (!at_eof || st->len > 0) {
		while (!at_eof && st->len < st->cap) {
			size_t got;
			if (io_read_some(in, st->buf + st->len, st->cap - st->len, &got, name, e))
				return -1;
			st->len += got;
			st->bytes += got;
			at_eof = got == 0;
		}
		size_t n_chunks, used = cut_chunks(st, at_eof, &n_chunks);
		if (n_chunks == 0) {     /* no safe cut yet: a giant stretch */
			size_t cap = st->cap * 2;
			uint8_t *b = realloc(st->buf, cap);
			if (!b)
				return lm_seterr(e, "%s: out of memory (%zu bytes without a safe cut)", name, st->len);
			st->buf = b;
			st->cap = cap;
			continue;
		}
		if (encode_chunks(st, n_chunks)) {
			for (size_t i = 0; i < n_chunks; i++)
				if (st->errs[i].msg[0]) {
					*e = st->errs[i];
					break;
				}
			return lm_err_prefix(e, "%s", name);
		}
		for (size_t i = 0; i < n_chunks; i++)
			if (sink(ctx, st->out[i].v, st->out[i].n, e))
				return -1;
		memmove(st->buf, st->buf + used, st->len - used);
		st->len -= used;
	}
	return 0;
}
