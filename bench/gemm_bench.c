/* gemm_bench.c: lmpipe's own product (kernels/gemm.h) beside cuBLASLt
 * (kernels/matmul.h, autotuned as in training) on the same operands.
 *
 *   gemm_bench M N K [BN ...]
 *
 * Random bf16 A [M, K] and B [N, K]; C = A B^T by cuBLASLt and by
 * gemm_tn_cuda at each tile width BN (default 128 and 256).  Checks every
 * element of ours against cuBLASLt's (both round the same fp32 sums to
 * bf16: they differ by the order of the additions, so the bound is a few
 * bf16 steps of the largest value), then times each with CUDA events
 * (WARMUP runs, then the median of RUNS) and prints one JSON line per
 * implementation with TFLOP/s (2 M N K a product) and, for ours, the ratio
 * to cuBLASLt.  Exit 1 when a check fails or a launch is refused. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/matmul.h"

enum { WARMUP = 3, RUNS = 21 };

static uint16_t f2bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static float urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

#define CK(x)                                                                           \
	do {                                                                            \
		if ((x) != cudaSuccess) {                                               \
			fprintf(stderr, "gemm_bench: %s: %s\n", #x,                    \
				cudaGetErrorString(cudaGetLastError()));                \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

/* Median milliseconds of one run of f (which == 0: cuBLASLt, else our BN). */
static double time_it(int which, matmul_cuda *mc, uint16_t *C, const uint16_t *A,
		      const uint16_t *B, int M, int N, int K, cudaStream_t st)
{
	float ms[RUNS];
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int r = 0; r < WARMUP + RUNS; r++) {
		CK(cudaEventRecord(e0, st));
		int bad = which ? gemm_tn_cuda(C, A, B, M, N, K, which, st)
				: matmul_fwd_cuda(mc, C, NULL, A, B, M, K, N);
		if (bad) {
			fprintf(stderr, "gemm_bench: %s refused %d x %d x %d\n",
				which ? "gemm_tn_cuda" : "cuBLASLt", M, N, K);
			exit(1);
		}
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		if (r >= WARMUP)
			CK(cudaEventElapsedTime(&ms[r - WARMUP], e0, e1));
	}
	qsort(ms, RUNS, sizeof ms[0], cmp_float);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return ms[RUNS / 2];
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: gemm_bench M N K [BN ...]\n");
		return 2;
	}
	int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
	int bns[8] = {128, 256}, nb = 2;
	if (argc > 4) {
		nb = 0;
		for (int i = 4; i < argc && nb < 8; i++)
			bns[nb++] = atoi(argv[i]);
	}
	size_t na = (size_t)M * K, nbw = (size_t)N * K, nc = (size_t)M * N;
	uint16_t *ha = malloc(na * 2), *hb = malloc(nbw * 2), *hr = malloc(nc * 2), *ho = malloc(nc * 2);
	if (!ha || !hb || !hr || !ho)
		return 1;
	for (size_t i = 0; i < na; i++)
		ha[i] = f2bf(urand());
	for (size_t i = 0; i < nbw; i++)
		hb[i] = f2bf(urand() * 0.1f);
	cudaStream_t st;
	CK(cudaStreamCreate(&st));
	uint16_t *A, *B, *C;
	CK(cudaMalloc((void **)&A, na * 2));
	CK(cudaMalloc((void **)&B, nbw * 2));
	CK(cudaMalloc((void **)&C, nc * 2));
	CK(cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(B, hb, nbw * 2, cudaMemcpyHostToDevice));
	matmul_cuda *mc = matmul_cuda_new(st);
	if (!mc) {
		fprintf(stderr, "gemm_bench: no cuBLASLt context\n");
		return 1;
	}
	double flop = 2.0 * M * N * K;
	double ref_ms = time_it(0, mc, C, A, B, M, N, K, st);
	CK(cudaMemcpy(hr, C, nc * 2, cudaMemcpyDeviceToHost));
	float big = 0;
	for (size_t i = 0; i < nc; i++)
		if (fabsf(bf2f(hr[i])) > big)
			big = fabsf(bf2f(hr[i]));
	printf("{\"impl\": \"cublaslt\", \"M\": %d, \"N\": %d, \"K\": %d, \"ms\": %.4f, \"tflops\": %.1f}\n",
	       M, N, K, ref_ms, flop / ref_ms * 1e-9);
	int status = 0;
	for (int b = 0; b < nb; b++) {
		CK(cudaMemset(C, 0xff, nc * 2));
		if (gemm_tn_cuda(C, A, B, M, N, K, bns[b], st)) {
			fprintf(stderr, "gemm_bench: gemm_tn_cuda refused BN %d\n", bns[b]);
			return 1;
		}
		CK(cudaStreamSynchronize(st));
		CK(cudaMemcpy(ho, C, nc * 2, cudaMemcpyDeviceToHost));
		double worst = 0;
		size_t at = 0;
		for (size_t i = 0; i < nc; i++) {
			double d = fabs((double)bf2f(ho[i]) - bf2f(hr[i]));
			if (!(d <= worst)) {
				worst = d;
				at = i;
			}
		}
		int valid = worst <= 4.0 / 128 * big;
		if (!valid)
			status = 1;
		double ms = time_it(bns[b], mc, C, A, B, M, N, K, st);
		printf("{\"impl\": \"lmpipe\", \"BN\": %d, \"M\": %d, \"N\": %d, \"K\": %d, \"ms\": %.4f, "
		       "\"tflops\": %.1f, \"ratio\": %.3f, \"max_diff\": %.4g, \"at\": [%zu, %zu], "
		       "\"scale\": %.4g, \"valid\": %s}\n",
		       bns[b], M, N, K, ms, flop / ms * 1e-9, ref_ms / ms, worst, at / N, at % N, big,
		       valid ? "true" : "false");
	}
	matmul_cuda_free(mc);
	return status;
}
