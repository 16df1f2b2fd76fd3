/* op_gemm.h: the entry of lmpipe's own Hopper product (kernels/gemm.h) in
 * the GPU op table (test_ops.c): C = A B^T against a double-precision sum
 * of the same bf16 operands, for both tile widths, with and without the
 * two-block cluster, with both epilogues, on shapes with partial tiles in
 * every dimension, one k-slice, and more tiles than the grid has blocks (an
 * odd count of row blocks for a cluster: the last one's second block has
 * no rows; several tiles a block); the ping-pong tiles 128 and 192 wide;
 * the same product with SwiGLU in its epilogue; the LM head's product with
 * the exponential in its epilogue and the guarded product; the q/k/v
 * product with RoPE in its epilogue; and the shapes they refuse. */
#ifndef LMPIPE_OP_GEMM_H
#define LMPIPE_OP_GEMM_H

#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/gemm.h"

/* Shapes: M, N, K, tile width BN, cluster (1 or 2), epilogue (1: pieces
 * through shared memory and tensor stores, the default; 0: from registers,
 * LMPIPE_GEMM_EPI=reg; 2: ping-pong warpgroups, LMPIPE_GEMM_EPI=pp). */
static const int gemm_shapes[][GPU_MAX_DIMS] = {
	{1, 8, 8, 128, 1, 1},         {1, 8, 8, 256, 2, 1},        {100, 72, 40, 128, 1, 1},
	{100, 72, 40, 256, 2, 1},     {128, 256, 64, 256, 1, 1},   {300, 264, 200, 128, 2, 1},
	{300, 264, 200, 256, 1, 1},   {257, 520, 1344, 256, 2, 1}, {1000, 1000, 72, 128, 1, 1},
	{2048, 2304, 128, 256, 1, 1}, {2048, 2304, 128, 256, 2, 1}, {2176, 1024, 520, 128, 2, 1},
	{100, 72, 40, 128, 1, 0},     {300, 264, 200, 256, 2, 0},  {1000, 1000, 72, 256, 1, 0},
	{2176, 1024, 520, 128, 2, 0},  {100, 72, 40, 128, 1, 2},    {300, 264, 200, 128, 2, 2},
	{1000, 1000, 72, 128, 1, 2},  {2048, 2304, 128, 128, 1, 2}, {2176, 1024, 520, 128, 2, 2},
	/* several tiles a block, one k-slice or more */
	{4096, 2048, 64, 256, 1, 1},  {4096, 2048, 72, 256, 2, 1},  {4100, 2056, 136, 128, 1, 1},
	/* ping-pong tiles 192 wide */
	{100, 72, 40, 192, 1, 2},     {300, 264, 200, 192, 2, 2},  {1000, 1000, 72, 192, 1, 2},
	{2048, 2304, 128, 192, 1, 2}, {4100, 2056, 136, 192, 1, 2}, {4096, 2048, 72, 192, 2, 2},
};

static const char *const gemm_epis[] = {"reg", "tma", "pp"};

/* The output is rounded to bf16 (2^-9 relative); the sums are fp32. */
static const gpu_tol gemm_tols[] = {{"C", 5e-3, 4e-3}};

static void gemm_describe(const int *s, char *buf, size_t len)
{
	snprintf(buf, len, "M%d N%d K%d BN%d cluster %d epilogue %s", s[0], s[1], s[2], s[3], s[4],
		 gemm_epis[s[5]]);
}

/* ref[M, N] = A B^T of the bf16 operands' values fa and fb, summed in
 * double. */
static void gemm_ref_abt(float *ref, const float *fa, const float *fb, int M, int N, int K)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double t = 0;
			for (int k = 0; k < K; k++)
				t += (double)fa[(size_t)i * K + k] * fb[(size_t)j * K + k];
			ref[(size_t)i * N + j] = (float)t;
		}
}

