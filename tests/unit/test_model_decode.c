/* test_model_decode.c: generation with the KV-cache decoder on a small
 * random model against full forward passes (model_forward): greedy equals
 * the argmax chain of repeated full passes; reported log-probs equal a
 * teacher-forced pass on prompt + completion within 1e-4; the same seed
 * gives the same samples; batches equal one-at-a-time runs; prompts longer
 * than a chunk and slots forked from one prefill agree too, and so do the
 * CPU pass on all threads and the op table's path.  For every model variant
 * (GQA, MQA, QK-norm, ReLU^2, soft-capping, norm epsilon, all at once) the
 * decoder's logits equal model_forward's, on a prefill and on the steps
 * after it in two slots (one forked), on the CPU pass with one thread and
 * all, and on the op table's path. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fake_tok.h"
#include "../tap.h"
#include "gen/model_decode.h"
#include "model/backend.h"

enum { V = 300, CTX = 320, EOT = 299, MAX_RES = 64, MAX_TOK = 24 };

static bpe_tokenizer tok;
static model m;

static void make_tokenizer(void) { fake_tokenizer(&tok, V, EOT); }

typedef struct result {
	uint64_t prompt;
	uint32_t sample, ids[MAX_TOK];
	double lp[MAX_TOK];
	size_t n;
} result;

typedef struct harness {
	uint32_t prompts[8][CTX];
	size_t plen[8], n_prompts, next;
	result res[MAX_RES];
	size_t n_res;
} harness;

static int h_next(void *user, gen_prompt *p, lm_err *e)
{
	harness *h = user;
	if (h->next == h->n_prompts)
		return 0;
	size_t i = h->next++;
	*p = (gen_prompt){ h->prompts[i], h->plen[i], "", 0, i, NULL };
	return 1;
}

static int h_done(void *user, const gen_sample *s, lm_err *e)
{
	harness *h = user;
	result *r = &h->res[h->n_res++];
	r->prompt = s->prompt->index;
	r->sample = s->index;
	r->n = s->n;
	memcpy(r->ids, s->ids, s->n * sizeof *s->ids);
	memcpy(r->lp, s->logprobs, s->n * sizeof *s->logprobs);
	return 0;
}

/* How run() drives the decoder: as lm-sample does, with every thread on
 * every chunk however small, or through the op table's ops. */
enum { PLAIN, ALL_THREADS, OP_TABLE };

static int run_as(harness *h, uint32_t slots, const gen_config *c, int how)
{
	model_decoder md;
	lm_err e;
	h->next = h->n_res = 0;
	if (model_decoder_init(&md, &m, slots, CTX, &e) < 0) {
		diag("%s", e.msg);
		return -1;
	}
	if (how == ALL_THREADS)
		md.work = 1;
	md.op_table = how == OP_TABLE;
	gen_io io = { h, h_next, NULL, h_done, NULL };
	int rc = generate(&md.dec, c, &io, &tok, &e);
	if (rc < 0)
		diag("generate: %s", e.msg);
	model_decoder_free(&md);
	return rc;
}

static int run(harness *h, uint32_t slots, const gen_config *c)
{
	return run_as(h, slots, c, PLAIN);
}

/* Full forward of prompt + completion[0 .. n-1]; rows[t] are the logits
 * after position t. */
static const float *full_forward(const harness *h, const result *r, size_t *pl)
{
	static int32_t seq[CTX + MAX_TOK];
	lm_err e;
	*pl = h->plen[r->prompt];
	for (size_t i = 0; i < *pl; i++)
		seq[i] = (int32_t)h->prompts[r->prompt][i];
	for (size_t i = 0; i + 1 < r->n; i++)
		seq[*pl + i] = (int32_t)r->ids[i];
	int T = (int)(*pl + r->n - 1);
	if (model_forward(&m, seq, NULL, 1, T, NULL, &e) < 0) {
		diag("forward: %s", e.msg);
		return NULL;
	}
	return (const float *)model_logits(&m);
}

static int same(const harness *a, const harness *b, double tol)
{
	if (a->n_res != b->n_res)
		return 0;
	for (size_t i = 0; i < a->n_res; i++) {
		const result *x = &a->res[i], *y = &b->res[i];
		if (x->prompt != y->prompt || x->sample != y->sample || x->n != y->n ||
		    memcmp(x->ids, y->ids, x->n * sizeof *x->ids))
			return 0;
		for (size_t t = 0; t < x->n; t++)
			if (fabs(x->lp[t] - y->lp[t]) > tol)
				return 0;
	}
	return 1;
}

