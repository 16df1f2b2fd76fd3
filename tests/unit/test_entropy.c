/* test_entropy.c: the entropy op's CPU twin (kernels/entropy.h) against
 * rl_loss.h's rl_entropy and rl_entropy_grad (the code the CS336
 * compute_entropy snapshot checks), and model_token_logp's log-probs and
 * entropies against a forward pass's logits read back and reduced here. */
#include <math.h>
#include <stdlib.h>

#include "../tap.h"
#include "kernels/entropy.h"
#include "kernels/lse.h"
#include "model/model.h"
#include "rl/rl_loss.h"

static const double TOL = 1e-5;

static double rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? d / m : d;
}

static void test_kernel(int N, int V, unsigned seed)
{
	float *z = malloc((size_t)N * V * sizeof *z), *lse = malloc(N * sizeof *lse);
	float *ent = malloc(N * sizeof *ent), *want = malloc(N * sizeof *want);
	float *dent = malloc(N * sizeof *dent), *dz = malloc((size_t)N * V * sizeof *dz);
	float *g = malloc((size_t)N * V * sizeof *g);
	srand(seed);
	for (size_t i = 0; i < (size_t)N * V; i++)
		z[i] = 8.0f * ((float)rand() / RAND_MAX - 0.5f);
	for (int n = 0; n < N; n++) {
		lse[n] = (float)lse_row_cpu(z + (size_t)n * V, (size_t)V);
		dent[n] = n % 3 == 1 ? 0.0f : 0.5f - (float)n / N;
	}
	entropy_fwd_cpu(ent, z, lse, N, V);
	rl_entropy(z, (size_t)N, (size_t)V, want);
	ok(rel_diff(ent, want, (size_t)N) < TOL, "entropy N=%d V=%d equals rl_entropy (%.2g)", N, V,
	   rel_diff(ent, want, (size_t)N));
	entropy_bwd_cpu(dz, z, lse, dent, N, V);
	for (int n = 0; n < N; n++) {
		rl_entropy_grad(z + (size_t)n * V, (size_t)V, g + (size_t)n * V);
		for (int v = 0; v < V; v++)
			g[(size_t)n * V + v] *= dent[n];
	}
	ok(rel_diff(dz, g, (size_t)N * V) < TOL, "entropy backward N=%d V=%d equals dent x rl_entropy_grad (%.2g)",
	   N, V, rel_diff(dz, g, (size_t)N * V));
	free(z), free(lse), free(ent), free(want), free(dent), free(dz), free(g);
}

/* model_token_logp on a padded batch: targets' log-probs and entropies
 * from the logits the model hands back. */
static void test_model(void)
{
	model_config c = { 61, 16, 32, 2, 4, 48, 10000.0, 0 };
	enum { B = 3, T = 9 };
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model m;
	lm_rng r;
	rng_seed(&r, 7);
	if (!be || model_init(&m, &c, be, B, T, &e) || model_init_weights(&m, &r, &e)) {
		ok(0, "a small model: %s", e.msg);
		return;
	}
	int32_t ids[B * T], tg[B * T];
	for (int i = 0; i < B * T; i++) {
		ids[i] = (i * 7 + 3) % c.vocab;
		tg[i] = i % T < 2 || i % 4 == 3 ? -1 : (i * 5 + 1) % c.vocab;
	}
	float logp[B * T], ent[B * T], *z = malloc((size_t)B * T * c.vocab * sizeof *z);
	int rc = model_forward(&m, ids, tg, B, T, NULL, &e) || model_token_logp(&m, logp, ent, &e) ||
		 model_read_logits(&m, z, B * T, &e);
	ok(rc == 0, "forward and token log-probs (%s)", rc ? e.msg : "");
	float wl[B * T], we[B * T];
	for (int i = 0; i < B * T; i++) {
		const float *row = z + (size_t)i * c.vocab;
		wl[i] = tg[i] < 0 ? 0.0f : (float)(row[tg[i]] - lse_row_cpu(row, (size_t)c.vocab));
		rl_entropy(row, 1, (size_t)c.vocab, &we[i]);
	}
	ok(rel_diff(logp, wl, B * T) < TOL, "model_token_logp: the targets' log-probs (%.2g)",
	   rel_diff(logp, wl, B * T));
	ok(rel_diff(ent, we, B * T) < TOL, "model_token_logp: the entropies (%.2g)", rel_diff(ent, we, B * T));
	free(z);
	model_free(&m);
	be->close(be);
}

int main(void)
{
	test_kernel(1, 2, 1);
	test_kernel(5, 97, 2);
	test_kernel(17, 1000, 3);
	test_model();
	return done_testing();
}