static const char *gemm_run(const int *s, uint64_t seed, gpu_err *err)
{
	const int M = s[0], N = s[1], K = s[2];
	const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
	uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *hc = malloc(nc * 2);
	float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ref = malloc(nc * 4), *tmp = malloc(nc * 4);
	uint16_t *A = NULL, *B = NULL, *C = NULL;
	const char *fail = NULL;
	uint64_t st = seed;
	if (!ha || !hb || !hc || !fa || !fb || !ref || !tmp) {
		fail = "host memory";
		goto out;
	}
	gpu_rand_bf16(ha, fa, na, 1.0f, &st);
	gpu_rand_bf16(hb, fb, nb, 0.5f, &st);
	gemm_ref_abt(ref, fa, fb, M, N, K);
	C = gpu_poisoned(nc * 2);
	if (!C || cudaMalloc((void **)&A, na * 2) != cudaSuccess ||
	    cudaMalloc((void **)&B, nb * 2) != cudaSuccess ||
	    cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(B, hb, nb * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
		fail = "device memory";
		goto out;
	}
	setenv("LMPIPE_GEMM_CLUSTER", s[4] == 2 ? "2" : "1", 1);
	setenv("LMPIPE_GEMM_EPI", gemm_epis[s[5]], 1);
	if (gemm_tn_cuda(C, A, B, M, N, K, s[3], NULL) || cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hc, C, nc * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_tn_cuda failed";
		goto out;
	}
	err[0] = gpu_compare_bf16(hc, ref, nc, tmp);
out:
	unsetenv("LMPIPE_GEMM_CLUSTER");
	unsetenv("LMPIPE_GEMM_EPI");
	cudaFree(A);
	cudaFree(B);
	cudaFree(C);
	free(ha);
	free(hb);
	free(hc);
	free(fa);
	free(fb);
	free(ref);
	free(tmp);
	return fail;
}

#define GEMM_OP { "gemm", gemm_shapes, (int)(sizeof gemm_shapes / sizeof *gemm_shapes), \
		  gemm_tols, (int)(sizeof gemm_tols / sizeof *gemm_tols), gemm_describe, gemm_run }

/* gemm_swiglu_cuda: h against a double sum, out against silu(gate) up
 * computed on the host from the kernel's own h (so that it checks the
 * epilogue's pairing of gates and ups at the bf16 rounding's precision).
 * Shapes: M, F, K, BN, cluster; F not a multiple of the tile's features
 * (BN / 2) in most. */
static const int gemm_swiglu_shapes[][GPU_MAX_DIMS] = {
	{1, 8, 8, 128, 1},       {100, 72, 40, 256, 1},   {100, 72, 40, 128, 2},
	{300, 200, 136, 256, 2}, {257, 1344, 512, 256, 1}, {257, 1344, 512, 128, 2},
	{1000, 96, 520, 128, 1}, {640, 512, 256, 256, 2},
	/* several tiles a block */
	{2048, 1344, 64, 256, 1}, {4100, 1000, 136, 128, 2},
	/* 192 wide: 96 features a tile in sets of 32; F not a multiple of 96 or 32 */
	{1, 8, 8, 192, 1},       {100, 72, 40, 192, 2},   {300, 200, 136, 192, 1},
	{257, 1344, 512, 192, 2}, {1000, 96, 520, 192, 1}, {2048, 1344, 64, 192, 2},
	{4100, 1000, 136, 192, 1}, {640, 2048, 256, 192, 2},
};

static const gpu_tol gemm_swiglu_tols[] = {{"h", 5e-3, 4e-3}, {"out", 5e-3, 4e-3}};

static void gemm_swiglu_describe(const int *s, char *buf, size_t len)
{
	snprintf(buf, len, "M%d F%d K%d BN%d cluster %d", s[0], s[1], s[2], s[3], s[4]);
}

