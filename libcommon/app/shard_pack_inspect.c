/* shard_pack_inspect.c: list, verify and decompress shards (shard-pack -l, -t,
 * -d; see shard_pack.h). */
#include "app/shard_pack.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/checked.h"
#include "data/shard.h"
#include "data/tokstream.h"

void shard_list_header(FILE *out)
{
	fprintf(out, "%14s %12s %9s %14s %7s  %s\n", "Tokens", "Documents", "Frames",
		"Bytes", "Ratio", "File");
}

static void list_line(FILE *out, uint64_t tokens, uint64_t docs, uint64_t frames,
		      uint64_t bytes, uint64_t raw, const char *name)
{
	fprintf(out, "%14llu %12llu %9llu %14llu %7.3f  %s\n", (unsigned long long)tokens,
		(unsigned long long)docs, (unsigned long long)frames,
		(unsigned long long)bytes, bytes ? (double)raw / (double)bytes : 0.0, name);
}

int shard_list_one(const char *path, shard_list_total *t, FILE *out, lm_err *e)
{
	shard_file f;
	if (shard_file_open(&f, path, e))
		return -1;
	const shard_meta *m = &f.m;
	uint64_t raw;
	if (ck_mul_u64(m->n_tokens, (uint64_t)m->dtype, &raw))
		raw = UINT64_MAX; /* a claim no file holds: shard_test says why */
	list_line(out, m->n_tokens, m->n_docs, m->n_frames, m->file_size, raw, path);
	t->files++;
	t->tokens += m->n_tokens;
	t->docs += m->n_docs;
	t->frames += m->n_frames;
	t->bytes += m->file_size;
	t->raw_bytes += raw;
	shard_file_close(&f);
	return 0;
}

void shard_list_footer(const shard_list_total *t, FILE *out)
{
	if (t->files > 1)
		list_line(out, t->tokens, t->docs, t->frames, t->bytes, t->raw_bytes, "total");
}

/* Frame buffers and a decompression context for one shard. */
typedef struct frame_buf {
	void *dctx;
	uint8_t *comp, *raw;
	uint32_t *ids;
} frame_buf;

static int frame_buf_init(frame_buf *b, const shard_file *f, lm_err *e)
{
	size_t bytes = shard_frame_bytes(f), F = bytes / (size_t)f->m.dtype;
	b->dctx = ZSTD_createDCtx();
	b->comp = malloc(f->max_frame_size ? f->max_frame_size : 1);
	b->raw = malloc(bytes ? bytes : 1);
	b->ids = malloc((F ? F : 1) * sizeof *b->ids);
	if (!b->dctx || !b->comp || !b->raw || !b->ids)
		return lm_seterr(e, "%s: out of memory", f->path);
	return 0;
}

static void frame_buf_free(frame_buf *b)
{
	ZSTD_freeDCtx(b->dctx);
	free(b->comp);
	free(b->raw);
	free(b->ids);
	memset(b, 0, sizeof *b);
}

/* Read frame k of f into b->ids; returns its token count or -1. */
static long long frame_ids(const shard_file *f, uint64_t k, frame_buf *b, lm_err *e)
{
	if (shard_read_frame(f, k, b->dctx, b->comp, b->raw, e))
		return -1;
	uint32_t n = shard_frame_tokens(f, k);
	shard_ids_from_raw(b->raw, f->m.dtype, n, b->ids);
	return n;
}

int shard_test(const char *path, lm_err *e)
{
	shard_file f;
	frame_buf b = { 0 };
	if (shard_file_open(&f, path, e))
		return -1;
	int rc = frame_buf_init(&b, &f, e);
	uint64_t docs = 0;
	for (uint64_t k = 0; !rc && k < f.m.n_frames; k++) {
		long long n = frame_ids(&f, k, &b, e);
		if (n < 0) {
			rc = -1;
			break;
		}
		for (long long i = 0; i < n; i++) /* ids < vocab: shard_read_frame */
			docs += b.ids[i] == f.m.eot;
	}
	if (!rc && docs != f.m.n_docs)
		rc = lm_seterr(e, "%s: %llu documents, the header says %llu", path,
			       (unsigned long long)docs, (unsigned long long)f.m.n_docs);
	frame_buf_free(&b);
	shard_file_close(&f);
	return rc;
}

static int decompress_one(const shard_file *f, tokstream_writer *w, lm_err *e)
{
	frame_buf b = { 0 };
	int rc = frame_buf_init(&b, f, e);
	for (uint64_t k = 0; !rc && k < f->m.n_frames; k++) {
		long long n = frame_ids(f, k, &b, e);
		rc = n < 0 ? -1 : tsw_write(w, b.ids, (size_t)n, e);
	}
	frame_buf_free(&b);
	return rc;
}

int shard_decompress(const char *const *paths, int n, FILE *out, lm_err *e)
{
	tokstream_writer w;
	int open = 0, rc = 0;
	for (int i = 0; !rc && i < n; i++) {
		shard_file f;
		if (shard_file_open(&f, paths[i], e)) {
			rc = -1;
			break;
		}
		if (!open) {
			rc = tsw_open_tok(&w, out, "<stdout>", f.m.vocab_size, f.m.eot,
					  f.m.has_tok ? &f.m.tok_crc : NULL, e);
			open = !rc;
		} else if (f.m.vocab_size != w.info.vocab_size || f.m.eot != w.info.eot) {
			rc = lm_seterr(e, "%s: vocabulary size %u and end-of-text id %u differ "
				       "from the first shard's %u and %u", paths[i],
				       f.m.vocab_size, f.m.eot, w.info.vocab_size, w.info.eot);
		} else if (f.m.has_tok != w.info.has_tok || f.m.tok_crc != w.info.tok_crc) {
			rc = lm_seterr(e, "%s: made by another tokenizer than the first shard", paths[i]);
		}
		if (!rc)
			rc = decompress_one(&f, &w, e);
		shard_file_close(&f);
	}
	/* On failure, no end marker: a reader of the output sees it truncated. */
	if (open && rc)
		free(w.buf);
	else if (open)
		rc = tsw_close(&w, e);
	return rc;
}
