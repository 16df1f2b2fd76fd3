/* test_rl_backend.c: what rl-update's batched passes need of the CUDA
 * backend, against the CPU backend: the entropy op forward and backward
 * (backend.h entropy_fwd / entropy_bwd) on bf16-rounded logits, then a
 * small model's padded micro-batch: model_token_logp's log-probs and
 * entropies, and model_backward_ex with per-token weights, an entropy
 * gradient and a hidden-state gradient (PPO's backward pass), every
 * gradient tensor compared; then rl-update's loss op (kernels/rl_tok.h,
 * whose C twin tests/unit/test_rl_tok.c holds to rl_grpo_step and
 * rl_dpo_loss bit for bit): weights and statistics of SFT, grpo_clip,
 * clip-higher with the KL term, Dr. GRPO's normalisation and DPO on both
 * backends, the CUDA results the same bits on a second run; and the whole
 * device step (rl/rl_device.h: the op, then the weighted backward pass)
 * on a small model, every gradient tensor compared; then PPO's loss op
 * (kernels/rl_ppo_tok.h, whose C twin tests/unit/test_rl_ppo_tok.c holds
 * to rl_ppo_loss and the value head bit for bit) on bf16-exact hidden
 * states: values, weights, entropy, value and hidden-state gradients, the
 * head's gradient and the statistics, the CUDA results the same bits on a
 * second run; and PPO's device step (rl_dev_values, rl_dev_ppo,
 * rl_dev_ppo_take) on a small model: values, loss, head gradient and every
 * gradient tensor compared; and the entropy and the loss op of the SFT and
 * GRPO-clip steps on the CS336 assignment 5 conformance inputs, CUDA
 * against CPU and both against the snapshots (skipped without
 * LMPIPE_DATA).  Run by `make test-gpu` on a GPU machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/lse.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "rl/rl_device.h"

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

/* The loss op's inputs for B rows of T tokens: counted tokens after a
 * prompt of 2 + b % 3, padding after T - 2b, row 1 without any. */
typedef struct tok_in {
	int B, T;
	float *ce, *old, *ref, *ent, *score;
	int32_t *tg;
	double *row_w, *dref;
} tok_in;

static void tok_make(tok_in *x, int B, int T)
{
	size_t n = (size_t)B * T;
	x->B = B, x->T = T;
	x->ce = malloc(n * sizeof *x->ce), x->old = malloc(n * sizeof *x->old);
	x->ref = malloc(n * sizeof *x->ref), x->ent = malloc(n * sizeof *x->ent);
	x->tg = malloc(n * sizeof *x->tg), x->score = malloc(B * sizeof *x->score);
	x->row_w = malloc(B * sizeof *x->row_w), x->dref = malloc(B * sizeof *x->dref);
	for (int b = 0; b < B; b++) {
		int cnt = 0;
		for (int t = 0; t < T; t++) {
			size_t i = (size_t)b * T + t;
			int counted = b != 1 && t >= 2 + b % 3 && t < T - 2 * b;
			float u = gpu_rand(&seed), v = gpu_rand(&seed), w = gpu_rand(&seed);
			x->tg[i] = counted ? 5 : -1;
			x->ce[i] = counted ? 0.05f + 3.0f * fabsf(u) : 0.0f;
			x->old[i] = -x->ce[i] + 0.3f * v;
			x->ref[i] = -x->ce[i] + 0.3f * w;
			x->ent[i] = 4.0f * fabsf(u * v);
			cnt += counted;
		}
		x->score[b] = gpu_rand(&seed);
		x->row_w[b] = cnt ? 1.0 / (cnt * 8.0) : 0.0;
		x->dref[b] = -0.5 * T * (1.0 + fabsf(gpu_rand(&seed)));
	}
}

static void tok_free(tok_in *x)
{
	free(x->ce), free(x->old), free(x->ref), free(x->ent), free(x->tg), free(x->score);
	free(x->row_w), free(x->dref);
}

