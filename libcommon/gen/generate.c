/* generate.c: the batched generation driver (see generate.h). */
#include "gen/generate.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";

typedef struct gen_req {
	gen_prompt p;
	uint32_t left; /* samples not yet handed to done() */
} gen_req;

struct gen_state {
	gen_req *req;
	lm_rng rng;
	uint32_t slot;
	size_t pos;           /* tokens in the slot's cache */
	size_t cap, text_cap, streamed;
	int inside;           /* within a <think> section */
	uint32_t think_used;  /* completion tokens produced inside one */
	int forced_once;
	size_t force_next;    /* next closing-text token while forcing */
	int forcing;
	int done;
	uint32_t next_tok;    /* chosen this step */
	double next_lp;
	int next_forced;
	int failed;
	lm_err err;
};

/* Everything one generate() call owns. */
typedef struct gen_run {
	const lm_decoder *d;
	const gen_config *c;
	const gen_io *io;
	const bpe_tokenizer *tok;
	gen_sample **fifo;    /* admitted samples, in input order */
	size_t head, tail, fifo_cap;
	gen_sample **slot;    /* the sample in each slot, or NULL */
	float **rows;         /* each slot's logits */
	float *logits;
	sample_work *work;    /* one per thread */
	int n_work;
	/* feed() arguments */
	uint32_t *f_slot, *f_n;
	const uint32_t **f_tok;
	float **f_rows;
	/* choose() arguments, when the decoder samples */
	uint32_t *c_slot, *c_tok; /* c_tok, c_lp: [rounds][n]; c_u: [rounds][n][draws] */
	int32_t *c_forced;
	float *c_u;
	double *c_lp;
	lm_rng *c_rng;        /* each stream after its first round's draws */
	int input_failed;     /* next() failed: finish what is in flight, then fail */
	lm_err input_err;
} gen_run;

int gen_config_check(const gen_config *c, const lm_decoder *d, lm_err *e)
{
	if (sample_params_check(&c->sp, e) < 0)
		return -1;
	if (c->n_samples < 1 || c->n_samples > d->n_slots)
		return lm_usage_err(e, "samples per prompt (%u) must be between 1 and the batch size (%u)",
				    c->n_samples, d->n_slots);
	if (c->max_tokens < 1)
		return lm_usage_err(e, "max tokens must be at least 1");
	for (size_t i = 0; i < c->n_stop; i++)
		if (!c->stop[i][0])
			return lm_usage_err(e, "empty stop string");
	if (c->think_budget && !c->n_think_close)
		return lm_usage_err(e, "a thinking budget needs a closing text of at least one token");
	return 0;
}

/* The last occurrence of needle in h[0 .. n), or -1. */
static long last_of(const uint8_t *h, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (size_t i = n; i >= m; i--)
		if (!memcmp(h + i - m, needle, m))
			return (long)(i - m);
	return -1;
}

int gen_think_state(const uint8_t *text, size_t len, int was)
{
	long open = last_of(text, len, THINK_OPEN);
	long close = last_of(text, len, THINK_CLOSE);
	if (open < 0 && close < 0)
		return was;
	return open > close;
}

enum { FIRST_CAP = 64 };

static void sample_free(gen_sample *s)
{
	free(s->ids);
	free(s->logprobs);
	free(s->forced);
	free(s->text);
	free(s->st);
	free(s);
}

