/* sampler.c: temperature, top-k, top-p and a seeded draw over one logits row
 * (see sampler.h). */
#include "gen/sampler.h"

#include "kernels/decode_ops.h"
#include "kernels/lse.h"

#include <math.h>
#include <stdlib.h>

struct sample_cand {
	double p;    /* unnormalised probability exp((logit - max) / T) */
	uint32_t id;
};

/* splitmix64, to hash the stream's coordinates into a seed. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void sample_rng_seed(lm_rng *r, uint64_t seed, uint64_t prompt, uint64_t sample)
{
	/* Hash the three coordinates in turn so that (seed, prompt, sample)
	 * triples that differ anywhere give unrelated streams. */
	uint64_t x = seed;
	uint64_t h = splitmix64(&x);
	x = h ^ prompt;
	h = splitmix64(&x);
	x = h ^ sample;
	rng_seed(r, splitmix64(&x));
}

int sample_work_init(sample_work *w, uint32_t n_vocab, lm_err *e)
{
	w->n_vocab = n_vocab;
	w->cand = malloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *w->cand);
	if (!w->cand)
		return lm_seterr(e, "sampler scratch for %u tokens:", n_vocab);
	return 0;
}

void sample_work_free(sample_work *w)
{
	free(w->cand);
	w->cand = NULL;
}

int sample_params_check(const sample_params *p, lm_err *e)
{
	if (!(p->temperature >= 0) || isinf(p->temperature))
		return lm_usage_err(e, "temperature must be a finite number >= 0");
	if (!(p->top_p > 0 && p->top_p <= 1))
		return lm_usage_err(e, "top-p must be in (0, 1]");
	return 0;
}

/* Candidate order: more probable first, then lower id. */
static int before(const struct sample_cand *a, const struct sample_cand *b)
{
	return a->p > b->p || (a->p == b->p && a->id < b->id);
}

static int cmp_cand(const void *pa, const void *pb)
{
	const struct sample_cand *a = pa, *b = pb;
	return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

static void swap(struct sample_cand *a, struct sample_cand *b)
{
	struct sample_cand t = *a;
	*a = *b;
	*b = t;
}

/* Restore the heap below node i of h[0 .. k): every parent comes after
 * its children in candidate order, so h[0] is the last of the k. */
static void sift_down(struct sample_cand *h, size_t k, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, last = i;
		if (l < k && before(&h[last], &h[l]))
			last = l;
		if (r < k && before(&h[last], &h[r]))
			last = r;
		if (last == i)
			return;
		swap(&h[i], &h[last]);
		i = last;
	}
}

/* Move the k first entries of c[0 .. n) in candidate order to c[0 .. k)
 * (in no particular order): a heap of the k best so far, which most
 * entries leave at one comparison with its root. */
static void select_top(struct sample_cand *c, size_t n, size_t k)
{
	for (size_t i = k / 2; i-- > 0;)
		sift_down(c, k, i);
	for (size_t i = k; i < n; i++)
		if (before(&c[i], &c[0])) {
			c[0] = c[i];
			sift_down(c, k, 0);
		}
}

/* Move the entries of c[from .. n) with p >= t to c[from ..); return
 * where they end, adding their mass to *mass. */
static size_t partition_at(struct sample_cand *c, size_t from, size_t n, double t, double *mass)
{
	size_t m = from;
	for (size_t i = from; i < n; i++)
		if (c[i].p >= t) {
			*mass += c[i].p;
			swap(&c[i], &c[m++]);
		}
	return m;
}

/* Cut c[0 .. n) (total mass `mass`) to the nucleus of probability top_p:
 * gather the head by a falling threshold, each entry moved once, and sort
 * only the head. */
static size_t nucleus(struct sample_cand *c, size_t n, double mass, double top_p)
{
	enum { THRESHOLD_STEP = 16 };
	double target = top_p * mass;
	double t = 1.0 / THRESHOLD_STEP; /* the most probable entry has p = 1 */
	double head_mass = 0;
	size_t m = 0;
	for (;;) {
		m = partition_at(c, m, n, t, &head_mass);
		if (head_mass >= target || m == n) {
			qsort(c, m, sizeof *c, cmp_cand);
			double cum = 0;
			for (size_t i = 0; i < m; i++) {
				cum += c[i].p;
				if (cum >= target)
					return i + 1;
			}
			if (m == n)
				return n;
		}
		t /= THRESHOLD_STEP;
	}
}