/* The op on one backend: weights into w, statistics into st (host). */
static void tok_run(lm_backend *be, const tok_in *x, int dpo, rl_tok_args a, int kl, float *w,
		    double *st)
{
	size_t n = (size_t)x->B * x->T;
	float *ce = put(be, x->ce, n, 0), *old = put(be, x->old, n, 0), *ref = put(be, x->ref, n, 0);
	float *ent = put(be, x->ent, n, 0), *score = put(be, x->score, x->B, 0);
	int32_t *tg = be->alloc(be, n * sizeof *tg);
	double *rw = be->alloc(be, x->B * sizeof *rw), *dref = be->alloc(be, x->B * sizeof *dref);
	double *stats = be->alloc(be, RL_ST_N * sizeof *stats), *ws = be->alloc(be, rl_tok_workspace(x->B));
	float *dw = be->alloc(be, n * sizeof *dw);
	be->upload(be, tg, x->tg, n * sizeof *tg);
	be->upload(be, rw, x->row_w, x->B * sizeof *rw);
	be->upload(be, dref, x->dref, x->B * sizeof *dref);
	be->zero(be, stats, RL_ST_N * sizeof *stats);
	if (dpo)
		be->rl_tok_dpo(be, dw, stats, ws, ce, tg, dref, 0.1, 3.0, x->B, x->T);
	else
		be->rl_tok_pg(be, dw, stats, ws, ce, tg, score, rw, a.clip ? old : NULL, kl ? ref : NULL,
			      ent, x->B, x->T, a);
	be->download(be, w, dw, n * sizeof *w);
	be->download(be, st, stats, RL_ST_N * sizeof *st);
	void *all[] = { ce, old, ref, ent, score, tg, rw, dref, stats, ws, dw };
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		be->release(be, all[i]);
}

static void test_rl_tok(int B, int T)
{
	static const struct { const char *name; int dpo, clip; float lo, hi; int kl; } cases[] = {
		{ "sft / naive", 0, 0, 0, 0, 0 },
		{ "grpo_clip", 0, 1, 0.2f, 0.2f, 0 },
		{ "grpo_clip, clip-higher, KL", 0, 1, 0.1f, 0.15f, 1 },
		{ "reinforce, KL", 0, 0, 0, 0, 1 },
		{ "dpo", 1, 0, 0, 0, 0 },
	};
	tok_in x;
	tok_make(&x, B, T);
	size_t n = (size_t)B * T;
	float *wc = malloc(n * sizeof *wc), *wg = malloc(n * sizeof *wg), *wg2 = malloc(n * sizeof *wg2);
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		rl_tok_args a = { .clip = cases[k].clip, .clip_low = cases[k].lo, .clip_high = cases[k].hi,
				  .kl_beta = 0.04 };
		double sc[RL_ST_N], sg[RL_ST_N], sg2[RL_ST_N], worst = 0;
		tok_run(cpu, &x, cases[k].dpo, a, cases[k].kl, wc, sc);
		tok_run(gpu, &x, cases[k].dpo, a, cases[k].kl, wg, sg);
		tok_run(gpu, &x, cases[k].dpo, a, cases[k].kl, wg2, sg2);
		lm_err e;
		int rg = gpu->sync(gpu, &e);
		gpu_err we = gpu_compare(wg, wc, n);
		for (int j = 0; j < RL_ST_N; j++)
			worst = fmax(worst, fabs(sg[j] - sc[j]) / fmax(fabs(sc[j]), 1e-12));
		ok(!rg && we.max <= 1e-5, "loss op %s B=%d T=%d: weights max rel %.3g (tol 1e-5)%s%s",
		   cases[k].name, B, T, we.max, rg ? ": " : "", rg ? e.msg : "");
		ok(!rg && worst <= 1e-9, "loss op %s: statistics rel %.3g (tol 1e-9), loss %.12g vs %.12g",
		   cases[k].name, worst, sg[0], sc[0]);
		ok(!memcmp(wg, wg2, n * sizeof *wg) && !memcmp(sg, sg2, sizeof sg),
		   "loss op %s: the CUDA run repeats bit for bit", cases[k].name);
	}
	free(wc), free(wg), free(wg2);
	tok_free(&x);
}

/* The CS336 assignment 5 conformance inputs (../shared/data/cs336-a5;
 * batch 2, 10 tokens, vocabulary 100): the entropy of their logits and
 * rl-update's loss op for the SFT microbatch step (normalize constants 1
 * and 42) and the GRPO-clip one (clip 0.1), gradient accumulation 2, each
 * CUDA against CPU as above, then both against the snapshots (CS336's
 * tolerance: rtol 1e-4, atol 1e-2 for the entropy of the bf16-rounded
 * logits; atol 1e-5 for the losses and log-prob gradients, as
 * tests/unit/test_rl_conformance.c holds rl_loss.c).  The snapshot's
 * gradient of the log-probs is the op's -w. */
enum { A5_B = 2, A5_T = 10, A5_V = 100, A5_ACCUM = 2 };

/* The tensor name of a5 file (safetensors/NAME.safetensors) as n floats
 * (F32, or BOOL as 0 / 1); NULL, with a failed check, if absent. */
