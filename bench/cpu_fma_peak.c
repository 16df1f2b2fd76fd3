/* cpu_fma_peak.c: the fp32 multiply-add ceiling of this CPU per thread
 * count, for reading the CPU decoding figures (bench/lm-sample-notes.md):
 * each thread runs independent chains of vector multiply-adds (16 lanes
 * with AVX-512, 8 with AVX2) on registers only, and the program prints one
 * JSON line per width and thread count with the total GFLOP/s.
 *
 *   cc -O2 -fopenmp bench/cpu_fma_peak.c -o cpu_fma_peak && ./cpu_fma_peak [threads...]
 */
#pragma GCC optimize("fp-contract=fast") /* acc * y + x as one multiply-add */

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

enum { CHAINS = 12, ITERS = 20000000 };

#define KERNEL(name, isa, lanes)                                                     \
	__attribute__((target(isa))) static double name(void)                          \
	{                                                                               \
		typedef float v __attribute__((vector_size(lanes * sizeof(float))));    \
		v acc[CHAINS], x, y;                                                    \
		for (int i = 0; i < lanes; i++)                                         \
			x[i] = 1.0f + 1e-7f * (float)i, y[i] = 0.999999f;               \
		for (int c = 0; c < CHAINS; c++)                                        \
			acc[c] = x * (float)(c + 1);                                    \
		for (long i = 0; i < ITERS; i++)                                        \
			_Pragma("GCC unroll 12") for (int c = 0; c < CHAINS; c++)       \
				acc[c] = acc[c] * y + x;                                \
		double s = 0;                                                           \
		for (int c = 0; c < CHAINS; c++)                                        \
			for (int i = 0; i < lanes; i++)                                 \
				s += acc[c][i];                                         \
		return s;                                                               \
	}

KERNEL(fma512, "arch=x86-64-v4", 16)
KERNEL(fma256, "arch=x86-64-v3", 8)

static void run(const char *name, double (*k)(void), int lanes, int threads)
{
	double sink = 0, t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
	sink += k();
	double t = omp_get_wtime() - t0;
	double flop = 2.0 * lanes * CHAINS * (double)ITERS * threads;
	printf("{\"impl\":\"fma-peak\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
	       "\"gflops_per_thread\":%.1f,\"sink\":%g}\n",
	       name, threads, flop / t / 1e9, flop / t / 1e9 / threads, sink);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int counts[16], n = 0;
	for (int i = 1; i < argc && n < 16; i++)
		counts[n++] = atoi(argv[i]);
	if (!n)
		counts[n++] = 1, counts[n++] = omp_get_num_procs();
	__builtin_cpu_init();
	for (int i = 0; i < n; i++) {
		if (__builtin_cpu_supports("avx512f"))
			run("avx512", fma512, 16, counts[i]);
		if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
			run("avx2", fma256, 8, counts[i]);
	}
	return 0;
}
