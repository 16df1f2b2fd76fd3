/* test_generate.c: the generation driver over fake decoders whose logits are
 * a pure function of the whole prefix: batch composition, slot count,
 * forking and lazy admission must not change any sample; log-probabilities
 * equal a recomputation from the prefix; greedy follows the argmax chain;
 * stop strings, end-of-text, max tokens, the context limit and the thinking
 * budget end or steer sequences as documented; output comes in order.  A
 * fake that samples where its logits are (choose, kernels/sample.h's C
 * twin) gives the same samples when it runs rounds ahead (choose_ahead),
 * also when it declines some calls. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "gen/generate.h"
#include "kernels/sample.h"

enum { V = 257, EOT = 256, CTX = 160, MAX_RES = 256 };

/* ---- a byte-level tokenizer: ids 0..255 are bytes, 256 end-of-text */
static bpe_tokenizer tok;

static void make_tokenizer(void)
{
	static const char eot[] = "<|endoftext|>";
	static uint8_t bytes[256 + sizeof eot];
	static uint64_t off[V + 1];
	for (int i = 0; i < 256; i++) {
		bytes[i] = (uint8_t)i;
		off[i] = (uint64_t)i;
		tok.byte_id[i] = (uint32_t)i;
	}
	memcpy(bytes + 256, eot, sizeof eot - 1);
	off[256] = 256;
	off[257] = 256 + sizeof eot - 1;
	tok.n_vocab = V;
	tok.bytes = bytes;
	tok.off = off;
	tok.eot = EOT;
}

/* ---- fake decoders */
typedef enum { HASHED, SCRIPTED } fake_kind;

typedef struct fake {
	fake_kind kind;
	const char *script;   /* SCRIPTED: the completion it writes, then EOT */
	size_t prompt_len;    /* SCRIPTED: where the completion starts */
	uint32_t hist[32][CTX];
	size_t len[32];
	long feeds;
	/* sampling where the logits are (choose): each slot's last logits */
	float rows[32][V];
	uint32_t room;        /* the decoder's n_ctx */
	int decline;          /* choose_ahead runs one round (1) or one round
			       * fewer (2) every other call */
	long calls, ahead_calls;
} fake;

/* HASHED: logits from a stream seeded by a hash of the whole prefix. */
static void hashed_logits(const uint32_t *ids, size_t n, float *out)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ids[i]) * 1099511628211ull;
	lm_rng r;
	rng_seed(&r, h);
	for (int v = 0; v < V; v++)
		out[v] = (float)(4 * rng_uniform(&r) - 2);
	out['a'] += 1.5f; /* a few likely tokens, so that top-p bites */
	out['b'] += 1.0f;
	out[EOT] += 1.5f; /* and some sequences that end early */
}

static void fake_logits(const fake *f, const uint32_t *ids, size_t n, float *out)
{
	if (f->kind == HASHED) {
		hashed_logits(ids, n, out);
		return;
	}
	size_t k = n - f->prompt_len, sl = strlen(f->script);
	uint32_t want = k < sl ? (uint8_t)f->script[k] : EOT;
	for (int v = 0; v < V; v++)
		out[v] = -5.0f + 0.001f * v;
	out[want] = 5.0f;
}

static int fake_reset(void *ctx, uint32_t slot, lm_err *e)
{
	((fake *)ctx)->len[slot] = 0;
	return 0;
}

static int fake_fork(void *ctx, uint32_t dst, uint32_t src, lm_err *e)
{
	fake *f = ctx;
	memcpy(f->hist[dst], f->hist[src], sizeof f->hist[src]);
	f->len[dst] = f->len[src];
	return 0;
}

static int fake_feed(void *ctx, uint32_t n_seq, const uint32_t *slot, const uint32_t *const *t,
		     const uint32_t *n, float *const *logits, lm_err *e)
{
	fake *f = ctx;
	f->feeds++;
	for (uint32_t i = 0; i < n_seq; i++) {
		uint32_t s = slot[i];
		if (f->len[s] + n[i] > CTX)
			return lm_seterr(e, "fake: slot %u overflows the context", s);
		memcpy(f->hist[s] + f->len[s], t[i], n[i] * sizeof *t[i]);
		f->len[s] += n[i];
		fake_logits(f, f->hist[s], f->len[s], logits[i]);
	}
	return 0;
}

