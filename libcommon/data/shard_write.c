/* shard_write.c: the streaming shard writer (see shard.h).
 *
 * Ids are packed into a group of a few frames per thread.  With one thread
 * a full group is compressed and written at once.  With more, two groups
 * alternate: while worker threads compress one (each frame on its own, one
 * zstd context per worker), the caller fills the other; the compressed
 * frames are written in order and indexed before the group is reused.  So
 * memory is 2 groups, whatever the corpus.  The header, known only at the
 * end, is written last over a placeholder. */
#include "data/shard.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/atomic.h"
#include "base/crc32c.h"
#include "base/le.h"

enum { FRAMES_PER_THREAD = 8, N_GROUPS = 2 };

typedef struct group {
	uint8_t *raw;            /* frames * F ids, packed */
	size_t tokens;
	uint8_t **comp;          /* one compressed buffer per frame */
	size_t *comp_len;        /* 0: compression failed */
	size_t nf;               /* frames to compress */
} group;

struct shard_writer {
	atomic_file af;
	shard_writer_config cfg;
	int dtype;
	size_t frames;           /* per group */
	size_t comp_cap;
	group g[N_GROUPS];
	int cur;                 /* the group being filled */
	ZSTD_CCtx **cctx;        /* one per thread */
	uint64_t n_tokens, n_docs, n_frames, offset;
	uint8_t *index;
	size_t index_cap;        /* in entries */

	/* The worker pool (threads > 1). */
	pthread_t *th;
	int n_th;
	pthread_mutex_t mu;
	pthread_cond_t work_cv, done_cv;
	group *job;              /* being compressed, or NULL */
	size_t next, done;       /* frames of job taken / finished */
	int stop;
};

static int compress_frame(shard_writer *w, ZSTD_CCtx *cctx, group *g, size_t i)
{
	const size_t F = w->cfg.frame_tokens, frame_bytes = F * (size_t)w->dtype;
	size_t ntok = i == g->nf - 1 ? g->tokens - i * F : F;
	size_t r = ZSTD_compress2(cctx, g->comp[i], w->comp_cap, g->raw + i * frame_bytes,
				  ntok * (size_t)w->dtype);
	g->comp_len[i] = ZSTD_isError(r) ? 0 : r;
	return ZSTD_isError(r) ? -1 : 0;
}

typedef struct worker_arg {
	shard_writer *w;
	int t;
} worker_arg;

static void *worker_main(void *p)
{
	worker_arg *a = p;
	shard_writer *w = a->w;
	ZSTD_CCtx *cctx = w->cctx[a->t];
	free(a);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && (!w->job || w->next >= w->job->nf))
			pthread_cond_wait(&w->work_cv, &w->mu);
		if (w->stop)
			break;
		group *g = w->job;
		size_t i = w->next++;
		pthread_mutex_unlock(&w->mu);
		compress_frame(w, cctx, g, i);
		pthread_mutex_lock(&w->mu);
		if (++w->done == g->nf)
			pthread_cond_broadcast(&w->done_cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void stop_pool(shard_writer *w)
{
	if (!w->n_th)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->work_cv);
	pthread_mutex_unlock(&w->mu);
	for (int t = 0; t < w->n_th; t++)
		pthread_join(w->th[t], NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->work_cv);
	pthread_cond_destroy(&w->done_cv);
	w->n_th = 0;
}

static int start_pool(shard_writer *w)
{
	w->th = calloc((size_t)w->cfg.threads, sizeof *w->th);
	if (!w->th)
		return -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work_cv, NULL);
	pthread_cond_init(&w->done_cv, NULL);
	for (int t = 0; t < w->cfg.threads; t++) {
		worker_arg *a = malloc(sizeof *a);
		if (!a)
			return -1;
		*a = (worker_arg){ w, t };
		if (pthread_create(&w->th[t], NULL, worker_main, a)) {
			free(a);
			return -1;
		}
		w->n_th++;
	}
	return 0;
}