static float *a5_load(const char *dir, const char *file, const char *name, size_t n)
{
	char path[4096];
	sft_file f;
	lm_err e;
	snprintf(path, sizeof path, "%s/cs336-a5/safetensors/%s.safetensors", dir, file);
	if (sft_open(&f, path, &e)) {
		ok(0, "a5: %s", e.msg);
		return NULL;
	}
	const sft_tensor *t = sft_find(&f, name);
	size_t esz = t ? sft_dtype_size(t->dtype) : 0;
	float *x = malloc(n * sizeof *x);
	if (!t || (t->dtype != SFT_F32 && t->dtype != SFT_BOOL) || t->nbytes != n * esz) {
		ok(0, "a5: %s: no tensor %s of %zu values", path, name, n);
		free(x), x = NULL;
	} else {
		for (size_t i = 0; i < n; i++)
			if (t->dtype == SFT_F32)
				memcpy(&x[i], (const char *)t->data + i * 4, 4);
			else
				x[i] = ((const uint8_t *)t->data)[i] ? 1.0f : 0.0f;
	}
	sft_close(&f);
	return x;
}

/* got[0..n) against the snapshot within atol + 1e-4 |want|: the worst
 * excess over that bound (<= 0: pass) and the largest difference. */
static void a5_check(const char *dir, const char *file, const char *key, const float *got, size_t n,
		     double atol, const char *what)
{
	float *want = a5_load(dir, file, key, n);
	if (!want)
		return;
	double worst = 0, over = -1;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		worst = fmax(worst, d);
		over = fmax(over, d - (atol + 1e-4 * fabs(want[i])));
	}
	ok(over <= 0, "a5 %s: %s/%s, %zu values, max |diff| %.3g (atol %g)", what, file, key, n, worst,
	   atol);
	free(want);
}

static void test_rl_a5(void)
{
	const char *dir = tap_data_dir();
	if (!dir) {
		ok(1, "# SKIP CS336 assignment 5 inputs: LMPIPE_DATA absent");
		return;
	}
	const int B = A5_B, T = A5_T, V = A5_V, N = B * T;
	float *z = a5_load(dir, "inputs-conftest_inputs", "logits", (size_t)N * V);
	float *logp = a5_load(dir, "inputs-conftest_inputs", "policy_log_probs", N);
	float *old = a5_load(dir, "inputs-conftest_inputs", "old_log_probs", N);
	float *adv = a5_load(dir, "inputs-conftest_inputs", "advantages", B);
	float *mask = a5_load(dir, "inputs-conftest_inputs", "response_mask", N);
	if (!z || !logp || !old || !adv || !mask)
		goto out;
	/* the entropy of the logits rounded to bf16, both backends */
	float lse[A5_B * A5_T], ec[A5_B * A5_T], eg[A5_B * A5_T];
	for (size_t i = 0; i < (size_t)N * V; i++)
		z[i] = bf2f(f2bf(z[i]));
	for (int n = 0; n < N; n++)
		lse[n] = (float)lse_row_cpu(z + (size_t)n * V, (size_t)V);
	lm_backend *bes[2] = { cpu, gpu };
	float *ent[2] = { ec, eg };
	for (int k = 0; k < 2; k++) {
		void *zd = put(bes[k], z, (size_t)N * V, 1);
		float *ld = put(bes[k], lse, N, 0), *ed = bes[k]->alloc(bes[k], N * sizeof(float));
		bes[k]->entropy_fwd(bes[k], ed, zd, ld, N, V);
		bes[k]->download(bes[k], ent[k], ed, N * sizeof(float));
		bes[k]->release(bes[k], zd), bes[k]->release(bes[k], ld), bes[k]->release(bes[k], ed);
	}
	gpu_err ee = gpu_compare(eg, ec, N);
	ok(ee.max <= TOL_F32, "a5 entropy: CUDA against CPU max rel %.3g (tol %.3g)", ee.max, TOL_F32);
	a5_check(dir, "test_compute_entropy", "array", ec, N, 1e-2, "entropy (CPU, bf16 logits)");
	a5_check(dir, "test_compute_entropy", "array", eg, N, 1e-2, "entropy (CUDA, bf16 logits)");
	/* the loss op: SFT at two constants, then GRPO-clip */
	static const struct { const char *file; double constant; int clip; } steps[] = {
		{ "test_sft_microbatch_train_step", 1.0, 0 },
		{ "test_sft_microbatch_train_step_normalize", 42.0, 0 },
		{ "test_grpo_microbatch_train_step_grpo_clip", 0, 1 },
	};
	tok_in x = { .B = B, .T = T };
	float ce[A5_B * A5_T], zero[A5_B * A5_T] = { 0 }, score[A5_B];
	int32_t tg[A5_B * A5_T];
	double row_w[A5_B], dref[A5_B] = { 0 };
	x.ce = ce, x.old = old, x.ref = zero, x.ent = zero, x.score = score, x.tg = tg;
	x.row_w = row_w, x.dref = dref;
	for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
		for (int b = 0; b < B; b++) {
			int cnt = 0;
			for (int t = 0; t < T; t++) {
				int i = b * T + t, in = mask[i] != 0;
				ce[i] = in ? -logp[i] : 0.0f;
				tg[i] = in ? 0 : -1;
				cnt += in;
			}
			/* SFT: every token 1 / (c B accum), score 1; GRPO: the masked
			 * mean of the row, averaged over the batch */
			score[b] = steps[k].clip ? adv[b] : 1.0f;
			row_w[b] = steps[k].clip ? (cnt ? 1.0 / ((double)cnt * B * A5_ACCUM) : 0.0)
						 : 1.0 / (steps[k].constant * B * A5_ACCUM);
		}
		rl_tok_args a = { .clip = steps[k].clip, .clip_low = 0.1f, .clip_high = 0.1f };
		float wc[A5_B * A5_T], wg[A5_B * A5_T], grad[A5_B * A5_T];
		double sc[RL_ST_N], sg[RL_ST_N];
		tok_run(cpu, &x, 0, a, 0, wc, sc);
		tok_run(gpu, &x, 0, a, 0, wg, sg);
		lm_err e;
		int rg = gpu->sync(gpu, &e);
		gpu_err we = gpu_compare(wg, wc, N);
		ok(!rg && we.max <= 1e-5 && fabs(sg[RL_ST_LOSS] - sc[RL_ST_LOSS]) <= 1e-9 * fabs(sc[RL_ST_LOSS]),
		   "a5 loss op %s: CUDA against CPU: weights max rel %.3g, loss %.9g vs %.9g%s%s",
		   steps[k].file, we.max, sg[RL_ST_LOSS], sc[RL_ST_LOSS], rg ? ": " : "", rg ? e.msg : "");
		float loss = (float)sg[RL_ST_LOSS];
		for (int i = 0; i < N; i++)
			grad[i] = -wg[i];
		a5_check(dir, steps[k].file, "loss", &loss, 1, 1e-5, "CUDA loss");
		a5_check(dir, steps[k].file, "policy_log_probs_grad", grad, N, 1e-5, "CUDA gradient");
	}