static const char *gemm_swiglu_run(const int *s, uint64_t seed, gpu_err *err)
{
	const int M = s[0], F = s[1], K = s[2];
	const size_t na = (size_t)M * K, nw = (size_t)2 * F * K, nh = (size_t)M * 2 * F,
		     no = (size_t)M * F;
	uint16_t *ha = malloc(na * 2), *hw = malloc(nw * 2), *hh = malloc(nh * 2), *ho = malloc(no * 2);
	float *fa = malloc(na * 4), *fw = malloc(nw * 4), *ref = malloc(nh * 4), *oref = malloc(no * 4),
	      *tmp = malloc(nh * 4);
	uint16_t *A = NULL, *W = NULL, *H = NULL, *O = NULL;
	const char *fail = NULL;
	uint64_t st = seed;
	if (!ha || !hw || !hh || !ho || !fa || !fw || !ref || !oref || !tmp) {
		fail = "host memory";
		goto out;
	}
	gpu_rand_bf16(ha, fa, na, 1.0f, &st);
	gpu_rand_bf16(hw, fw, nw, 0.5f, &st);
	gemm_ref_abt(ref, fa, fw, M, 2 * F, K);
	H = gpu_poisoned(nh * 2);
	O = gpu_poisoned(no * 2);
	if (!H || !O || cudaMalloc((void **)&A, na * 2) != cudaSuccess ||
	    cudaMalloc((void **)&W, nw * 2) != cudaSuccess ||
	    cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(W, hw, nw * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
		fail = "device memory";
		goto out;
	}
	setenv("LMPIPE_GEMM_CLUSTER", s[4] == 2 ? "2" : "1", 1);
	if (gemm_swiglu_cuda(H, O, A, W, M, F, K, s[3], NULL) ||
	    cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hh, H, nh * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
	    cudaMemcpy(ho, O, no * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_swiglu_cuda failed";
		goto out;
	}
	for (int i = 0; i < M; i++)
		for (int j = 0; j < F; j++) {
			float g = bf2f(hh[(size_t)i * 2 * F + j]), u = bf2f(hh[(size_t)i * 2 * F + F + j]);
			oref[(size_t)i * F + j] = g / (1.0f + expf(-g)) * u;
		}
	err[0] = gpu_compare_bf16(hh, ref, nh, tmp);
	err[1] = gpu_compare_bf16(ho, oref, no, tmp);
out:
	unsetenv("LMPIPE_GEMM_CLUSTER");
	cudaFree(A);
	cudaFree(W);
	cudaFree(H);
	cudaFree(O);
	free(ha);
	free(hw);
	free(hh);
	free(ho);
	free(fa);
	free(fw);
	free(ref);
	free(oref);
	free(tmp);
	return fail;
}

#define GEMM_SWIGLU_OP { "gemm_swiglu", gemm_swiglu_shapes, \
	(int)(sizeof gemm_swiglu_shapes / sizeof *gemm_swiglu_shapes), gemm_swiglu_tols, \
	(int)(sizeof gemm_swiglu_tols / sizeof *gemm_swiglu_tols), gemm_swiglu_describe, \
	gemm_swiglu_run }

/* gemm_exp_cuda: E against exp of a double sum, the partial sums against
 * the double sums of those over each 192-column tile, and *flag zeroed;
 * then gemm_tn_guarded_cuda with the flag clear (C untouched: still the
 * poison) and set (C against the double sum).  Shapes: M, N, K, cluster;
 * partial tiles in every dimension, N past one tile and not a multiple of
 * 192, several tiles a block. */
static const int gemm_exp_shapes[][GPU_MAX_DIMS] = {
	{1, 8, 8, 1},          {100, 72, 40, 2},     {300, 264, 200, 1}, {1000, 1000, 72, 2},
	{2048, 2304, 128, 2},  {4100, 2056, 136, 1}, {257, 10000, 64, 2}, {513, 50304, 48, 2},
};

static const gpu_tol gemm_exp_tols[] = {
	{"E", 5e-3, 4e-3}, {"part", 1e-4, 1e-4}, {"flag", 0, 0},
	{"C guard clear", 0, 0}, {"C guard set", 5e-3, 4e-3},
};

static void gemm_exp_describe(const int *s, char *buf, size_t len)
{
	snprintf(buf, len, "M%d N%d K%d cluster %d", s[0], s[1], s[2], s[3]);
}

static const char *gemm_exp_run(const int *s, uint64_t seed, gpu_err *err)
{
	const int M = s[0], N = s[1], K = s[2], ntn = (N + GEMM_EXP_BN - 1) / GEMM_EXP_BN;
	const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N,
		     np = (size_t)M * ntn;
	uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *hc = malloc(nc * 2);
	float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ref = malloc(nc * 4),
	      *eref = malloc(nc * 4), *tmp = malloc(nc * 4), *pref = malloc(np * 4),
	      *hp = malloc(np * 4);
	uint16_t *A = NULL, *B = NULL, *C = NULL;
	float *part = NULL;
	int *flag = NULL, hflag[2] = {7, 0};
	const char *fail = NULL;
	uint64_t st = seed;
	if (!ha || !hb || !hc || !fa || !fb || !ref || !eref || !tmp || !pref || !hp) {
		fail = "host memory";
		goto out;
	}
	gpu_rand_bf16(ha, fa, na, 1.0f, &st);
	gpu_rand_bf16(hb, fb, nb, 0.5f, &st);
	gemm_ref_abt(ref, fa, fb, M, N, K);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < ntn; j++) {
			double ps = 0;
			for (int c = j * GEMM_EXP_BN; c < N && c < (j + 1) * GEMM_EXP_BN; c++) {
				const double e = exp((double)ref[(size_t)i * N + c]);
				eref[(size_t)i * N + c] = (float)e;
				ps += e;
			}
			pref[(size_t)i * ntn + j] = (float)ps;
		}
	C = gpu_poisoned(nc * 2);
	part = gpu_poisoned(np * 4);
	if (!C || !part || cudaMalloc((void **)&A, na * 2) != cudaSuccess ||
	    cudaMalloc((void **)&B, nb * 2) != cudaSuccess ||
	    cudaMalloc((void **)&flag, sizeof hflag) != cudaSuccess ||
	    cudaMemcpy(flag, hflag, sizeof hflag, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(B, hb, nb * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
		fail = "device memory";
		goto out;
	}
	if (gemm_exp_cuda(C, part, flag, A, B, M, N, K, s[3], NULL) ||
	    cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hc, C, nc * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
	    cudaMemcpy(hp, part, np * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
	    cudaMemcpy(hflag, flag, sizeof hflag, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_exp_cuda failed";
		goto out;
	}
	err[0] = gpu_compare_bf16(hc, eref, nc, tmp);
	err[1] = gpu_compare(hp, pref, np);
	err[2].max = err[2].rel = hflag[0] == 0 ? 0 : INFINITY;
	/* the guard clear (flag is 0 now): C keeps E */
	uint16_t *before = (uint16_t *)tmp;  /* nc * 4 bytes: room for nc bf16 */
	memcpy(before, hc, nc * 2);
	if (gemm_tn_guarded_cuda(C, A, B, M, N, K, s[3], flag, NULL) ||
	    cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hc, C, nc * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_tn_guarded_cuda failed";
		goto out;
	}
	err[3].max = err[3].rel = memcmp(before, hc, nc * 2) ? INFINITY : 0;
	hflag[0] = 1;
	if (cudaMemcpy(flag, hflag, sizeof hflag, cudaMemcpyHostToDevice) != cudaSuccess ||
	    gemm_tn_guarded_cuda(C, A, B, M, N, K, s[3], flag, NULL) ||
	    cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hc, C, nc * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_tn_guarded_cuda failed";
		goto out;
	}
	err[4] = gpu_compare_bf16(hc, ref, nc, tmp);
out:
	cudaFree(A);
	cudaFree(B);
	cudaFree(C);
	cudaFree(part);
	cudaFree(flag);
	void *host[] = {ha, hb, hc, fa, fb, ref, eref, tmp, pref, hp};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
	return fail;
}

#define GEMM_EXP_OP { "gemm_exp", gemm_exp_shapes, \
	(int)(sizeof gemm_exp_shapes / sizeof *gemm_exp_shapes), gemm_exp_tols, \
	(int)(sizeof gemm_exp_tols / sizeof *gemm_exp_tols), gemm_exp_describe, gemm_exp_run }

/* gemm_rope_cuda: C against the double sum with each head's pairs (i, i +
 * 32) in the columns below cols turned in double by the angle (row % T)
 * theta^(-2i/64).  Shapes: M, N, K, T, cols, cluster; theta 5e5 where T
 * is odd, else 1e4.  Partial row tiles, N not a multiple of 192 (a tile
 * of one head), no columns turned and all of them, positions up to 2^17
 * - 1 (where an angle's fp32 product alone would be off by up to 0.008). */
static const int gemm_rope_shapes[][GPU_MAX_DIMS] = {
	{1, 64, 8, 1, 64, 1},          {100, 192, 40, 100, 128, 1},  {300, 384, 200, 64, 256, 2},
	{257, 640, 64, 7, 640, 2},     {2048, 2304, 128, 1024, 1536, 2}, {4100, 1152, 136, 1000, 768, 1},
	{1000, 576, 72, 333, 0, 2},    {16384, 192, 64, 16383, 128, 2},
	{131072, 64, 8, 131072, 64, 2},
};

static const gpu_tol gemm_rope_tols[] = {{"C", 5e-3, 4e-3}};

static double gemm_rope_theta(const int *s)
{
	return s[3] % 2 ? 5e5 : 1e4;
}

static void gemm_rope_describe(const int *s, char *buf, size_t len)
{
	snprintf(buf, len, "M%d N%d K%d T%d cols %d theta %g cluster %d", s[0], s[1], s[2], s[3],
		 s[4], gemm_rope_theta(s), s[5]);
}

/* ref[M, N] turned in place as gemm_rope_cuda turns it. */
static void gemm_rope_ref(float *ref, int M, int N, int T, int cols, double theta)
{
	for (int r = 0; r < M; r++)
		for (int c = 0; c < cols; c++) {
			const int i = c % GEMM_ROPE_D;
			if (i >= GEMM_ROPE_D / 2)
				continue;
			const double a = (double)(r % T) * pow(theta, -2.0 * i / GEMM_ROPE_D);
			float *x = ref + (size_t)r * N + c;
			const double x0 = x[0], x1 = x[GEMM_ROPE_D / 2];
			x[0] = (float)(x0 * cos(a) - x1 * sin(a));
			x[GEMM_ROPE_D / 2] = (float)(x1 * cos(a) + x0 * sin(a));
		}
}

static const char *gemm_rope_run(const int *s, uint64_t seed, gpu_err *err)
{
	const int M = s[0], N = s[1], K = s[2];
	const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
	uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *hc = malloc(nc * 2);
	float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ref = malloc(nc * 4), *tmp = malloc(nc * 4);
	uint16_t *A = NULL, *B = NULL, *C = NULL;
	const char *fail = NULL;
	uint64_t st = seed;
	if (!ha || !hb || !hc || !fa || !fb || !ref || !tmp) {
		fail = "host memory";
		goto out;
	}
	gpu_rand_bf16(ha, fa, na, 1.0f, &st);
	gpu_rand_bf16(hb, fb, nb, 0.5f, &st);
	gemm_ref_abt(ref, fa, fb, M, N, K);
	gemm_rope_ref(ref, M, N, s[3], s[4], gemm_rope_theta(s));
	C = gpu_poisoned(nc * 2);
	if (!C || cudaMalloc((void **)&A, na * 2) != cudaSuccess ||
	    cudaMalloc((void **)&B, nb * 2) != cudaSuccess ||
	    cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(B, hb, nb * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
		fail = "device memory";
		goto out;
	}
	if (gemm_rope_cuda(C, A, B, M, N, K, s[3], s[4], gemm_rope_theta(s), s[5], NULL) ||
	    cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(hc, C, nc * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fail = "gemm_rope_cuda failed";
		goto out;
	}
	err[0] = gpu_compare_bf16(hc, ref, nc, tmp);
out:
	cudaFree(A);
	cudaFree(B);
	cudaFree(C);
	void *host[] = {ha, hb, hc, fa, fb, ref, tmp};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
	return fail;
}

#define GEMM_ROPE_OP { "gemm_rope", gemm_rope_shapes, \
	(int)(sizeof gemm_rope_shapes / sizeof *gemm_rope_shapes), gemm_rope_tols, \
	(int)(sizeof gemm_rope_tols / sizeof *gemm_rope_tols), gemm_rope_describe, gemm_rope_run }

/* What gemm_tn_cuda refuses, without touching memory. */
static void gemm_refused(void)
{
	uint16_t *p = NULL;
	if (cudaMalloc((void **)&p, 1 << 16) != cudaSuccess) {
		ok(0, "gemm refusals: device memory");
		return;
	}
	ok(gemm_tn_cuda(p, p, p, 16, 12, 64, 128, NULL) == -1, "gemm refuses N not a multiple of 8");
	ok(gemm_tn_cuda(p, p, p, 16, 16, 60, 128, NULL) == -1, "gemm refuses K not a multiple of 8");
	ok(gemm_tn_cuda(p, p, p, 16, 16, 64, 64, NULL) == -1, "gemm refuses a tile width of 64");
	ok(gemm_tn_cuda(p, p + 1, p, 16, 16, 64, 128, NULL) == -1, "gemm refuses a misaligned A");
	ok(gemm_tn_cuda(p, p, p, 0, 16, 64, 128, NULL) == -1, "gemm refuses M = 0");
	setenv("LMPIPE_GEMM_EPI", "pp", 1);
	ok(gemm_tn_cuda(p, p, p, 16, 16, 64, 256, NULL) == -1, "gemm refuses ping-pong at BN 256");
	unsetenv("LMPIPE_GEMM_EPI");
	ok(gemm_swiglu_cuda(p, p, p, p, 16, 12, 64, 128, NULL) == -1,
	   "gemm_swiglu refuses F not a multiple of 8");
	ok(gemm_exp_cuda(p, (float *)p, (int *)p, p, p, 16, 12, 64, 2, NULL) == -1,
	   "gemm_exp refuses N not a multiple of 8");
	ok(gemm_exp_cuda(p, (float *)p, (int *)p, p, p, 16, 16, 64, 3, NULL) == -1,
	   "gemm_exp refuses a cluster of 3");
	ok(gemm_tn_guarded_cuda(p, p, p, 16, 16, 64, 1, NULL, NULL) == -1,
	   "gemm_tn_guarded refuses no guard");
	ok(gemm_rope_cuda(p, p, p, 16, 96, 64, 16, 64, 1e4, 2, NULL) == -1,
	   "gemm_rope refuses N not a multiple of 64");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, 16, 96, 1e4, 2, NULL) == -1,
	   "gemm_rope refuses turned columns not a multiple of 64");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, 16, 192, 1e4, 2, NULL) == -1,
	   "gemm_rope refuses more turned columns than N");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, 0, 64, 1e4, 2, NULL) == -1,
	   "gemm_rope refuses T = 0");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, GEMM_ROPE_MAX_T + 1, 64, 1e4, 2, NULL) == -1,
	   "gemm_rope refuses positions past 2^17");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, 16, 64, 1.0, 2, NULL) == -1 &&
	   gemm_rope_cuda(p, p, p, 16, 128, 64, 16, 64, NAN, 2, NULL) == -1,
	   "gemm_rope refuses theta <= 1 or NaN");
	ok(gemm_rope_cuda(p, p, p, 16, 128, 64, 16, 64, 1e4, 3, NULL) == -1,
	   "gemm_rope refuses a cluster of 3");
	cudaFree(p);
}

#endif