/* The device-sampling fake: feed keeps each slot's logits. */
static int dev_feed(void *ctx, uint32_t n_seq, const uint32_t *slot, const uint32_t *const *t,
		    const uint32_t *n, float *const *logits, lm_err *e)
{
	fake *f = ctx;
	float *rows[32];
	for (uint32_t i = 0; i < n_seq; i++)
		rows[i] = f->rows[slot[i]];
	return fake_feed(ctx, n_seq, slot, t, n, rows, e);
}

static int dev_fork(void *ctx, uint32_t dst, uint32_t src, lm_err *e)
{
	fake *f = ctx;
	memcpy(f->rows[dst], f->rows[src], sizeof f->rows[src]);
	return fake_fork(ctx, dst, src, e);
}

static int dev_ahead(void *ctx, uint32_t n, uint32_t k, const uint32_t *slot,
		     const sample_params *sp, const float *u, const int32_t *forced, uint32_t *out,
		     double *lp, lm_err *e)
{
	fake *f = ctx;
	sample_args a = { (float)sp->temperature, (int)sp->top_k, (float)sp->top_p, (int)sp->limit,
			  SAMPLE_WAY_AUTO };
	if (f->decline && f->calls++ % 2)
		k = f->decline == 2 && k > 2 ? k - 1 : 1;
	for (uint32_t i = 0; i < n; i++)
		if (f->len[slot[i]] + k - 1 > f->room || forced[i] >= 0)
			k = 1;
	f->ahead_calls += k > 1;
	int32_t row[32], t[32];
	float l[32];
	for (uint32_t i = 0; i < n; i++)
		row[i] = (int32_t)slot[i];
	for (uint32_t j = 0; j < k; j++) {
		sample_rows_cpu(t, l, &f->rows[0][0], row, u + (size_t)j * n * SAMPLE_DRAWS,
				j ? NULL : forced, NULL,
				(int)n, V, a);
		uint32_t ids[32], one[32];
		const uint32_t *tp[32];
		for (uint32_t i = 0; i < n; i++) {
			out[j * n + i] = t[i] < 0 ? UINT32_MAX : (uint32_t)t[i];
			lp[j * n + i] = l[i];
			ids[i] = t[i] < 0 ? 0 : (uint32_t)t[i];
			tp[i] = &ids[i];
			one[i] = 1;
		}
		if (j + 1 < k && dev_feed(ctx, n, slot, tp, one, NULL, e) < 0)
			return -1;
	}
	return (int)k;
}

static int dev_choose(void *ctx, uint32_t n, const uint32_t *slot, const sample_params *sp,
		      const float *u, const int32_t *forced, uint32_t *out, double *lp, lm_err *e)
{
	return dev_ahead(ctx, n, 1, slot, sp, u, forced, out, lp, e) < 0 ? -1 : 0;
}

/* ---- prompts in, results out */
typedef struct result {
	uint64_t prompt;
	uint32_t sample;
	uint32_t ids[CTX];
	double lp[CTX];
	uint8_t forced[CTX];
	size_t n;
	char text[4 * CTX];
	size_t len;
	const char *finish;
} result;

typedef struct harness {
	const char *const *prompts;
	size_t n_prompts, next;
	uint32_t ids[MAX_RES][CTX];
	result res[MAX_RES];
	size_t n_res;
	char streamed[MAX_RES * 4 * CTX];
	size_t n_streamed;
	int in_order;
	int released;
} harness;

static int h_next(void *user, gen_prompt *p, lm_err *e)
{
	harness *h = user;
	if (h->next == h->n_prompts)
		return 0;
	size_t i = h->next++;
	const char *s = h->prompts[i];
	size_t n = strlen(s);
	for (size_t k = 0; k < n; k++)
		h->ids[i][k] = (uint8_t)s[k];
	*p = (gen_prompt){ h->ids[i], n, s, n, i, NULL };
	return 1;
}