/* Scan the row: reject NaN and +inf; find the max and the lowest argmax
 * among the first n_draw ids. */
static int scan(const float *logits, uint32_t n, uint32_t n_draw, float *max, uint32_t *argmax,
		lm_err *e)
{
	long bad = dec_row_bad(logits, n);
	if (bad >= 0)
		return lm_seterr(e, "logit %ld is %s", bad, isnan(logits[bad]) ? "NaN" : "+inf");
	size_t am;
	float mx = dec_row_argmax(logits, n_draw, &am);
	if (mx == -INFINITY)
		return lm_seterr(e, "every logit is -inf: no token can be chosen");
	*max = mx;
	*argmax = (uint32_t)am;
	return 0;
}

double sample_logprob(const float *logits, uint32_t n_vocab, uint32_t token)
{
	return (double)logits[token] - lse_row_cpu(logits, n_vocab);
}

/* Fill w->cand[0 .. *n) with the candidate set, unnormalised; *mass is
 * its total.  Greedy leaves the argmax alone. */
static int support(const float *logits, const sample_params *p, sample_work *w,
		   size_t *n_out, double *mass_out, lm_err *e)
{
	float mx = -INFINITY;
	uint32_t am = 0;
	uint32_t n_draw = p->limit && p->limit < w->n_vocab ? p->limit : w->n_vocab;
	if (sample_params_check(p, e) < 0 || scan(logits, w->n_vocab, n_draw, &mx, &am, e) < 0)
		return -1;
	struct sample_cand *c = w->cand;
	if (p->temperature == 0) {
		c[0] = (struct sample_cand){ 1.0, am };
		*n_out = 1;
		*mass_out = 1.0;
		return 0;
	}
	float inv_t = (float)(1.0 / p->temperature);
	size_t n = 0;
	double mass = 0;
	for (uint32_t i = 0; i < n_draw; i++) {
		float q = expf((logits[i] - mx) * inv_t);
		if (q > 0) {
			c[n++] = (struct sample_cand){ q, i };
			mass += q;
		}
	}
	if (p->top_k > 0 && p->top_k < n) {
		select_top(c, n, p->top_k);
		n = p->top_k;
		mass = 0;
		for (size_t i = 0; i < n; i++)
			mass += c[i].p;
	}
	if (p->top_p < 1) {
		n = nucleus(c, n, mass, p->top_p);
		mass = 0;
		for (size_t i = 0; i < n; i++)
			mass += c[i].p;
	}
	*n_out = n;
	*mass_out = mass;
	return 0;
}

int sample_token(const float *logits, const sample_params *p, lm_rng *rng,
		 sample_work *w, uint32_t *token, double *logprob, lm_err *e)
{
	size_t n;
	double mass;
	if (support(logits, p, w, &n, &mass, e) < 0)
		return -1;
	/* One draw per step even when greedy, so streams stay aligned. */
	double u = rng_uniform(rng) * mass;
	const struct sample_cand *c = w->cand;
	size_t pick = n - 1;
	double acc = 0;
	for (size_t i = 0; i < n; i++) {
		acc += c[i].p;
		if (u < acc) {
			pick = i;
			break;
		}
	}
	*token = c[pick].id;
	if (logprob)
		*logprob = sample_logprob(logits, w->n_vocab, *token);
	return 0;
}

int sample_support(const float *logits, const sample_params *p, sample_work *w,
		   uint32_t *ids, double *probs, uint32_t *n_out, lm_err *e)
{
	size_t n;
	double mass;
	if (support(logits, p, w, &n, &mass, e) < 0)
		return -1;
	qsort(w->cand, n, sizeof *w->cand, cmp_cand);
	for (size_t i = 0; i < n; i++) {
		ids[i] = w->cand[i].id;
		probs[i] = w->cand[i].p / mass;
	}
	*n_out = (uint32_t)n;
	return 0;
}