out:
	free(z), free(logp), free(old), free(adv), free(mask);
}

/* rl_dev_pg (the op and the weighted backward pass) on both backends:
 * a grpo_clip step with the KL term on a padded micro-batch. */
static void test_dev_step(model_config c, int B, int T)
{
	lm_err e;
	model mc, mg;
	rl_dev dc, dg;
	lm_rng r;
	rng_seed(&r, 17);
	if (model_init(&mc, &c, cpu, B, T, &e) || model_init(&mg, &c, gpu, B, T, &e) ||
	    rl_dev_init(&dc, cpu, B, T, &e) || rl_dev_init(&dg, gpu, B, T, &e)) {
		ok(0, "device step: init: %s", e.msg);
		return;
	}
	model_init_weights(&mc, &r, &e);
	float *p = malloc(mc.n_params * sizeof *p);
	cpu->download(cpu, p, mc.params, mc.n_params * sizeof *p);
	gpu->upload(gpu, mg.params, p, mc.n_params * sizeof *p);
	model_params_changed(&mg);
	size_t N = (size_t)B * T;
	int32_t *ids = malloc(N * sizeof *ids), *tg = malloc(N * sizeof *tg);
	float *lp = malloc(N * sizeof *lp), *old = malloc(N * sizeof *old), *ref = malloc(N * sizeof *ref);
	float *score = malloc(B * sizeof *score);
	double *rw = malloc(B * sizeof *rw);
	for (size_t i = 0; i < N; i++) {
		int row = (int)(i / T), t = (int)(i % T), len = T - 3 * row;
		ids[i] = t < len ? (int32_t)((i * 7 + 3) % c.vocab) : 0;
		tg[i] = t >= 3 && t < len ? (int32_t)((i * 5 + 1) % c.vocab) : -1;
	}
	int rc = model_forward(&mc, ids, tg, B, T, NULL, &e) || model_token_logp(&mc, lp, NULL, &e);
	/* old log-probs at log-ratios -0.3, 0 and 0.3: each token clearly in
	 * or out of the clip range [log 0.9, log 1.1], so that the bf16 GPU's
	 * log-probs (about 1e-2 from the CPU's) clip the same tokens; random
	 * ratios near the range's ends clipped different tokens on the two
	 * backends (gradients 0.11-0.24 apart, measured on the H200) */
	for (size_t i = 0; i < N; i++) {
		old[i] = lp[i] + 0.3f * (float)((int)(i % 3) - 1);
		ref[i] = lp[i] + 0.2f * gpu_rand(&seed);
	}
	for (int b = 0; b < B; b++)
		score[b] = gpu_rand(&seed), rw[b] = 1.0 / (T * (double)B);
	rl_pg_rows rows = { .score = score, .row_w = rw, .old = old, .ref = ref, .entropy = 1,
			    .a = { .clip = 1, .clip_low = 0.1f, .clip_high = 0.1f, .kl_beta = 0.04 } };
	double sc[RL_ST_N], sg[RL_ST_N];
	rc = rc || rl_dev_pg(&dc, &mc, &rows, &e) || rl_dev_take(&dc, sc, &e);
	int rg = model_forward(&mg, ids, tg, B, T, NULL, &e) || rl_dev_pg(&dg, &mg, &rows, &e) ||
		 rl_dev_take(&dg, sg, &e);
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
	double dl = fabs(sg[RL_ST_LOSS] - sc[RL_ST_LOSS]);
	ok(!rc && !rg && dl <= 1e-3 + 2e-2 * fabs(sc[RL_ST_LOSS]),
	   "device step d=%d: loss %.6g vs CPU %.6g%s%s", c.d_model, sg[RL_ST_LOSS], sc[RL_ST_LOSS],
	   rg ? ": " : "", rg ? e.msg : "");
	ok(!rc && !rg && sg[RL_ST_TOKENS] == sc[RL_ST_TOKENS] &&
	   fabs(sg[RL_ST_ENT] - sc[RL_ST_ENT]) <= 2e-2 * fabs(sc[RL_ST_ENT]),
	   "device step: %g tokens (CPU %g), entropy sum %.6g (CPU %.6g)", sg[RL_ST_TOKENS],
	   sc[RL_ST_TOKENS], sg[RL_ST_ENT], sc[RL_ST_ENT]);
	ok(!rc && !rg && worst <= TOL_GRAD, "device step: gradients, every tensor within rel %.3g "
	   "(worst %.3g, %s)", TOL_GRAD, worst, worst_name);
	rl_dev_free(&dc);
	rl_dev_free(&dg);
	model_free(&mc);
	model_free(&mg);
	free(t), free(p), free(ids), free(tg), free(lp), free(old), free(ref), free(score), free(rw);
	free(gc), free(gg);
}

