/* test_value_head.c: the PPO value head on the model's final hidden state
 * (model_hidden) and the backward pass of rl_backward_extra: the gradient
 * of a loss made of values, entropies and weighted cross-entropies w.r.t.
 * the value head and the shared trunk's parameters matches central finite
 * differences. */
#include <math.h>
#include <stdlib.h>

#include "../tap.h"
#include "base/rng_stream.h"
#include "model/backend.h"
#include "model/model.h"
#include "rl/rl_backward.h"
#include "rl/rl_loss.h"
#include "rl/value_head.h"

enum { T = 6, V = 64, C = 32, PROBES = 48 };
static const float FD_H = 1e-2f;

typedef struct fixture {
	model m;
	value_head h;
	int32_t ids[T], targets[T];
	float cv[T], ch[T], cw[T];     /* loss weights of values, entropies, cross-entropies */
	float logits[T * V], hidden[T * C], values[T];
} fixture;

/* L = sum_t cv_t v_t + ch_t H_t + cw_t CE_t, in double from the forward pass. */
static double loss(fixture *f)
{
	lm_err e;
	double mean;
	model_forward(&f->m, f->ids, f->targets, 1, T, &mean, &e);
	model_read_logits(&f->m, f->logits, T, &e);
	model_read_hidden(&f->m, f->hidden, T, &e);
	vh_forward(&f->h, f->hidden, T, f->values);
	double L = 0;
	for (int t = 0; t < T; t++) {
		const float *z = f->logits + t * V;
		float H;
		rl_entropy(z, 1, V, &H);
		double mx = z[0], s = 0;
		for (int j = 1; j < V; j++)
			mx = fmax(mx, z[j]);
		for (int j = 0; j < V; j++)
			s += exp(z[j] - mx);
		double ce = f->targets[t] >= 0 ? mx + log(s) - z[f->targets[t]] : 0;
		L += f->cv[t] * (double)f->values[t] + f->ch[t] * (double)H + f->cw[t] * ce;
	}
	return L;
}

/* The analytic gradient into m.grads and h.gw. */
static int backward(fixture *f)
{
	lm_err e;
	float dlogits[T * V], dhidden[T * C];
	loss(f);
	model_zero_grad(&f->m);
	vh_zero_grad(&f->h);
	for (int t = 0; t < T; t++) {
		rl_entropy_grad(f->logits + t * V, V, dlogits + t * V);
		for (int j = 0; j < V; j++)
			dlogits[t * V + j] *= f->ch[t];
	}
	vh_backward(&f->h, f->hidden, f->cv, T, dhidden);
	return rl_backward_extra(&f->m, f->cw, dlogits, dhidden, &e);
}

/* Relative error of the analytic gradient at PROBES parameters (and the
 * whole value head) against finite differences. */
static void check(fixture *f, lm_rng *r, const char *what)
{
	lm_backend *be = f->m.be;
	if (!ok(backward(f) == 0, "%s: backward runs", what))
		return;
	float *g = malloc(f->m.n_params * sizeof *g);
	be->download(be, g, f->m.grads, f->m.n_params * sizeof *g);
	double num = 0, den = 0;
	for (int k = 0; k < PROBES; k++) {
		/* half the probes in the last layers and the final norm, where the head's gradient enters */
		size_t i = k % 2 ? f->m.n_params - 1 - rng_below(r, f->m.n_params / 3)
				 : rng_below(r, f->m.n_params);
		float p, q;
		be->download(be, &p, f->m.params + i, sizeof p);
		q = p + FD_H;
		be->upload(be, f->m.params + i, &q, sizeof q);
		double hp = loss(f);
		q = p - FD_H;
		be->upload(be, f->m.params + i, &q, sizeof q);
		double hm = loss(f);
		be->upload(be, f->m.params + i, &p, sizeof p);
		double fd = (hp - hm) / (2.0 * FD_H);
		num += (g[i] - fd) * (g[i] - fd);
		den += fd * fd;
	}
	ok(den > 0 && sqrt(num / den) < 2e-2, "%s: trunk gradient matches finite differences "
	   "(relative error %.2g at %d parameters)", what, sqrt(num / den), PROBES);
	double hn = 0, hd = 0;
	for (int j = 0; j <= C; j++) {
		float *x = j < C ? &f->h.w[j] : &f->h.b[0], save = *x;
		double an = j < C ? f->h.gw[j] : f->h.gb[0];
		*x = save + FD_H;
		double hp = loss(f);
		*x = save - FD_H;
		double hm = loss(f);
		*x = save;
		double fd = (hp - hm) / (2.0 * FD_H);
		hn += (an - fd) * (an - fd);
		hd += fd * fd;
	}
	ok(hd > 0 && sqrt(hn / hd) < 2e-2, "%s: value head gradient matches finite differences "
	   "(relative error %.2g)", what, sqrt(hn / hd));
	free(g);
}

int main(void)
{
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model_config c = { V, 16, C, 2, 4, 64, 10000.0, 0, MODEL_PLAIN };
	static fixture f;
	lm_rng r;
	rng_seed(&r, 7);
	if (!ok(be && !model_init(&f.m, &c, be, 1, T, &e) && !model_init_weights(&f.m, &r, &e) &&
		!vh_init(&f.h, C, &e), "a tiny model and value head"))
		return done_testing();
	for (int j = 0; j < C; j++)
		f.h.w[j] = (float)rng_normal(&r);
	f.h.b[0] = 0.5f;
	for (int t = 0; t < T; t++) {
		f.ids[t] = (int32_t)rng_below(&r, V);
		f.targets[t] = t < 2 ? -1 : (int32_t)rng_below(&r, V);
		f.cv[t] = t < 2 ? 0 : (float)rng_normal(&r);
	}
	check(&f, &r, "values only");
	float *g = malloc(f.m.n_params * sizeof *g);
	be->download(be, g, f.m.grads, f.m.n_params * sizeof *g);
	double emb = 0;
	for (size_t i = 0; i < (size_t)V * C; i++)
		emb += fabs(g[i]);
	ok(emb > 0, "the value loss reaches the embedding (a shared trunk, not a detached head)");
	free(g);
	for (int t = 2; t < T; t++) {
		f.ch[t] = (float)rng_normal(&r);
		f.cw[t] = (float)rng_normal(&r);
	}
	check(&f, &r, "values, entropies and cross-entropies");
	ok(f.m.be == be, "the model's op table is restored");
	vh_free(&f.h);
	model_free(&f.m);
	be->close(be);
	return done_testing();
}