/* Append the chosen token; decide whether the sample is finished. */
static int advance(gen_run *r, gen_sample *s, lm_err *e)
{
	struct gen_state *st = s->st;
	const gen_config *c = r->c;
	if (s->n == st->cap) {
		/* the three per-token arrays share one capacity */
		size_t cap = st->cap ? 2 * st->cap : FIRST_CAP;
		uint32_t *ids = realloc(s->ids, cap * sizeof *ids);
		if (ids)
			s->ids = ids;
		double *lp = ids ? realloc(s->logprobs, cap * sizeof *lp) : NULL;
		if (lp)
			s->logprobs = lp;
		uint8_t *fo = lp ? realloc(s->forced, cap) : NULL;
		if (!fo)
			return lm_seterr(e, "generation buffers:");
		s->forced = fo;
		st->cap = cap;
	}
	uint32_t t = st->next_tok;
	s->ids[s->n] = t;
	s->logprobs[s->n] = st->next_lp;
	s->forced[s->n] = (uint8_t)st->next_forced;
	s->n++;
	if (t == c->eot) {
		s->finish = "stop";
		return 0;
	}
	size_t old = s->len, blen = bpe_token_len(r->tok, t);
	if (lm_grow((void **)&s->text, &st->text_cap, s->len + blen + 1, 1, e) < 0)
		return -1;
	memcpy(s->text + s->len, bpe_token_bytes(r->tok, t), blen);
	s->len += blen;
	s->text[s->len] = '\0';
	for (size_t i = 0; i < c->n_stop; i++) {
		size_t m = strlen(c->stop[i]);
		size_t from = old >= m - 1 ? old - (m - 1) : 0;
		if (memmem(s->text + from, s->len - from, c->stop[i], m)) {
			s->finish = "stop";
			return 0;
		}
	}
	if (s->n >= c->max_tokens || st->pos >= r->d->n_ctx) {
		s->finish = "length";
		return 0;
	}
	if (!c->think_budget)
		return 0;
	/* A tag may straddle tokens: look back far enough to see it whole. */
	size_t back = sizeof THINK_CLOSE - 2;
	size_t from = old >= back ? old - back : 0;
	int was_inside = st->inside;
	st->inside = gen_think_state(s->text + from, s->len - from, st->inside);
	if (st->forcing && ++st->force_next == c->n_think_close)
		st->forcing = 0;
	/* Count the tokens after the opening tag while the section stays open. */
	if (was_inside && st->inside && !st->forced_once && ++st->think_used >= c->think_budget) {
		st->forced_once = 1;
		st->forcing = 1;
		st->force_next = 0;
	}
	return 0;
}

/* Rounds for the decoder to run ahead (generate.h's choose_ahead): its
 * most while some sample may still take half as many tokens, none with a
 * thinking budget (the host decides each token's forcing). */
static uint32_t ahead_rounds(const gen_run *r, gen_sample **act, size_t n)
{
	const lm_decoder *d = r->d;
	const gen_config *c = r->c;
	if (!d->choose_ahead || d->max_ahead < 2 || c->think_budget)
		return 1;
	size_t need = 0;
	for (size_t i = 0; i < n; i++)
		if (c->max_tokens - act[i]->n > need)
			need = c->max_tokens - act[i]->n;
	return 2 * need >= d->max_ahead ? d->max_ahead : 1;
}

/* The next token of every sample in flight, by the decoder where its
 * logits are, for *rounds rounds (1 unless it runs ahead): LM_DECODER_DRAWS
 * draws a round from each sample's stream unless it is forcing (sample_token
 * takes one).  The tokens stay in c_tok and c_lp for take_round. */
static int choose_on_decoder(gen_run *r, gen_sample **act, size_t n, uint32_t *rounds, lm_err *e)
{
	enum { D = LM_DECODER_DRAWS };
	const gen_config *c = r->c;
	const lm_decoder *d = r->d;
	uint32_t k = ahead_rounds(r, act, n);
	for (size_t i = 0; i < n; i++) {
		struct gen_state *st = act[i]->st;
		r->c_slot[i] = st->slot;
		r->c_forced[i] = st->forcing ? (int32_t)c->think_close[st->force_next] : -1;
		for (int x = 0; x < D; x++)
			r->c_u[i * D + x] = st->forcing ? 0.0f : (float)rng_uniform(&st->rng);
		if (k > 1)
			r->c_rng[i] = st->rng;
		for (uint32_t j = 1; j < k; j++)
			for (int x = 0; x < D; x++)
				r->c_u[(j * n + i) * D + x] = (float)rng_uniform(&st->rng);
	}
	int got = k > 1 ? d->choose_ahead(d->ctx, (uint32_t)n, k, r->c_slot, &c->sp, r->c_u,
					  r->c_forced, r->c_tok, r->c_lp, e)
			: d->choose(d->ctx, (uint32_t)n, r->c_slot, &c->sp, r->c_u, r->c_forced,
				    r->c_tok, r->c_lp, e) < 0 ? -1 : 1;
	if (got < 1 || (uint32_t)got > k)
		return got < 0 ? -1 : lm_seterr(e, "the decoder ran %d rounds of %u", got, k);
	/* the draws of rounds not run go back to the streams */
	for (size_t i = 0; i < n && (uint32_t)got < k; i++) {
		struct gen_state *st = act[i]->st;
		st->rng = r->c_rng[i];
		for (int j = 0; j < (got - 1) * LM_DECODER_DRAWS; j++)
			(void)rng_uniform(&st->rng);
	}
	*rounds = (uint32_t)got;
	return 0;
}

