/* sampler.c: temperature, top-k, top-p and a seeded draw over one logits row
 * (see sampler.h). */
#include "gen/sampler.h"

#include "kernels/decode_ops.h"
#include "kernels/lse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A candidate as one number: the bits of its unnormalised probability
 * exp((logit - max) / T) (a positive float) inverted, above its id, so that
 * candidate order (more probable first, then the lower id) is the order of
 * the numbers: comparisons are integer ones and a sort is a radix sort. */
struct sample_cand {
	uint64_t key;
};

static inline struct sample_cand cand_make(float p, uint32_t id)
{
	uint32_t bits;
	memcpy(&bits, &p, sizeof bits);
	return (struct sample_cand){ (uint64_t)~bits << 32 | id };
}

static inline float cand_p(struct sample_cand c)
{
	uint32_t bits = ~(uint32_t)(c.key >> 32);
	float p;
	memcpy(&p, &bits, sizeof p);
	return p;
}

static inline uint32_t cand_id(struct sample_cand c)
{
	return (uint32_t)c.key;
}

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
	size_t n = n_vocab ? n_vocab : 1;
	w->cand = malloc(n * sizeof *w->cand);
	w->tmp = malloc(n * sizeof *w->tmp);
	if (!w->cand || !w->tmp) {
		sample_work_free(w);
		return lm_seterr(e, "sampler scratch for %u tokens:", n_vocab);
	}
	return 0;
}

void sample_work_free(sample_work *w)
{
	free(w->cand);
	free(w->tmp);
	w->cand = w->tmp = NULL;
}

int sample_params_check(const sample_params *p, lm_err *e)
{
	if (!(p->temperature >= 0) || isinf(p->temperature))
		return lm_usage_err(e, "temperature must be a finite number >= 0");
	if (!(p->top_p > 0 && p->top_p <= 1))
		return lm_usage_err(e, "top-p must be in (0, 1]");
	return 0;
}

int sample_greedy(double temperature)
{
	return temperature == 0 || isinf((float)(1.0 / temperature));
}

/* Candidate order: more probable first, then lower id. */
static inline int before(const struct sample_cand *a, const struct sample_cand *b)
{
	return a->key < b->key;
}

/* Sort c[0 .. n) into candidate order (tmp: room for n): by insertion
 * when short, else by an LSD radix sort of the keys a byte a pass, the
 * passes whose byte is the same in every key skipped (the ids' high bytes,
 * most of the probabilities' exponent), the others' counts made in one read.
 * The order is total, so any sort gives the same sequence: the sampler's
 * choices do not depend on how it sorts. */
static void sort_cands(struct sample_cand *c, struct sample_cand *tmp, size_t n)
{
	enum { SHORT = 48, DIGITS = 8 };
	if (n <= SHORT) {
		for (size_t i = 1; i < n; i++) {
			struct sample_cand x = c[i];
			size_t j = i;
			for (; j > 0 && before(&x, &c[j - 1]); j--)
				c[j] = c[j - 1];
			c[j] = x;
		}
		return;
	}
	uint64_t differ = 0; /* the bits in which some key differs from the first */
	for (size_t i = 1; i < n; i++)
		differ |= c[i].key ^ c[0].key;
	int pass[DIGITS], n_pass = 0;
	for (int d = 0; d < DIGITS; d++)
		if ((differ >> (8 * d)) & 0xFF)
			pass[n_pass++] = d;
	size_t count[DIGITS][256];
	memset(count, 0, (size_t)n_pass * sizeof count[0]);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < n_pass; k++)
			count[k][(c[i].key >> (8 * pass[k])) & 0xFF]++;
	struct sample_cand *src = c, *dst = tmp;
	for (int k = 0; k < n_pass; k++) {
		size_t *h = count[k], sum = 0;
		unsigned shift = 8 * (unsigned)pass[k];
		for (int v = 0; v < 256; v++) {
			size_t m = h[v];
			h[v] = sum;
			sum += m;
		}
		for (size_t i = 0; i < n; i++)
			dst[h[(src[i].key >> shift) & 0xFF]++] = src[i];
		struct sample_cand *t = src;
		src = dst;
		dst = t;
	}
	if (src != c)
		memcpy(c, src, n * sizeof *c);
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
	for (size_t i = from; i < n; i++) {
		double p = cand_p(c[i]);
		if (p >= t) {
			*mass += p;
			swap(&c[i], &c[m++]);
		}
	}
	return m;
}

/* Cut c[0 .. n) (total mass `mass`) to the nucleus of probability top_p:
 * gather the head by a falling threshold, each entry moved once, and sort
 * only the head. */
static size_t nucleus(struct sample_cand *c, struct sample_cand *tmp, size_t n, double mass,
		      double top_p)
{
	enum { THRESHOLD_STEP = 16 };
	double target = top_p * mass;
	double t = 1.0 / THRESHOLD_STEP; /* the most probable entry has p = 1 */
	double head_mass = 0;
	size_t m = 0;
	for (;;) {
		m = partition_at(c, m, n, t, &head_mass);
		if (head_mass >= target || m == n) {
			sort_cands(c, tmp, m);
			double cum = 0;
			for (size_t i = 0; i < m; i++) {
				cum += cand_p(c[i]);
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
	if (sample_greedy(p->temperature)) {
		c[0] = cand_make(1.0f, am);
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
			c[n++] = cand_make(q, i);
			mass += q;
		}
	}
	if (p->top_k > 0 && p->top_k < n) {
		select_top(c, n, p->top_k);
		n = p->top_k;
		mass = 0;
		for (size_t i = 0; i < n; i++)
			mass += cand_p(c[i]);
	}
	if (p->top_p < 1) {
		n = nucleus(c, w->tmp, n, mass, p->top_p);
		mass = 0;
		for (size_t i = 0; i < n; i++)
			mass += cand_p(c[i]);
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
		acc += cand_p(c[i]);
		if (u < acc) {
			pick = i;
			break;
		}
	}
	*token = cand_id(c[pick]);
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
	sort_cands(w->cand, w->tmp, n);
	for (size_t i = 0; i < n; i++) {
		ids[i] = cand_id(w->cand[i]);
		probs[i] = cand_p(w->cand[i]) / mass;
	}
	*n_out = (uint32_t)n;
	return 0;
}
