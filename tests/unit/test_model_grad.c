/* test_model_grad.c: the whole model's backward pass against central finite
 * differences of its loss, per named tensor (a random direction within the
 * tensor), untied and tied, at T below the allocated context.  Also:
 * gradient accumulation adds, and a bad token id is an error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "model/model.h"

enum { BATCH = 2, SEQ = 7 };
static const double FD_EPS = 1e-2, FD_TOL = 1e-3;

static double loss_at(model *m, const int32_t *ids, const int32_t *tg)
{
	double loss;
	lm_err e;
	if (model_forward(m, ids, tg, BATCH, SEQ, &loss, &e))
		return NAN;
	return loss;
}

static void check_model(int tied)
{
	model_config c = { 16, 8, 16, 2, 2, 24, 10000.0, tied };
	model m;
	lm_err e;
	lm_rng r;
	lm_backend *be = backend_open("cpu", &e);
	if (!be || model_init(&m, &c, be, BATCH, 8, &e)) {
		ok(0, "model_init: %s", e.msg);
		return;
	}
	rng_seed(&r, 7);
	model_init_weights(&m, &r, &e);
	int32_t ids[BATCH * SEQ], tg[BATCH * SEQ];
	for (int i = 0; i < BATCH * SEQ; i++) {
		ids[i] = (int32_t)rng_below(&r, c.vocab);
		tg[i] = i == 3 ? -1 : (int32_t)rng_below(&r, c.vocab);
	}
	double loss;
	model_zero_grad(&m);
	ok(!model_forward(&m, ids, tg, BATCH, SEQ, &loss, &e), "%s: forward", tied ? "tied" : "untied");
	is_int(model_count(&m), BATCH * SEQ - 1, "ignored target not counted");
	ok(fabs(loss - log(c.vocab)) < 1.5, "initial loss %.3f near ln V", loss);
	model_backward(&m, 1.0f / model_count(&m), &e);
	float *g = malloc(m.n_params * sizeof *g), *dir = malloc(m.n_params * sizeof *dir);
	memcpy(g, m.grads, m.n_params * sizeof *g);
	model_tensor *t;
	int n = model_tensors(&c, &t);
	double worst = 0;
	const char *worst_name = "";
	for (int i = 0; i < n; i++) {
		double gd = 0, gn = 0, dn2 = 0;
		for (size_t j = 0; j < t[i].numel; j++) {
			dir[j] = (float)rng_normal(&r);
			dn2 += (double)dir[j] * dir[j];
		}
		for (size_t j = 0; j < t[i].numel; j++) {
			dir[j] /= (float)sqrt(dn2);   /* unit direction */
			gd += (double)g[t[i].offset + j] * dir[j];
			gn += (double)g[t[i].offset + j] * g[t[i].offset + j];
		}
		float *p = m.params + t[i].offset;
		for (size_t j = 0; j < t[i].numel; j++)
			p[j] += (float)FD_EPS * dir[j];
		double up = loss_at(&m, ids, tg);
		for (size_t j = 0; j < t[i].numel; j++)
			p[j] -= 2 * (float)FD_EPS * dir[j];
		double dn = loss_at(&m, ids, tg);
		for (size_t j = 0; j < t[i].numel; j++)
			p[j] += (float)FD_EPS * dir[j];
		double fd = (up - dn) / (2 * FD_EPS);
		double err = fabs(fd - gd) / fmax(sqrt(gn), 1e-6);
		if (!(err <= worst)) {
			worst = err;
			worst_name = t[i].name;
		}
		if (!(err < FD_TOL))
			diag("%s: fd %.6g analytic %.6g", t[i].name, fd, gd);
	}
	ok(worst < FD_TOL, "%s: every tensor's gradient matches finite differences "
	   "(worst rel err %.2g, %s)", tied ? "tied" : "untied", worst, worst_name);

	/* accumulation: a second backward doubles the gradient */
	model_forward(&m, ids, tg, BATCH, SEQ, &loss, &e);
	model_backward(&m, 1.0f / model_count(&m), &e);
	double maxdiff = 0;
	for (size_t j = 0; j < m.n_params; j++)
		maxdiff = fmax(maxdiff, fabs(m.grads[j] - 2 * g[j]));
	ok(maxdiff < 1e-5, "gradients accumulate across backward passes (%.2g)", maxdiff);
	/* the fused LM head and cross-entropy (model_forward_loss) give the
	 * same loss and gradients as the separate ops */
	model_zero_grad(&m);
	model_loss_reset(&m);
	float sc = 1.0f / (float)(BATCH * SEQ - 1);
	lm_scalars s;
	ok(!model_forward_loss(&m, ids, tg, BATCH, SEQ, sc, 1, &e) && !model_backward(&m, sc, &e) &&
	   !model_read_scalars(&m, &s, &e), "%s: fused head forward and backward run", tied ? "tied" : "untied");
	double dl = fabs(s.loss_sum / model_count(&m) - loss);
	maxdiff = 0;
	for (size_t j = 0; j < m.n_params; j++)
		maxdiff = fmax(maxdiff, fabs(m.grads[j] - g[j]));
	ok(dl < 1e-6 && maxdiff < 1e-6, "fused head: the same loss (%.2g) and gradients (%.2g)", dl,
	   maxdiff);
	ok(!model_forward_loss(&m, ids, tg, BATCH, SEQ, sc, 1, &e) &&
	   model_backward_ex(&m, &(model_grad_in){ .scale = 1, .weights = g }, &e) < 0 &&
	   strstr(e.msg, "model_forward_loss"), "per-token weights after the fused head are refused: %s",
	   e.msg);
	ids[5] = c.vocab;
	ok(model_forward(&m, ids, tg, BATCH, SEQ, &loss, &e) && strstr(e.msg, "outside the vocabulary"),
	   "bad token id: %s", e.msg);
	free(t);
	free(g);
	free(dir);
	model_free(&m);
	be->close(be);
}

int main(void)
{
	lm_err e;
	model_config bad = { 16, 8, 18, 2, 4, 24, 10000.0, 0 };
	ok(model_config_check(&bad, &e) && e.code == 2 && strstr(e.msg, "not divisible"),
	   "d not divisible by heads: %s", e.msg);
	bad.n_heads = 6;
	ok(model_config_check(&bad, &e) && strstr(e.msg, "odd"), "odd head dim: %s", e.msg);
	for (const model_preset *p = model_presets; p->name; p++)
		ok(!model_config_check(&p->cfg, &e), "preset %s is consistent", p->name);
	const model_preset *ts = model_preset_find("ts");
	is_int(ts ? (long long)model_n_params(&ts->cfg) : 0,
	       10000LL * 512 * 2 + 4LL * (2 * 512 + 4 * 512 * 512 + 3 * 512 * 1344) + 512,
	       "ts parameter count");
	check_model(0);
	check_model(1);
	lm_backend *cuda = backend_open("cuda", &e);
	if (cuda) {
		ok(1, "cuda: a GPU is here (%s)", cuda->name);
		cuda->close(cuda);
	} else {
		ok(strstr(e.msg, "not available") != NULL, "cuda: %s", e.msg);
	}
	return done_testing();
}