/* Round j's token for sample i of n, from choose_on_decoder. */
static int take_round(gen_run *r, gen_sample *s, uint32_t j, size_t i, size_t n, lm_err *e)
{
	struct gen_state *st = s->st;
	size_t at = j * n + i;
	if (r->c_tok[at] == UINT32_MAX)
		return lm_seterr(e, "prompt %llu, sample %u: no token can be chosen (the logits "
				 "hold NaN or +inf, or are all -inf)",
				 (unsigned long long)s->prompt->index, s->index);
	st->next_forced = j == 0 && st->forcing;
	st->next_tok = r->c_tok[at];
	st->next_lp = r->c_lp[at];
	return 0;
}

/* The next token of every sample in flight, in parallel. */
static int choose(gen_run *r, gen_sample **act, size_t n, uint32_t *rounds, lm_err *e)
{
	*rounds = 1;
	if (r->d->choose)
		return choose_on_decoder(r, act, n, rounds, e);
	const gen_config *c = r->c;
	uint32_t V = r->d->n_vocab;
	#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
	for (size_t i = 0; i < n; i++) {
		struct gen_state *st = act[i]->st;
		const float *row = r->rows[st->slot];
		sample_work *w = &r->work[omp_get_thread_num()];
		st->next_forced = st->forcing;
		if (st->forcing) {
			st->next_tok = c->think_close[st->force_next];
			st->next_lp = sample_logprob(row, V, st->next_tok);
		} else if (sample_token(row, &c->sp, &st->rng, w, &st->next_tok, &st->next_lp,
					&st->err) < 0) {
			st->failed = 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (act[i]->st->failed) {
			*e = act[i]->st->err;
			return lm_err_prefix(e, "prompt %llu, sample %u",
					     (unsigned long long)act[i]->prompt->index, act[i]->index);
		}
	return 0;
}

/* Hand finished samples back in order; stream the oldest one's text. */
static int emit(gen_run *r, lm_err *e)
{
	while (r->head < r->tail) {
		gen_sample *s = r->fifo[r->head];
		struct gen_state *st = s->st;
		if (r->io->text && st->streamed < s->len) {
			r->io->text(r->io->user, s, s->text + st->streamed, s->len - st->streamed);
			st->streamed = s->len;
		}
		if (!st->done)
			break;
		if (r->io->done(r->io->user, s, e) < 0)
			return -1;
		gen_req *q = st->req;
		sample_free(s);
		r->fifo[r->head++] = NULL;
		if (--q->left == 0) {
			if (r->io->release)
				r->io->release(r->io->user, &q->p);
			free(q);
		}
	}
	return 0;
}

static size_t free_slots(const gen_run *r)
{
	size_t n = 0;
	for (uint32_t i = 0; i < r->d->n_slots; i++)
		n += !r->slot[i];
	return n;
}

static uint32_t take_slot(gen_run *r, gen_sample *s)
{
	for (uint32_t i = 0; i < r->d->n_slots; i++)
		if (!r->slot[i]) {
			r->slot[i] = s;
			return i;
		}
	return 0; /* not reached: callers check free_slots first */
}

/* Admit one prompt: its samples take slots; the first is queued for
 * prefill (others too when the decoder cannot fork). */
static int admit(gen_run *r, gen_req *q, size_t *n_pre, lm_err *e)
{
	const gen_config *c = r->c;
	if (q->p.n_ids < 1 || q->p.n_ids > r->d->n_ctx)
		return lm_seterr(e, "prompt %llu has %zu tokens; the context holds %u",
				 (unsigned long long)q->p.index, q->p.n_ids, r->d->n_ctx);
	int inside = gen_think_state((const uint8_t *)q->p.text, q->p.len, 0);
	for (uint32_t j = 0; j < c->n_samples; j++) {
		gen_sample *s = calloc(1, sizeof *s);
		struct gen_state *st = s ? calloc(1, sizeof *st) : NULL;
		size_t cap = r->fifo_cap;
		if (!st || lm_grow((void **)&r->fifo, &cap, r->tail + 1, sizeof *r->fifo, e) < 0) {
			free(s);
			free(st);
			return lm_seterr(e, "generation buffers:");
		}
		r->fifo_cap = cap;
		q->left++; /* run_free releases q once its samples are gone */
		s->prompt = &q->p;
		s->index = j;
		s->st = st;
		st->req = q;
		st->inside = inside;
		st->pos = q->p.n_ids;
		sample_rng_seed(&st->rng, c->seed, q->p.index, j);
		st->slot = take_slot(r, s);
		r->fifo[r->tail++] = s;
		if (r->d->reset(r->d->ctx, st->slot, e) < 0)
			return -1;
		if (j == 0 || !r->d->fork) {
			r->f_slot[*n_pre] = st->slot;
			r->f_tok[*n_pre] = q->p.ids;
			r->f_n[*n_pre] = (uint32_t)q->p.n_ids;
			r->f_rows[*n_pre] = r->rows[st->slot];
			++*n_pre;
		}
	}
	return 0;
}

/* Drop the handed-back entries from the front of the FIFO once they are
 * half of it, so its memory follows what is in flight, not the input. */
static void compact(gen_run *r)
{
	if (!r->head || r->head < r->fifo_cap / 2)
		return;
	memmove(r->fifo, r->fifo + r->head, (r->tail - r->head) * sizeof *r->fifo);
	r->tail -= r->head;
	r->head = 0;
}

/* Admit prompts while slots allow, prefill them, fork their siblings;
 * *n_prefilled: the prompts' sequences prefilled. */
static int fill(gen_run *r, int *eof, size_t n_active, size_t *n_prefilled, lm_err *e)
{
	const gen_config *c = r->c;
	compact(r);
	size_t n_pre = 0, first = r->tail;
	*n_prefilled = 0;
	while (!*eof && free_slots(r) >= c->n_samples && !(c->lazy && (n_active || n_pre))) {
		gen_req *q = calloc(1, sizeof *q);
		if (!q)
			return lm_seterr(e, "generation buffers:");
		double t0 = r->c->times ? omp_get_wtime() : 0;
		int got = r->io->next(r->io->user, &q->p, &r->input_err);
		if (r->c->times)
			r->c->times->input_s += omp_get_wtime() - t0;
		if (got <= 0) {
			free(q);
			r->input_failed = got < 0;
			*eof = 1;
			break;
		}
		if (admit(r, q, &n_pre, e) < 0) {
			if (!q->left) {
				if (r->io->release)
					r->io->release(r->io->user, &q->p);
				free(q);
			}
			return -1;
		}
	}
	if (!n_pre)
		return 0;
	*n_prefilled = n_pre;
	double t0 = r->c->times ? omp_get_wtime() : 0;
	if (r->d->feed(r->d->ctx, (uint32_t)n_pre, r->f_slot, r->f_tok, r->f_n, r->f_rows, e) < 0)
		return -1;
	if (r->c->times)
		r->c->times->feed_s += omp_get_wtime() - t0;
	if (!r->d->fork)
		return 0;
	size_t V = r->d->n_vocab;
	for (size_t i = first; i < r->tail; i++) {
		gen_sample *s = r->fifo[i];
		if (s->index == 0)
			continue;
		gen_sample *src = r->fifo[i - s->index];
		if (r->d->fork(r->d->ctx, s->st->slot, src->st->slot, e) < 0)
			return -1;
		if (!r->d->choose)
			memcpy(r->rows[s->st->slot], r->rows[src->st->slot], V * sizeof(float));
	}
	return 0;
}

static int run_loop(gen_run *r, lm_err *e)
{
	const lm_decoder *d = r->d;
	gen_sample **act = malloc(d->n_slots * sizeof *act);
	if (!act)
		return lm_seterr(e, "generation buffers:");
	int eof = 0, rc = 0;
	size_t n_act = 0;
	gen_times *tm = r->c->times;
	for (;;) {
		double t0 = tm ? omp_get_wtime() : 0;
		size_t n_pre, n_tok = 0;
		if ((rc = fill(r, &eof, n_act, &n_pre, e)) < 0)
			break;
		n_act = 0;
		for (uint32_t i = 0; i < d->n_slots; i++)
			if (r->slot[i])
				act[n_act++] = r->slot[i];
		if (!n_act && eof)
			break;
		uint32_t rounds;
		double tc = tm ? omp_get_wtime() : 0;
		if ((rc = choose(r, act, n_act, &rounds, e)) < 0)
			break;
		if (tm)
			tm->choose_s += omp_get_wtime() - tc;
		/* each round's tokens in turn; the decoder has fed all but the
		 * last round's, which go to feed() */
		size_t n_feed = 0;
		for (uint32_t j = 0; j < rounds && rc == 0; j++)
			for (size_t i = 0; i < n_act && rc == 0; i++) {
				gen_sample *s = act[i];
				if (!s)
					continue; /* finished in an earlier round */
				if (d->choose && (rc = take_round(r, s, j, i, n_act, e)) < 0)
					break;
				rc = advance(r, s, e);
				n_tok++;
				if (s->finish) {
					s->st->done = 1;
					r->slot[s->st->slot] = NULL;
					act[i] = NULL;
					continue;
				}
				s->st->pos++;
				if (j + 1 < rounds)
					continue;
				r->f_slot[n_feed] = s->st->slot;
				r->f_tok[n_feed] = &s->ids[s->n - 1];
				r->f_n[n_feed] = 1;
				r->f_rows[n_feed] = r->rows[s->st->slot];
				n_feed++;
			}
		tc = tm ? omp_get_wtime() : 0;
		if (rc < 0 || (rc = emit(r, e)) < 0)
			break;
		if (tm) {
			double tf = omp_get_wtime();
			tm->output_s += tf - tc;
			tc = tf;
		}
		if (n_feed && (rc = d->feed(d->ctx, (uint32_t)n_feed, r->f_slot, r->f_tok, r->f_n,
					    r->f_rows, e)) < 0)
			break;
		n_act = n_feed;
		if (tm) {
			tm->feed_s += omp_get_wtime() - tc;
			double dt = omp_get_wtime() - t0;
			if (n_pre) {
				tm->prefill_s += dt;
				tm->prefill_turns++;
				if (dt > tm->prefill_max_s)
					tm->prefill_max_s = dt;
			} else {
				tm->decode_s += dt;
				tm->decode_turns++;
				tm->decode_tokens += n_tok;
				if (dt > tm->decode_max_s)
					tm->decode_max_s = dt;
			}
		}
	}
	free(act);
	if (rc == 0 && r->input_failed) {
		*e = r->input_err;
		rc = -1;
	}
	return rc;
}

static void run_free(gen_run *r)
{
	for (size_t i = r->head; i < r->tail; i++) {
		gen_sample *s = r->fifo[i];
		gen_req *q = s->st->req;
		sample_free(s);
		if (--q->left == 0) {
			if (r->io->release)
				r->io->release(r->io->user, &q->p);
			free(q);
		}
	}
	free(r->fifo);
	free(r->slot);
	free(r->rows);
	free(r->logits);
	for (int i = 0; i < r->n_work; i++)
		sample_work_free(&r->work[i]);
	free(r->work);
	free(r->f_slot);
	free(r->f_n);
	free(r->f_tok);
	free(r->f_rows);
	free(r->c_slot);
	free(r->c_tok);
	free(r->c_forced);
	free(r->c_u);
	free(r->c_lp);
	free(r->c_rng);
}

int generate(const lm_decoder *d, const gen_config *c, const gen_io *io,
	     const bpe_tokenizer *tok, lm_err *e)
{
	if (gen_config_check(c, d, e) < 0)
		return -1;
	if (tok->n_vocab > d->n_vocab)
		return lm_seterr(e, "the tokenizer has %u tokens but the model's vocabulary only %u",
				 tok->n_vocab, d->n_vocab);
	/* A vocabulary padded past the tokenizer: never draw the padding. */
	gen_config cc = *c;
	cc.sp.limit = tok->n_vocab;
	if (c->times)
		*c->times = (gen_times){ 0 };
	gen_run r = { .d = d, .c = &cc, .io = io, .tok = tok };
	size_t S = d->n_slots, V = d->n_vocab;
	r.slot = calloc(S, sizeof *r.slot);
	r.rows = malloc(S * sizeof *r.rows);
	r.logits = malloc(S * V * sizeof *r.logits);
	r.n_work = omp_get_max_threads();
	r.work = calloc((size_t)r.n_work, sizeof *r.work);
	r.f_slot = malloc(S * sizeof *r.f_slot);
	r.f_n = malloc(S * sizeof *r.f_n);
	r.f_tok = malloc(S * sizeof *r.f_tok);
	r.f_rows = malloc(S * sizeof *r.f_rows);
	size_t K = d->choose_ahead && d->max_ahead > 1 ? d->max_ahead : 1;
	r.c_slot = malloc(S * sizeof *r.c_slot);
	r.c_tok = malloc(K * S * sizeof *r.c_tok);
	r.c_forced = malloc(S * sizeof *r.c_forced);
	r.c_u = malloc(K * S * LM_DECODER_DRAWS * sizeof *r.c_u);
	r.c_lp = malloc(K * S * sizeof *r.c_lp);
	r.c_rng = malloc(S * sizeof *r.c_rng);
	int rc = -1;
	if (!r.slot || !r.rows || !r.logits || !r.work || !r.f_slot || !r.f_n || !r.f_tok || !r.f_rows ||
	    !r.c_slot || !r.c_tok || !r.c_forced || !r.c_u || !r.c_lp || !r.c_rng) {
		lm_seterr(e, "generation buffers for %zu sequences:", S);
		goto out;
	}
	for (size_t i = 0; i < S; i++)
		r.rows[i] = r.logits + i * V;
	for (int i = 0; i < r.n_work; i++)
		if (sample_work_init(&r.work[i], (uint32_t)V, e) < 0)
			goto out;
	rc = run_loop(&r, e);
out:
	run_free(&r);
	return rc;
}