/* The decoder's logits against a full forward pass of model cfg on one
 * sequence of VT tokens: slot 0 gets a prefill of VP tokens then one token
 * a step; slot 1, forked from it after the prefill, the same tokens beside
 * it in the same calls.  The largest difference, or INFINITY on failure. */
enum { VT = 40, VP = 23 };

static double decode_vs_forward(model_config cfg, int how)
{
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model mm;
	model_decoder md;
	double worst = INFINITY;
	if (!be || model_init(&mm, &cfg, be, 1, VT, &e)) {
		diag("model_init: %s", e.msg);
		return worst;
	}
	lm_rng r;
	rng_seed(&r, 41);
	model_init_weights(&mm, &r, &e);
	int32_t ids[VT];
	uint32_t toks[VT];
	for (int i = 0; i < VT; i++)
		toks[i] = (uint32_t)(ids[i] = (int32_t)rng_below(&r, (uint64_t)cfg.vocab));
	float *full = malloc((size_t)VT * cfg.vocab * sizeof *full);
	float *out = malloc(2 * (size_t)cfg.vocab * sizeof *out);
	if (model_forward(&mm, ids, NULL, 1, VT, NULL, &e) || model_read_logits(&mm, full, VT, &e) ||
	    model_decoder_init(&md, &mm, 2, VT, &e)) {
		diag("%s", e.msg);
		goto out;
	}
	md.work = how == ALL_THREADS ? 1 : md.work;
	md.op_table = how == OP_TABLE;
	worst = 0;
	uint32_t slot[2] = { 0, 1 }, n[2] = { VP, VP };
	const uint32_t *tp[2] = { toks, toks };
	float *o[2] = { out, out + cfg.vocab };
	int rc = md.dec.feed(md.dec.ctx, 1, slot, tp, n, o, &e) || md.dec.fork(md.dec.ctx, 1, 0, &e);
	for (int v = 0; !rc && v < cfg.vocab; v++)
		worst = fmax(worst, fabs(out[v] - full[(size_t)(VP - 1) * cfg.vocab + v]));
	for (int t = VP; !rc && t < VT; t++) {
		n[0] = n[1] = 1;
		tp[0] = tp[1] = toks + t;
		rc = md.dec.feed(md.dec.ctx, 2, slot, tp, n, o, &e);
		for (int v = 0; !rc && v < 2 * cfg.vocab; v++)
			worst = fmax(worst, fabs(out[v] - full[(size_t)t * cfg.vocab + v % cfg.vocab]));
	}
	if (rc) {
		diag("feed: %s", e.msg);
		worst = INFINITY;
	}
	model_decoder_free(&md);
out:
	free(full);
	free(out);
	model_free(&mm);
	be->close(be);
	return worst;
}

static void check_variants(void)
{
	model_config base = { .vocab = 97, .ctx = VT, .d_model = 32, .n_layers = 2, .n_heads = 4,
			      .d_ff = 48, .rope_theta = 10000.0 };
	struct { const char *name; model_config c; } v[8];
	for (int i = 0; i < 8; i++)
		v[i].c = base;
	v[0].name = "plain";
	v[1].name = "gqa 4/2", v[1].c.n_kv_heads = 2;
	v[2].name = "mqa 4/1", v[2].c.n_kv_heads = 1;
	v[3].name = "qk-norm", v[3].c.qk_norm = 1;
	v[4].name = "relu2", v[4].c.mlp = MODEL_MLP_RELU2;
	v[5].name = "softcap", v[5].c.softcap = 2.0;
	v[6].name = "norm eps", v[6].c.norm_eps = 1e-2;
	v[7].name = "all", v[7].c.n_kv_heads = 2, v[7].c.qk_norm = 1, v[7].c.mlp = MODEL_MLP_RELU2;
	v[7].c.softcap = 2.0, v[7].c.norm_eps = 1e-3, v[7].c.tie_embeddings = 1, v[7].c.z_loss = 1e-3;
	static const char *const how_name[] = { "CPU pass", "CPU pass, all threads", "op table" };
	for (int i = 0; i < 8; i++)
		for (int how = PLAIN; how <= OP_TABLE; how++) {
			double d = decode_vs_forward(v[i].c, how);
			ok(d <= 1e-4, "%s, %s: decoder logits equal model_forward's (max diff %.2g)",
			   v[i].name, how_name[how], d);
		}
}

