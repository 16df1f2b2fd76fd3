/* op_attention.h: the attention entry of the GPU op table (test_ops.c):
 * forward and backward on the GPU (bf16) against the CPU twin run on the
 * same bf16-rounded inputs; plus the CS336 inputs against double precision
 * and the error codes for what the kernels do not support. */
#ifndef LMPIPE_OP_ATTENTION_H
#define LMPIPE_OP_ATTENTION_H

#include <stdlib.h>

#include "../attn_ref.h"
#include "../st_read.h"
#include "gpu_harness.h"
#include "kernels/attention.h"

/* Shapes: B, H, T, D, causal, and 1 for the deterministic backward
 * (attn_bwd_det_cuda; its own table entry, ATTN_DET_OP). */
static const int attn_shapes[][GPU_MAX_DIMS] = {
	{1, 1, 1, 64, 0},    {1, 1, 1, 128, 1},   {2, 3, 17, 64, 1},  {2, 3, 17, 128, 0},
	{1, 2, 64, 64, 1},   {1, 2, 129, 64, 0},  {1, 2, 129, 128, 1}, {2, 1, 200, 64, 1},
	{1, 2, 1000, 64, 1}, {1, 2, 1000, 128, 0}, {1, 1, 1000, 128, 1}, {1, 2, 1024, 64, 0},
	{1, 1, 2049, 128, 1},
	/* more (head, row tile) items than an H200 has multiprocessors: the
	 * persistent forward's blocks each take several */
	{2, 80, 200, 64, 1}, {1, 140, 130, 128, 1}, {1, 70, 250, 128, 0},
	/* D = 32: the short kernels (attn_short_*), one block per head */
	{1, 1, 1, 32, 0},    {1, 1, 1, 32, 1},    {2, 3, 17, 32, 1},  {1, 2, 63, 32, 1},
	{2, 2, 65, 32, 0},   {1, 2, 129, 32, 0},  {4, 16, 256, 32, 1}, {3, 5, 100, 32, 1},
	{1, 2, 511, 32, 1},  {1, 3, 512, 32, 0},
};

/* The deterministic backward: T = 1024 (gpt2s), odd T past a key block
 * (129: a second block of one key; 2049), T < 64, T not a multiple of 64,
 * causal and full. */
static const int attn_det_shapes[][GPU_MAX_DIMS] = {
	{1, 1, 1, 64, 1, 1},     {2, 3, 17, 128, 1, 1},  {1, 2, 129, 64, 1, 1},
	{1, 2, 129, 128, 0, 1},  {2, 2, 1024, 64, 1, 1}, {1, 2, 1024, 128, 1, 1},
	{1, 2, 1000, 64, 0, 1},  {1, 1, 2049, 64, 1, 1}, {1, 1, 2049, 128, 1, 1},
	{1, 2, 2047, 128, 0, 1}, {2, 6, 333, 64, 1, 1},
};

/* bf16 rounding of o and of P before P V bounds the forward error near
 * 2^-8; the backward adds dS and the dq atomics in fp32. */
static const gpu_tol attn_tols[] = {
	{"o", 1e-2, 6e-3}, {"lse", 1e-5, 1e-6}, {"dq", 1.5e-2, 1e-2}, {"dk", 1.5e-2, 1e-2},
	{"dv", 1.5e-2, 1e-2},
};

static void attn_describe(const int *s, char *buf, size_t len)
{
	snprintf(buf, len, "B%d H%d T%d D%d %s%s", s[0], s[1], s[2], s[3], s[4] ? "causal" : "full",
		 s[5] ? ", deterministic backward" : "");
}

/* Device copies of the inputs and outputs of one attention problem. */
typedef struct attn_dev {
	uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv;
	float *lse;
	void *ws;
} attn_dev;

static void attn_dev_free(attn_dev *d)
{
	void *p[] = {d->q, d->k, d->v, d->o, d->dout, d->dq, d->dk, d->dv, d->lse, d->ws};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		cudaFree(p[i]);
}

/* The backward pass into d's dq, dk, dv: the short kernels where they
 * apply, else the flash kernels, det: the deterministic ones. */
static int attn_dev_bwd(attn_dev *d, int B, int H, int T, int D, int causal, float scale, int det)
{
	if (attn_short_applies(D, T))
		return attn_short_bwd_cuda(d->q, d->k, d->v, d->o, d->dout, d->lse, d->dq, d->dk, d->dv,
					   B, H, T, D, causal, scale, 0, NULL);
	return (det ? attn_bwd_det_cuda : attn_bwd_cuda)(d->q, d->k, d->v, d->o, d->dout, d->lse,
							  d->dq, d->dk, d->dv, B, H, T, D, causal,
							  scale, d->ws, NULL);
}

