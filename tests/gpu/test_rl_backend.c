/* test_rl_backend.c: what rl-update's batched passes need of the CUDA
 * backend, against the CPU backend: the entropy op forward and backward
 * (backend.h entropy_fwd / entropy_bwd) on bf16-rounded logits, then a
 * small model's padded micro-batch: model_token_logp's log-probs and
 * entropies, and model_backward_ex with per-token weights, an entropy
 * gradient and a hidden-state gradient (PPO's backward pass), every
 * gradient tensor compared.  Run by `make test-gpu` on a GPU machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/lse.h"
#include "model/model.h"

static lm_backend *cpu, *gpu;
static uint64_t seed = 20261202;

/* Tolerances: fp32 results of bf16 logits; gradients through the model. */
static const double TOL_F32 = 5e-3, TOL_GRAD = 5e-2;

/* n host floats into a backend's fp32 (act 0) or act (act 1) buffer. */
static void *put(lm_backend *be, const float *h, size_t n, int act)
{
	void *d = be->alloc(be, n * (act ? lm_dtype_size(be->act) : sizeof(float)));
	if (act && be->act != LM_F32) {
		float *f = be->alloc(be, n * sizeof *f);
		be->upload(be, f, h, n * sizeof *f);
		be->to_act(be, d, f, n);
		be->sync(be, NULL);
		be->release(be, f);
	} else {
		be->upload(be, d, h, n * sizeof(float));
	}
	return d;
}

static float *get(lm_backend *be, const float *d, size_t n)
{
	float *h = malloc(n * sizeof *h);
	be->download(be, h, d, n * sizeof *h);
	return h;
}

static void test_entropy(int N, int V)
{
	size_t NV = (size_t)N * V;
	float *z = malloc(NV * sizeof *z), *lse = malloc(N * sizeof *lse), *dent = malloc(N * sizeof *dent);
	for (size_t i = 0; i < NV; i++)
		z[i] = bf2f(f2bf(6.0f * gpu_rand(&seed)));
	for (int n = 0; n < N; n++) {
		lse[n] = (float)lse_row_cpu(z + (size_t)n * V, (size_t)V);
		dent[n] = n % 4 == 1 ? 0.0f : gpu_rand(&seed);
	}
	void *zc = put(cpu, z, NV, 1), *zg = put(gpu, z, NV, 1);
	float *lc = put(cpu, lse, N, 0), *lg = put(gpu, lse, N, 0);
	float *dc = put(cpu, dent, N, 0), *dg = put(gpu, dent, N, 0);
	float *ec = cpu->alloc(cpu, N * sizeof(float)), *eg = gpu_poisoned(N * sizeof(float));
	float *gc = cpu->alloc(cpu, NV * sizeof(float)), *gg = gpu_poisoned(NV * sizeof(float));
	cpu->entropy_fwd(cpu, ec, zc, lc, N, V);
	gpu->entropy_fwd(gpu, eg, zg, lg, N, V);
	cpu->entropy_bwd(cpu, gc, zc, lc, dc, N, V);
	gpu->entropy_bwd(gpu, gg, zg, lg, dg, N, V);
	lm_err e;
	int rg = gpu->sync(gpu, &e);
	float *hec = get(cpu, ec, N), *heg = get(gpu, eg, N), *hgc = get(cpu, gc, NV), *hgg = get(gpu, gg, NV);
	gpu_err fe = gpu_compare(heg, hec, N), be_ = gpu_compare(hgg, hgc, NV);
	ok(!rg && fe.rel <= TOL_F32, "entropy N=%d V=%d: rel %.3g (tol %.3g)%s", N, V, fe.rel, TOL_F32,
	   rg ? e.msg : "");
	ok(!rg && be_.rel <= TOL_F32, "entropy backward N=%d V=%d: rel %.3g (tol %.3g)", N, V, be_.rel,
	   TOL_F32);
	void *all_c[] = { zc, lc, dc, ec, gc }, *all_g[] = { zg, lg, dg, eg, gg };
	for (size_t i = 0; i < sizeof all_c / sizeof *all_c; i++)
		cpu->release(cpu, all_c[i]), gpu->release(gpu, all_g[i]);
	free(z), free(lse), free(dent), free(hec), free(heg), free(hgc), free(hgg);
}