static void h_text(void *user, const gen_sample *s, const uint8_t *b, size_t n)
{
	harness *h = user;
	memcpy(h->streamed + h->n_streamed, b, n);
	h->n_streamed += n;
}

static int h_done(void *user, const gen_sample *s, lm_err *e)
{
	harness *h = user;
	result *r = &h->res[h->n_res];
	if (h->n_res) {
		const result *prev = &h->res[h->n_res - 1];
		if (prev->prompt > s->prompt->index ||
		    (prev->prompt == s->prompt->index && prev->sample >= s->index))
			h->in_order = 0;
	}
	h->n_res++;
	r->prompt = s->prompt->index;
	r->sample = s->index;
	r->n = s->n;
	memcpy(r->ids, s->ids, s->n * sizeof *s->ids);
	memcpy(r->lp, s->logprobs, s->n * sizeof *s->logprobs);
	memcpy(r->forced, s->forced, s->n);
	if (s->len)
		memcpy(r->text, s->text, s->len);
	r->text[s->len] = '\0';
	r->len = s->len;
	r->finish = s->finish;
	memcpy(h->streamed + h->n_streamed, "\n", 1);
	h->n_streamed++;
	return 0;
}

static void h_release(void *user, gen_prompt *p)
{
	((harness *)user)->released++;
}

/* generate() over d into a fresh harness. */
static int run_on(harness *h, const lm_decoder *d, const gen_config *c, lm_err *e)
{
	gen_io io = { h, h_next, h_text, h_done, h_release };
	h->next = h->n_res = h->n_streamed = 0;
	h->in_order = 1;
	h->released = 0;
	return generate(d, c, &io, &tok, e);
}

static int run(harness *h, fake *f, uint32_t slots, int fork, const gen_config *c, lm_err *e)
{
	lm_decoder d = { f, V, CTX, slots, fake_reset, fork ? fake_fork : NULL, fake_feed, NULL, NULL, 0 };
	return run_on(h, &d, c, e);
}

/* The device-sampling fake, running up to `ahead` rounds a call (0: none). */
static int run_dev(harness *h, fake *f, uint32_t slots, uint32_t ahead, const gen_config *c,
		   lm_err *e)
{
	lm_decoder d = { f, V, CTX, slots, fake_reset, dev_fork, dev_feed, dev_choose,
			 ahead ? dev_ahead : NULL, ahead };
	f->room = CTX;
	return run_on(h, &d, c, e);
}

static const char *const PROMPTS[] = {
	"Once", "The quick brown fox", "a", "Lorem ipsum dolor sit amet, consectetur",
	"xy", "Hello, world", "z z z z",
};
enum { NP = sizeof PROMPTS / sizeof PROMPTS[0], NS = 3 };

static int same_results(const harness *a, const harness *b)
{
	if (a->n_res != b->n_res)
		return 0;
	for (size_t i = 0; i < a->n_res; i++) {
		const result *x = &a->res[i], *y = &b->res[i];
		if (x->prompt != y->prompt || x->sample != y->sample || x->n != y->n ||
		    memcmp(x->ids, y->ids, x->n * sizeof *x->ids) ||
		    memcmp(x->lp, y->lp, x->n * sizeof *x->lp) || x->len != y->len ||
		    memcmp(x->text, y->text, x->len) ||
		    strcmp(x->finish, y->finish))
			return 0;
	}
	return 1;
}

