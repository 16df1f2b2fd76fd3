/* overlap_bench.c: a memory-bound pass beside a weight-gradient product
 * on split multiprocessors, against the two one after the other.
 *
 *   overlap_bench [N C OUT]
 *
 * Default 32768 768 4096: gpt2s's second RMSNorm backward (N rows of C)
 * and the gate/up product's weight gradient (dW [OUT, C] += dh^T x, dh
 * [N, OUT]), which does not depend on it: in the backward pass they could
 * run at once (bench/lm-train-gpu-notes.md, stop 67).  Prints one JSON line
 * for the two run one after the other on the whole GPU ("seq_ms"), then
 * one for each k of OVERLAP_BLOCKS (default "8 12 16 20 24 32"): the
 * product sized for the GPU's multiprocessors less k (cuBLASLt's SM count
 * target, matmul_cuda_set_sm_target) and the pass in k blocks
 * (rmsnorm_bwd_act_cuda_blocks), each alone ("prod_ms", "pass_ms") and
 * both at once on two streams ("par_ms"), with "gain" = seq_ms / par_ms;
 * "cand" -1 is the plan as lm-train makes it (cuBLASLt's candidates timed
 * alone), and OVERLAP_CANDS=n adds a line for each of the heuristic's
 * first n candidates ("algo", "tile", "stages": cuBLASLt's ids), to see
 * which of them coexist with the pass.
 * LMPIPE_RMSNORM_BULK=0 picks the pass's register-fed kernel.  Times are
 * medians of RUNS timings of REPS calls queued back to back
 * (cuda_timing.h).  Nothing is checked here: both operations are tested
 * in tests/gpu (test_backend); the inputs are random and the outputs
 * accumulate over the runs. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_timing.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"

enum { WARMUP = 3, RUNS = 15, REPS = 5 };

#define CK(x) do { if ((x) != cudaSuccess) { fprintf(stderr, "overlap_bench: %s: %s\n", #x, \
	cudaGetErrorString(cudaGetLastError())); exit(1); } } while (0)

typedef struct ctx {
	int N, C, OUT;
	unsigned k;          /* the pass's blocks (0: as many as it takes) */
	cudaStream_t sa, sb; /* the product's stream, the pass's when beside it */
	cudaEvent_t fork, join;
	matmul_cuda *mm;     /* on sa */
	uint16_t *dh, *xb, *wgu, *dy, *dxa;
	float *dwp, *x, *g, *rstd, *dx, *dwn;
	void *ws;
} ctx;

static int prod(ctx *c)
{
	return matmul_bwd_cuda(c->mm, NULL, c->dwp, c->dh, c->xb, c->wgu, c->N, c->C, c->OUT);
}

static int pass(ctx *c, cudaStream_t st)
{
	return rmsnorm_bwd_act_cuda_blocks(c->dx, c->dxa, c->dwn, c->dy, c->x, c->g, c->rstd, c->N,
					   c->C, c->ws, c->k, st);
}

static int run_prod(void *a) { return prod(a); }
static int run_pass(void *a) { return pass(a, ((ctx *)a)->sa); }

static int run_seq(void *a)
{
	ctx *c = a;
	return prod(c) || pass(c, c->sa);
}

static int run_par(void *a)
{
	ctx *c = a;
	if (cudaEventRecord(c->fork, c->sa) || cudaStreamWaitEvent(c->sb, c->fork, 0) || prod(c) ||
	    pass(c, c->sb) || cudaEventRecord(c->join, c->sb) || cudaStreamWaitEvent(c->sa, c->join, 0))
		return -1;
	return 0;
}

static void *dev_rand(size_t n, int bf16, uint64_t *st)
{
	size_t bytes = n * (bf16 ? 2 : 4);
	void *h = malloc(bytes), *d;
	if (!h)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		*st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
		float f = (float)((*st >> 40) & 0xffffff) / 16777216.0f - 0.5f;
		if (bf16) {
			uint32_t u;
			memcpy(&u, &f, 4);
			((uint16_t *)h)[i] = (uint16_t)(u >> 16);
		} else {
			((float *)h)[i] = f;
		}
	}
	CK(cudaMalloc(&d, bytes));
	CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

static double med(int (*run)(void *), ctx *c)
{
	double ms = median_ms(run, c, WARMUP, RUNS, REPS, c->sa);
	if (ms < 0) {
		fprintf(stderr, "overlap_bench: a product or pass failed\n");
		exit(1);
	}
	return ms;
}

