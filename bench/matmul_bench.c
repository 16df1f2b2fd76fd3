/* matmul_bench.c: the linear layer's three cuBLASLt products (kernels/matmul.h,
 * autotuned as in training) timed one by one on a training shape, to see
 * which of them runs below the tensor cores' rate.
 *
 *   matmul_bench N IN OUT
 *
 * Random bf16 inp [N, IN], W [OUT, IN], dout [N, OUT].  Times the forward
 * product (bf16 out), the forward with an fp32 addend (the residual
 * branch), the backward's weight gradient alone (dW += dout^T inp, fp32,
 * matmul_bwd_cuda with dinp NULL) and the whole backward (dinp and dW);
 * dinp alone is the difference.  Each figure is the median of RUNS timings
 * of REPS products queued back to back, after WARMUP (cuda_timing.h).  One JSON line per
 * product with milliseconds and TFLOP/s (2 N IN OUT a product). */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_timing.h"
#include "kernels/matmul.h"

enum { WARMUP = 3, RUNS = 15, REPS = 10 };

#define CK(x)                                                                           \
	do {                                                                            \
		if ((x) != cudaSuccess) {                                               \
			fprintf(stderr, "matmul_bench: %s: %s\n", #x,                  \
				cudaGetErrorString(cudaGetLastError()));                \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

struct bufs {
	uint16_t *inp, *w, *dout, *out, *dinp;
	float *f32, *dw;
	int N, IN, OUT;
};

enum what { FWD, FWD_ADD, BWD_DW, BWD };

struct call {
	matmul_cuda *mc;
	const struct bufs *b;
	enum what w;
};

static int run(void *arg)
{
	const struct call *c = arg;
	const struct bufs *b = c->b;
	switch (c->w) {
	case FWD:
		return matmul_fwd_cuda(c->mc, b->out, NULL, b->inp, b->w, b->N, b->IN, b->OUT);
	case FWD_ADD:
		return matmul_fwd_cuda(c->mc, b->f32, b->f32, b->inp, b->w, b->N, b->IN, b->OUT);
	case BWD_DW:
		return matmul_bwd_cuda(c->mc, NULL, b->dw, b->dout, b->inp, b->w, b->N, b->IN, b->OUT);
	default:
		return matmul_bwd_cuda(c->mc, b->dinp, b->dw, b->dout, b->inp, b->w, b->N, b->IN,
				       b->OUT);
	}
}

static double time_it(matmul_cuda *mc, const struct bufs *b, enum what w, cudaStream_t st)
{
	struct call c = { mc, b, w };
	double ms = median_ms(run, &c, WARMUP, RUNS, REPS, st);
	if (ms < 0) {
		fprintf(stderr, "matmul_bench: cuBLASLt refused or failed %d x %d x %d\n", b->N,
			b->IN, b->OUT);
		exit(1);
	}
	return ms;
}

static void *dev_random(size_t n, cudaStream_t st)
{
	uint16_t *h = malloc(n * 2), *d;
	if (!h)
		exit(1);
	uint64_t s = 88172645463325252ull + n;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		h[i] = (uint16_t)(0x3c00 | (s & 0x7f) | ((s >> 8) & 1) << 15);  /* +-[0.0078, 0.0156) */
	}
	CK(cudaMalloc((void **)&d, n * 2));
	CK(cudaMemcpyAsync(d, h, n * 2, cudaMemcpyHostToDevice, st));
	CK(cudaStreamSynchronize(st));
	free(h);
	return d;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: matmul_bench N IN OUT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct bufs b = { .N = atoi(argv[1]), .IN = atoi(argv[2]), .OUT = atoi(argv[3]) };
	if (b.N < 1 || b.IN < 1 || b.OUT < 1) {
		fprintf(stderr, "matmul_bench: sizes must be positive\n");
		return 2;
	}
	cudaStream_t st;
	CK(cudaStreamCreate(&st));
	size_t n = (size_t)b.N;
	b.inp = dev_random(n * b.IN, st);
	b.w = dev_random((size_t)b.OUT * b.IN, st);
	b.dout = dev_random(n * b.OUT, st);
	CK(cudaMalloc((void **)&b.out, n * b.OUT * 2));
	CK(cudaMalloc((void **)&b.dinp, n * b.IN * 2));
	CK(cudaMalloc((void **)&b.f32, n * b.OUT * 4));
	CK(cudaMalloc((void **)&b.dw, (size_t)b.OUT * b.IN * 4));
	CK(cudaMemset(b.f32, 0, n * b.OUT * 4));
	CK(cudaMemset(b.dw, 0, (size_t)b.OUT * b.IN * 4));
	matmul_cuda *mc = matmul_cuda_new(st);
	if (!mc) {
		fprintf(stderr, "matmul_bench: no cuBLASLt context\n");
		return 1;
	}
	static const char *names[] = { "fwd", "fwd+addend", "dW", "dX+dW" };
	double flop = 2.0 * b.N * b.IN * b.OUT, ms[4];
	for (int w = FWD; w <= BWD; w++) {
		ms[w] = time_it(mc, &b, (enum what)w, st);
		double f = w == BWD ? 2 * flop : flop;
		printf("{\"N\": %d, \"IN\": %d, \"OUT\": %d, \"product\": \"%s\", \"ms\": %.4f, "
		       "\"tflops\": %.1f}\n", b.N, b.IN, b.OUT, names[w], ms[w], f / ms[w] * 1e-9);
	}
	double dx = ms[BWD] - ms[BWD_DW];
	printf("{\"N\": %d, \"IN\": %d, \"OUT\": %d, \"product\": \"dX (difference)\", \"ms\": %.4f, "
	       "\"tflops\": %.1f}\n", b.N, b.IN, b.OUT, dx, flop / dx * 1e-9);
	matmul_cuda_free(mc);
	return 0;
}
