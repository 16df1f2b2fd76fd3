/* test_sample.c: the sampler: random streams, greedy ties, top-k/top-p
 * supports against a brute-force sort, draw frequencies (chi-square, fixed
 * seed), log-probabilities and bad rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "gen/sampler.h"

enum { MAXV = 512, DRAWS = 200000, RANDOM_ROWS = 300 };

typedef struct ref_cand {
	double p;
	uint32_t id;
} ref_cand;

static int cmp_ref(const void *pa, const void *pb)
{
	const ref_cand *a = pa, *b = pb;
	if (a->p != b->p)
		return a->p > b->p ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* The definition, by sorting everything: ids in order, count returned. */
static uint32_t ref_support(const float *l, uint32_t V, const sample_params *sp, uint32_t *ids,
			    double *probs)
{
	static ref_cand *c;
	static uint32_t cap;
	if (V > cap) {
		free(c);
		cap = V;
		c = malloc(cap * sizeof *c);
		if (!c)
			abort();
	}
	float mx = -INFINITY;
	for (uint32_t i = 0; i < V; i++)
		mx = l[i] > mx ? l[i] : mx;
	uint32_t n = 0;
	for (uint32_t i = 0; i < V; i++) {
		double q = sp->temperature == 0 ? (l[i] == mx) : expf((l[i] - mx) * (float)(1.0 / sp->temperature));
		if (q > 0)
			c[n++] = (ref_cand){ q, i };
	}
	qsort(c, n, sizeof *c, cmp_ref);
	if (sp->temperature == 0)
		n = 1;
	if (sp->top_k && sp->top_k < n)
		n = sp->top_k;
	double mass = 0;
	for (uint32_t i = 0; i < n; i++)
		mass += c[i].p;
	if (sp->top_p < 1) {
		double cum = 0;
		for (uint32_t i = 0; i < n; i++) {
			cum += c[i].p;
			if (cum >= sp->top_p * mass) {
				n = i + 1;
				break;
			}
		}
	}
	mass = 0;
	for (uint32_t i = 0; i < n; i++)
		mass += c[i].p;
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = c[i].id;
		probs[i] = c[i].p / mass;
	}
	return n;
}

static void test_rng(void)
{
	lm_rng a, b, c, d;
	sample_rng_seed(&a, 42, 3, 1);
	sample_rng_seed(&b, 42, 3, 1);
	sample_rng_seed(&c, 42, 1, 3);
	sample_rng_seed(&d, 43, 3, 1);
	int same = 1, diff_c = 0, diff_d = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = rng_next(&a);
		same &= x == rng_next(&b);
		diff_c += x != rng_next(&c);
		diff_d += x != rng_next(&d);
	}
	ok(same, "same (seed, prompt, sample): same stream");
	ok(diff_c == 1000, "swapped prompt and sample indexes: another stream");
	ok(diff_d == 1000, "another seed: another stream");
	double lo = 1, hi = 0, sum = 0;
	for (int i = 0; i < 100000; i++) {
		double u = rng_uniform(&a);
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
		sum += u;
	}
	ok(lo >= 0 && hi < 1, "uniform draws lie in [0, 1)");
	near(sum / 100000, 0.5, 0.01, "uniform draws have mean 1/2");
}