/* A padded micro-batch of B sequences of lengths T - 3r, prompts of 3. */
static void test_model(model_config c, int B, int T)
{
	lm_err e;
	model mc, mg;
	lm_rng r;
	rng_seed(&r, 13);
	if (model_init(&mc, &c, cpu, B, T, &e) || model_init(&mg, &c, gpu, B, T, &e)) {
		ok(0, "model_init: %s", e.msg);
		return;
	}
	model_init_weights(&mc, &r, &e);
	float *p = malloc(mc.n_params * sizeof *p);
	cpu->download(cpu, p, mc.params, mc.n_params * sizeof *p);
	gpu->upload(gpu, mg.params, p, mc.n_params * sizeof *p);
	model_params_changed(&mg);
	int N = B * T;
	int32_t *ids = malloc(N * sizeof *ids), *tg = malloc(N * sizeof *tg);
	float *w = malloc(N * sizeof *w), *dent = malloc(N * sizeof *dent);
	float *dh = malloc((size_t)N * c.d_model * sizeof *dh);
	for (int i = 0; i < N; i++) {
		int row = i / T, t = i % T, len = T - 3 * row;
		ids[i] = t < len ? (int32_t)((i * 7 + 3) % c.vocab) : 0;
		tg[i] = t >= 3 && t < len ? (int32_t)((i * 5 + 1) % c.vocab) : -1;
		w[i] = tg[i] < 0 ? 0.0f : 0.1f * gpu_rand(&seed);
		dent[i] = tg[i] < 0 ? 0.0f : 0.01f * gpu_rand(&seed);
	}
	for (size_t i = 0; i < (size_t)N * c.d_model; i++)
		dh[i] = tg[i / c.d_model] < 0 ? 0.0f : 0.01f * gpu_rand(&seed);
	float *lpc = malloc(N * sizeof *lpc), *lpg = malloc(N * sizeof *lpg);
	float *enc = malloc(N * sizeof *enc), *eng = malloc(N * sizeof *eng);
	int rc = model_forward(&mc, ids, tg, B, T, NULL, &e) || model_token_logp(&mc, lpc, enc, &e);
	int rg = model_forward(&mg, ids, tg, B, T, NULL, &e) || model_token_logp(&mg, lpg, eng, &e);
	gpu_err le = gpu_compare(lpg, lpc, N), ee = gpu_compare(eng, enc, N);
	ok(!rc && !rg && le.rel <= 2e-2, "model d=%d V=%d B=%d T=%d, padded: token log-probs rel %.3g%s%s",
	   c.d_model, c.vocab, B, T, le.rel, rg ? ": " : "", rg ? e.msg : "");
	ok(!rc && !rg && ee.rel <= 2e-2, "model: token entropies rel %.3g", ee.rel);
	model_grad_in g = { .scale = 1.0f, .weights = w, .dentropy = dent, .dhidden = dh };
	rc = model_backward_ex(&mc, &g, &e);
	rg = model_backward_ex(&mg, &g, &e) || gpu->sync(gpu, &e);
	float *gc = malloc(mc.n_params * sizeof *gc), *gg = malloc(mc.n_params * sizeof *gg);
	cpu->download(cpu, gc, mc.grads, mc.n_params * sizeof *gc);
	gpu->download(gpu, gg, mg.grads, mc.n_params * sizeof *gg);
	model_tensor *t = NULL;
	int nt = model_tensors(&c, &t);
	double worst = 0;
	const char *worst_name = "";
	for (int i = 0; i < nt; i++) {
		gpu_err ge = gpu_compare(gg + t[i].offset, gc + t[i].offset, t[i].numel);
		if (ge.rel > worst)
			worst = ge.rel, worst_name = t[i].name;
	}
	ok(!rc && !rg && worst <= TOL_GRAD, "model: weights + entropy + hidden gradients, every tensor within "
	   "rel %.3g (worst %.3g, %s)%s%s", TOL_GRAD, worst, worst_name, rg ? ": " : "", rg ? e.msg : "");
	model_free(&mc);
	model_free(&mg);
	free(t), free(p), free(ids), free(tg), free(w), free(dent), free(dh), free(lpc), free(lpg),
		free(enc), free(eng), free(gc), free(gg);
}

int main(void)
{
	gpu_require_device();
	lm_err e;
	cpu = backend_open("cpu", &e);
	gpu = backend_open("cuda", &e);
	if (!gpu) {
		ok(0, "the CUDA backend opens: %s", e.msg);
		return done_testing();
	}
	test_entropy(1, 2);
	test_entropy(37, 97);
	test_entropy(64, 10000);
	model_config small = { 97, 64, 64, 2, 2, 96, 10000.0, 0 };
	test_model(small, 4, 40);
	model_config ts_like = { 1000, 256, 512, 2, 16, 1344, 10000.0, 0 };
	test_model(ts_like, 4, 128);
	cpu->close(cpu);
	gpu->close(gpu);
	return done_testing();
}
