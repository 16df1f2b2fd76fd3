/* test_sample_twin.c: kernels/sample.h's C twin of the device sampler:
 * over a grid of draws u = (k + 1/2) / K, every token's count equals K
 * times its probability in what top-k and top-p keep (integer masses,
 * ranked by p then id, by sorting) within a draw, and nothing outside is
 * ever drawn, whether the nucleus is found first (more than
 * SAMPLE_REJECT_ROWS rows a call) or drawn by rejection (at most that
 * many).  A token's count from a grid of spacing 1/K is off by less than
 * one where its interval is whole (the nucleus found first); the
 * rejection's fallback takes its draws from the rejected tokens'
 * intervals, each off by less than one, so a kept token's count may
 * gather a few of those errors (bound 6 there).  A wrong cut or placement
 * is off by tens or hundreds.  (test_decode, on a GPU, checks the kernel
 * against this twin.) */
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

/* K draws of one row, `per` rows a call (all the same row). */
static void counts_of(const float *l, int V, sample_args a, int per, long *cnt, long *bad)
{
	int32_t row[ROWS] = { 0 }, tok[ROWS];
	float u[ROWS], lp[ROWS];
	memset(cnt, 0, (size_t)V * sizeof *cnt);
	*bad = 0;
	for (int k0 = 0; k0 < K; k0 += per) {
		for (int i = 0; i < per; i++)
			u[i] = (float)((k0 + i + 0.5) / K);
		sample_rows_cpu(tok, lp, l, row, u, NULL, NULL, per, V, a);
		for (int i = 0; i < per; i++) {
			if (tok[i] < 0 || tok[i] >= V)
				(*bad)++;
			else
				cnt[tok[i]]++;
		}
	}
}

static void check(const char *what, const float *l, int V, sample_args a)
{
	uint64_t *q = malloc((size_t)V * sizeof *q);
	long *cnt = malloc((size_t)V * sizeof *cnt), bad;
	uint64_t kept = ref_nucleus(l, V, a, q);
	int size = 0;
	for (int j = 0; j < V; j++)
		size += q[j] > 0;
	/* the nucleus by rejection where a call has few rows, top-p and no top-k */
	int ways = a.top_p < 1 && a.top_k <= 0 ? 2 : 1;
	for (int w = 0; w < ways; w++) {
		counts_of(l, V, a, w ? SAMPLE_REJECT_ROWS : ROWS, cnt, &bad);
		double worst = 0, bound = w ? 6 : 1;
		long outside = 0;
		for (int j = 0; j < V; j++) {
			if (!q[j]) {
				outside += cnt[j];
				continue;
			}
			double d = fabs((double)cnt[j] - (double)K * (double)q[j] / (double)kept);
			worst = d > worst ? d : worst;
		}
		ok(!bad && !outside && worst <= bound,
		   "%s%s: %d draws over %d tokens, each within %.2f of its expected count (<= %g), "
		   "%ld outside them", what, w ? ", drawn by rejection" : "", K, size, worst, bound,
		   outside);
	}
	free(q), free(cnt);
}

static uint64_t lcg = 12345;

static float rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((lcg >> 40) / (double)(1ull << 24)) * 2 - 1;
}

int main(void)
{
	enum { V = 300 };
	float l[V];
	for (int j = 0; j < V; j++)
		l[j] = 3 * rnd() + (j % 50 == 0 ? 4 : 0);
	check("random logits, p 0.9", l, V, (sample_args){ 1, 0, 0.9f, 0 });
	check("random logits, T 0.7, p 0.999", l, V, (sample_args){ 0.7f, 0, 0.999f, 0 });
	check("random logits, T 1.5, p 0.5, ids below 200", l, V, (sample_args){ 1.5f, 0, 0.5f, 200 });
	check("random logits, p 0.01 (the top token alone)", l, V, (sample_args){ 1, 0, 0.01f, 0 });
	check("random logits, top-k 40", l, V, (sample_args){ 1, 40, 1, 0 });
	check("random logits, T 0.8, top-k 60, p 0.9", l, V, (sample_args){ 0.8f, 60, 0.9f, 0 });
	check("random logits, no cut", l, V, (sample_args){ 1, 0, 1, 0 });
	for (int j = 0; j < V; j++)
		l[j] = (float)(j % 7) * 0.5f;
	check("seven levels of many ties, p 0.5 (the cut inside a level)", l, V,
	      (sample_args){ 1, 0, 0.5f, 0 });
	check("seven levels of many ties, top-k 100 (the cut inside a level, by id)", l, V,
	      (sample_args){ 1, 100, 1, 0 });
	for (int j = 0; j < V; j++)
		l[j] = j % 11 == 0 ? -INFINITY : 0.25f;
	check("all equal but -inf, p 0.95", l, V, (sample_args){ 1, 0, 0.95f, 0 });
	for (int j = 0; j < V; j++)
		l[j] = j == 17 ? 20.0f : j % 5 ? -40.0f : 0.0f;
	check("one token far above (p's below 2^-40 never drawn), p 0.99", l, V,
	      (sample_args){ 1, 0, 0.99f, 0 });
	/* a temperature whose reciprocal overflows a float: the argmax (ties
	 * to the lowest id), not the NaN that 0 * inf makes of the top logit */
	for (int j = 0; j < V; j++)
		l[j] = j == 40 || j == 41 ? 2.0f : (float)(j % 3) - 1;
	int32_t row = 0, tok = -7;
	float u = 0.99f, lp = 0;
	sample_rows_cpu(&tok, &lp, l, &row, &u, NULL, NULL, 1, V, (sample_args){ 1e-40f, 0, 0.9f, 0 });
	ok(tok == 40 && isfinite(lp), "temperature 1e-40: the argmax, ties to the lowest id (%d)", tok);
	return done_testing();
}
