/* shard_reader.c: random and sequential windows over a set of shards, with
 * a frame cache and a prefetching thread (see shard_reader.h). */
#define _POSIX_C_SOURCE 200809L
#include "data/shard_reader.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "base/checked.h"
#include "base/rng.h"
#include "data/shard.h"
#include "data/shard_set.h"

enum {
	DEFAULT_CACHE_FRAMES = 64,
	NAME_EXTRA = 32,        /* room for "-000000.lms" after a prefix */
};
/* the default cache's bound per thread, for shards of very large frames */
static const size_t CACHE_BYTES_MAX = (size_t)256 << 20;

typedef struct cache_entry {
	size_t file;
	uint64_t frame;
	uint64_t last_use;      /* 0: empty */
	uint8_t *raw;
} cache_entry;

/* What one filling thread owns: its frame cache and decompression state. */
typedef struct sr_worker {
	cache_entry *cache;
	size_t n_cache;
	uint64_t clock;
	ZSTD_DCtx *dctx;
	uint8_t *comp;
	lm_err err;
} sr_worker;

struct shard_reader {
	sr_config cfg;
	shard_file *files;
	size_t n_files;
	uint64_t *start_prefix;  /* n_files + 1: cumulative random start positions */
	uint64_t *win_prefix;    /* n_files + 1: cumulative sequential windows */
	uint64_t total_tokens;
	uint64_t total_frames;
	size_t max_frame_size;
	size_t frame_bytes;      /* the largest decompressed frame of the set */
	int dtype;
	int has_tok;             /* some shard names the tokenizer: tok_crc */
	uint32_t tok_crc;
	const char *tok_path;    /* the first such shard */

	/* Used only by whoever fills batches (the prefetch thread, if on). */
	sr_worker *workers;
	int n_workers;

	uint64_t pos;            /* windows handed out */

	/* Prefetch: the thread fills buf with the batch at want_pos. */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int thread_on, stop;
	int requested, ready;    /* a fill was asked for / is done */
	uint64_t want_pos;
	uint32_t *buf;
	int buf_count, buf_rc;
	lm_err buf_err;
};

static size_t window_len(const shard_reader *r)
{
	return (size_t)r->cfg.context + 1;
}

/* The decompressed ids of frame k of file i, through the cache. */
static const uint8_t *get_frame(const shard_reader *r, sr_worker *w, size_t i, uint64_t k,
				lm_err *e)
{
	cache_entry *victim = &w->cache[0];
	w->clock++;
	for (size_t c = 0; c < w->n_cache; c++) {
		cache_entry *ce = &w->cache[c];
		if (ce->last_use && ce->file == i && ce->frame == k) {
			ce->last_use = w->clock;
			return ce->raw;
		}
		if (ce->last_use < victim->last_use)
			victim = ce;
	}
	victim->last_use = 0;
	if (!victim->raw && !(victim->raw = malloc(r->frame_bytes ? r->frame_bytes : 1))) {
		lm_seterr(e, "%s: out of memory for a frame of %zu bytes", r->files[i].path,
			  r->frame_bytes);
		return NULL;
	}
	if (shard_read_frame(&r->files[i], k, w->dctx, w->comp, victim->raw, e))
		return NULL;
	victim->file = i;
	victim->frame = k;
	victim->last_use = w->clock;
	return victim->raw;
}

/* Copy n ids of file i from token start on into out. */
static int read_tokens(const shard_reader *r, sr_worker *w, size_t i, uint64_t start,
		       size_t n, uint32_t *out, lm_err *e)
{
	const shard_file *f = &r->files[i];
	const uint64_t F = f->m.frame_tokens;
	while (n > 0) {
		uint64_t k = start / F, off = start % F;
		const uint8_t *raw = get_frame(r, w, i, k, e);
		if (!raw)
			return -1;
		size_t take = (size_t)(F - off) < n ? (size_t)(F - off) : n;
		shard_ids_from_raw(raw + off * (uint64_t)f->m.dtype, f->m.dtype, take, out);
		out += take;
		n -= take;
		start += take;
	}
	return 0;
}

/* The shard holding global index x of a cumulative table (prefix[i] <= x <
 * prefix[i + 1]). */