/* PPO's loss op inputs for B rows of T tokens of width C (the layout of
 * tok_make: counted tokens after a prompt of 2 + b % 3, padding after T -
 * 2b, row 1 without any); hidden and head bf16-exact, so that both
 * backends read the same numbers; old log-probs and old values clearly
 * inside or outside their clip ranges. */
typedef struct ppo_in {
	tok_in t;
	int C;
	float *hidden, *head, *adv, *old_v, *ret;
} ppo_in;

static const rl_ppo_tok_args PPO_ARGS = { 0.1f, 0.1f, 0.2f, 0.5, 0.01 };

/* A return this far from the value: between 0.6 and 1 either way, so that
 * the plain and the clipped squared errors of old values 0.4 or 0.5 from
 * the value (clipped to 0.2 from it) differ by 0.2 or more, on whichever
 * side: near a tie the backends' values (bf16 apart, in the device step)
 * would pick different branches, one of which has no gradient. */
static float ret_offset(size_t i, float u)
{
	return ((i / 9) % 2 ? 1.0f : -1.0f) * (0.6f + 0.4f * fabsf(u));
}

static void ppo_make(ppo_in *x, int B, int T, int C)
{
	tok_make(&x->t, B, T);
	size_t n = (size_t)B * T;
	x->C = C;
	x->hidden = malloc(n * C * sizeof *x->hidden), x->head = malloc((C + 1) * sizeof *x->head);
	x->adv = malloc(n * sizeof *x->adv), x->old_v = malloc(n * sizeof *x->old_v);
	x->ret = malloc(n * sizeof *x->ret);
	for (int j = 0; j <= C; j++)
		x->head[j] = bf2f(f2bf(0.1f * gpu_rand(&seed)));
	for (size_t i = 0; i < n; i++) {
		double v = x->head[C];
		for (int j = 0; j < C; j++) {
			x->hidden[i * C + j] = bf2f(f2bf(gpu_rand(&seed)));
			v += (double)x->head[j] * x->hidden[i * C + j];
		}
		float lp = x->t.ce[i] == 0 ? 0.0f : -x->t.ce[i];
		x->t.old[i] = lp + 0.3f * (float)((int)(i % 3) - 1);
		x->old_v[i] = (float)v + 0.4f * (float)((int)(i % 3) - 1);
		x->adv[i] = gpu_rand(&seed);
		x->ret[i] = (float)v + ret_offset(i, gpu_rand(&seed));
	}
}