static void test_batching(void)
{
	static harness ref, h;
	static fake f;
	lm_err e;
	gen_config c = { .sp = { 0.9, 50, 0.95, 0 }, .seed = 1234, .n_samples = NS, .max_tokens = 20,
			 .eot = EOT };
	ref.prompts = h.prompts = PROMPTS;
	ref.n_prompts = h.n_prompts = NP;
	f.kind = HASHED;
	c.lazy = 1;
	is_int(run(&ref, &f, NS, 0, &c, &e), 0, "one prompt at a time runs");
	is_int(ref.n_res, NP * NS, "every prompt gives -n samples");
	ok(ref.in_order, "results come in (prompt, sample) order");
	is_int(ref.released, NP, "every prompt is released once");
	int lens = 0, stops = 0;
	for (size_t i = 0; i < ref.n_res; i++) {
		lens += !strcmp(ref.res[i].finish, "length");
		stops += !strcmp(ref.res[i].finish, "stop");
	}
	ok(lens && stops, "some samples end at end-of-text, some at max tokens (%d, %d)", stops, lens);
	c.lazy = 0;
	static const struct { uint32_t slots; int fork; } cfg[] = { { 21, 1 }, { 21, 0 }, { 5, 1 }, { 4, 0 }, { 32, 1 } };
	for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
		memset(&f, 0, sizeof f);
		int rc = run(&h, &f, cfg[k].slots, cfg[k].fork, &c, &e);
		ok(rc == 0 && same_results(&ref, &h) && h.in_order,
		   "batch of %u slots (%s): results equal one-at-a-time, in order", cfg[k].slots,
		   cfg[k].fork ? "prefill forked" : "prefill repeated");
	}
	size_t total = 0;
	for (size_t i = 0; i < ref.n_res; i++)
		total += ref.res[i].len + 1;
	ok(h.n_streamed == total && !memcmp(h.streamed, ref.streamed, total),
	   "streamed text equals the completions in order");

	/* log-probs and greedy against the prefix function */
	int lp_bad = 0;
	float row[V];
	for (size_t i = 0; i < ref.n_res; i++) {
		const result *r = &ref.res[i];
		uint32_t seq[2 * CTX];
		size_t pl = strlen(PROMPTS[r->prompt]);
		for (size_t k = 0; k < pl; k++)
			seq[k] = (uint8_t)PROMPTS[r->prompt][k];
		memcpy(seq + pl, r->ids, r->n * sizeof *seq);
		for (size_t t = 0; t < r->n; t++) {
			hashed_logits(seq, pl + t, row);
			lp_bad += sample_logprob(row, V, r->ids[t]) != r->lp[t];
		}
	}
	is_int(lp_bad, 0, "every log-prob equals the log-softmax of a full recomputation");
	int differ = 0;
	for (size_t i = 0; i + 1 < ref.n_res; i++)
		differ += ref.res[i].prompt == ref.res[i + 1].prompt &&
			  (ref.res[i].n != ref.res[i + 1].n ||
			   memcmp(ref.res[i].ids, ref.res[i + 1].ids, ref.res[i].n * sizeof *ref.res[i].ids));
	ok(differ > 0, "samples of one prompt differ from each other");

	c.seed = 99;
	memset(&f, 0, sizeof f);
	run(&h, &f, 8, 1, &c, &e);
	ok(!same_results(&ref, &h), "another seed gives other samples");

	c.sp = (sample_params){ 0, 0, 1, 0 };
	memset(&f, 0, sizeof f);
	run(&h, &f, 8, 1, &c, &e);
	int greedy_bad = 0;
	for (size_t i = 0; i < h.n_res; i++) {
		const result *r = &h.res[i];
		uint32_t seq[2 * CTX];
		size_t pl = strlen(PROMPTS[r->prompt]);
		for (size_t k = 0; k < pl; k++)
			seq[k] = (uint8_t)PROMPTS[r->prompt][k];
		memcpy(seq + pl, r->ids, r->n * sizeof *seq);
		for (size_t t = 0; t < r->n; t++) {
			hashed_logits(seq, pl + t, row);
			uint32_t am = 0;
			for (uint32_t v = 1; v < V; v++)
				am = row[v] > row[am] ? v : am;
			greedy_bad += am != r->ids[t];
		}
		if (r->sample && (r->n != h.res[i - 1].n || memcmp(r->ids, h.res[i - 1].ids, r->n * sizeof *r->ids)))
			greedy_bad++;
	}
	is_int(greedy_bad, 0, "greedy follows the argmax chain of full recomputations");
}

