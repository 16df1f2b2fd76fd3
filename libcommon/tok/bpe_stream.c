/* bpe_stream.c: batches of chunks cut at safe points, encoded by a pool of
 * worker threads, written in order (see bpe_stream.h).
 *
 * Two batches are in flight: while the workers encode one, the calling
 * thread writes out the one before it and reads the next, so reading and
 * writing overlap the encoding. */
#include "tok/bpe_stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "tok/bpe_pre.h"

typedef struct batch {
	uint8_t *buf;
	size_t cap, len;
	size_t used;             /* bytes cut into chunks; the rest carries over */
	size_t *cut;             /* chunk i is buf[cut[i] .. cut[i + 1]) */
	size_t n_chunks, next;   /* chunks cut, next one to hand out */
	size_t remaining;        /* chunks not yet encoded */
	bpe_ids *out;
	lm_err *errs;
	char *failed;
	int pending;             /* handed to the workers, not yet written */
	unsigned long long seq;  /* order handed out */
} batch;

struct bpe_stream {
	const bpe_encoder *enc;
	bpe_stream_opts o;
	size_t max_chunks;
	batch b[2];
	batch *queue[2];         /* batches with chunks to hand out, oldest first */
	int n_queued;
	unsigned long long seq;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	int quit;
	pthread_t *tid;
	int n_started;
	bpe_worker **w;
	unsigned long long bytes;
};

typedef struct worker_arg {
	bpe_stream *st;
	int index;
} worker_arg;

static int encode_chunk(bpe_stream *st, bpe_worker *w, batch *b, size_t i)
{
	const uint8_t *s = b->buf + b->cut[i];
	size_t n = b->cut[i + 1] - b->cut[i];
	bpe_ids *out = &b->out[i];
	lm_err *e = &b->errs[i];
	out->n = 0;
	if (!st->o.doc_per_line)
		return bpe_encode(w, s, n, out, e);
	for (size_t p = 0; p < n;) {
		const uint8_t *nl = memchr(s + p, '\n', n - p);
		size_t len = nl ? (size_t)(nl - (s + p)) : n - p;
		if (bpe_encode(w, s + p, len, out, e) || bpe_ids_reserve(out, 1, e))
			return -1;
		out->v[out->n++] = st->o.eot;
		p += len + 1;
	}
	return 0;
}