static void ppo_free(ppo_in *x)
{
	tok_free(&x->t);
	free(x->hidden), free(x->head), free(x->adv), free(x->old_v), free(x->ret);
}

/* The op's outputs on one backend, host memory. */
typedef struct ppo_out {
	float *values, *w, *dent, *dvalue, *dhidden, *hgrad;
	double st[RL_PPO_N];
} ppo_out;

static void ppo_run(lm_backend *be, const ppo_in *x, ppo_out *o)
{
	int B = x->t.B, T = x->t.T, C = x->C;
	size_t n = (size_t)B * T;
	float *ce = put(be, x->t.ce, n, 0), *old = put(be, x->t.old, n, 0);
	float *ent = put(be, x->t.ent, n, 0), *adv = put(be, x->adv, n, 0);
	float *old_v = put(be, x->old_v, n, 0), *ret = put(be, x->ret, n, 0);
	float *head = put(be, x->head, C + 1, 0);
	void *hid = put(be, x->hidden, n * C, 1);
	int32_t *tg = be->alloc(be, n * sizeof *tg);
	double *rs = be->alloc(be, B * sizeof *rs), *stats = be->alloc(be, sizeof o->st);
	double *ws = be->alloc(be, rl_ppo_workspace(B, T, C));
	float *vals = be->alloc(be, n * sizeof *vals), *w = be->alloc(be, n * sizeof *w);
	float *dent = be->alloc(be, n * sizeof *dent), *dv = be->alloc(be, n * sizeof *dv);
	float *dh = be->alloc(be, n * C * sizeof *dh), *hg = be->alloc(be, (C + 1) * sizeof *hg);
	be->upload(be, tg, x->t.tg, n * sizeof *tg);
	be->upload(be, rs, x->t.row_w, B * sizeof *rs);
	be->zero(be, stats, sizeof o->st);
	be->zero(be, hg, (C + 1) * sizeof *hg);
	be->ppo_value(be, vals, hid, head, (int)n, C);
	be->ppo_tok(be, w, dent, dv, dh, hg, stats, ws, ce, tg, hid, head, ent, old, adv, old_v, ret,
		    rs, B, T, C, PPO_ARGS);
	o->values = get(be, vals, n), o->w = get(be, w, n), o->dent = get(be, dent, n);
	o->dvalue = get(be, dv, n), o->dhidden = get(be, dh, n * C), o->hgrad = get(be, hg, C + 1);
	be->download(be, o->st, stats, sizeof o->st);
	void *all[] = { ce, old, ent, adv, old_v, ret, head, hid, tg, rs, stats, ws, vals, w, dent,
			dv, dh, hg };
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		be->release(be, all[i]);
}

static void ppo_out_free(ppo_out *o)
{
	free(o->values), free(o->w), free(o->dent), free(o->dvalue), free(o->dhidden), free(o->hgrad);
}

