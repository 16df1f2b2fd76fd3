/* shard_write.c: the streaming shard writer (see shard.h).  Ids are packed
 * into a group of a few frames per thread; a full group is compressed in
 * parallel (one zstd context per thread), written in order and indexed.
 * The header, known only at the end, is written last over a placeholder. */
#include "shard.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "atomic.h"
#include "crc32c.h"
#include "le.h"

enum { FRAMES_PER_THREAD = 4 };

struct shard_writer {
	atomic_file af;
	shard_writer_config cfg;
	int dtype;
	size_t group;            /* frames per compression group */
	uint8_t *raw;            /* group * F ids, packed */
	size_t raw_tokens;
	uint8_t **comp;          /* one compressed buffer per frame of a group */
	size_t *comp_len;
	size_t comp_cap;
	ZSTD_CCtx **cctx;        /* one per thread */
	uint64_t n_tokens, n_docs, n_frames, offset;
	uint8_t *index;
	size_t index_cap;        /* in entries */
};

static void writer_free(shard_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; w->comp && i < w->group; i++)
		free(w->comp[i]);
	for (int t = 0; w->cctx && t < w->cfg.threads; t++)
		ZSTD_freeCCtx(w->cctx[t]);
	free(w->comp);
	free(w->comp_len);
	free(w->cctx);
	free(w->raw);
	free(w->index);
	free(w);
}

int shard_writer_open(shard_writer **out, const char *path,
		      const shard_writer_config *cfg, lm_err *e)
{
	*out = NULL;
	if (cfg->vocab_size == 0)
		return lm_seterr(e, "%s: vocabulary size must be at least 1", path);
	if (cfg->eot != SHARD_NO_EOT && cfg->eot >= cfg->vocab_size)
		return lm_seterr(e, "%s: end-of-text id %u >= vocabulary size %u",
				 path, cfg->eot, cfg->vocab_size);
	shard_writer *w = calloc(1, sizeof *w);
	if (!w)
		return lm_seterr(e, "%s: out of memory", path);
	w->af.slot = -1;
	w->cfg = *cfg;
	if (!w->cfg.frame_tokens)
		w->cfg.frame_tokens = SHARD_DEFAULT_FRAME_TOKENS;
	if (w->cfg.frame_tokens > SHARD_MAX_FRAME_TOKENS) {
		free(w);
		return lm_seterr(e, "%s: frame of %u tokens exceeds the maximum %d",
				 path, cfg->frame_tokens, SHARD_MAX_FRAME_TOKENS);
	}
	if (w->cfg.threads < 1)
		w->cfg.threads = 1;
	w->dtype = cfg->vocab_size <= SHARD_U16_VOCAB_MAX ? 2 : 4;
	w->group = (size_t)w->cfg.threads * FRAMES_PER_THREAD;
	size_t frame_bytes = (size_t)w->cfg.frame_tokens * (size_t)w->dtype;
	w->comp_cap = ZSTD_compressBound(frame_bytes);
	w->raw = malloc(w->group * frame_bytes);
	w->comp = calloc(w->group, sizeof *w->comp);
	w->comp_len = calloc(w->group, sizeof *w->comp_len);
	w->cctx = calloc((size_t)w->cfg.threads, sizeof *w->cctx);
	int bad = !w->raw || !w->comp || !w->comp_len || !w->cctx;
	for (size_t i = 0; !bad && i < w->group; i++)
		bad = !(w->comp[i] = malloc(w->comp_cap));
	for (int t = 0; !bad && t < w->cfg.threads; t++) {
		bad = !(w->cctx[t] = ZSTD_createCCtx());
		if (!bad && ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx[t],
				ZSTD_c_compressionLevel, w->cfg.level))) {
			writer_free(w);
			return lm_seterr(e, "%s: bad zstd level %d", path, cfg->level);
		}
	}
	if (bad) {
		writer_free(w);
		return lm_seterr(e, "%s: out of memory", path);
	}
	if (atomic_open(&w->af, path, e)) {
		writer_free(w);
		return -1;
	}
	uint8_t placeholder[SHARD_HEADER_LEN] = { 0 };
	if (fwrite(placeholder, 1, sizeof placeholder, w->af.fp) != sizeof placeholder) {
		lm_seterr(e, "%s: write error:", path);
		shard_writer_abort(w);
		return -1;
	}
	w->offset = SHARD_HEADER_LEN;
	*out = w;
	return 0;
}

static int add_index(shard_writer *w, uint64_t off, uint32_t size, uint32_t crc, lm_err *e)
{
	if (w->n_frames == w->index_cap) {
		size_t cap = w->index_cap ? w->index_cap * 2 : 1024;
		uint8_t *p = realloc(w->index, cap * SHARD_INDEX_ENTRY);
		if (!p)
			return lm_seterr(e, "%s: out of memory", w->af.path);
		w->index = p;
		w->index_cap = cap;
	}
	uint8_t *p = w->index + w->n_frames * SHARD_INDEX_ENTRY;
	le_put64(p, off);
	le_put32(p + 8, size);
	le_put32(p + 12, crc);
	w->n_frames++;
	return 0;
}

