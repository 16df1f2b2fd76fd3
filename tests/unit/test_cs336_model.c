/* test_cs336_model.c: conformance with the CS336 assignment 1 reference
 * outputs (../shared/data/cs336-a1/safetensors): scaled dot-product
 * attention with a mask (3-d and 4-d) and without, RoPE (CS336's
 * interleaved pairs, through the rotate-half op and a permutation of each
 * head's dimensions), AdamW for 1000 steps, the cosine schedule and
 * gradient clipping.  Tolerances are those of the CS336 tests
 * (notes/a1-tests.md).  Skips without the shared data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/adamw.h"
#include "kernels/rope.h"
#include "kernels/sdpa.h"
#include "model/optimizer.h"
#include "model/safetensors.h"

static const double SDPA_ATOL = 1e-5, ROPE_ATOL = 1e-5, ADAMW_ATOL = 1e-4, CLIP_ATOL = 1e-5;
static const double RTOL = 1e-4;

static char dir[4096];

static int load(sft_file *f, const char *name)
{
	char path[8192];
	lm_err e;
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
	if (sft_open(f, path, &e)) {
		diag("%s", e.msg);
		return -1;
	}
	return 0;
}

static const float *f32(const sft_file *f, const char *name, size_t *n)
{
	const sft_tensor *t = sft_find(f, name);
	if (!t || t->dtype != SFT_F32)
		return NULL;
	if (n)
		*n = t->nbytes / sizeof(float);
	return t->data;
}

/* numpy.allclose: |a - b| <= atol + rtol |b| everywhere. */
static int allclose(const float *a, const float *b, size_t n, double atol, double *worst)
{
	int good = 1;
	*worst = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		*worst = fmax(*worst, d);
		if (!(d <= atol + RTOL * fabs(b[i])))
			good = 0;
	}
	return good;
}

static void test_sdpa(const sft_file *in)
{
	enum { BQ = 4, TQ = 12, TK = 16, D = 64 };
	const float *q = f32(in, "q", NULL), *k = f32(in, "k", NULL), *v = f32(in, "v", NULL);
	const sft_tensor *mt = sft_find(in, "mask");
	if (!q || !k || !v || !mt) {
		ok(0, "sdpa inputs present");
		return;
	}
	float o[BQ * TQ * D];
	double worst;
	int good;
	sdpa_fwd_cpu(o, q, k, v, mt->data, BQ, TQ, TK, D, 1.0f / sqrtf(D));
	sft_file ref;
	if (!load(&ref, "test_scaled_dot_product_attention")) {
		good = allclose(o, f32(&ref, "array", NULL), BQ * TQ * D, SDPA_ATOL, &worst);
		ok(good, "sdpa with mask matches CS336 (max diff %.2g)", worst);
		sft_close(&ref);
	}
	/* 4-d: (batch head) seq d -> batch head seq d; the same memory. */
	if (!load(&ref, "test_4d_scaled_dot_product_attention")) {
		const sft_tensor *t = sft_find(&ref, "array");
		ok(t && t->ndim == 4 && t->shape[0] * t->shape[1] == BQ,
		   "4-d reference is [2, 2, 12, 64]");
		good = allclose(o, t->data, BQ * TQ * D, SDPA_ATOL, &worst);
		ok(good, "4-d sdpa with mask matches CS336 (max diff %.2g)", worst);
		sft_close(&ref);
	}
	/* no mask: against a direct double-precision softmax */
	sdpa_fwd_cpu(o, q, k, v, NULL, BQ, TQ, TK, D, 1.0f / sqrtf(D));
	double err = 0;
	for (int s = 0; s < BQ; s++)
		for (int i = 0; i < TQ; i++) {
			double sc[TK], mx = -INFINITY, sum = 0;
			for (int j = 0; j < TK; j++) {
				sc[j] = 0;
				for (int d = 0; d < D; d++)
					sc[j] += (double)q[(s * TQ + i) * D + d] * k[(s * TK + j) * D + d];
				sc[j] /= sqrt(D);
				mx = fmax(mx, sc[j]);
			}
			for (int j = 0; j < TK; j++)
				sum += sc[j] = exp(sc[j] - mx);
			for (int d = 0; d < D; d++) {
				double r = 0;
				for (int j = 0; j < TK; j++)
					r += sc[j] / sum * v[(s * TK + j) * D + d];
				err = fmax(err, fabs(r - o[(s * TQ + i) * D + d]));
			}
		}
	ok(err < SDPA_ATOL, "sdpa without mask matches a double softmax (max diff %.2g)", err);
}

/* CS336 pairs (2i, 2i+1); the op pairs (i, i + D/2). */
static void test_rope(const sft_file *in)
{
	enum { B = 4, T = 12, D = 64, MAXT = 16 };
	const float *x = f32(in, "in_embeddings", NULL);
	const sft_tensor *pt = sft_find(in, "pos_ids");
	sft_file ref;
	if (!x || !pt || pt->dtype != SFT_I64 || load(&ref, "test_rope")) {
		ok(0, "rope inputs present");
		return;
	}
	static float y[B * T * D], cs[MAXT * D];
	for (int r = 0; r < B * T; r++)
		for (int i = 0; i < D / 2; i++) {
			y[r * D + i] = x[r * D + 2 * i];
			y[r * D + i + D / 2] = x[r * D + 2 * i + 1];
		}
	rope_table(cs, pt->data, T, D, ROPE_THETA_DEFAULT);
	rope_fwd_cpu(y, cs, B, 1, T, D);
	static float back[B * T * D];
	for (int r = 0; r < B * T; r++)
		for (int i = 0; i < D / 2; i++) {
			back[r * D + 2 * i] = y[r * D + i];
			back[r * D + 2 * i + 1] = y[r * D + i + D / 2];
		}
	double worst;
	int good;
	good = allclose(back, f32(&ref, "array", NULL), B * T * D, ROPE_ATOL, &worst);
	ok(good, "rope matches CS336 after the pairing permutation (max diff %.2g)", worst);
	sft_close(&ref);
}

