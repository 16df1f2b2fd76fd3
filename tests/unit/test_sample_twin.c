/* test_sample_twin.c: kernels/sample.h's C twin of the device sampler.
 * Over a grid of first draws u0 = (k + 1/2) / K, with the nucleus found
 * first (SAMPLE_WAY_SELECT), every token's count equals K times its
 * probability in what top-k and top-p keep (integer masses, ranked by p
 * then id, by sorting) within one draw, and nothing outside is drawn.  The
 * nucleus by rejection (SAMPLE_WAY_REJECT) is checked three ways: its
 * token equals a reference built from those definitions for many random
 * draw triples; with u0 on the grid and the later draws fixed where they
 * are rejected, a kept token's count is K times its probability within one
 * draw and the fallback's token takes the rejected share too (the first
 * draw is kept exactly when in the nucleus); and with only the last draw
 * on the grid, the fallback alone gives the nucleus's distribution (its
 * draws come from the rejected tokens' intervals, each off by less than
 * one, so a kept token may gather a few of those errors: bound 6).  A
 * wrong cut or placement is off by tens or hundreds.  (test_decode, on a
 * GPU, checks the kernel against this twin.) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/sample.h"

enum { K = 1 << 15, ROWS = 64 };

typedef struct cand {
	float p;
	int id;
} cand;

static int by_p_then_id(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->p != y->p)
		return x->p > y->p ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The nucleus's integer masses by the definition: q_j = floor(p_j 2^40),
 * members ranked by p then id, cut to the top_k first (top_k > 0), then
 * the fewest whose mass reaches top_p of theirs; q[j] = 0 outside.
 * Returns the kept mass. */
static uint64_t ref_nucleus(const float *l, int V, sample_args a, uint64_t *q)
{
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	float mx = -INFINITY;
	for (int j = 0; j < n; j++)
		mx = l[j] > mx ? l[j] : mx;
	cand *c = malloc((size_t)n * sizeof *c);
	int m = 0;
	uint64_t mass = 0;
	for (int j = 0; j < n; j++) {
		float p = expf((l[j] - mx) * (1.0f / a.temperature));
		if ((uint64_t)(p * SAMPLE_MASS_ONE)) {
			c[m++] = (cand){ p, j };
			mass += (uint64_t)(p * SAMPLE_MASS_ONE);
		}
	}
	qsort(c, (size_t)m, sizeof *c, by_p_then_id);
	if (a.top_k > 0 && a.top_k < m) {
		m = a.top_k;
		mass = 0;
		for (int i = 0; i < m; i++)
			mass += (uint64_t)(c[i].p * SAMPLE_MASS_ONE);
	}
	uint64_t target = (uint64_t)((double)a.top_p * (double)mass), kept = 0;
	target = target ? target : 1;
	memset(q, 0, (size_t)V * sizeof *q);
	for (int i = 0; i < m && kept < target; i++) {
		q[c[i].id] = (uint64_t)(c[i].p * SAMPLE_MASS_ONE);
		kept += q[c[i].id];
	}
	free(c);
	return kept;
}

static uint64_t lcg = 12345;

static float rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((lcg >> 40) / (double)(1ull << 24)) * 2 - 1;
}

/* Draws of one row, `per` rows a call (all the same row): draw k of the
 * grid is u[at] = (k + 1/2) / K, the others fixed[]. */
static void counts_of(const float *l, int V, sample_args a, int per, int at, const float *fixed,
		      long *cnt, long *bad)
{
	int32_t row[ROWS] = { 0 }, tok[ROWS];
	float u[ROWS * SAMPLE_DRAWS], lp[ROWS];
	memset(cnt, 0, (size_t)V * sizeof *cnt);
	*bad = 0;
	for (int k0 = 0; k0 < K; k0 += per) {
		for (int i = 0; i < per; i++)
			for (int d = 0; d < SAMPLE_DRAWS; d++)
				u[i * SAMPLE_DRAWS + d] = d == at ? (float)((k0 + i + 0.5) / K) : fixed[d];
		sample_rows_cpu(tok, lp, l, row, u, NULL, NULL, per, V, a);
		for (int i = 0; i < per; i++) {
			if (tok[i] < 0 || tok[i] >= V)
				(*bad)++;
			else
				cnt[tok[i]]++;
		}
	}
}

/* The largest gap between counts and K times expected masses (of total
 * `total`) over the tokens with expected > 0; *outside the draws of the
 * others. */
static double worst_gap(const long *cnt, const uint64_t *expect, uint64_t total, int V,
			long *outside)
{
	double worst = 0;
	*outside = 0;
	for (int j = 0; j < V; j++) {
		if (!expect[j]) {
			*outside += cnt[j];
			continue;
		}
		double d = fabs((double)cnt[j] - (double)K * (double)expect[j] / (double)total);
		worst = d > worst ? d : worst;
	}
	return worst;
}