/* Compress the buffered ids (whole frames but the last) and write them. */
static int flush_group(shard_writer *w, lm_err *e)
{
	const size_t F = w->cfg.frame_tokens, frame_bytes = F * (size_t)w->dtype;
	const long nf = (long)((w->raw_tokens + F - 1) / F);
	if (nf == 0)
		return 0;
	int failed = 0;
#pragma omp parallel for num_threads(w->cfg.threads) schedule(dynamic, 1) if (nf > 1)
	for (long i = 0; i < nf; i++) {
		size_t ntok = (size_t)i == (size_t)nf - 1 ? w->raw_tokens - (size_t)i * F : F;
		size_t r = ZSTD_compress2(w->cctx[omp_get_thread_num()], w->comp[i], w->comp_cap,
					  w->raw + (size_t)i * frame_bytes, ntok * (size_t)w->dtype);
		if (ZSTD_isError(r)) {
#pragma omp atomic write
			failed = 1;
		} else {
			w->comp_len[i] = r;
		}
	}
	if (failed)
		return lm_seterr(e, "%s: zstd compression failed", w->af.path);
	for (long i = 0; i < nf; i++) {
		size_t n = w->comp_len[i];
		if (fwrite(w->comp[i], 1, n, w->af.fp) != n)
			return lm_seterr(e, "%s: write error:", w->af.path);
		if (add_index(w, w->offset, (uint32_t)n, crc32c(0, w->comp[i], n), e))
			return -1;
		w->offset += n;
	}
	w->raw_tokens = 0;
	return 0;
}

int shard_writer_put(shard_writer *w, const uint32_t *ids, size_t n, lm_err *e)
{
	const size_t cap = w->group * w->cfg.frame_tokens;
	const uint32_t vocab = w->cfg.vocab_size, eot = w->cfg.eot;
	while (n > 0) {
		size_t k = cap - w->raw_tokens < n ? cap - w->raw_tokens : n;
		uint8_t *dst = w->raw + w->raw_tokens * (size_t)w->dtype;
		for (size_t i = 0; i < k; i++) {
			uint32_t v = ids[i];
			if (v >= vocab)
				return lm_seterr(e, "%s: token id %u >= vocabulary size %u",
						 w->af.path, v, vocab);
			w->n_docs += v == eot;
			if (w->dtype == 2)
				le_put16(dst + 2 * i, v);
			else
				le_put32(dst + 4 * i, v);
		}
		w->raw_tokens += k;
		w->n_tokens += k;
		ids += k;
		n -= k;
		if (w->raw_tokens == cap && flush_group(w, e))
			return -1;
	}
	return 0;
}

uint64_t shard_writer_tokens(const shard_writer *w)
{
	return w->n_tokens;
}

uint64_t shard_writer_bytes(const shard_writer *w)
{
	return w->offset;
}

int shard_writer_commit(shard_writer *w, lm_err *e)
{
	if (flush_group(w, e))
		goto fail;
	size_t index_bytes = w->n_frames * SHARD_INDEX_ENTRY;
	if (index_bytes && fwrite(w->index, 1, index_bytes, w->af.fp) != index_bytes) {
		lm_seterr(e, "%s: write error:", w->af.path);
		goto fail;
	}
	uint8_t h[SHARD_HEADER_LEN] = { 0 };
	memcpy(h, SHARD_MAGIC, 4);
	le_put16(h + 4, SHARD_VERSION);
	le_put16(h + 6, SHARD_HEADER_LEN);
	h[8] = (uint8_t)w->dtype;
	le_put32(h + 12, w->cfg.vocab_size);
	le_put32(h + 16, w->cfg.eot);
	le_put32(h + 20, w->cfg.frame_tokens);
	le_put64(h + 24, w->n_tokens);
	le_put64(h + 32, w->n_docs);
	le_put64(h + 40, w->n_frames);
	le_put64(h + 48, w->offset);
	le_put32(h + 56, crc32c(0, w->index, index_bytes));
	le_put32(h + 60, crc32c(0, h, SHARD_HEADER_LEN - 4));
	if (fseek(w->af.fp, 0, SEEK_SET) || fwrite(h, 1, sizeof h, w->af.fp) != sizeof h) {
		lm_seterr(e, "%s: write error:", w->af.path);
		goto fail;
	}
	int rc = atomic_commit(&w->af, e);
	writer_free(w);
	return rc;
fail:
	shard_writer_abort(w);
	return -1;
}

void shard_writer_abort(shard_writer *w)
{
	if (!w)
		return;
	atomic_abort(&w->af);
	writer_free(w);
}
