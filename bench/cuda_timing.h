/* cuda_timing.h: the timing loop of the CUDA product benchmarks
 * (gemm_bench.c, matmul_bench.c): CUDA events around runs of calls queued
 * back to back, the median of the runs.  Header-only, for programs of one
 * file. */
#ifndef LMPIPE_BENCH_CUDA_TIMING_H
#define LMPIPE_BENCH_CUDA_TIMING_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

enum { TIMING_MAX_RUNS = 64 };

static int timing_cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Median milliseconds of one call of run(arg) over `runs` timings (at most
 * TIMING_MAX_RUNS) of `reps` calls queued back to back on st, after
 * `warmup` timings; queued this way, the host's time to queue a call hides
 * behind the device's work, as in a training step.  -1 when a call returns
 * nonzero or CUDA fails. */
static double median_ms(int (*run)(void *), void *arg, int warmup, int runs, int reps,
			cudaStream_t st)
{
	float ms[TIMING_MAX_RUNS];
	cudaEvent_t e0, e1;
	double med = -1;
	if (runs < 1 || runs > TIMING_MAX_RUNS || reps < 1)
		return -1;
	if (cudaEventCreate(&e0) != cudaSuccess)
		return -1;
	if (cudaEventCreate(&e1) != cudaSuccess) {
		cudaEventDestroy(e0);
		return -1;
	}
	for (int r = 0; r < warmup + runs; r++) {
		if (cudaEventRecord(e0, st) != cudaSuccess)
			goto out;
		for (int i = 0; i < reps; i++)
			if (run(arg))
				goto out;
		if (cudaEventRecord(e1, st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess)
			goto out;
		if (r >= warmup) {
			if (cudaEventElapsedTime(&ms[r - warmup], e0, e1) != cudaSuccess)
				goto out;
			ms[r - warmup] /= reps;
		}
	}
	qsort(ms, runs, sizeof ms[0], timing_cmp_float);
	med = ms[runs / 2];
out:
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return med;
}

#endif
