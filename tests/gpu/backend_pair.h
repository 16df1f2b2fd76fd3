/* backend_pair.h: what the tests of the CUDA backend against the CPU
 * backend share: a buffer on each side from the same host values (rounded
 * to bf16 first, so both see the same inputs), NaN-poisoned outputs, and
 * the comparison of the two sides' results. */
#ifndef LMPIPE_BACKEND_PAIR_H
#define LMPIPE_BACKEND_PAIR_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "model/backend.h"

typedef struct side {
	lm_backend *be;
	void *bufs[64];
	int n;
} side;

static side cpu, gpu;
static uint64_t seed = 20261201;

/* Tolerances: bf16 outputs, fp32 outputs from bf16 products. */
static const double TOL_ACT = 1.5e-2, TOL_F32 = 5e-3;

static float *rnd(size_t n, float mag)
{
	float *h = malloc(n * sizeof *h);
	for (size_t i = 0; i < n; i++)
		h[i] = bf2f(f2bf(mag * gpu_rand(&seed)));
	return h;
}

/* A buffer of n values on a side: act type when act, else fp32; from host
 * values h (NULL: NaN-poisoned). */
static void *put(side *s, const float *h, size_t n, int act)
{
	lm_backend *be = s->be;
	size_t es = act ? lm_dtype_size(be->act) : sizeof(float);
	void *d = be->alloc(be, n * es);
	s->bufs[s->n++] = d;
	float *tmp = NULL;
	if (!h) {
		tmp = malloc(n * sizeof *tmp);
		for (size_t i = 0; i < n; i++)
			tmp[i] = NAN;
		h = tmp;
	}
	if (act && be->act != LM_F32) {
		float *f = be->alloc(be, n * sizeof *f);
		be->upload(be, f, h, n * sizeof *f);
		be->to_act(be, d, f, n);
		be->sync(be, NULL);
		be->release(be, f);
	} else {
		be->upload(be, d, h, n * sizeof(float));
	}
	free(tmp);
	return d;
}

static float *get(side *s, const void *d, size_t n, int act)
{
	lm_backend *be = s->be;
	float *h = malloc(n * sizeof *h);
	if (act && be->act != LM_F32) {
		float *f = be->alloc(be, n * sizeof *f);
		be->from_act(be, f, d, n);
		be->download(be, h, f, n * sizeof *f);
		be->release(be, f);
	} else {
		be->download(be, h, d, n * sizeof *h);
	}
	return h;
}

static void release_all(side *s)
{
	for (int i = 0; i < s->n; i++)
		s->be->release(s->be, s->bufs[i]);
	s->n = 0;
}

static void compare(const char *what, const void *g, const void *c, size_t n, int act, double tol)
{
	lm_err e;
	int rg = gpu.be->sync(gpu.be, &e);
	if (rg) {
		ok(0, "%s: the CUDA backend failed: %s", what, e.msg);
		return;
	}
	float *hg = get(&gpu, g, n, act), *hc = get(&cpu, c, n, act);
	gpu_err r = gpu_compare(hg, hc, n);
	ok(r.rel <= tol, "%s: rel %.3g (tol %.3g)", what, r.rel, tol);
	free(hg);
	free(hc);
}

/* BOTH(x, host, n, act): the same inputs on both sides, as xc and xg; OUT:
 * NaN-poisoned outputs; ZERO: zeroed fp32 accumulators. */
#define BOTH(name, host, n, act)                 \
	void *name##c = put(&cpu, host, n, act); \
	void *name##g = put(&gpu, host, n, act)
#define OUT(name, n, act)                        \
	void *name##c = put(&cpu, NULL, n, act); \
	void *name##g = put(&gpu, NULL, n, act)
#define ZERO(name, n)                              \
	float *z_##name = calloc(n, sizeof(float)); \
	BOTH(name, z_##name, n, 0);                \
	free(z_##name)

#endif