static void test_ppo_tok(int B, int T, int C)
{
	ppo_in x;
	ppo_make(&x, B, T, C);
	ppo_out c, g, g2;
	size_t n = (size_t)B * T;
	ppo_run(cpu, &x, &c);
	ppo_run(gpu, &x, &g);
	ppo_run(gpu, &x, &g2);
	lm_err e;
	int rg = gpu->sync(gpu, &e);
	gpu_err ve = gpu_compare(g.values, c.values, n), we = gpu_compare(g.w, c.w, n);
	gpu_err de = gpu_compare(g.dent, c.dent, n), dv = gpu_compare(g.dvalue, c.dvalue, n);
	gpu_err dh = gpu_compare(g.dhidden, c.dhidden, n * C), hg = gpu_compare(g.hgrad, c.hgrad, C + 1);
	double worst = 0;
	for (int j = 0; j < RL_PPO_N; j++)
		worst = fmax(worst, fabs(g.st[j] - c.st[j]) / fmax(fabs(c.st[j]), 1e-12));
	ok(!rg && ve.max <= 1e-5, "ppo value op B=%d T=%d C=%d: max rel %.3g (tol 1e-5)%s%s", B, T, C,
	   ve.max, rg ? ": " : "", rg ? e.msg : "");
	ok(!rg && we.max <= 1e-5 && de.max <= 1e-5 && dv.max <= 1e-4,
	   "ppo loss op: weights %.3g, entropy gradients %.3g, value gradients %.3g (max rel; tol "
	   "1e-5, 1e-5, 1e-4)", we.max, de.max, dv.max);
	ok(!rg && dh.max <= 1e-4 && hg.rel <= 1e-4,
	   "ppo loss op: hidden gradients max rel %.3g, head gradient rel %.3g (tol 1e-4)", dh.max,
	   hg.rel);
	ok(!rg && worst <= 1e-6 && g.st[RL_PPO_TOKENS] == c.st[RL_PPO_TOKENS],
	   "ppo loss op: statistics rel %.3g (tol 1e-6), loss %.12g vs %.12g, %g tokens", worst,
	   g.st[RL_PPO_LOSS], c.st[RL_PPO_LOSS], g.st[RL_PPO_TOKENS]);
	ok(!memcmp(g.w, g2.w, n * sizeof *g.w) && !memcmp(g.dhidden, g2.dhidden, n * C * sizeof(float)) &&
	   !memcmp(g.hgrad, g2.hgrad, (C + 1) * sizeof(float)) && !memcmp(g.st, g2.st, sizeof g.st),
	   "ppo loss op: the CUDA run repeats bit for bit");
	ppo_out_free(&c), ppo_out_free(&g), ppo_out_free(&g2);
	ppo_free(&x);
}

/* PPO's device step on both backends: the old values (rl_dev_values),
 * then rl_dev_ppo with the entropy bonus on a padded micro-batch. */