/* CS336 test_adamw: Linear(3, 2) without bias, loss sum((y - W x)^2) with
 * y = (x0 + x1, -x2), AdamW(lr 1e-3, wd 0.01, betas (0.9, 0.999), eps 1e-8). */
static void test_adamw(const sft_file *in)
{
	enum { STEPS = 1000, IN = 3, OUT = 2 };
	size_t nx;
	const float *w0 = f32(in, "adamw_init_weight", NULL), *xs = f32(in, "adamw_xs", &nx);
	const float *torch = f32(in, "adamw_torch_result", NULL);
	if (!w0 || !xs || !torch || nx != STEPS * IN) {
		ok(0, "adamw inputs present");
		return;
	}
	float w[OUT * IN], g[OUT * IN], m[OUT * IN] = { 0 }, v[OUT * IN] = { 0 };
	memcpy(w, w0, sizeof w);
	adamw_hparams h = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0, 1.0f, NULL };
	for (int s = 0; s < STEPS; s++) {
		const float *x = xs + s * IN;
		float y[OUT] = { x[0] + x[1], -x[2] };
		for (int o = 0; o < OUT; o++) {
			float yh = 0;
			for (int i = 0; i < IN; i++)
				yh += w[o * IN + i] * x[i];
			for (int i = 0; i < IN; i++)
				g[o * IN + i] = -2.0f * (y[o] - yh) * x[i];
		}
		h.t = s + 1;
		adamw_step_cpu(w, g, m, v, OUT * IN, &h);
	}
	double worst;
	int good;
	good = allclose(w, torch, OUT * IN, ADAMW_ATOL, &worst);
	ok(good, "AdamW 1000 steps matches torch.optim.AdamW (max diff %.2g)", worst);
	sft_file ref;
	if (!load(&ref, "test_adamw")) {
		good = allclose(w, f32(&ref, "array", NULL), OUT * IN, ADAMW_ATOL, &worst);
		ok(good, "AdamW 1000 steps matches the CS336 snapshot (max diff %.2g)", worst);
		sft_close(&ref);
	}
}

/* The list in CS336 test_get_lr_cosine_schedule (max 1, min 0.1, warmup 7,
 * cycle 21). */
static void test_schedule(void)
{
	static const double want[] = {
		0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855,
		0.5714285714285714, 0.7142857142857143, 0.8571428571428571, 1.0,
		0.9887175604818206, 0.9554359905560885, 0.9018241671106134, 0.8305704108364301,
		0.7452476826029011, 0.6501344202803414, 0.55, 0.44986557971965857,
		0.3547523173970989, 0.26942958916356996, 0.19817583288938662,
		0.14456400944391146, 0.11128243951817937, 0.1, 0.1, 0.1, 0.1,
	};
	double worst = 0;
	for (int t = 0; t < (int)(sizeof want / sizeof want[0]); t++)
		worst = fmax(worst, fabs(lr_cosine(t, 1.0, 0.1, 7, 21) - want[t]));
	ok(worst < 1e-12, "cosine schedule matches the CS336 list (max diff %.2g)", worst);
}

/* CS336 test_gradient_clipping: six 5x5 tensors, the last frozen (no
 * gradient), max_norm 1e-2, against torch's clip_grad_norm_ formula. */
static void test_clip(void)
{
	enum { NT = 6, NE = 25 };
	static const double MAX_NORM = 1e-2;
	float g[NT - 1][NE];
	unsigned s = 42;
	double ss = 0;
	for (int t = 0; t < NT - 1; t++)
		for (int i = 0; i < NE; i++) {
			s = s * 1103515245u + 12345u;
			g[t][i] = (float)((s >> 8) / (double)(1u << 24) * 2 - 1);
			ss += (double)g[t][i] * g[t][i];
		}
	double norm = sqrt(sumsq_cpu(&g[0][0], (NT - 1) * NE));
	near(norm, sqrt(ss), 1e-9, "global norm over the tensors that have gradients");
	double f = clip_factor(norm, MAX_NORM), worst = 0;
	for (int t = 0; t < NT - 1; t++)
		for (int i = 0; i < NE; i++)
			worst = fmax(worst, fabs(g[t][i] * f - g[t][i] * MAX_NORM / (sqrt(ss) + 1e-6)));
	ok(worst < CLIP_ATOL, "clipped gradients match torch's (max diff %.2g)", worst);
	near(clip_factor(0.5 * MAX_NORM, MAX_NORM), 1.0, 0, "no clipping below the limit");
	near(clip_factor(100, 0), 1.0, 0, "max_norm 0 disables clipping");
}

int main(void)
{
	test_schedule();
	test_clip();
	const char *data = tap_data_dir();
	if (!data) {
		diag("../shared/data absent: CS336 reference outputs skipped");
		return done_testing();
	}
	snprintf(dir, sizeof dir, "%s/cs336-a1/safetensors", data);
	sft_file in;
	if (load(&in, "inputs-conftest_inputs")) {
		ok(0, "CS336 inputs load");
		return done_testing();
	}
	test_sdpa(&in);
	test_rope(&in);
	test_adamw(&in);
	sft_close(&in);
	return done_testing();
}