static size_t find_shard(const uint64_t *prefix, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (prefix[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Window k: its shard and first token. */
static void locate(const shard_reader *r, uint64_t k, size_t *i, uint64_t *start)
{
	if (r->cfg.mode == SR_RANDOM) {
		/* this rank's window k -> the global window of the same draw */
		uint64_t B = (uint64_t)r->cfg.batch, world = (uint64_t)r->cfg.world;
		uint64_t g = (k / B * world + (uint64_t)r->cfg.rank) * B + k % B;
		uint64_t u = lm_draw_below(r->cfg.seed, g, r->start_prefix[r->n_files]);
		*i = find_shard(r->start_prefix, r->n_files, u);
		*start = u - r->start_prefix[*i];
	} else {
		*i = find_shard(r->win_prefix, r->n_files, k);
		*start = (k - r->win_prefix[*i]) * (uint64_t)r->cfg.stride;
	}
}

/* Fill the batch of windows pos .. pos + B - 1 into out; returns the
 * count (fewer at the end of sequential windows) or -1. */
static int fill(shard_reader *r, uint64_t pos, uint32_t *out, lm_err *e)
{
	const size_t W = window_len(r);
	int count = r->cfg.batch;
	if (r->cfg.mode == SR_SEQUENTIAL) {
		uint64_t total = r->win_prefix[r->n_files];
		uint64_t left = pos < total ? total - pos : 0;
		count = left < (uint64_t)count ? (int)left : count;
	}
	int failed = 0;
	for (int t = 0; t < r->n_workers; t++)
		r->workers[t].err.msg[0] = '\0';
	/* Each thread uses its own worker; the windows do not depend on which. */
#pragma omp parallel for num_threads(r->n_workers) schedule(static, 1) if (r->n_workers > 1)
	for (int b = 0; b < count; b++) {
		sr_worker *w = &r->workers[omp_get_thread_num()];
		size_t i;
		uint64_t start;
		int stop;
#pragma omp atomic read
		stop = failed;
		if (stop)
			continue;
		locate(r, pos + (uint64_t)b, &i, &start);
		if (read_tokens(r, w, i, start, W, out + (size_t)b * W, &w->err)) {
#pragma omp atomic write
			failed = 1;
		}
	}
	if (failed) {
		for (int t = 0; t < r->n_workers; t++)
			if (r->workers[t].err.msg[0]) {
				if (e)
					*e = r->workers[t].err;
				break;
			}
		return -1;
	}
	return count;
}

static void *prefetch_main(void *arg)
{
	shard_reader *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->requested && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->stop)
			break;
		uint64_t pos = r->want_pos;
		pthread_mutex_unlock(&r->mu);
		lm_err e = { .msg = "" };
		int rc = fill(r, pos, r->buf, &e);
		pthread_mutex_lock(&r->mu);
		r->buf_count = rc;
		r->buf_rc = rc < 0 ? -1 : 0;
		r->buf_err = e;
		r->requested = 0;
		r->ready = 1;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Ask the thread for the batch at pos (it must be idle). */
static void request(shard_reader *r, uint64_t pos)
{
	pthread_mutex_lock(&r->mu);
	r->want_pos = pos;
	r->ready = 0;
	r->requested = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void wait_ready(shard_reader *r)
{
	pthread_mutex_lock(&r->mu);
	while (!r->ready)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

int sr_next(shard_reader *r, uint32_t *out, lm_err *e)
{
	int count;
	if (!r->thread_on) {
		count = fill(r, r->pos, out, e);
	} else {
		wait_ready(r);
		count = r->buf_count;
		if (r->buf_rc) {
			if (e)
				*e = r->buf_err;
			request(r, r->pos); /* a later call retries, and fails again */
			return -1;
		}
		memcpy(out, r->buf, (size_t)count * window_len(r) * sizeof *out);
	}
	if (count < 0)
		return -1;
	r->pos += (uint64_t)count;
	if (r->thread_on)
		request(r, r->pos);
	return count;
}

uint64_t sr_tell(const shard_reader *r)
{
	return r->pos;
}

int sr_seek(shard_reader *r, uint64_t windows, lm_err *e)
{
	if (r->thread_on) {
		wait_ready(r);
		request(r, windows);
	}
	r->pos = windows;
	return 0;
}

/* ---- opening ---- */

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int add_file(shard_reader *r, const char *path, size_t *cap, lm_err *e)
{
	if (r->n_files == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		shard_file *p = realloc(r->files, c * sizeof *p);
		if (!p)
			return lm_seterr(e, "out of memory");
		r->files = p;
		*cap = c;
	}
	if (shard_file_open(&r->files[r->n_files], path, e))
		return -1;
	r->n_files++;
	return 0;
}

/* The shards of part of the manifest of prefix, each checked against its
 * entry (a shard replaced since the manifest was written is refused). */
static int add_manifest(shard_reader *r, const char *prefix, const shard_set *s, int part,
			const char *what, size_t *cap, lm_err *e)
{
	if (s->n[part] == 0)
		return lm_seterr(e, "%s%s: the set has no %s shards", prefix, SHARD_SET_EXT, what);
	for (size_t i = 0; i < s->n[part]; i++) {
		const shard_set_entry *x = &s->e[part][i];
		char *path = shard_set_shard_path(prefix, x->name);
		if (!path)
			return lm_seterr(e, "out of memory");
		int rc = add_file(r, path, cap, e);
		free(path);
		if (rc)
			return lm_err_prefix(e, "%s%s", prefix, SHARD_SET_EXT);
		const shard_file *f = &r->files[r->n_files - 1];
		if (f->header_crc != x->crc || f->m.n_tokens != x->tokens || f->m.n_docs != x->docs)
			return lm_seterr(e, "%s: differs from its entry in %s%s (%llu tokens, checksum "
					 "%08x): the set changed after it was written; redo it with "
					 "shard-pack -f -o %s", f->path, prefix, SHARD_SET_EXT,
					 (unsigned long long)x->tokens, x->crc, prefix);
	}
	return 0;
}

/* A path that is a file, or a PREFIX: the shards its manifest names
 * (PREFIX-val: the validation part of PREFIX's manifest; PREFIX.manifest,
 * the manifest itself: PREFIX). */
static int add_path(shard_reader *r, const char *path, size_t *cap, lm_err *e)
{
	size_t plen = strlen(path), ext = sizeof SHARD_SET_EXT - 1;
	if (plen > ext && !strcmp(path + plen - ext, SHARD_SET_EXT) && is_file(path)) {
		char *prefix = strndup(path, plen - ext);
		if (!prefix)
			return lm_seterr(e, "out of memory");
		int rc = add_path(r, prefix, cap, e);
		free(prefix);
		return rc;
	}
	if (is_file(path))
		return add_file(r, path, cap, e);
	shard_set s;
	int part = SHARD_SET_TRAIN;
	char *base = strdup(path);
	if (!base)
		return lm_seterr(e, "out of memory");
	int got = shard_set_read(base, &s, e);
	size_t n = strlen(base), nv = sizeof SHARD_SET_VAL - 1;
	if (got == 1 && n > nv && !strcmp(base + n - nv, SHARD_SET_VAL)) {
		base[n - nv] = '\0';
		part = SHARD_SET_VALID;
		got = shard_set_read(base, &s, e);
	}
	int rc = got < 0 ? -1 : 0;
	if (got == 0) {
		rc = add_manifest(r, base, &s, part, part == SHARD_SET_VALID ? "validation" : "training",
				  cap, e);
		shard_set_free(&s);
	} else if (got == 1) {
		size_t len = strlen(path) + NAME_EXTRA;
		char *name = malloc(len);
		if (!name)
			rc = lm_seterr(e, "out of memory");
		else {
			snprintf(name, len, "%s-%06u%s", path, 0u, SHARD_EXT);
			rc = is_file(name)
			     ? lm_seterr(e, "%s: no manifest %s%s: the set is incomplete (shard-pack was "
					 "interrupted) or older than manifests; redo it with shard-pack "
					 "-f -o %s, or, if its run finished, seal it with shard-pack "
					 "--seal %s", path, base, SHARD_SET_EXT, base, base)
			     : lm_seterr(e, "%s: no such shard, and no %s%s", path, path, SHARD_SET_EXT);
			free(name);
		}
	}
	free(base);
	return rc;
}

static int check_set(shard_reader *r, lm_err *e)
{
	const shard_meta *m0 = &r->files[0].m;
	const uint64_t T = (uint64_t)r->cfg.context, S = (uint64_t)r->cfg.stride;
	r->start_prefix = calloc(r->n_files + 1, sizeof *r->start_prefix);
	r->win_prefix = calloc(r->n_files + 1, sizeof *r->win_prefix);
	if (!r->start_prefix || !r->win_prefix)
		return lm_seterr(e, "out of memory");
	r->dtype = m0->dtype;
	for (size_t i = 0; i < r->n_files; i++) {
		const shard_file *f = &r->files[i];
		const shard_meta *m = &f->m;
		if (m->vocab_size != m0->vocab_size || m->eot != m0->eot)
			return lm_seterr(e, "%s: vocabulary size %u and end-of-text id %u differ "
					 "from %s's %u and %u", f->path, m->vocab_size, m->eot,
					 r->files[0].path, m0->vocab_size, m0->eot);
		if (m->has_tok) {
			if (r->has_tok && m->tok_crc != r->tok_crc)
				return lm_seterr(e, "%s: made by another tokenizer (identity %08x) than %s "
						 "(identity %08x)", f->path, m->tok_crc, r->tok_path,
						 r->tok_crc);
			if (!r->has_tok)
				r->tok_path = f->path;
			r->has_tok = 1;
			r->tok_crc = m->tok_crc;
		}
		uint64_t n = m->n_tokens;
		if (ck_add_u64(r->start_prefix[i], n > T ? n - T : 0, &r->start_prefix[i + 1]) ||
		    ck_add_u64(r->win_prefix[i], n > T ? (n - 1 - T) / S + 1 : 0, &r->win_prefix[i + 1]) ||
		    ck_add_u64(r->total_tokens, n, &r->total_tokens))
			return lm_seterr(e, "%s: %llu tokens: the set's token count overflows",
					 f->path, (unsigned long long)n);
		if (shard_frame_bytes(f) > r->frame_bytes)
			r->frame_bytes = shard_frame_bytes(f);
		r->total_frames += m->n_frames;
		if (f->max_frame_size > r->max_frame_size)
			r->max_frame_size = f->max_frame_size;
	}
	if (r->start_prefix[r->n_files] == 0)
		return lm_seterr(e, "%s: no shard holds a window of %llu tokens", r->files[0].path,
				 (unsigned long long)(T + 1));
	return 0;
}

static int alloc_buffers(shard_reader *r, lm_err *e)
{
	r->n_workers = r->cfg.threads > 1 ? r->cfg.threads : 1;
	r->workers = calloc((size_t)r->n_workers, sizeof *r->workers);
	if (!r->workers)
		return lm_seterr(e, "out of memory");
	/* Entries are allocated when first filled, so a frame size claimed by a
	 * header costs memory only once such a frame has been read; a cache never
	 * holds more entries than the set has frames, nor (by default) more than
	 * CACHE_BYTES_MAX. */
	size_t n_cache = r->cfg.cache_frames;
	if (!n_cache) {
		n_cache = DEFAULT_CACHE_FRAMES;
		if (r->frame_bytes && CACHE_BYTES_MAX / r->frame_bytes < n_cache)
			n_cache = CACHE_BYTES_MAX / r->frame_bytes;
	}
	if (n_cache > r->total_frames)
		n_cache = (size_t)r->total_frames;
	if (n_cache == 0)
		n_cache = 1;
	for (int t = 0; t < r->n_workers; t++) {
		sr_worker *w = &r->workers[t];
		w->n_cache = n_cache;
		w->cache = calloc(w->n_cache, sizeof *w->cache);
		w->dctx = ZSTD_createDCtx();
		w->comp = malloc(r->max_frame_size ? r->max_frame_size : 1);
		if (!w->cache || !w->dctx || !w->comp)
			return lm_seterr(e, "out of memory");
	}
	return 0;
}

static int start_thread(shard_reader *r, lm_err *e)
{
	size_t n = (size_t)r->cfg.batch * window_len(r);
	r->buf = malloc(n * sizeof *r->buf);
	if (!r->buf)
		return lm_seterr(e, "out of memory for a batch of %zu tokens", n);
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->ready = 1; /* idle: nothing asked yet */
	if (pthread_create(&r->thread, NULL, prefetch_main, r)) {
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		return lm_seterr(e, "cannot start the prefetch thread");
	}
	r->thread_on = 1;
	request(r, r->pos);
	return 0;
}

int sr_open(shard_reader **out, const char *const *paths, size_t n,
	    const sr_config *cfg, lm_err *e)
{
	*out = NULL;
	if (cfg->batch < 1 || cfg->context < 1)
		return lm_usage_err(e, "shard reader: batch %d and context %d must be >= 1",
				    cfg->batch, cfg->context);
	if (cfg->stride < 0 || cfg->stride > cfg->context)
		return lm_usage_err(e, "an evaluation stride of %d tokens: it must be 1 to the "
				    "context, %d", cfg->stride, cfg->context);
	if (n == 0)
		return lm_usage_err(e, "shard reader: no shards given");
	if (cfg->world < 0 || cfg->rank < 0 || (cfg->world > 0 && cfg->rank >= cfg->world) ||
	    (cfg->world == 0 && cfg->rank > 0))
		return lm_usage_err(e, "shard reader: rank %d of world %d", cfg->rank, cfg->world);
	shard_reader *r = calloc(1, sizeof *r);
	if (!r)
		return lm_seterr(e, "out of memory");
	r->cfg = *cfg;
	if (r->cfg.world == 0)
		r->cfg.world = 1;
	if (r->cfg.stride == 0)
		r->cfg.stride = r->cfg.context;
	size_t cap = 0;
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = add_path(r, paths[i], &cap, e);
	if (!rc)
		rc = check_set(r, e);
	if (!rc)
		rc = alloc_buffers(r, e);
	if (!rc && cfg->prefetch)
		rc = start_thread(r, e);
	if (rc) {
		sr_close(r);
		return -1;
	}
	*out = r;
	return 0;
}

void sr_close(shard_reader *r)
{
	if (!r)
		return;
	if (r->thread_on) {
		pthread_mutex_lock(&r->mu);
		r->stop = 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thread, NULL);
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
	}
	for (int t = 0; r->workers && t < r->n_workers; t++) {
		sr_worker *w = &r->workers[t];
		for (size_t c = 0; w->cache && c < w->n_cache; c++)
			free(w->cache[c].raw);
		free(w->cache);
		ZSTD_freeDCtx(w->dctx);
		free(w->comp);
	}
	free(r->workers);
	for (size_t i = 0; i < r->n_files; i++)
		shard_file_close(&r->files[i]);
	free(r->buf);
	free(r->files);
	free(r->start_prefix);
	free(r->win_prefix);
	free(r);
}

uint32_t sr_vocab_size(const shard_reader *r)
{
	return r->files[0].m.vocab_size;
}

uint32_t sr_eot(const shard_reader *r)
{
	return r->files[0].m.eot;
}

int sr_tokenizer(const shard_reader *r, uint32_t *crc)
{
	*crc = r->tok_crc;
	return r->has_tok;
}

uint64_t sr_tokens(const shard_reader *r)
{
	return r->total_tokens;
}

uint64_t sr_starts(const shard_reader *r)
{
	return r->start_prefix[r->n_files];
}

uint64_t sr_windows(const shard_reader *r)
{
	return r->win_prefix[r->n_files];
}

int sr_window_first(const shard_reader *r, uint64_t k)
{
	if (k >= r->win_prefix[r->n_files])
		return 0;
	return r->win_prefix[find_shard(r->win_prefix, r->n_files, k)] == k;
}

size_t sr_shards(const shard_reader *r)
{
	return r->n_files;
}

const char *sr_shard_path(const shard_reader *r, size_t i)
{
	return r->files[i].path;
}

uint64_t sr_shard_tokens(const shard_reader *r, size_t i)
{
	return r->files[i].m.n_tokens;
}

uint64_t sr_window_offset(const shard_reader *r, uint64_t k)
{
	size_t i;
	uint64_t start, before = 0;
	locate(r, k, &i, &start);
	for (size_t j = 0; j < i; j++)
		before += r->files[j].m.n_tokens;
	return before + start;
}

size_t sr_cache_bytes(const shard_reader *r)
{
	size_t n = 0;
	for (int t = 0; t < r->n_workers; t++)
		for (size_t c = 0; c < r->workers[t].n_cache; c++)
			n += r->workers[t].cache[c].raw ? r->frame_bytes : 0;
	return n;
}
