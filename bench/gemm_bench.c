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
 * (WARMUP runs, then the median of RUNS runs of GEMM_REPS products, default
 * 10, queued back to back; GEMM_REPS=1 times each product alone between
 * its events, no neighbour to overlap with, the caches warm) and prints
 * one JSON line per implementation with TFLOP/s (2 M N K a product)
 * and, for ours, the ratio to cuBLASLt, the cluster and the epilogue.
 * Ours runs once for each value in GEMM_CLUSTERS (default "1") and in
 * GEMM_EPIS (default "tma"), space-separated lists
 * set as LMPIPE_GEMM_CLUSTER and LMPIPE_GEMM_EPI (kernels/gemm.h).  The
 * epilogue "swiglu" runs gemm_swiglu_cuda (N = 2F: the gate/up product and
 * silu(gate) up) against cuBLASLt's product then swiglu_fwd_cuda, and
 * checks both outputs.  The epilogue "rope" runs gemm_rope_cuda (the q/k/v
 * product with RoPE: N = 3 H 64, rows of sequences of GEMM_ROPE_T tokens,
 * default 1024, M a multiple of it; the q and k heads turned, theta 1e4;
 * BN 192 only, other widths print "refused")
 * against cuBLASLt's product then qkv_rope_cuda's pass (and prints the
 * product alone's ratio too), checked against cuBLASLt's output turned on
 * the host.  Exit 1 when a check fails. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_timing.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/permute.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

enum { WARMUP = 3, RUNS = 21, REPS_DEFAULT = 10 };

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

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

/* Products a timing queues (GEMM_REPS, default REPS_DEFAULT). */
static int reps(void)
{
	int n = atoi(env_or("GEMM_REPS", ""));
	return n > 0 ? n : REPS_DEFAULT;
}

static int swiglu_mode(void)
{
	return !strcmp(env_or("LMPIPE_GEMM_EPI", ""), "swiglu");
}

static int rope_mode(void)
{
	return !strcmp(env_or("LMPIPE_GEMM_EPI", ""), "rope");
}

/* The rope runs: sequence length, the RoPE table on the device, theta. */
static int g_T;
static float *g_cs;
static const double ROPE_THETA = 1e4;

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

static uint16_t *g_out;  /* silu(gate) up, [M, N / 2], for the swiglu runs */

/* One product of time_it's: which == 0: cuBLASLt, -1: cuBLASLt then
 * swiglu_fwd_cuda, else ours at tile width which (with
 * LMPIPE_GEMM_EPI=swiglu, our product with SwiGLU in its epilogue,
 * gemm_swiglu_cuda). */
struct product {
	int which;
	matmul_cuda *mc;
	uint16_t *C;
	const uint16_t *A, *B;
	int M, N, K;
	cudaStream_t st;
};

static int run_product(void *arg)
{
	const struct product *p = arg;
	const int rope = rope_mode();
	if (p->which > 0 && rope)
		return gemm_rope_cuda(p->C, p->A, p->B, p->M, p->N, p->K, g_T, p->N / 3 * 2, ROPE_THETA,
				      atoi(env_or("LMPIPE_GEMM_CLUSTER", "1")), p->st);
	if (p->which < 0 && rope)
		return matmul_fwd_cuda(p->mc, p->C, NULL, p->A, p->B, p->M, p->K, p->N) ||
		       qkv_rope_cuda(p->C, g_cs, p->M / g_T, g_T, p->N / 3 / GEMM_ROPE_D, GEMM_ROPE_D,
				     p->st);
	if (p->which > 0 && swiglu_mode())
		return gemm_swiglu_cuda(p->C, g_out, p->A, p->B, p->M, p->N / 2, p->K, p->which, p->st);
	if (p->which > 0)
		return gemm_tn_cuda(p->C, p->A, p->B, p->M, p->N, p->K, p->which, p->st);
	return matmul_fwd_cuda(p->mc, p->C, NULL, p->A, p->B, p->M, p->K, p->N) ||
	       (p->which < 0 && swiglu_fwd_cuda(g_out, p->C, p->M, p->N / 2, p->st));
}

/* Median milliseconds of one product (run_product's which) over RUNS
 * timings of reps() products queued back to back (cuda_timing.h); exits
 * if a product is refused. */
static double time_it(int which, matmul_cuda *mc, uint16_t *C, const uint16_t *A,
		      const uint16_t *B, int M, int N, int K, cudaStream_t st)
{
	struct product p = { which, mc, C, A, B, M, N, K, st };
	double ms = median_ms(run_product, &p, WARMUP, RUNS, reps(), st);
	if (ms < 0) {
		fprintf(stderr, "gemm_bench: %s refused or failed %d x %d x %d\n",
			which > 0 ? "gemm_tn_cuda" : "cuBLASLt", M, N, K);
		exit(1);
	}
	return ms;
}

/* Words of s (space-separated, s is cut) into w[0 .. max); their count. */
static int split(char *s, const char **w, int max)
{
	int n = 0;
	char *save;
	for (char *t = strtok_r(s, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
		w[n++] = t;
	return n;
}

/* Check ours at tile width bn against cuBLASLt's output hr (largest
 * magnitude big), time it and print its line; 1 if the check fails. */
static int run_ours(int bn, const char *cl, const char *epi, matmul_cuda *mc, uint16_t *C,
		    const uint16_t *A, const uint16_t *B, int M, int N, int K, const uint16_t *hr,
		    uint16_t *ho, float big, double ref_ms, cudaStream_t st)
{
	size_t nc = (size_t)M * N;
	const int sw = swiglu_mode(), rope = rope_mode();
	if (bn == 192 && !rope)
		epi = "pp";  /* 192 wide is ping-pong only */
	CK(cudaMemset(C, 0xff, nc * 2));
	struct product self = { bn, mc, C, A, B, M, N, K, st };
	/* e.g. ping-pong at BN = 256; RoPE's product is 192 wide only */
	if ((rope && bn != 192) || run_product(&self)) {
		printf("{\"impl\": \"lmpipe\", \"BN\": %d, \"cluster\": \"%s\", \"epi\": \"%s\", "
		       "\"M\": %d, \"N\": %d, \"K\": %d, \"refused\": true}\n", bn, cl, epi, M, N, K);
		return 0;
	}
	CK(cudaStreamSynchronize(st));
	CK(cudaMemcpy(ho, C, nc * 2, cudaMemcpyDeviceToHost));
	double worst = 0;
	size_t at = 0;
	for (size_t i = 0; i < nc; i++) {
		double want = bf2f(hr[i]);
		const int c = (int)(i % N), h = c % GEMM_ROPE_D;
		if (rope && c < N / 3 * 2) {  /* cuBLASLt's sums turned in double */
			const int j = h % (GEMM_ROPE_D / 2), top = h < GEMM_ROPE_D / 2;
			const double a = (double)(i / N % g_T) * pow(ROPE_THETA, -2.0 * j / GEMM_ROPE_D);
			const double x0 = bf2f(hr[top ? i : i - GEMM_ROPE_D / 2]);
			const double x1 = bf2f(hr[top ? i + GEMM_ROPE_D / 2 : i]);
			want = top ? x0 * cos(a) - x1 * sin(a) : x1 * cos(a) + x0 * sin(a);
		}
		double d = fabs((double)bf2f(ho[i]) - want);
		if (!(d <= worst)) {
			worst = d;
			at = i;
		}
	}
	int valid = worst <= 4.0 / 128 * big;
	double product_ms = ref_ms;  /* cuBLASLt's product alone */
	if (rope)
		ref_ms = time_it(-1, mc, C, A, B, M, N, K, st);
	if (sw) {  /* out against swiglu_fwd_cuda of cuBLASLt's h: C again */
		size_t no = nc / 2;
		uint16_t *mine = malloc(no * 2), *theirs = malloc(no * 2);
		uint16_t *hc = NULL;
		if (!mine || !theirs)
			exit(1);
		CK(cudaMemcpy(mine, g_out, no * 2, cudaMemcpyDeviceToHost));
		CK(cudaMalloc((void **)&hc, nc * 2));
		CK(cudaMemcpy(hc, hr, nc * 2, cudaMemcpyHostToDevice));
		if (swiglu_fwd_cuda(g_out, hc, M, N / 2, st))
			exit(1);
		CK(cudaMemcpy(theirs, g_out, no * 2, cudaMemcpyDeviceToHost));
		cudaFree(hc);
		float obig = 0;
		double oworst = 0;
		for (size_t i = 0; i < no; i++) {
			if (fabsf(bf2f(theirs[i])) > obig)
				obig = fabsf(bf2f(theirs[i]));
			double d = fabs((double)bf2f(mine[i]) - bf2f(theirs[i]));
			if (!(d <= oworst))
				oworst = d;
		}
		if (!(oworst <= 4.0 / 128 * obig))
			valid = 0;
		free(mine);
		free(theirs);
		ref_ms = time_it(-1, mc, C, A, B, M, N, K, st);
	}
	double ms = time_it(bn, mc, C, A, B, M, N, K, st), flop = 2.0 * M * N * K;
	printf("{\"impl\": \"lmpipe\", \"BN\": %d, \"cluster\": \"%s\", \"epi\": \"%s\", "
	       "\"M\": %d, \"N\": %d, \"K\": %d, \"ms\": %.4f, \"tflops\": %.1f, \"ratio\": %.3f, ",
	       bn, cl, epi, M, N, K, ms, flop / ms * 1e-9, ref_ms / ms);
	if (sw || rope)  /* ratio: against cuBLASLt and the pass; this one against the product alone */
		printf("\"ref_ms\": %.4f, \"ratio_product\": %.3f, ", ref_ms, product_ms / ms);
	printf("\"max_diff\": %.4g, \"at\": [%zu, %zu], \"scale\": %.4g, \"valid\": %s}\n", worst,
	       at / N, at % N, big, valid ? "true" : "false");
	return !valid;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: gemm_bench M N K [BN ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);  /* each line whole, even if a later run is killed */
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
	CK(cudaMalloc((void **)&g_out, nc));  /* [M, N / 2] bf16 */
	CK(cudaMalloc((void **)&A, na * 2));
	CK(cudaMalloc((void **)&B, nbw * 2));
	CK(cudaMalloc((void **)&C, nc * 2));
	CK(cudaMemcpy(A, ha, na * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(B, hb, nbw * 2, cudaMemcpyHostToDevice));
	g_T = atoi(env_or("GEMM_ROPE_T", "1024"));
	if (strstr(env_or("GEMM_EPIS", ""), "rope")) {  /* the table for qkv_rope_cuda's pass */
		if (g_T < 1 || M % g_T || N % (3 * GEMM_ROPE_D)) {
			fprintf(stderr, "gemm_bench: rope: M a multiple of GEMM_ROPE_T, N of 192\n");
			return 2;
		}
		size_t ncs = (size_t)g_T * GEMM_ROPE_D;
		float *cs = malloc(ncs * sizeof *cs);
		if (!cs)
			return 1;
		rope_table(cs, NULL, g_T, GEMM_ROPE_D, ROPE_THETA);
		CK(cudaMalloc((void **)&g_cs, ncs * sizeof *cs));
		CK(cudaMemcpy(g_cs, cs, ncs * sizeof *cs, cudaMemcpyHostToDevice));
		free(cs);
	}
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
	char cls[64], epis[64];
	const char *cl_of[4], *epi_of[4];
	snprintf(cls, sizeof cls, "%s", env_or("GEMM_CLUSTERS", "1"));
	snprintf(epis, sizeof epis, "%s", env_or("GEMM_EPIS", "tma"));
	int ncl = split(cls, cl_of, 4), nepi = split(epis, epi_of, 4);
	for (int v = 0; v < ncl * nepi; v++) {
		setenv("LMPIPE_GEMM_CLUSTER", cl_of[v / nepi], 1);
		setenv("LMPIPE_GEMM_EPI", epi_of[v % nepi], 1);
		for (int b = 0; b < nb; b++)
			status |= run_ours(bns[b], cl_of[v / nepi], epi_of[v % nepi], mc, C, A, B, M, N,
					   K, hr, ho, big, ref_ms, st);
	}
	matmul_cuda_free(mc);
	return status;
}