static void test_greedy(sample_work *w)
{
	float l[8] = { 0.5f, 3.0f, -INFINITY, 3.0f, 1.0f, 3.0f, 2.9f, -1.0f };
	sample_params g = { 0, 0, 1, 0 };
	lm_rng r;
	sample_rng_seed(&r, 1, 0, 0);
	uint32_t tok = 99;
	double lp = 0;
	lm_err e;
	w->n_vocab = 8;
	is_int(sample_token(l, &g, &r, w, &tok, &lp, &e), 0, "greedy samples");
	is_int(tok, 1, "greedy: argmax, ties to the lowest id");
	double s = 0;
	for (int i = 0; i < 8; i++)
		s += expf(l[i] - 3.0f);
	near(lp, -log(s), 1e-12, "greedy: log-prob is the log-softmax at temperature 1");
	sample_params tk = { 1.0, 2, 1, 0 };
	uint32_t ids[8], n;
	double pr[8];
	sample_support(l, &tk, w, ids, pr, &n, &e);
	ok(n == 2 && ids[0] == 1 && ids[1] == 3, "top-k 2 over a three-way tie keeps the two lowest ids");
	/* temperatures whose reciprocal overflows a float: greedy, not a NaN
	 * top logit and an empty support */
	const double tiny[] = { 1e-40, 2.9e-39, 1e-300, 4.9e-324 };
	for (int i = 0; i < 4; i++) {
		sample_params t = { tiny[i], 0, 0.9, 0 };
		tok = 99;
		int rc = sample_token(l, &t, &r, w, &tok, &lp, &e);
		ok(sample_greedy(tiny[i]) && rc == 0 && tok == 1, "temperature %g is greedy (token %u)",
		   tiny[i], tok);
		sample_support(l, &t, w, ids, pr, &n, &e);
		ok(n == 1 && ids[0] == 1 && pr[0] == 1, "temperature %g: the argmax alone", tiny[i]);
	}
	/* the smallest that is not: the three-way tie at the top stays a tie */
	sample_params t30 = { 3e-38, 0, 1, 0 };
	sample_support(l, &t30, w, ids, pr, &n, &e);
	ok(!sample_greedy(3e-38) && n == 3 && ids[0] == 1 && ids[1] == 3 && ids[2] == 5,
	   "temperature 3e-38 keeps the three tied maxima (%u)", n);
}

/* Rows with random logits, some quantised so that probabilities tie. */
static void random_row(float *l, uint32_t V, lm_rng *r)
{
	int quantise = rng_uniform(r) < 0.3;
	double scale = 0.5 + 6 * rng_uniform(r);
	for (uint32_t i = 0; i < V; i++) {
		double x = scale * (rng_uniform(r) * 2 - 1);
		l[i] = quantise ? (float)floor(x) : (float)x;
		if (rng_uniform(r) < 0.02)
			l[i] = -INFINITY;
	}
	l[rng_next(r) % V] = 1.0f; /* at least one finite */
}

static void test_supports(sample_work *w)
{
	lm_rng r;
	sample_rng_seed(&r, 7, 0, 0);
	static float l[MAXV];
	static uint32_t ids[MAXV], rids[MAXV];
	static double pr[MAXV], rpr[MAXV];
	int bad = 0;
	lm_err e;
	for (int it = 0; it < RANDOM_ROWS; it++) {
		uint32_t V = 2 + (uint32_t)(rng_next(&r) % (MAXV - 1));
		random_row(l, V, &r);
		static const double temps[] = { 0, 0.3, 1, 1.7 };
		static const double tops[] = { 1, 0.9, 0.5, 0.05 };
		sample_params sp = { temps[rng_next(&r) % 4], (uint32_t)(rng_next(&r) % 4 == 0 ? 0 : rng_next(&r) % V),
				     tops[rng_next(&r) % 4], 0 };
		w->n_vocab = V;
		uint32_t n, rn = ref_support(l, V, &sp, rids, rpr);
		if (sample_support(l, &sp, w, ids, pr, &n, &e) < 0 || n != rn) {
			bad++;
			continue;
		}
		for (uint32_t i = 0; i < n; i++)
			if (ids[i] != rids[i] || fabs(pr[i] - rpr[i]) > 1e-12)
				bad++;
	}
	is_int(bad, 0, "%d random rows: top-k/top-p supports equal the brute-force definition", RANDOM_ROWS);
}

/* Rows of large vocabularies, where the sampler sorts by radix: flat ones
 * (a nucleus of nearly every id), peaked ones, and ties (quantised
 * logits, whole runs of equal probability), against the definition. */