/* Sampling on the decoder, one round a call or several. */
static void test_ahead(void)
{
	static harness ref, h;
	static fake f;
	lm_err e;
	gen_config c = { .sp = { 0.9, 50, 0.95, 0 }, .seed = 77, .n_samples = NS, .max_tokens = 30,
			 .eot = EOT };
	ref.prompts = h.prompts = PROMPTS;
	ref.n_prompts = h.n_prompts = NP;
	f.kind = HASHED;
	int rc = run_dev(&ref, &f, 6, 0, &c, &e);
	ok(rc == 0 && ref.n_res == NP * NS && ref.in_order, "sampling on the decoder runs%s%s",
	   rc ? ": " : "", rc ? e.msg : "");
	static const struct { uint32_t slots, ahead; int decline; } cfg[] = {
		{ 6, 4, 0 }, { 6, 8, 1 }, { 21, 5, 0 }, { 3, 16, 1 }, { 32, 2, 0 },
	};
	for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
		memset(&f, 0, sizeof f);
		f.decline = cfg[k].decline;
		rc = run_dev(&h, &f, cfg[k].slots, cfg[k].ahead, &c, &e);
		ok(rc == 0 && same_results(&ref, &h) && h.in_order && f.ahead_calls > 0,
		   "%u slots, %u rounds ahead%s: the samples of one round a call (%ld calls ran ahead)",
		   cfg[k].slots, cfg[k].ahead, cfg[k].decline ? ", every other call declined" : "",
		   f.ahead_calls);
	}
	ok(h.n_streamed == ref.n_streamed && !memcmp(h.streamed, ref.streamed, ref.n_streamed),
	   "rounds ahead: the same streamed text");
	/* top-p alone: the twin's nucleus by rejection (all three draws a
	 * token used), and calls that run one round fewer than asked (the
	 * streams put back to the rounds run) */
	gen_config cp = c;
	cp.sp = (sample_params){ 1.0, 0, 0.95, 0 };
	memset(&f, 0, sizeof f);
	f.kind = HASHED;
	rc = run_dev(&ref, &f, 6, 0, &cp, &e);
	for (int d = 0; d <= 2; d += 2) {
		memset(&f, 0, sizeof f);
		f.decline = d;
		rc |= run_dev(&h, &f, 6, 8, &cp, &e);
		ok(rc == 0 && same_results(&ref, &h) && f.ahead_calls > 0,
		   "top-p alone (the nucleus by rejection), 8 rounds ahead%s: the samples of one round "
		   "a call%s%s", d ? ", every other call one round fewer" : "", rc ? ": " : "",
		   rc ? e.msg : "");
	}
	/* endings inside a call's rounds: stop strings, max tokens, a full context */
	const char *stops[] = { "b", "zz" };
	c.stop = stops;
	c.n_stop = 2;
	c.max_tokens = 13;
	memset(&f, 0, sizeof f);
	f.kind = HASHED;
	rc = run_dev(&ref, &f, 8, 0, &c, &e);
	memset(&f, 0, sizeof f);
	rc |= run_dev(&h, &f, 8, 8, &c, &e);
	int stopped = 0;
	for (size_t i = 0; i < ref.n_res; i++)
		stopped += ref.res[i].len >= 1 && !strcmp(ref.res[i].finish, "stop") &&
			   ref.res[i].ids[ref.res[i].n - 1] != EOT;
	ok(rc == 0 && same_results(&ref, &h) && stopped > 0,
	   "stop strings and max tokens within a call's rounds: the same samples (%d stopped by a "
	   "string)", stopped);
	c.n_stop = 0;
	c.max_tokens = 200;
	c.eot = BPE_NO_TOKEN;
	memset(&f, 0, sizeof f);
	rc = run_dev(&ref, &f, 4, 0, &c, &e);
	memset(&f, 0, sizeof f);
	rc |= run_dev(&h, &f, 4, 8, &c, &e);
	int full = 0;
	for (size_t i = 0; i < ref.n_res; i++)
		full += !strcmp(ref.res[i].finish, "length") &&
			strlen(PROMPTS[ref.res[i].prompt]) + ref.res[i].n == CTX + 1;
	ok(rc == 0 && same_results(&ref, &h) && full == (int)ref.n_res,
	   "up to a full context: the same samples, every one ends there (%d of %zu)", full, ref.n_res);
}

/* The C sampler's feed: each choice on to the next step's ids, positions
 * and embedded rows (kernels/sample.h), -1 as token 0. */