static void writer_free(shard_writer *w)
{
	if (!w)
		return;
	stop_pool(w);
	for (int k = 0; k < N_GROUPS; k++) {
		group *g = &w->g[k];
		for (size_t i = 0; g->comp && i < w->frames; i++)
			free(g->comp[i]);
		free(g->comp);
		free(g->comp_len);
		free(g->raw);
	}
	for (int t = 0; w->cctx && t < w->cfg.threads; t++)
		ZSTD_freeCCtx(w->cctx[t]);
	free(w->cctx);
	free(w->th);
	free(w->index);
	free(w);
}

static int alloc_groups(shard_writer *w)
{
	size_t frame_bytes = (size_t)w->cfg.frame_tokens * (size_t)w->dtype;
	int n = w->cfg.threads > 1 ? N_GROUPS : 1;
	for (int k = 0; k < n; k++) {
		group *g = &w->g[k];
		g->raw = malloc(w->frames * frame_bytes);
		g->comp = calloc(w->frames, sizeof *g->comp);
		g->comp_len = calloc(w->frames, sizeof *g->comp_len);
		if (!g->raw || !g->comp || !g->comp_len)
			return -1;
		for (size_t i = 0; i < w->frames; i++)
			if (!(g->comp[i] = malloc(w->comp_cap)))
				return -1;
	}
	return 0;
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
	if (cfg->frame_tokens > SHARD_MAX_FRAME_TOKENS)
		return lm_seterr(e, "%s: frame of %u tokens exceeds the maximum %d",
				 path, cfg->frame_tokens, SHARD_MAX_FRAME_TOKENS);
	shard_writer *w = calloc(1, sizeof *w);
	if (!w)
		return lm_seterr(e, "%s: out of memory", path);
	w->af.slot = -1;
	w->cfg = *cfg;
	if (!w->cfg.frame_tokens)
		w->cfg.frame_tokens = SHARD_DEFAULT_FRAME_TOKENS;
	if (w->cfg.threads < 1)
		w->cfg.threads = 1;
	w->dtype = cfg->vocab_size <= SHARD_U16_VOCAB_MAX ? 2 : 4;
	w->frames = (size_t)w->cfg.threads * FRAMES_PER_THREAD;
	w->comp_cap = ZSTD_compressBound((size_t)w->cfg.frame_tokens * (size_t)w->dtype);
	w->cctx = calloc((size_t)w->cfg.threads, sizeof *w->cctx);
	int bad = !w->cctx || alloc_groups(w);
	for (int t = 0; !bad && t < w->cfg.threads; t++) {
		bad = !(w->cctx[t] = ZSTD_createCCtx());
		if (!bad && ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx[t],
				ZSTD_c_compressionLevel, w->cfg.level))) {
			writer_free(w);
			return lm_seterr(e, "%s: bad zstd level %d", path, cfg->level);
		}
	}
	if (!bad && w->cfg.threads > 1)
		bad = start_pool(w);
	if (bad) {
		writer_free(w);
		return lm_seterr(e, "%s: out of memory or threads", path);
	}
	if (atomic_open(&w->af, path, e)) {
		writer_free(w);
		return -1;
	}
	uint8_t placeholder[SHARD_HEADER_TOK_LEN] = { 0 };
	size_t hlen = cfg->has_tok ? SHARD_HEADER_TOK_LEN : SHARD_HEADER_LEN;
	if (fwrite(placeholder, 1, hlen, w->af.fp) != hlen) {
		lm_seterr(e, "%s: write error:", path);
		shard_writer_abort(w);
		return -1;
	}
	w->offset = hlen;
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

/* Write the compressed frames of g in order and index them. */
static int write_group(shard_writer *w, group *g, lm_err *e)
{
	for (size_t i = 0; i < g->nf; i++) {
		size_t n = g->comp_len[i];
		if (n == 0)
			return lm_seterr(e, "%s: zstd compression failed", w->af.path);
		if (fwrite(g->comp[i], 1, n, w->af.fp) != n)
			return lm_seterr(e, "%s: write error:", w->af.path);
		if (add_index(w, w->offset, (uint32_t)n, crc32c(0, g->comp[i], n), e))
			return -1;
		w->offset += n;
	}
	g->tokens = 0;
	g->nf = 0;
	return 0;
}