/* Workspace bytes for either backward pass. */
static size_t attn_dev_ws(int B, int H, int T, int D)
{
	size_t a = attn_bwd_cuda_workspace(B, H, T, D), b = attn_bwd_det_cuda_workspace(B, H, T, D);
	return a > b ? a : b;
}

/* Upload the bf16 inputs h[0..3] (q, k, v, dout), allocate the outputs
 * (and the workspace) poisoned, run forward then backward (det: the
 * deterministic one).  NULL, or what failed. */
static const char *attn_dev_run(attn_dev *d, uint16_t *const h[4], int B, int H, int T, int D,
				int causal, float scale, int det)
{
	size_t n = (size_t)B * H * T * D, nl = (size_t)B * H * T, bytes = n * sizeof(uint16_t);
	uint16_t **in[] = {&d->q, &d->k, &d->v, &d->dout};
	memset(d, 0, sizeof *d);
	for (int i = 0; i < 4; i++)
		if (!(*in[i] = gpu_poisoned(bytes)) ||
		    cudaMemcpy(*in[i], h[i], bytes, cudaMemcpyHostToDevice) != cudaSuccess)
			return "upload";
	if (!(d->o = gpu_poisoned(bytes)) || !(d->dq = gpu_poisoned(bytes)) ||
	    !(d->dk = gpu_poisoned(bytes)) || !(d->dv = gpu_poisoned(bytes)) ||
	    !(d->lse = gpu_poisoned(nl * sizeof(float))) ||
	    !(d->ws = gpu_poisoned(attn_dev_ws(B, H, T, D))))
		return "cudaMalloc";
	int sh = attn_short_applies(D, T);
	int rc = sh ? attn_short_fwd_cuda(d->q, d->k, d->v, d->o, d->lse, B, H, T, D, causal, scale, 0, NULL)
		    : attn_fwd_cuda(d->q, d->k, d->v, d->o, d->lse, B, H, T, D, causal, scale, NULL);
	if (rc)
		return attn_strerror(rc);
	rc = attn_dev_bwd(d, B, H, T, D, causal, scale, det);
	if (rc)
		return attn_strerror(rc);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return cudaGetErrorString(cudaGetLastError());
	return NULL;
}

static const char *attn_run(const int *s, uint64_t seed, gpu_err *err)
{
	int B = s[0], H = s[1], T = s[2], D = s[3], causal = s[4];
	size_t n = (size_t)B * H * T * D, nl = (size_t)B * H * T;
	float scale = 1 / sqrtf((float)D);
	const float mag[4] = {2, 1, 1, 1};  /* q larger: a peaked softmax */
	uint16_t *h[4], *got = malloc(n * sizeof *got);
	float *f[4], *ref[5], *tmp = malloc(n * sizeof *tmp);
	for (int i = 0; i < 4; i++) {
		h[i] = malloc(n * sizeof **h);
		f[i] = malloc(n * sizeof **f);
		gpu_rand_bf16(h[i], f[i], n, mag[i], &seed);
	}
	for (int i = 0; i < 5; i++)
		ref[i] = malloc((i == 1 ? nl : n) * sizeof **ref);
	/* ref: o, lse, dq, dk, dv from the CPU twin. */
	attn_fwd_cpu(f[0], f[1], f[2], ref[0], ref[1], B, H, T, D, causal, scale);
	attn_bwd_cpu(f[0], f[1], f[2], ref[0], f[3], ref[1], ref[2], ref[3], ref[4], B, H, T, D,
		     causal, scale);
	attn_dev d;
	const char *fail = attn_dev_run(&d, h, B, H, T, D, causal, scale, s[5]);
	uint16_t *outs[] = {d.o, NULL, d.dq, d.dk, d.dv};
	for (int i = 0; !fail && i < 5; i++) {
		if (i == 1) {
			if (cudaMemcpy(tmp, d.lse, nl * sizeof *tmp, cudaMemcpyDeviceToHost))
				fail = "download";
			else
				err[i] = gpu_compare(tmp, ref[i], nl);
			continue;
		}
		if (cudaMemcpy(got, outs[i], n * sizeof *got, cudaMemcpyDeviceToHost))
			fail = "download";
		else
			err[i] = gpu_compare_bf16(got, ref[i], n, tmp);
	}
	attn_dev_free(&d);
	for (int i = 0; i < 5; i++)
		free(ref[i]);
	for (int i = 0; i < 4; i++) {
		free(h[i]);
		free(f[i]);
	}
	free(got);
	free(tmp);
	return fail;
}