static void test_large_supports(void)
{
	static const uint32_t sizes[] = { 49, 1000, 10000, 50257 };
	static const double scales[] = { 0.05, 0.5, 3, 12 };
	static const double tops[] = { 1, 0.95, 0.5, 0.01 };
	enum { MAX = 50257 };
	float *l = malloc(MAX * sizeof *l);
	uint32_t *ids = malloc(MAX * sizeof *ids), *rids = malloc(MAX * sizeof *rids);
	double *pr = malloc(MAX * sizeof *pr), *rpr = malloc(MAX * sizeof *rpr);
	sample_work w;
	lm_err e;
	if (!l || !ids || !rids || !pr || !rpr || sample_work_init(&w, MAX, &e) < 0)
		abort();
	lm_rng r;
	sample_rng_seed(&r, 31, 0, 0);
	int bad = 0, rows = 0, big = 0;
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
		for (size_t k = 0; k < 4; k++)
			for (int quantise = 0; quantise < 2; quantise++) {
				uint32_t V = sizes[si];
				for (uint32_t i = 0; i < V; i++) {
					double x = scales[k] * (rng_uniform(&r) * 2 - 1);
					l[i] = quantise ? (float)(floor(x * 4) / 4) : (float)x;
				}
				sample_params sp = { 1, (uint32_t)(rows % 3 == 2 ? V / 3 : 0), tops[(rows + k) % 4], 0 };
				w.n_vocab = V;
				uint32_t n, rn = ref_support(l, V, &sp, rids, rpr);
				rows++;
				big += rn > 1000;
				if (sample_support(l, &sp, &w, ids, pr, &n, &e) < 0 || n != rn) {
					bad++;
					continue;
				}
				for (uint32_t i = 0; i < n; i++)
					if (ids[i] != rids[i] || fabs(pr[i] - rpr[i]) > 1e-12) {
						bad++;
						break;
					}
			}
	is_int(bad, 0, "%d rows of 49 to 50257 ids (%d supports of over 1000): the definition's", rows,
	       big);
	ok(big >= 8, "the large cases include large supports (%d)", big);
	sample_work_free(&w);
	free(l);
	free(ids);
	free(rids);
	free(pr);
	free(rpr);
}

/* Draw DRAWS tokens; none may fall outside the support; the counts must fit
 * the renormalised probabilities (chi-square, generous bound). */
static void check_draws(sample_work *w, const float *l, uint32_t V, sample_params sp, const char *what)
{
	static uint32_t ids[MAXV];
	static double pr[MAXV];
	static long count[MAXV];
	lm_err e;
	w->n_vocab = V;
	uint32_t n = ref_support(l, V, &sp, ids, pr);
	memset(count, 0, sizeof count);
	lm_rng r;
	sample_rng_seed(&r, 2024, 0, 0);
	long outside = 0;
	for (int i = 0; i < DRAWS; i++) {
		uint32_t tok;
		sample_token(l, &sp, &r, w, &tok, NULL, &e);
		int in = 0;
		for (uint32_t j = 0; j < n; j++)
			if (ids[j] == tok) {
				count[j]++;
				in = 1;
			}
		outside += !in;
	}
	is_int(outside, 0, "%s: no draw outside the %u-token support", what, n);
	double chi2 = 0;
	for (uint32_t j = 0; j < n; j++) {
		double expect = pr[j] * DRAWS;
		chi2 += (count[j] - expect) * (count[j] - expect) / expect;
	}
	double df = n > 1 ? n - 1 : 1;
	double bound = df + 8 * sqrt(2 * df) + 10; /* far beyond p = 1e-6 */
	ok(chi2 < bound, "%s: frequencies match the renormalised probabilities (chi2 %.1f < %.1f, df %.0f)",
	   what, chi2, bound, df);
}