/* The row's probabilities' integer masses over the drawable ids (q[j],
 * all of them: no cut); returns their sum. */
static uint64_t all_masses(const float *l, int V, sample_args a, uint64_t *q)
{
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	float mx = -INFINITY;
	for (int j = 0; j < n; j++)
		mx = l[j] > mx ? l[j] : mx;
	uint64_t mass = 0;
	for (int j = 0; j < V; j++) {
		q[j] = j < n ? (uint64_t)(expf((l[j] - mx) * (1.0f / a.temperature)) * SAMPLE_MASS_ONE) : 0;
		mass += q[j];
	}
	return mass;
}

/* The id at `want` of the masses q in id order. */
static int ref_at(const uint64_t *q, int V, uint64_t want)
{
	uint64_t acc = 0;
	for (int j = 0; j < V; j++)
		if (q[j] && (acc += q[j]) > want)
			return j;
	return -1;
}

static uint64_t ref_want(float u, uint64_t mass)
{
	uint64_t w = (uint64_t)((double)u * (double)mass);
	return w < mass ? w : mass - 1;
}

/* The nucleus by rejection (sample.h), from the definitions: q all the
 * masses, nq the nucleus's (kept of them). */
static int ref_reject(const uint64_t *q, uint64_t mass, const uint64_t *nq, uint64_t kept, int V,
		      const float *u)
{
	int x = -1;
	uint64_t want = 0;
	for (int d = 0; d < SAMPLE_DRAWS; d++) {
		want = ref_want(u[d], mass);
		x = ref_at(q, V, want);
		if (nq[x])
			return x;
	}
	uint64_t below = 0;
	for (int j = 0; j < x; j++)
		below += nq[j];
	uint64_t rej = mass - kept, w = want - below;
	uint64_t v = rej ? (uint64_t)((double)w / (double)rej * (double)kept) : 0;
	return ref_at(nq, V, v < kept ? v : kept - 1);
}

/* A draw whose token is outside the nucleus (-1: none is). */
static float rejected_draw(const uint64_t *q, uint64_t mass, const uint64_t *nq, int V)
{
	for (int k = 0; k < 4096; k++) {
		float u = (float)((k + 0.5) / 4096);
		if (!nq[ref_at(q, V, ref_want(u, mass))])
			return u;
	}
	return -1;
}

static void check(const char *what, const float *l, int V, sample_args a)
{
	uint64_t *q = malloc((size_t)V * sizeof *q), *all = malloc((size_t)V * sizeof *all);
	uint64_t *ex = malloc((size_t)V * sizeof *ex);
	long *cnt = malloc((size_t)V * sizeof *cnt), bad, outside;
	uint64_t kept = ref_nucleus(l, V, a, q);
	int size = 0;
	for (int j = 0; j < V; j++)
		size += q[j] > 0;
	const float half[SAMPLE_DRAWS] = { 0.5f, 0.5f, 0.5f };
	a.way = SAMPLE_WAY_SELECT;
	counts_of(l, V, a, ROWS, 0, half, cnt, &bad);
	double worst = worst_gap(cnt, q, kept, V, &outside);
	ok(!bad && !outside && worst <= 1,
	   "%s: %d draws over %d tokens, each within %.2f of its expected count (<= 1), "
	   "%ld outside them", what, K, size, worst, outside);
	if (!(a.top_p < 1) || a.top_k > 0) {
		free(q), free(all), free(ex), free(cnt);
		return;
	}
	a.way = SAMPLE_WAY_REJECT;
	uint64_t mass = all_masses(l, V, a, all);
	/* random draw triples against the reference */
	int differ = 0;
	for (int t = 0; t < 3000; t++) {
		float u[SAMPLE_DRAWS];
		for (int d = 0; d < SAMPLE_DRAWS; d++)
			u[d] = (float)((rnd() + 1) / 2);
		int32_t row = 0, tok;
		float lp;
		sample_rows_cpu(&tok, &lp, l, &row, u, NULL, NULL, 1, V, a);
		differ += tok != ref_reject(all, mass, q, kept, V, u);
	}
	ok(!differ, "%s, by rejection: the reference's token for 3000 random draw triples (%d differ)",
	   what, differ);
	float r = rejected_draw(all, mass, q, V);
	if (r < 0) {
		ok(1, "%s, by rejection: no draw is rejected (the nucleus is everything)", what);
		free(q), free(all), free(ex), free(cnt);
		return;
	}
	/* u0 on the grid, the later draws rejected: u0's token where kept, the
	 * fallback of the last draw's (one token, t_f) where not.  t_f's count
	 * gathers the grid's points in every run of rejected ids (in id order,
	 * one interval each, each off by less than one) */
	float fixed[SAMPLE_DRAWS] = { r, r, r };
	int tf = ref_reject(all, mass, q, kept, V, fixed);
	int runs = 0, in = 1;
	for (int j = 0; j < V; j++)
		if (all[j]) {
			runs += in && !q[j];
			in = q[j] > 0;
		}
	counts_of(l, V, a, 1, 0, fixed, cnt, &bad);
	long ctf = cnt[tf];
	cnt[tf] = 0;
	memcpy(ex, q, (size_t)V * sizeof *ex);
	ex[tf] = 0;
	worst = worst_gap(cnt, ex, mass, V, &outside);
	double gf = fabs((double)ctf - (double)K * (double)(q[tf] + mass - kept) / (double)mass);
	ok(!bad && !outside && worst <= 1 && gf <= runs + 1,
	   "%s, by rejection, the first draw on the grid: each kept token within %.2f of its "
	   "expected count (<= 1), the fallback's with the rejected share within %.2f (<= %d "
	   "runs of rejected ids + 1), %ld outside", what, worst, gf, runs, outside);
	/* the first draws rejected, the last on the grid: the fallback alone */
	counts_of(l, V, a, 1, SAMPLE_DRAWS - 1, fixed, cnt, &bad);
	worst = worst_gap(cnt, q, kept, V, &outside);
	ok(!bad && !outside && worst <= 6,
	   "%s, by rejection, the last draw on the grid after rejected ones: %d draws over %d "
	   "tokens, each within %.2f of its expected count (<= 6), %ld outside them", what, K, size,
	   worst, outside);
	free(q), free(all), free(ex), free(cnt);
}