static void test_sample_feed(void)
{
	enum { N = 3, FV = 5, FC = 4 };
	float logits[N][FV] = { { 0, 9, 0, 0, 0 }, { 0, 0, 0, 0, 7 }, { 0, NAN, 0, 0, 0 } };
	float table[FV][FC], x[N][FC], u[N * SAMPLE_DRAWS], lp[N];
	for (int i = 0; i < N * SAMPLE_DRAWS; i++)
		u[i] = 0.5f;
	int32_t row[N] = { 0, 1, 2 }, t[N], ids[N] = { -7, -7, -7 }, pos[N] = { 3, 10, 0 };
	for (int v = 0; v < FV; v++)
		for (int c = 0; c < FC; c++)
			table[v][c] = (float)(10 * v + c);
	sample_feed f = { ids, pos, &x[0][0], &table[0][0], FC };
	sample_rows_cpu(t, lp, &logits[0][0], row, u, NULL, &f, N, FV,
			(sample_args){ 0, 0, 1, 0, SAMPLE_WAY_AUTO });
	ok(t[0] == 1 && t[1] == 4 && t[2] == -1 && ids[0] == 1 && ids[1] == 4 && ids[2] == 0 &&
	   pos[0] == 4 && pos[1] == 11 && pos[2] == 1 && !memcmp(x[0], table[1], sizeof x[0]) &&
	   !memcmp(x[1], table[4], sizeof x[1]) && !memcmp(x[2], table[0], sizeof x[2]),
	   "the C sampler feeds its choices on: ids, positions, embedded rows (-1 as 0)");
}

/* Many prompts through few slots: the FIFO is compacted on the way. */
static void test_many(void)
{
	static harness a, b;
	static fake f;
	static const char *many[200];
	lm_err e;
	for (size_t i = 0; i < 200; i++)
		many[i] = PROMPTS[i % NP];
	a.prompts = b.prompts = many;
	a.n_prompts = b.n_prompts = 200;
	gen_config c = { .sp = { 1, 0, 1, 0 }, .seed = 3, .n_samples = 1, .max_tokens = 3, .eot = EOT };
	f.kind = HASHED;
	int rc = run(&a, &f, 3, 1, &c, &e);
	memset(&f, 0, sizeof f);
	f.kind = HASHED;
	c.lazy = 1;
	rc |= run(&b, &f, 1, 1, &c, &e);
	ok(rc == 0 && a.n_res == 200 && a.in_order && same_results(&a, &b),
	   "200 prompts through 3 slots: in order, equal to one at a time");
}

static result *run_script(const char *prompt, const char *script, gen_config *c, uint32_t ctx_room)
{
	static harness h;
	static fake f;
	static const char *pp[1];
	lm_err e;
	memset(&f, 0, sizeof f);
	f.kind = SCRIPTED;
	f.script = script;
	f.prompt_len = strlen(prompt);
	pp[0] = prompt;
	h.prompts = pp;
	h.n_prompts = 1;
	lm_decoder d = { &f, V, ctx_room, 2, fake_reset, fake_fork, fake_feed, NULL, NULL, 0 };
	gen_io io = { &h, h_next, NULL, h_done, NULL };
	h.next = h.n_res = 0;
	if (generate(&d, c, &io, &tok, &e) < 0) {
		diag("generate: %s", e.msg);
		return NULL;
	}
	return &h.res[0];
}

