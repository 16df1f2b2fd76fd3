/* gpu_harness.h: the table-driven check of CUDA ops against their CPU
 * twins (in the style of ggml's test-backend-ops).  An op contributes one
 * gpu_op entry: its shapes, the names of its outputs with a tolerance for
 * each, and a run function that draws random inputs, runs both backends
 * and measures each output's error.  gpu_run_ops prints one TAP line per
 * output and shape.
 *
 * Errors: "max" is the largest |gpu - cpu| over the largest |cpu|, "rel"
 * is |gpu - cpu| / |cpu| in the 2-norm; NaN anywhere (outputs are
 * poisoned with NaN before each run, so unwritten elements show) fails. */
#ifndef LMPIPE_GPU_HARNESS_H
#define LMPIPE_GPU_HARNESS_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../tap.h"

enum { GPU_MAX_DIMS = 6, GPU_MAX_OUTS = 8, GPU_NAN_BYTE = 0xff };

typedef struct gpu_tol {
	const char *name;
	double max, rel;
} gpu_tol;

typedef struct gpu_err {
	double max, rel;
} gpu_err;

typedef struct gpu_op {
	const char *name;
	const int (*shapes)[GPU_MAX_DIMS];
	int nshapes;
	const gpu_tol *outs;  /* nouts tolerances, in the order run fills err */
	int nouts;
	/* Describe one shape for the test names. */
	void (*describe)(const int *shape, char *buf, size_t len);
	/* Run both backends on fresh random inputs; fill err[0..nouts-1].
	 * Return 0, or a message naming what failed to run. */
	const char *(*run)(const int *shape, uint64_t seed, gpu_err *err);
} gpu_op;

/* Host bf16 <-> float (round to nearest even; inputs here are finite). */
static inline uint16_t f2bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* A deterministic uniform draw in [-1, 1) (splitmix64). */
static inline float gpu_rand(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
}

/* n random bf16 values in [-mag, mag), never all zero; f gets them as floats. */
static inline void gpu_rand_bf16(uint16_t *h, float *f, size_t n, float mag, uint64_t *st)
{
	for (size_t i = 0; i < n; i++) {
		h[i] = f2bf(mag * gpu_rand(st));
		f[i] = bf2f(h[i]);
	}
}

/* Device buffer of n bytes filled with NaN bit patterns (bf16 and fp32). */
static inline void *gpu_poisoned(size_t n)
{
	void *p = NULL;
	if (cudaMalloc(&p, n) != cudaSuccess)
		return NULL;
	if (cudaMemset(p, GPU_NAN_BYTE, n) != cudaSuccess) {
		cudaFree(p);
		return NULL;
	}
	return p;
}

static inline gpu_err gpu_compare(const float *got, const float *ref, size_t n)
{
	gpu_err e = {0, 0};
	double num = 0, den = 0, big = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (!(d == d) || isinf(d)) {
			e.max = e.rel = INFINITY;
			return e;
		}
		e.max = fmax(e.max, d);
		big = fmax(big, fabs(ref[i]));
		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	e.max = big > 0 ? e.max / big : e.max;
	e.rel = den > 0 ? sqrt(num / den) : sqrt(num);
	return e;
}

static inline gpu_err gpu_compare_bf16(const uint16_t *got, const float *ref, size_t n, float *tmp)
{
	for (size_t i = 0; i < n; i++)
		tmp[i] = bf2f(got[i]);
	return gpu_compare(tmp, ref, n);
}

/* Every op on every shape; one TAP line per output. */
static inline void gpu_run_ops(const gpu_op *ops, int nops, uint64_t seed)
{
	for (int o = 0; o < nops; o++)
		for (int s = 0; s < ops[o].nshapes; s++) {
			gpu_err err[GPU_MAX_OUTS];
			char desc[128];
			ops[o].describe(ops[o].shapes[s], desc, sizeof desc);
			const char *fail = ops[o].run(ops[o].shapes[s], seed + (uint64_t)s * 7919, err);
			if (fail) {
				ok(0, "%s %s runs: %s", ops[o].name, desc, fail);
				continue;
			}
			for (int i = 0; i < ops[o].nouts; i++) {
				const gpu_tol *t = &ops[o].outs[i];
				ok(err[i].max <= t->max && err[i].rel <= t->rel,
				   "%s %s %s: max %.3g rel %.3g (tol %.3g %.3g)", ops[o].name, desc,
				   t->name, err[i].max, err[i].rel, t->max, t->rel);
			}
		}
}

/* Skip the whole file when no GPU is there. */
static inline void gpu_require_device(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		skip_all("no CUDA device");
}

#endif