#define ARGS(t, k, p, limit) ((sample_args){ t, k, p, limit, SAMPLE_WAY_AUTO })

int main(void)
{
	enum { V = 300 };
	float l[V];
	for (int j = 0; j < V; j++)
		l[j] = 3 * rnd() + (j % 50 == 0 ? 4 : 0);
	check("random logits, p 0.9", l, V, ARGS(1, 0, 0.9f, 0));
	check("random logits, T 0.7, p 0.999", l, V, ARGS(0.7f, 0, 0.999f, 0));
	check("random logits, T 1.5, p 0.5, ids below 200", l, V, ARGS(1.5f, 0, 0.5f, 200));
	check("random logits, p 0.01 (the top token alone)", l, V, ARGS(1, 0, 0.01f, 0));
	check("random logits, top-k 40", l, V, ARGS(1, 40, 1, 0));
	check("random logits, T 0.8, top-k 60, p 0.9", l, V, ARGS(0.8f, 60, 0.9f, 0));
	check("random logits, no cut", l, V, ARGS(1, 0, 1, 0));
	for (int j = 0; j < V; j++)
		l[j] = (float)(j % 7) * 0.5f;
	check("seven levels of many ties, p 0.5 (the cut inside a level)", l, V,
	      ARGS(1, 0, 0.5f, 0));
	check("seven levels of many ties, top-k 100 (the cut inside a level, by id)", l, V,
	      ARGS(1, 100, 1, 0));
	/* a prefix's mass exactly the target (150 of 300 equal masses): kept
	 * only below it, as the definition's fewest tokens reaching it */
	for (int j = 0; j < V; j++)
		l[j] = 0;
	check("all equal, p 0.5 (the target a prefix's mass exactly)", l, V, ARGS(1, 0, 0.5f, 0));
	for (int j = 0; j < V; j++)
		l[j] = j % 11 == 0 ? -INFINITY : 0.25f;
	check("all equal but -inf, p 0.95", l, V, ARGS(1, 0, 0.95f, 0));
	for (int j = 0; j < V; j++)
		l[j] = j == 17 ? 20.0f : j % 5 ? -40.0f : 0.0f;
	check("one token far above (p's below 2^-40 never drawn), p 0.99", l, V,
	      ARGS(1, 0, 0.99f, 0));
	/* a temperature whose reciprocal overflows a float: the argmax (ties
	 * to the lowest id), not the NaN that 0 * inf makes of the top logit */
	for (int j = 0; j < V; j++)
		l[j] = j == 40 || j == 41 ? 2.0f : (float)(j % 3) - 1;
	int32_t row = 0, tok = -7;
	float u[SAMPLE_DRAWS] = { 0.99f, 0.99f, 0.99f }, lp = 0;
	sample_rows_cpu(&tok, &lp, l, &row, u, NULL, NULL, 1, V, ARGS(1e-40f, 0, 0.9f, 0));
	ok(tok == 40 && isfinite(lp), "temperature 1e-40: the argmax, ties to the lowest id (%d)", tok);
	return done_testing();
}