static void *worker_main(void *p)
{
	worker_arg *a = p;
	bpe_stream *st = a->st;
	bpe_worker *w = st->w[a->index];
	free(a);
	pthread_mutex_lock(&st->mu);
	for (;;) {
		while (!st->quit && st->n_queued == 0)
			pthread_cond_wait(&st->work, &st->mu);
		if (st->quit)
			break;
		batch *b = st->queue[0];
		size_t i = b->next++;
		if (b->next == b->n_chunks) {
			st->queue[0] = st->queue[1];
			st->n_queued--;
		}
		pthread_mutex_unlock(&st->mu);
		char failed = encode_chunk(st, w, b, i) != 0;
		pthread_mutex_lock(&st->mu);
		b->failed[i] = failed;
		if (--b->remaining == 0)
			pthread_cond_broadcast(&st->done);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

static int batch_init(batch *b, size_t max_chunks, size_t cap)
{
	b->cap = cap;
	b->buf = malloc(cap);
	b->cut = calloc(max_chunks + 1, sizeof *b->cut);
	b->out = calloc(max_chunks, sizeof *b->out);
	b->errs = calloc(max_chunks, sizeof *b->errs);
	b->failed = calloc(max_chunks, 1);
	return b->buf && b->cut && b->out && b->errs && b->failed ? 0 : -1;
}

static void batch_free(batch *b, size_t max_chunks)
{
	for (size_t i = 0; b->out && i < max_chunks; i++)
		bpe_ids_free(&b->out[i]);
	free(b->buf);
	free(b->cut);
	free(b->out);
	free(b->errs);
	free(b->failed);
}

bpe_stream *bpe_stream_new(const bpe_encoder *enc, const bpe_stream_opts *o, lm_err *e)
{
	bpe_stream *st = calloc(1, sizeof *st);
	if (!st) {
		lm_seterr(e, "out of memory");
		return NULL;
	}
	st->enc = enc;
	st->o = *o;
	if (st->o.threads < 1 || st->o.pre)
		st->o.threads = 1;   /* pre-tokens are numbered in order, by one worker */
	if (st->o.pre && st->o.doc_per_line) {
		free(st);
		lm_usage_err(e, "pre-tokens of one document per line are not supported");
		return NULL;
	}
	if (!st->o.chunk)
		st->o.chunk = BPE_DEFAULT_CHUNK;
	st->max_chunks = (size_t)st->o.threads * BPE_CHUNKS_PER_THREAD;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->work, NULL);
	pthread_cond_init(&st->done, NULL);
	st->w = calloc((size_t)st->o.threads, sizeof *st->w);
	st->tid = calloc((size_t)st->o.threads, sizeof *st->tid);
	if (!st->w || !st->tid || batch_init(&st->b[0], st->max_chunks, st->max_chunks * st->o.chunk) ||
	    batch_init(&st->b[1], st->max_chunks, st->max_chunks * st->o.chunk)) {
		bpe_stream_free(st);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	for (int i = 0; i < st->o.threads; i++) {
		worker_arg *a = malloc(sizeof *a);
		if (!(st->w[i] = bpe_worker_new(enc, e)) || !a) {
			free(a);
			bpe_stream_free(st);
			return NULL;
		}
		if (st->o.pre)
			bpe_worker_set_pre(st->w[i], st->o.pre);
		*a = (worker_arg){ st, i };
		if (pthread_create(&st->tid[i], NULL, worker_main, a)) {
			free(a);
			bpe_stream_free(st);
			lm_seterr(e, "cannot start a thread:");
			return NULL;
		}
		st->n_started++;
	}
	return st;
}

void bpe_stream_free(bpe_stream *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->mu);
	st->quit = 1;
	pthread_cond_broadcast(&st->work);
	pthread_mutex_unlock(&st->mu);
	for (int i = 0; i < st->n_started; i++)
		pthread_join(st->tid[i], NULL);
	for (int i = 0; st->w && i < st->o.threads; i++)
		bpe_worker_free(st->w[i]);
	batch_free(&st->b[0], st->max_chunks);
	batch_free(&st->b[1], st->max_chunks);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->work);
	pthread_cond_destroy(&st->done);
	free(st->w);
	free(st->tid);
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

/* Cut b->buf[0..len) into chunks; b->used is where the rest begins (it
 * waits for more input unless at_eof). */
static void cut_chunks(const bpe_stream *st, batch *b, int at_eof)
{
	size_t pos = 0, k = 0, chunk = st->o.chunk;
	b->cut[0] = 0;
	while (pos < b->len && k < st->max_chunks) {
		size_t left = b->len - pos, end = 0;
		if (at_eof && left <= chunk) {
			end = b->len;
		} else {
			size_t target = pos + (chunk < left ? chunk : left - 1);
			for (size_t p = target; p >= pos + 2 && !end; p--)
				if (safe_cut(st, b->buf, b->len, p))
					end = p;
			for (size_t p = target + 1; p + 1 < b->len && !end; p++)
				if (safe_cut(st, b->buf, b->len, p))
					end = p;
			if (!end) {
				if (!at_eof)
					break;
				end = b->len;
			}
		}
		b->cut[++k] = end;
		pos = end;
	}
	b->n_chunks = k;
	b->used = pos;
}

/* Wait until the workers are done with b; write its ids unless skip (after
 * an error, when only the wait matters). */
static int finish_batch(bpe_stream *st, batch *b, int skip, const char *name, bpe_sink_fn sink, void *ctx,
			lm_err *e)
{
	if (!b->pending)
		return 0;
	pthread_mutex_lock(&st->mu);
	while (b->remaining)
		pthread_cond_wait(&st->done, &st->mu);
	pthread_mutex_unlock(&st->mu);
	b->pending = 0;
	for (size_t i = 0; i < b->n_chunks && !skip; i++) {
		if (b->failed[i]) {
			*e = b->errs[i];
			return lm_err_prefix(e, "%s", name);
		}
		if (sink(ctx, b->out[i].v, b->out[i].n, e))
			return -1;
	}
	return 0;
}

static void hand_out(bpe_stream *st, batch *b)
{
	pthread_mutex_lock(&st->mu);
	b->next = 0;
	b->remaining = b->n_chunks;
	b->pending = 1;
	b->seq = st->seq++;
	st->queue[st->n_queued++] = b;
	pthread_cond_broadcast(&st->work);
	pthread_mutex_unlock(&st->mu);
}

/* Fill b (holding carried-over bytes) from in, growing it while no chunk
 * can be cut, and cut it. */
static int fill_and_cut(bpe_stream *st, batch *b, FILE *in, const char *name, int *at_eof, lm_err *e)
{
	for (;;) {
		while (!*at_eof && b->len < b->cap) {
			size_t got;
			if (io_read_some(in, b->buf + b->len, b->cap - b->len, &got, name, e))
				return -1;
			b->len += got;
			st->bytes += got;
			*at_eof = got == 0;
		}
		cut_chunks(st, b, *at_eof);
		if (b->n_chunks > 0 || *at_eof)
			return 0;
		size_t cap = b->cap * 2;       /* no safe cut yet: a giant stretch */
		uint8_t *buf = realloc(b->buf, cap);
		if (!buf)
			return lm_seterr(e, "%s: out of memory (%zu bytes without a safe cut)", name, b->len);
		b->buf = buf;
		b->cap = cap;
	}
}

int bpe_stream_file(bpe_stream *st, FILE *in, const char *name, bpe_sink_fn sink, void *ctx, lm_err *e)
{
	int at_eof = 0, rc = 0;
	st->b[0].len = st->b[0].used = st->b[1].len = st->b[1].used = 0;
	for (int k = 0;; k ^= 1) {
		batch *cur = &st->b[k], *prev = &st->b[k ^ 1];
		if (finish_batch(st, cur, 0, name, sink, ctx, e)) {   /* the one before prev */
			rc = -1;
			break;
		}
		size_t carry = prev->len - prev->used;
		if (carry > cur->cap) {
			uint8_t *buf = realloc(cur->buf, carry);
			if (!buf) {
				rc = lm_seterr(e, "%s: out of memory", name);
				break;
			}
			cur->buf = buf;
			cur->cap = carry;
		}
		memcpy(cur->buf, prev->buf + prev->used, carry);
		cur->len = carry;
		prev->len = prev->used;
		if (fill_and_cut(st, cur, in, name, &at_eof, e)) {
			rc = -1;
			break;
		}
		if (cur->n_chunks == 0)
			break;
		hand_out(st, cur);
		if (at_eof && cur->used == cur->len)
			break;
	}
	for (int pass = 0; pass < 2; pass++) {          /* the older one first */
		batch *b = NULL;
		for (int i = 0; i < 2; i++)
			if (st->b[i].pending && (!b || st->b[i].seq < b->seq))
				b = &st->b[i];
		if (b && finish_batch(st, b, rc != 0, name, sink, ctx, e))
			rc = -1;
	}
	return rc;
}