static void test_endings(void)
{
	gen_config c = { .sp = { 1, 0, 1, 0 }, .seed = 1, .n_samples = 1, .max_tokens = 40, .eot = EOT };
	const char *stops[] = { "STOP", "</answer>" };
	c.stop = stops;
	c.n_stop = 2;
	result *r = run_script("Q:", "<answer>42</answer> and more", &c, CTX);
	ok(r && !strcmp(r->text, "<answer>42</answer>") && !strcmp(r->finish, "stop"),
	   "a stop string ends the completion, which keeps it (%s)", r ? r->text : "");
	r = run_script("Q:", "ab", &c, CTX);
	ok(r && r->n == 3 && r->ids[2] == EOT && !strcmp(r->text, "ab") && !strcmp(r->finish, "stop"),
	   "end-of-text: in the ids, not in the text, finish stop");
	c.max_tokens = 4;
	r = run_script("Q:", "abcdefgh", &c, CTX);
	ok(r && !strcmp(r->text, "abcd") && !strcmp(r->finish, "length"), "max tokens: finish length");
	c.max_tokens = 40;
	r = run_script("Q:", "abcdefgh", &c, 5);
	ok(r && !strcmp(r->text, "abcd") && !strcmp(r->finish, "length"),
	   "a full context ends the sample (context 5, prompt 2: 4 tokens, the last never fed)");
	r = run_script("Q:", "abcdefghijklmnopqrstuvwxyz", &c, 2);
	ok(r && r->n == 1 && !strcmp(r->finish, "length"), "a prompt filling the context gets one token");
	static char longer[141];
	for (size_t i = 0; i < sizeof longer - 1; i++)
		longer[i] = (char)('a' + i % 26);
	c.max_tokens = 150;
	r = run_script("Q:", longer, &c, CTX);
	ok(r && r->n == 141 && !memcmp(r->text, longer, 140) && r->ids[140] == EOT,
	   "a long completion (buffers grow past their first size)");
	r = run_script("Q: a long prompt", "abc", &c, 4);
	ok(!r, "a prompt longer than the context is an error");
}

static void test_think(void)
{
	static const char close_text[] = "</think>X";
	uint32_t close_ids[sizeof close_text - 1];
	for (size_t i = 0; i < sizeof close_text - 1; i++)
		close_ids[i] = (uint8_t)close_text[i];
	gen_config c = { .sp = { 0, 0, 1, 0 }, .seed = 1, .n_samples = 1, .max_tokens = 20, .eot = EOT,
			 .think_budget = 4, .think_close = close_ids, .n_think_close = sizeof close_text - 1 };
	const char *script = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	result *r = run_script("User: 2+2? Assistant: <think>", script, &c, CTX);
	ok(r && !strcmp(r->text, "aaaa</think>Xaaaaaaa"),
	   "thinking budget 4: four tokens, the closing text, then the model again (%s)", r ? r->text : "");
	int forced_ok = r != NULL;
	for (size_t i = 0; r && i < r->n; i++)
		forced_ok &= r->forced[i] == (i >= 4 && i < 4 + sizeof close_text - 1);
	ok(forced_ok, "exactly the closing tokens are flagged forced");
	r = run_script("User: 2+2? Assistant:", script, &c, CTX);
	ok(r && !strcmp(r->text, "aaaaaaaaaaaaaaaaaaaa"), "no <think> open: the budget does nothing");
	r = run_script("x", "<think>abcdefgh", &c, CTX);
	ok(r && !strcmp(r->text, "<think>abcd</think>X"),
	   "a <think> the model opens, across tokens, starts the count (%s)", r ? r->text : "");
	ok(gen_think_state((const uint8_t *)"<think>a</think>b", 17, 1) == 0 &&
	   gen_think_state((const uint8_t *)"</think><think>", 15, 0) == 1 &&
	   gen_think_state((const uint8_t *)"plain", 5, 1) == 1, "the thinking state follows the last tag");
}

static void test_config(void)
{
	lm_err e;
	lm_decoder d = { NULL, V, CTX, 4, NULL, NULL, NULL, NULL, NULL, 0 };
	gen_config c = { .sp = { 1, 0, 1, 0 }, .n_samples = 5, .max_tokens = 1, .eot = EOT };
	ok(gen_config_check(&c, &d, &e) < 0 && e.code == 2, "more samples than slots: usage error (%s)", e.msg);
	c.n_samples = 1;
	c.think_budget = 3;
	ok(gen_config_check(&c, &d, &e) < 0, "a budget without closing text: refused (%s)", e.msg);
	c.think_budget = 0;
	const char *stops[] = { "" };
	c.stop = stops;
	c.n_stop = 1;
	ok(gen_config_check(&c, &d, &e) < 0, "an empty stop string: refused (%s)", e.msg);
}

int main(void)
{
	make_tokenizer();
	test_batching();
	test_many();
	test_ahead();
	test_sample_feed();
	test_endings();
	test_think();
	test_config();
	return done_testing();
}