/* Wait for the group the workers compress, then write it. */
static int finish_job(shard_writer *w, lm_err *e)
{
	pthread_mutex_lock(&w->mu);
	group *g = w->job;
	while (g && w->done < g->nf)
		pthread_cond_wait(&w->done_cv, &w->mu);
	w->job = NULL;
	pthread_mutex_unlock(&w->mu);
	return g ? write_group(w, g, e) : 0;
}

/* The current group is full (or final): compress it, in the background when
 * there are workers. */
static int flush_group(shard_writer *w, lm_err *e)
{
	group *g = &w->g[w->cur];
	const size_t F = w->cfg.frame_tokens;
	g->nf = (g->tokens + F - 1) / F;
	if (w->n_th == 0) {
		for (size_t i = 0; i < g->nf; i++)
			compress_frame(w, w->cctx[0], g, i);
		return write_group(w, g, e);
	}
	if (finish_job(w, e))
		return -1;
	if (g->nf == 0)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->job = g;
	w->next = w->done = 0;
	pthread_cond_broadcast(&w->work_cv);
	pthread_mutex_unlock(&w->mu);
	w->cur = (w->cur + 1) % N_GROUPS;
	return 0;
}

int shard_writer_put(shard_writer *w, const uint32_t *ids, size_t n, lm_err *e)
{
	const size_t cap = w->frames * w->cfg.frame_tokens;
	const uint32_t vocab = w->cfg.vocab_size, eot = w->cfg.eot;
	while (n > 0) {
		group *g = &w->g[w->cur];
		size_t k = cap - g->tokens < n ? cap - g->tokens : n;
		uint8_t *dst = g->raw + g->tokens * (size_t)w->dtype;
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
		g->tokens += k;
		w->n_tokens += k;
		ids += k;
		n -= k;
		if (g->tokens == cap && flush_group(w, e))
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
	if (flush_group(w, e) || (w->n_th && finish_job(w, e)))
		goto fail;
	size_t index_bytes = w->n_frames * SHARD_INDEX_ENTRY;
	if (index_bytes && fwrite(w->index, 1, index_bytes, w->af.fp) != index_bytes) {
		lm_seterr(e, "%s: write error:", w->af.path);
		goto fail;
	}
	uint8_t h[SHARD_HEADER_TOK_LEN] = { 0 };
	size_t hlen = w->cfg.has_tok ? SHARD_HEADER_TOK_LEN : SHARD_HEADER_LEN;
	memcpy(h, SHARD_MAGIC, 4);
	le_put16(h + 4, w->cfg.has_tok ? SHARD_VERSION_TOK : SHARD_VERSION);
	le_put16(h + 6, (uint16_t)hlen);
	h[8] = (uint8_t)w->dtype;
	le_put32(h + 12, w->cfg.vocab_size);
	le_put32(h + 16, w->cfg.eot);
	le_put32(h + 20, w->cfg.frame_tokens);
	le_put64(h + 24, w->n_tokens);
	le_put64(h + 32, w->n_docs);
	le_put64(h + 40, w->n_frames);
	le_put64(h + 48, w->offset);
	le_put32(h + 56, crc32c(0, w->index, index_bytes));
	if (w->cfg.has_tok)
		le_put32(h + 60, w->cfg.tok_crc);
	le_put32(h + hlen - 4, crc32c(0, h, hlen - 4));
	if (fseek(w->af.fp, 0, SEEK_SET) || fwrite(h, 1, hlen, w->af.fp) != hlen) {
		lm_seterr(e, "%s: write error:", w->af.path);
		goto fail;
	}
	stop_pool(w);
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
	stop_pool(w);
	atomic_abort(&w->af);
	writer_free(w);
}