static void test_ppo_dev_step(model_config c, int B, int T)
{
	lm_err e;
	model mc, mg;
	rl_dev dc, dg;
	value_head hc, hg;
	lm_rng r;
	rng_seed(&r, 19);
	int C = c.d_model;
	if (model_init(&mc, &c, cpu, B, T, &e) || model_init(&mg, &c, gpu, B, T, &e) ||
	    rl_dev_ppo_init(&dc, cpu, B, T, C, &e) || rl_dev_ppo_init(&dg, gpu, B, T, C, &e) ||
	    vh_init(&hc, C, &e) || vh_init(&hg, C, &e)) {
		ok(0, "ppo device step: init: %s", e.msg);
		return;
	}
	model_init_weights(&mc, &r, &e);
	float *p = malloc(mc.n_params * sizeof *p);
	cpu->download(cpu, p, mc.params, mc.n_params * sizeof *p);
	gpu->upload(gpu, mg.params, p, mc.n_params * sizeof *p);
	model_params_changed(&mg);
	for (int j = 0; j < C; j++)
		hc.w[j] = hg.w[j] = 0.2f * gpu_rand(&seed);
	hc.b[0] = hg.b[0] = 0.1f;
	rl_dev_set_head(&dc, &hc);
	rl_dev_set_head(&dg, &hg);
	size_t N = (size_t)B * T;
	int32_t *ids = malloc(N * sizeof *ids), *tg = malloc(N * sizeof *tg);
	float *lp = malloc(N * sizeof *lp), *old = malloc(N * sizeof *old);
	float *vc = malloc(N * sizeof *vc), *vg = malloc(N * sizeof *vg);
	float *adv = malloc(N * sizeof *adv), *old_v = malloc(N * sizeof *old_v);
	float *ret = malloc(N * sizeof *ret);
	double *rs = malloc(B * sizeof *rs);
	for (size_t i = 0; i < N; i++) {
		int row = (int)(i / T), t = (int)(i % T), len = T - 3 * row;
		ids[i] = t < len ? (int32_t)((i * 7 + 3) % c.vocab) : 0;
		tg[i] = t >= 3 && t < len ? (int32_t)((i * 5 + 1) % c.vocab) : -1;
	}
	int rc = model_forward(&mc, ids, tg, B, T, NULL, &e) || rl_dev_values(&dc, &mc, vc, &e) ||
		 model_token_logp(&mc, lp, NULL, &e);
	int rg = model_forward(&mg, ids, tg, B, T, NULL, &e) || rl_dev_values(&dg, &mg, vg, &e);
	gpu_err ve = gpu_compare(vg, vc, N);
	ok(!rc && !rg && ve.rel <= 2e-2, "ppo device step d=%d: values rel %.3g (tol 2e-2)%s%s",
	   C, ve.rel, rg ? ": " : "", rg ? e.msg : "");
	/* old log-probs and values clearly inside or outside the clip ranges
	 * (as test_dev_step's), returns clear of the value losses' ties, so that
 * both backends clip the same tokens */
	for (size_t i = 0; i < N; i++) {
		old[i] = lp[i] + 0.3f * (float)((int)(i % 3) - 1);
		old_v[i] = vc[i] + 0.5f * (float)((int)((i / 3) % 3) - 1);
		adv[i] = gpu_rand(&seed);
		ret[i] = vc[i] + ret_offset(i, gpu_rand(&seed));
	}
	for (int b = 0; b < B; b++)
		rs[b] = 1.0 / (T * (double)B);
	rl_ppo_rows rows = { .old = old, .adv = adv, .old_v = old_v, .ret = ret, .row_scale = rs,
			     .a = PPO_ARGS };
	double sc[RL_PPO_N], sg[RL_PPO_N];
	rc = rc || rl_dev_ppo(&dc, &mc, &rows, &e) || rl_dev_ppo_take(&dc, sc, &hc, &e);
	rg = rg || model_forward(&mg, ids, tg, B, T, NULL, &e) || rl_dev_ppo(&dg, &mg, &rows, &e) ||
	     rl_dev_ppo_take(&dg, sg, &hg, &e);
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
	gpu_err he = gpu_compare(hg.gw, hc.gw, (size_t)C);
	double dl = fabs(sg[RL_PPO_LOSS] - sc[RL_PPO_LOSS]);
	ok(!rc && !rg && dl <= 1e-3 + 2e-2 * fabs(sc[RL_PPO_LOSS]) &&
	   sg[RL_PPO_TOKENS] == sc[RL_PPO_TOKENS],
	   "ppo device step: loss %.6g vs CPU %.6g, %g tokens (CPU %g)%s%s", sg[RL_PPO_LOSS],
	   sc[RL_PPO_LOSS], sg[RL_PPO_TOKENS], sc[RL_PPO_TOKENS], rg ? ": " : "", rg ? e.msg : "");
	/* The bias's gradient is a sum over the tokens of terms of both signs
	 * (vf_coef * scale * (v - ret), v clipped or not), which cancel: its
	 * error is bounded against the sum of the terms' magnitudes, each
	 * within bf16 rounding of the CPU's, not against the (small) sum. */
	double mag = 0;
	for (size_t i = 0; i < N; i++)
		if (tg[i] >= 0)
			mag += PPO_ARGS.vf_coef * rs[i / T] * (fabs(vc[i] - ret[i]) + PPO_ARGS.vf_clip);
	double db = fabs(hg.gb[0] - hc.gb[0]);
	ok(!rc && !rg && he.rel <= TOL_GRAD && db <= 2e-2 * mag + 1e-6,
	   "ppo device step: the head's gradient rel %.3g (tol %.3g), bias %.6g vs %.6g "
	   "(difference %.3g of the terms' %.3g)", he.rel, TOL_GRAD, hg.gb[0], hc.gb[0], db / mag, mag);
	ok(!rc && !rg && worst <= TOL_GRAD, "ppo device step: gradients, every tensor within rel %.3g "
	   "(worst %.3g, %s)", TOL_GRAD, worst, worst_name);
	rl_dev_free(&dc), rl_dev_free(&dg);
	vh_free(&hc), vh_free(&hg);
	model_free(&mc), model_free(&mg);
	free(t), free(p), free(ids), free(tg), free(lp), free(old), free(vc), free(vg), free(adv);
	free(old_v), free(ret), free(rs), free(gc), free(gg);
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
	model_config small = { 97, 64, 64, 2, 2, 96, 10000.0, 0, MODEL_PLAIN };
	test_model(small, 4, 40);
	model_config ts_like = { 1000, 256, 512, 2, 16, 1344, 10000.0, 0, MODEL_PLAIN };
	test_model(ts_like, 4, 128);
	test_rl_tok(2, 1);
	test_rl_tok(6, 37);
	test_rl_tok(64, 300);
	test_rl_a5();
	test_dev_step(small, 4, 40);
	test_dev_step(ts_like, 8, 128);
	test_ppo_tok(2, 1, 8);
	test_ppo_tok(6, 37, 64);
	test_ppo_tok(64, 300, 512);
	test_ppo_dev_step(small, 4, 40);
	test_ppo_dev_step(ts_like, 8, 128);
	cpu->close(cpu);
	gpu->close(gpu);
	return done_testing();
}