static void test_frequencies(sample_work *w)
{
	enum { V = 40 };
	float l[V];
	for (int i = 0; i < V; i++)
		l[i] = (float)(-0.15 * i + 0.3 * sin(i)); /* a fixed, skewed distribution */
	l[7] = l[3]; /* one tie */
	check_draws(w, l, V, (sample_params){ 1, 0, 1, 0 }, "plain sampling");
	check_draws(w, l, V, (sample_params){ 1, 8, 1, 0 }, "top-k 8");
	check_draws(w, l, V, (sample_params){ 1, 0, 0.7, 0 }, "top-p 0.7");
	check_draws(w, l, V, (sample_params){ 0.6, 12, 0.8, 0 }, "temperature 0.6, top-k 12, top-p 0.8");
	check_draws(w, l, V, (sample_params){ 2.5, 0, 0.95, 0 }, "temperature 2.5, top-p 0.95");
}

static void test_determinism(sample_work *w)
{
	enum { V = 300, STEPS = 200 };
	float l[V];
	lm_rng g;
	sample_rng_seed(&g, 5, 0, 0);
	sample_params sp = { 0.9, 50, 0.9, 0 };
	uint32_t a[STEPS], b[STEPS];
	lm_err e;
	w->n_vocab = V;
	for (int pass = 0; pass < 2; pass++) {
		lm_rng r, rows;
		sample_rng_seed(&r, 11, 4, 2);
		sample_rng_seed(&rows, 5, 0, 0);
		for (int s = 0; s < STEPS; s++) {
			random_row(l, V, &rows);
			sample_token(l, &sp, &r, w, pass ? &b[s] : &a[s], NULL, &e);
		}
	}
	ok(!memcmp(a, b, sizeof a), "same seed and rows: same tokens");
}

static void test_errors(sample_work *w)
{
	float l[4] = { 0, NAN, 1, 2 };
	lm_rng r;
	sample_rng_seed(&r, 1, 0, 0);
	uint32_t tok;
	lm_err e;
	sample_params sp = { 1, 0, 1, 0 };
	w->n_vocab = 4;
	ok(sample_token(l, &sp, &r, w, &tok, NULL, &e) < 0 && strstr(e.msg, "logit 1 is NaN"),
	   "a NaN logit is an error naming it (%s)", e.msg);
	float inf[3] = { -INFINITY, -INFINITY, -INFINITY };
	w->n_vocab = 3;
	ok(sample_token(inf, &sp, &r, w, &tok, NULL, &e) < 0, "all -inf is an error (%s)", e.msg);
	sample_params badp = { 1, 0, 0, 0 };
	ok(sample_params_check(&badp, &e) < 0 && e.code == 2, "top-p 0 is a usage error (%s)", e.msg);
	sample_params badt = { -1, 0, 1, 0 };
	ok(sample_params_check(&badt, &e) < 0, "negative temperature is refused (%s)", e.msg);
	float masked[3] = { -INFINITY, 0, -INFINITY };
	int never = 1;
	for (int i = 0; i < 1000; i++) {
		sample_token(masked, &(sample_params){ 5, 0, 1, 0 }, &r, w, &tok, NULL, &e);
		never &= tok == 1;
	}
	ok(never, "-inf logits are never drawn");
	float pad[4] = { 0, 1, 9, 9 };
	w->n_vocab = 4;
	int below = 1;
	double lp = 0;
	for (int i = 0; i < 200; i++) {
		sample_token(pad, &(sample_params){ 1, 0, 1, 2 }, &r, w, &tok, &lp, &e);
		below &= tok < 2;
	}
	sample_token(pad, &(sample_params){ 0, 0, 1, 2 }, &r, w, &tok, &lp, &e);
	ok(below && tok == 1, "limit: ids past it are never drawn, greedy too");
	near(lp, sample_logprob(pad, 4, 1), 1e-12, "limit: the log-prob is still over the whole row");
}

int main(void)
{
	sample_work w;
	lm_err e;
	if (sample_work_init(&w, MAXV, &e) < 0)
		return 1;
	test_rng();
	test_greedy(&w);
	test_supports(&w);
	test_large_supports();
	test_frequencies(&w);
	test_determinism(&w);
	test_errors(&w);
	sample_work_free(&w);
	return done_testing();
}
