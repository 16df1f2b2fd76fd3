/* sample.c: the C twin of the device sampler (see sample.h): the same
 * thresholds found the same way, sums taken in id order. */
#include "kernels/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float x)
{
	uint32_t b;
	memcpy(&b, &x, sizeof b);
	return b;
}

static float bitsf(uint32_t b)
{
	float x;
	memcpy(&x, &b, sizeof x);
	return x;
}

/* The set: p's bits above tau, and the first `ties` (in id order) at tau. */
struct cut {
	uint32_t tau;
	long ties;
};

static int in_cut(uint32_t pb, long *rank, struct cut c)
{
	if (pb > c.tau)
		return 1;
	if (pb != c.tau)
		return 0;
	return (*rank)++ < c.ties;
}

/* Mass (or count) of the set's members with bits >= t. */
static double mass_from(const float *p, int n, struct cut c, uint32_t t, int count)
{
	double s = 0;
	long rank = 0;
	for (int j = 0; j < n; j++) {
		uint32_t pb = fbits(p[j]);
		if (in_cut(pb, &rank, c) && pb >= t)
			s += count ? 1.0 : (double)p[j];
	}
	return s;
}

/* The largest t in [lo, hi) with f(t) >= want, f falling in t: f(lo) >= want. */
static uint32_t bisect(const float *p, int n, struct cut c, uint32_t lo, uint32_t hi, double want,
		       int count)
{
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (mass_from(p, n, c, mid, count) >= want)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

enum { ONE_BITS = 0x3f800000u };

static void one_row(int32_t *tok, float *lp, const float *l, float u, int32_t forced, int V,
		    sample_args a, float *p)
{
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	float mx = -INFINITY, mxall = -INFINITY;
	int am = 0, bad = 0;
	for (int j = 0; j < V; j++) {
		bad |= isnan(l[j]) || l[j] == INFINITY;
		if (l[j] > mxall)
			mxall = l[j];
		if (j < n && l[j] > mx) {
			mx = l[j];
			am = j;
		}
	}
	if (bad || mx == -INFINITY) {
		*tok = -1;
		*lp = NAN;
		return;
	}
	double se = 0;
	for (int j = 0; j < V; j++)
		se += (double)expf(l[j] - mxall);
	double lse = (double)mxall + log(se);
	int32_t t = am;
	if (forced >= 0 && forced < V) {
		t = forced;
	} else if (a.temperature > 0) {
		float inv_t = 1.0f / a.temperature;
		for (int j = 0; j < n; j++)
			p[j] = expf((l[j] - mx) * inv_t);
		struct cut c = { 0, 0 };
		double npos = mass_from(p, n, c, 1, 1);
		if (a.top_k > 0 && a.top_k < npos) {
			uint32_t tau = bisect(p, n, c, 1, ONE_BITS + 1, a.top_k, 1);
			long gt = (long)mass_from(p, n, c, tau + 1, 1);
			c = (struct cut){ tau, a.top_k - gt };
		}
		double mass = mass_from(p, n, c, 0, 0);
		if (a.top_p < 1) {
			double target = (double)a.top_p * mass;
			uint32_t tau = bisect(p, n, c, c.tau ? c.tau : 1, ONE_BITS + 1, target, 0);
			double gt = mass_from(p, n, c, tau + 1, 0);
			long m = (long)ceil((target - gt) / (double)bitsf(tau));
			if (m < 1)
				m = 1;
			if (tau == c.tau && m > c.ties)
				m = c.ties;
			c = (struct cut){ tau, m };
			mass = mass_from(p, n, c, 0, 0);
		}
		double want = (double)u * mass, acc = 0;
		long rank = 0;
		t = -1;
		for (int j = 0; j < n; j++) {
			uint32_t pb = fbits(p[j]);
			if (!in_cut(pb, &rank, c))
				continue;
			t = j;
			acc += (double)p[j];
			if (want < acc)
				break;
		}
	}
	*tok = t;
	*lp = (float)((double)l[t] - lse);
}

void sample_rows_cpu(int32_t *tok, float *lp, const float *logits, const int32_t *row,
		     const float *u, const int32_t *forced, int n, int V, sample_args a)
{
	/* one row's probabilities: the caller's logits are not ours to overwrite */
	float *p = malloc((size_t)(V > 0 ? V : 1) * sizeof *p);
	if (!p) {
		for (int i = 0; i < n; i++)
			tok[i] = -1;
		return;
	}
	for (int i = 0; i < n; i++)
		one_row(tok + i, lp + i, logits + (size_t)row[i] * V, u[i], forced ? forced[i] : -1, V,
			a, p);
	free(p);
}