int main(int argc, char **argv)
{
	if (argc != 1 && argc != 4) {
		fprintf(stderr, "usage: overlap_bench [N C OUT]\n");
		return 2;
	}
	ctx c = {0};
	c.N = argc == 4 ? atoi(argv[1]) : 32768;
	c.C = argc == 4 ? atoi(argv[2]) : 768;
	c.OUT = argc == 4 ? atoi(argv[3]) : 4096;
	if (c.N < 1 || c.C < 8 || c.C % 8 || c.OUT < 8 || c.OUT % 8) {
		fprintf(stderr, "overlap_bench: N >= 1, C and OUT multiples of 8\n");
		return 2;
	}
	int dev, sms;
	CK(cudaGetDevice(&dev));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
	uint64_t st = 7;
	size_t nc = (size_t)c.N * c.C;
	c.dh = dev_rand((size_t)c.N * c.OUT, 1, &st);
	c.xb = dev_rand(nc, 1, &st);
	c.wgu = dev_rand((size_t)c.OUT * c.C, 1, &st);
	c.dy = dev_rand(nc, 1, &st);
	c.x = dev_rand(nc, 0, &st);
	c.g = dev_rand(c.C, 0, &st);
	c.rstd = dev_rand(c.N, 0, &st);
	c.dx = dev_rand(nc, 0, &st);
	CK(cudaMalloc((void **)&c.dxa, nc * 2));
	CK(cudaMalloc((void **)&c.dwp, (size_t)c.OUT * c.C * 4));
	CK(cudaMalloc((void **)&c.dwn, (size_t)c.C * 4));
	CK(cudaMemset(c.dwp, 0, (size_t)c.OUT * c.C * 4));
	CK(cudaMemset(c.dwn, 0, (size_t)c.C * 4));
	CK(cudaMalloc(&c.ws, rmsnorm_bwd_cuda_workspace(c.N, c.C)));
	CK(cudaStreamCreateWithFlags(&c.sa, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&c.sb, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&c.fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&c.join, cudaEventDisableTiming));
	const char *bulk = getenv("LMPIPE_RMSNORM_BULK");
	const char *pass_kind = bulk && *bulk == '0' ? "registers" : "bulk";
	if (!(c.mm = matmul_cuda_new(c.sa))) {
		fprintf(stderr, "overlap_bench: no cuBLASLt\n");
		return 1;
	}
	double seq = med(run_seq, &c), p0 = med(run_prod, &c), q0 = med(run_pass, &c);
	printf("{\"N\": %d, \"C\": %d, \"OUT\": %d, \"sms\": %d, \"pass\": \"%s\", \"prod_ms\": %.4f, "
	       "\"pass_ms\": %.4f, \"seq_ms\": %.4f}\n", c.N, c.C, c.OUT, sms, pass_kind, p0, q0, seq);
	matmul_cuda_free(c.mm);
	char list[256];
	const char *l = getenv("OVERLAP_BLOCKS");
	snprintf(list, sizeof list, "%s", l && *l ? l : "8 12 16 20 24 32");
	const char *cands_env = getenv("OVERLAP_CANDS");
	int ncand = cands_env && *cands_env ? atoi(cands_env) : 0;
	for (char *s = strtok(list, " "); s; s = strtok(NULL, " ")) {
		int k = atoi(s);
		if (k < 1 || k >= sms) {
			fprintf(stderr, "overlap_bench: OVERLAP_BLOCKS: %s is not in 1 .. %d\n", s, sms - 1);
			return 2;
		}
		c.k = (unsigned)k;
		/* cand -1: the plan as the model makes it (timed); then, with
		 * OVERLAP_CANDS=n, each of the heuristic's first n in turn */
		for (int cand = -1; cand < ncand; cand++) {
			if (!(c.mm = matmul_cuda_new(c.sa))) {
				fprintf(stderr, "overlap_bench: no cuBLASLt\n");
				return 1;
			}
			matmul_cuda_set_sm_target(c.mm, sms - k);
			matmul_cuda_force_candidate(c.mm, cand);
			if (prod(&c)) { /* fewer candidates than asked for */
				cudaGetLastError();
				matmul_cuda_free(c.mm);
				break;
			}
			int id, tile, stages;
			matmul_cuda_last_algo(c.mm, &id, &tile, &stages);
			double p = med(run_prod, &c), q = med(run_pass, &c), par = med(run_par, &c);
			printf("{\"k\": %d, \"cand\": %d, \"algo\": %d, \"tile\": %d, \"stages\": %d, "
			       "\"pass\": \"%s\", \"prod_ms\": %.4f, \"pass_ms\": %.4f, \"par_ms\": %.4f, "
			       "\"seq_ms\": %.4f, \"gain\": %.3f}\n", k, cand, id, tile, stages, pass_kind,
			       p, q, par, seq, seq / par);
			matmul_cuda_free(c.mm);
		}
	}
	return 0;
}
