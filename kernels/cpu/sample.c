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

/* The set: q > 0 and p's bits above tau, or at tau among its first `ties`
 * (in id order). */
struct cut {
	uint32_t tau;
	uint64_t ties;
};

static uint64_t q_of(float p) { return (uint64_t)(p * SAMPLE_MASS_ONE); }

/* Membership of id j, counting the ties at tau seen so far in *rank. */
static int in_cut(float p, uint64_t *rank, struct cut c)
{
	uint32_t pb = fbits(p);
	if (!q_of(p) || pb < c.tau)
		return 0;
	return pb > c.tau || (*rank)++ < c.ties;
}

/* The threshold of the members' first `want` (tokens, or mass with
 * by_mass) in decreasing p: four passes over p's bits, 8 at a time, of a
 * 256-bin histogram of the members that share the bits chosen so far.
 * Returns the bits; *left is what the tokens at exactly those bits must
 * still supply. */
static uint32_t radix_select(const float *p, int n, struct cut c, uint64_t want, int by_mass,
			     uint64_t *left)
{
	uint32_t prefix = 0, mask = 0;
	uint64_t need = want;
	for (int shift = 24; shift >= 0; shift -= 8) {
		uint64_t h[256] = { 0 }, rank = 0;
		for (int j = 0; j < n; j++)
			if (in_cut(p[j], &rank, c) && (fbits(p[j]) & mask) == prefix)
				h[(fbits(p[j]) >> shift) & 255] += by_mass ? q_of(p[j]) : 1;
		int b = 255;
		for (; b > 0 && h[b] < need; b--)
			need -= h[b];
		prefix |= (uint32_t)b << shift;
		mask |= 255u << shift;
	}
	*left = need;
	return prefix;
}

static uint64_t mass_of(const float *p, int n, struct cut c, uint64_t *count)
{
	uint64_t m = 0, k = 0, rank = 0;
	for (int j = 0; j < n; j++)
		if (in_cut(p[j], &rank, c)) {
			m += q_of(p[j]);
			k++;
		}
	if (count)
		*count = k;
	return m;
}

/* The first member of c in id order whose cumulative mass passes want
 * (want < c's mass). */
static int draw_at(const float *p, int n, struct cut c, uint64_t want)
{
	uint64_t acc = 0, rank = 0;
	int t = -1;
	for (int j = 0; j < n; j++) {
		if (!in_cut(p[j], &rank, c))
			continue;
		t = j;
		if (acc + q_of(p[j]) > want)
			break;
		acc += q_of(p[j]);
	}
	return t;
}

/* The nucleus of what is left: the fewest most probable of c's members
 * (equal p by id) whose mass reaches target. */
static struct cut nucleus(const float *p, int n, struct cut c, uint64_t target)
{
	uint64_t left;
	uint32_t tau = radix_select(p, n, c, target, 1, &left);
	uint64_t qt = q_of(bitsf(tau)), m = (left + qt - 1) / qt;
	return (struct cut){ tau, m ? m : 1 };
}

static uint64_t want_of(float u, uint64_t mass)
{
	uint64_t want = (uint64_t)((double)u * (double)mass);
	return want < mass ? want : mass - 1;
}

/* Where the rejected draw w (of the rejected mass) falls on the kept mass:
 * the same doubles as the device's. */
static uint64_t reject_want(uint64_t w, uint64_t rejected, uint64_t kept)
{
	uint64_t v = rejected ? (uint64_t)((double)w / (double)rejected * (double)kept) : 0;
	return v < kept ? v : kept - 1;
}

/* The mass ranked before x (larger p, or equal p and a lower id). */
static uint64_t mass_before(const float *p, int n, int x)
{
	uint32_t xb = fbits(p[x]);
	uint64_t before = 0;
	for (int j = 0; j < n; j++) {
		uint32_t pb = fbits(p[j]);
		if (q_of(p[j]) && (pb > xb || (pb == xb && j < x)))
			before += q_of(p[j]);
	}
	return before;
}

/* The draw by rejection (sample.h): x_k at u[k] on all the mass, the
 * first kept whose mass ranked before is below target, which is x_k being
 * in the nucleus; when none is, the nucleus is found and the last draw
 * placed on it by where it fell among the rejected mass. */
static int draw_reject(const float *p, int n, uint64_t mass, uint64_t target, const float *u)
{
	struct cut all = { 0, 0 };
	uint64_t want = 0;
	int x = -1;
	for (int k = 0; k < SAMPLE_DRAWS; k++) {
		want = want_of(u[k], mass);
		x = draw_at(p, n, all, want);
		if (mass_before(p, n, x) < target)
			return x;
	}
	struct cut c = nucleus(p, n, all, target);
	uint64_t kept = mass_of(p, n, c, NULL), below = 0, rank = 0;
	for (int j = 0; j < x; j++)
		if (in_cut(p[j], &rank, c))
			below += q_of(p[j]);
	return draw_at(p, n, c, reject_want(want - below, mass - kept, kept));
}

static void one_row(int32_t *tok, float *lp, const float *l, const float *u, int32_t forced,
		    int V, sample_args a, int reject, float *p)
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
	} else if (a.temperature > 0 && !isinf(1.0f / a.temperature)) {
		/* (a temperature whose reciprocal overflows is greedy, as in
		 * gen/sampler.c's sample_greedy) */
		float inv_t = 1.0f / a.temperature;
		for (int j = 0; j < n; j++)
			p[j] = expf((l[j] - mx) * inv_t);
		struct cut c = { 0, 0 };
		uint64_t members;
		uint64_t mass = mass_of(p, n, c, &members);
		if (a.top_k > 0 && (uint64_t)a.top_k < members) {
			uint64_t left;
			uint32_t tau = radix_select(p, n, c, (uint64_t)a.top_k, 0, &left);
			c = (struct cut){ tau, left };
			mass = mass_of(p, n, c, NULL);
		}
		if (a.top_p < 1) {
			uint64_t target = (uint64_t)((double)a.top_p * (double)mass);
			target = target ? target : 1;
			if (reject) {
				*tok = draw_reject(p, n, mass, target, u);
				*lp = (float)((double)l[*tok] - lse);
				return;
			}
			c = nucleus(p, n, c, target);
			mass = mass_of(p, n, c, NULL);
		}
		t = draw_at(p, n, c, want_of(u[0], mass));
	}
	*tok = t;
	*lp = (float)((double)l[t] - lse);
}

void sample_rows_cpu(int32_t *tok, float *lp, const float *logits, const int32_t *row,
		     const float *u, const int32_t *forced, const sample_feed *feed,
		     int n, int V, sample_args a)
{
	/* one row's probabilities: the caller's logits are not ours to overwrite */
	float *p = malloc((size_t)(V > 0 ? V : 1) * sizeof *p);
	int reject = sample_rejects(n, a);
	for (int i = 0; i < n; i++) {
		if (p)
			one_row(tok + i, lp + i, logits + (size_t)row[i] * V, u + (size_t)i * SAMPLE_DRAWS,
				forced ? forced[i] : -1, V, a, reject, p);
		else
			tok[i] = -1;
		if (feed) {
			int32_t t = tok[i] < 0 ? 0 : tok[i];
			feed->ids[i] = t;
			feed->pos[i]++;
			if (feed->x)
				memcpy(feed->x + (size_t)i * feed->C, feed->table + (size_t)t * feed->C,
				       (size_t)feed->C * sizeof *feed->x);
		}
	}
	free(p);
}