int main(void)
{
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model_config cfg = { .vocab = V, .ctx = CTX, .d_model = 32, .n_layers = 2, .n_heads = 4,
			     .d_ff = 48, .rope_theta = 10000.0 };
	if (model_init(&m, &cfg, be, 1, CTX, &e) < 0) {
		diag("%s", e.msg);
		return 1;
	}
	lm_rng r;
	rng_seed(&r, 31);
	model_init_weights(&m, &r, &e);
	make_tokenizer();

	static harness h1, hb, hs;
	/* prompts of different lengths, one longer than a chunk */
	static const size_t lens[] = { 1, 5, 17, 3, MODEL_DECODE_CHUNK + 30, 9 };
	h1.n_prompts = sizeof lens / sizeof lens[0];
	for (size_t p = 0; p < h1.n_prompts; p++) {
		h1.plen[p] = lens[p];
		for (size_t i = 0; i < lens[p]; i++)
			h1.prompts[p][i] = (uint32_t)((p * 37 + i * 11) % (V - 1));
	}
	hb = hs = h1;

	gen_config c = { .sp = { 1.0, 0, 1, 0 }, .seed = 77, .n_samples = 2, .max_tokens = MAX_TOK,
			 .eot = EOT, .lazy = 1 };
	ok(run(&h1, 2, &c) == 0 && h1.n_res == 2 * h1.n_prompts, "sampling one prompt at a time runs");
	c.lazy = 0;
	ok(run(&hb, 7, &c) == 0 && same(&h1, &hb, 1e-5), "a batch of 7 slots gives the same samples");
	ok(run(&hs, 12, &c) == 0 && same(&h1, &hs, 1e-5), "a batch of 12 slots: the same again");
	ok(run_as(&hs, 7, &c, ALL_THREADS) == 0 && same(&h1, &hs, 1e-5),
	   "every thread on every chunk (%d): the same samples", omp_get_max_threads());
	ok(run_as(&hs, 7, &c, OP_TABLE) == 0 && same(&h1, &hs, 1e-5),
	   "the op table's ops instead of the CPU pass: the same samples");

	double worst = 0;
	for (size_t i = 0; i < h1.n_res; i++) {
		size_t pl;
		const float *lg = full_forward(&h1, &h1.res[i], &pl);
		for (size_t t = 0; lg && t < h1.res[i].n; t++) {
			double lp = sample_logprob(lg + (pl - 1 + t) * V, V, h1.res[i].ids[t]);
			double d = fabs(lp - h1.res[i].lp[t]);
			worst = d > worst ? d : worst;
		}
	}
	ok(worst <= 1e-4, "log-probs equal a teacher-forced full forward pass (max diff %.2g <= 1e-4)", worst);

	c.sp = (sample_params){ 0, 0, 1, 0 };
	c.n_samples = 1;
	ok(run(&hb, 4, &c) == 0, "greedy runs");
	int chain_bad = 0;
	for (size_t i = 0; i < hb.n_res; i++) {
		size_t pl;
		const float *lg = full_forward(&hb, &hb.res[i], &pl);
		for (size_t t = 0; lg && t < hb.res[i].n; t++) {
			const float *row = lg + (pl - 1 + t) * V;
			uint32_t am = 0;
			for (uint32_t v = 1; v < V; v++)
				am = row[v] > row[am] ? v : am;
			chain_bad += am != hb.res[i].ids[t];
		}
	}
	is_int(chain_bad, 0, "greedy equals the argmax chain of repeated full forward passes");

	c.sp = (sample_params){ 0.8, 40, 0.9, 0 };
	c.n_samples = 3;
	c.seed = 5;
	hs.n_prompts = hb.n_prompts = 4;
	run(&hs, 6, &c);
	run(&hb, 3, &c);
	ok(hs.n_res == 12 && same(&hs, &hb, 1e-5), "same seed, other batch: same samples (top-k, top-p)");
	c.seed = 6;
	run(&hb, 6, &c);
	ok(!same(&hs, &hb, 1e-5), "another seed: other samples");

	model_decoder md;
	ok(model_decoder_init(&md, &m, 2, CTX + 1, &e) < 0, "a cache longer than the context is refused (%s)", e.msg);
	check_variants();
	model_free(&m);
	be->close(be);
	return done_testing();
}