/* The forward pass twice on the same inputs gives the same bits (no race). */
static void attn_repeatable(void)
{
	enum { B = 2, H = 2, T = 333, D = 128 };
	size_t n = (size_t)B * H * T * D;
	uint64_t seed = 99;
	uint16_t *h[4], *a = malloc(n * 2), *b = malloc(n * 2);
	float *f = malloc(n * sizeof *f);
	for (int i = 0; i < 4; i++) {
		h[i] = malloc(n * sizeof **h);
		gpu_rand_bf16(h[i], f, n, 1, &seed);
	}
	attn_dev d;
	const char *fail = attn_dev_run(&d, h, B, H, T, D, 1, 0.1f, 0);
	if (!fail && cudaMemcpy(a, d.o, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
	    attn_fwd_cuda(d.q, d.k, d.v, d.o, d.lse, B, H, T, D, 1, 0.1f, NULL) == 0 &&
	    cudaMemcpy(b, d.o, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess)
		ok(!memcmp(a, b, n * 2), "attention forward is bitwise repeatable");
	else
		ok(0, "attention forward repeat runs: %s", fail ? fail : "CUDA error");
	attn_dev_free(&d);
	for (int i = 0; i < 4; i++)
		free(h[i]);
	free(a);
	free(b);
	free(f);
}

/* The short kernels' backward pass sums without atomics: dq, dk and dv
 * are the same bits when it runs again. */
static void attn_short_repeatable(void)
{
	enum { B = 3, H = 4, T = 256, D = 32 };
	size_t n = (size_t)B * H * T * D;
	uint64_t seed = 7;
	uint16_t *h[4], *a = malloc(3 * n * 2), *b = malloc(3 * n * 2);
	float *f = malloc(n * sizeof *f);
	for (int i = 0; i < 4; i++) {
		h[i] = malloc(n * sizeof **h);
		gpu_rand_bf16(h[i], f, n, 1, &seed);
	}
	attn_dev d;
	const char *fail = attn_dev_run(&d, h, B, H, T, D, 1, 0.2f, 0);
	uint16_t *g[3] = {d.dq, d.dk, d.dv};
	int good = !fail;
	for (int i = 0; good && i < 3; i++)
		good = cudaMemcpy(a + i * n, g[i], n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
	good = good && attn_short_bwd_cuda(d.q, d.k, d.v, d.o, d.dout, d.lse, d.dq, d.dk, d.dv, B, H, T,
					   D, 1, 0.2f, 0, NULL) == 0;
	for (int i = 0; good && i < 3; i++)
		good = cudaMemcpy(b + i * n, g[i], n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
	if (good)
		ok(!memcmp(a, b, 3 * n * 2), "short attention backward is bitwise repeatable");
	else
		ok(0, "short attention backward repeat runs: %s", fail ? fail : "CUDA error");
	/* o and dout as [B, T, H, D]: the same bits, in the other layout */
	uint16_t *o1 = malloc(n * 2), *dy = malloc(n * 2), *y = NULL, *dyd = NULL;
	good = !fail && cudaMemcpy(o1, d.o, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
	       cudaMemcpy(dy, d.dout, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
	       cudaMalloc((void **)&y, n * 2) == cudaSuccess && cudaMalloc((void **)&dyd, n * 2) == cudaSuccess;
	uint16_t *perm = malloc(n * 2), *back = malloc(n * 2);
	for (size_t i = 0; good && i < n; i++) {   /* [B, H, T, D] -> [B, T, H, D] */
		size_t dd = i % D, t = i / D % T, hh = i / D / T % H, bb = i / D / T / H;
		perm[((bb * T + t) * H + hh) * D + dd] = dy[i];
	}
	good = good && cudaMemcpy(dyd, perm, n * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
	       attn_short_fwd_cuda(d.q, d.k, d.v, y, d.lse, B, H, T, D, 1, 0.2f, 1, NULL) == 0 &&
	       attn_short_bwd_cuda(d.q, d.k, d.v, y, dyd, d.lse, d.dq, d.dk, d.dv, B, H, T, D, 1, 0.2f, 1,
				   NULL) == 0 &&
	       cudaMemcpy(back, y, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
	int same = good;
	for (size_t i = 0; same && i < n; i++) {
		size_t dd = i % D, t = i / D % T, hh = i / D / T % H, bb = i / D / T / H;
		same = back[((bb * T + t) * H + hh) * D + dd] == o1[i];
	}
	ok(same, "short attention with o as [B, T, H, D]: the same o");
	for (int i = 0; good && i < 3; i++)
		good = cudaMemcpy(b + i * n, g[i], n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
	ok(good && !memcmp(a, b, 3 * n * 2), "short attention with dout as [B, T, H, D]: the same dq, dk, dv");
	cudaFree(y), cudaFree(dyd);
	free(o1), free(dy), free(perm), free(back);
	attn_dev_free(&d);
	for (int i = 0; i < 4; i++)
		free(h[i]);
	free(a);
	free(b);
	free(f);
}

/* The deterministic backward (attn_bwd_det_cuda) on the same inputs three
 * times, the workspace NaN-poisoned before each run: dq, dk and dv the
 * same bits every time (the default's dq may differ in its last bits: its
 * blocks add as they finish), dk and dv the default kernel's bits. */
static void attn_det_repeatable(int B, int H, int T, int D, int causal)
{
	size_t n = (size_t)B * H * T * D, ws = attn_dev_ws(B, H, T, D);
	uint64_t seed = 1234 + T;
	float scale = 1 / sqrtf((float)D);
	uint16_t *h[4], *a = malloc(3 * n * 2), *b = malloc(3 * n * 2);
	float *f = malloc(n * sizeof *f);
	for (int i = 0; i < 4; i++) {
		h[i] = malloc(n * sizeof **h);
		gpu_rand_bf16(h[i], f, n, i ? 1 : 2, &seed);
	}
	attn_dev d;
	const char *fail = attn_dev_run(&d, h, B, H, T, D, causal, scale, 1);
	uint16_t *g[3] = {d.dq, d.dk, d.dv};
	int good = !fail, same = 1;
	for (int i = 0; good && i < 3; i++)
		good = cudaMemcpy(a + i * n, g[i], n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (int r = 0; good && r < 3; r++) {
		int det = r < 2;
		good = cudaMemset(d.ws, GPU_NAN_BYTE, ws) == cudaSuccess &&
		       attn_dev_bwd(&d, B, H, T, D, causal, scale, det) == 0 &&
		       cudaDeviceSynchronize() == cudaSuccess;
		for (int i = 0; good && i < 3; i++)
			good = cudaMemcpy(b + i * n, g[i], n * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
		/* runs 0 and 1: all three; run 2 (the default): dk and dv */
		if (good)
			same = same && !memcmp(a + (det ? 0 : n), b + (det ? 0 : n), (det ? 3 : 2) * n * 2);
	}
	if (good)
		ok(same, "deterministic attention backward B%d H%d T%d D%d %s: the same dq, dk, dv "
		   "three times, and the default's dk, dv", B, H, T, D, causal ? "causal" : "full");
	else
		ok(0, "deterministic attention backward repeat runs: %s", fail ? fail : "CUDA error");
	attn_dev_free(&d);
	for (int i = 0; i < 4; i++)
		free(h[i]);
	free(a);
	free(b);
	free(f);
}

/* Unsupported head dimensions, empty shapes and misaligned pointers are
 * refused with their codes, before anything runs. */
static void attn_bad_input(void)
{
	uint16_t *p = gpu_poisoned(4096);
	float *l = gpu_poisoned(1024);
	void *ws = gpu_poisoned(4096);
	is_int(attn_fwd_cuda(p, p, p, p, l, 1, 1, 4, 32, 0, 1, NULL), ATTN_EHEADDIM, "fwd D=32 refused");
	is_int(attn_short_fwd_cuda(p, p, p, p, l, 1, 1, 513, 32, 1, 1, 0, NULL), ATTN_EHEADDIM,
	       "short fwd T=513 refused");
	is_int(attn_short_bwd_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 4, 64, 1, 1, 0, NULL), ATTN_EHEADDIM,
	       "short bwd D=64 refused");
	is_int(attn_short_fwd_cuda(p + 1, p, p, p, l, 1, 1, 4, 32, 1, 1, 0, NULL), ATTN_EALIGN,
	       "short fwd misaligned q refused");
	is_int(attn_fwd_cuda(p, p, p, p, l, 1, 1, 4, 96, 1, 1, NULL), ATTN_EHEADDIM, "fwd D=96 refused");
	is_int(attn_bwd_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 4, 256, 0, 1, ws, NULL), ATTN_EHEADDIM,
	       "bwd D=256 refused");
	is_int(attn_fwd_cuda(p, p, p, p, l, 1, 1, 0, 64, 0, 1, NULL), ATTN_ESHAPE, "fwd T=0 refused");
	is_int(attn_fwd_cuda(p + 1, p, p, p, l, 1, 1, 4, 64, 0, 1, NULL), ATTN_EALIGN,
	       "fwd misaligned q refused");
	is_int(attn_bwd_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 4, 64, 0, 1, NULL, NULL), ATTN_EALIGN,
	       "bwd without workspace refused");
	is_int(attn_bwd_det_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 4, 96, 1, 1, ws, NULL), ATTN_EHEADDIM,
	       "deterministic bwd D=96 refused");
	is_int(attn_bwd_det_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 4, 64, 1, 1, NULL, NULL), ATTN_EALIGN,
	       "deterministic bwd without workspace refused");
	is_int(attn_bwd_det_cuda(p, p, p, p, p, l, p, p, p, 1, 1, 0, 64, 1, 1, ws, NULL), ATTN_ESHAPE,
	       "deterministic bwd T=0 refused");
	cudaFree(p);
	cudaFree(l);
	cudaFree(ws);
}

/* CS336 FlashAttention inputs (float32, 4 x 128 x 64) rounded to bf16, the
 * kernels against double precision on the original float32 values with
 * the CS336 test's tolerance (|got - ref| <= 1e-2 + 1e-2 |ref|). */
static void attn_cs336(void)
{
	enum { B = 4, T = 128, D = 64 };
	const double ATOL = 1e-2, RTOL = 1e-2;
	const size_t n = (size_t)B * T * D;
	const char *dir = tap_data_dir();
	char path[4096];
	st_file sf;
	if (!dir) {
		ok(1, "# SKIP CS336 inputs: LMPIPE_DATA absent");
		return;
	}
	snprintf(path, sizeof path, "%s/cs336-a2/safetensors/inputs-fixtures_and_attention_inputs.safetensors", dir);
	if (!ok(st_open(&sf, path) == 0, "read %s", path))
		return;
	const char *names[] = {"attn_q", "attn_k", "attn_v", "attn_do"};
	float *f = malloc(n * sizeof *f);
	double *x[4], *ref[4], *lse = malloc((size_t)B * T * sizeof *lse);
	uint16_t *h[4], *got = malloc(n * sizeof *got);
	int have = 0;
	for (int i = 0; i < 4; i++) {
		x[i] = malloc(n * sizeof **x);
		ref[i] = malloc(n * sizeof **ref);
		h[i] = malloc(n * sizeof **h);
		have += st_f32(&sf, names[i], f, n) == 0;
		for (size_t j = 0; j < n; j++) {
			x[i][j] = f[j];
			h[i][j] = f2bf(f[j]);
		}
	}
	for (int causal = 0; have == 4 && causal < 2; causal++) {
		double scale = 1 / sqrt(D);
		ref_fwd(x[0], x[1], x[2], ref[0], lse, B, 1, T, D, causal, scale);
		ref_bwd(x[0], x[1], x[2], x[3], ref[1], ref[2], ref[3], B, 1, T, D, causal, scale);
		attn_dev d;
		const char *fail = attn_dev_run(&d, h, B, 1, T, D, causal, (float)scale, 0);
		uint16_t *outs[] = {d.o, d.dq, d.dk, d.dv};
		const char *onames[] = {"o", "dq", "dk", "dv"};
		for (int i = 0; i < 4; i++) {
			if (fail || cudaMemcpy(got, outs[i], n * 2, cudaMemcpyDeviceToHost)) {
				ok(0, "CS336 %s runs: %s", onames[i], fail ? fail : "download");
				continue;
			}
			size_t bad = 0;
			double worst = 0;
			for (size_t j = 0; j < n; j++) {
				double e = fabs(bf2f(got[j]) - ref[i][j]);
				if (!(e <= ATOL + RTOL * fabs(ref[i][j])))
					bad++;
				worst = e > worst || e != e ? e : worst;
			}
			ok(bad == 0, "CS336 %s %s within atol=rtol=1e-2 of double (worst %.3g)",
			   causal ? "causal" : "full", onames[i], worst);
		}
		attn_dev_free(&d);
	}
	ok(have == 4, "CS336 q, k, v, do read");
	for (int i = 0; i < 4; i++) {
		free(x[i]);
		free(ref[i]);
		free(h[i]);
	}
	free(f);
	free(lse);
	free(got);
	st_close(&sf);
}

#define ATTN_OP { "attention", attn_shapes, (int)(sizeof attn_shapes / sizeof *attn_shapes), \
		  attn_tols, (int)(sizeof attn_tols / sizeof *attn_tols), attn_describe, attn_run }
#define ATTN_DET_OP { "attention", attn_det_shapes,                                           \
		      (int)(sizeof attn_det_shapes / sizeof *attn_det_shapes), attn_tols,          \
		      (int)(sizeof attn_tols / sizeof *attn_tols), attn_describe, attn_run }

#endif
