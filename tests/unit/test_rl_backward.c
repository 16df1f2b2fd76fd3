/* test_rl_backward.c: the per-token weighted backward equals the sum of
 * one-token backward passes of model_backward, each with its own weight. */
#include <math.h>
#include <stdlib.h>

#include "../tap.h"
#include "base/rng_stream.h"
#include "model/backend.h"
#include "model/model.h"
#include "rl/rl_backward.h"

enum { T = 6 };

int main(void)
{
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model_config c = { 64, 16, 32, 2, 4, 64, 10000.0, 0, MODEL_PLAIN };
	model m;
	lm_rng r;
	rng_seed(&r, 3);
	if (!ok(be && !model_init(&m, &c, be, 1, T, &e) && !model_init_weights(&m, &r, &e), "a tiny model"))
		return done_testing();
	int32_t ids[T], targets[T], one[T];
	float w[T];
	for (int t = 0; t < T; t++) {
		ids[t] = (int32_t)rng_below(&r, 64);
		targets[t] = t < 2 ? -1 : (int32_t)rng_below(&r, 64);
		w[t] = (float)(t - 3.5) * 0.3f; /* of both signs */
	}
	double loss;
	model_zero_grad(&m);
	model_forward(&m, ids, targets, 1, T, &loss, &e);
	is_int(rl_backward_tokens(&m, w, &e), 0, "weighted backward runs");
	float *g = malloc(m.n_params * sizeof *g);
	be->download(be, g, m.grads, m.n_params * sizeof *g);

	model_zero_grad(&m);
	for (int t = 2; t < T; t++) {
		for (int k = 0; k < T; k++)
			one[k] = k == t ? targets[k] : -1;
		model_forward(&m, ids, one, 1, T, &loss, &e);
		model_backward(&m, w[t], &e);
	}
	float *h = malloc(m.n_params * sizeof *h);
	be->download(be, h, m.grads, m.n_params * sizeof *h);
	double worst = 0, scale = 0;
	for (size_t i = 0; i < m.n_params; i++) {
		worst = fmax(worst, fabs((double)g[i] - h[i]));
		scale = fmax(scale, fabs((double)h[i]));
	}
	ok(scale > 0 && worst <= 1e-5 * scale, "equals the one-token backward passes (max diff %.2g of %.2g)",
	   worst, scale);
	ok(m.be == be, "the model's op table is restored");
	free(g);
	free(h);
	model_free(&m);
	be->close(be);
	return done_testing();
}
