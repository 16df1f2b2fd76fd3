/* swiglu.c: CPU twin of the SwiGLU gate (see swiglu.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/swiglu.h"
#include "vexp.h"
#include "wide.h"

#include <math.h>
#include <stddef.h>

/* The rows as wide as the machine allows (wide.h): the same operations in
 * each lane, so the same bits at any width. */
static WIDE void fwd_row(float *o, const float *g, const float *u, int F)
{
#pragma omp simd
	for (int i = 0; i < F; i++) {
		float sig = 1.0f / (1.0f + vexpf(-g[i]));
		o[i] = g[i] * sig * u[i];
	}
}

void swiglu_fwd_cpu(float *out, const float *h, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *g = h + (size_t)n * 2 * F;
		fwd_row(out + (size_t)n * F, g, g + F, F);
	}
}

/* d silu(g)/dg = sig * (1 + g (1 - sig)) */
static WIDE void bwd_row(float *dg, float *du, const float *d, const float *g, const float *u,
			 int F)
{
#pragma omp simd
	for (int i = 0; i < F; i++) {
		float sig = 1.0f / (1.0f + vexpf(-g[i]));
		float silu = g[i] * sig;
		du[i] = d[i] * silu;
		dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
	}
}

void swiglu_bwd_cpu(float *dh, const float *dout, const float *h, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *g = h + (size_t)n * 2 * F;
		float *dg = dh + (size_t)n * 2 * F;
		bwd_row(dg, dg + F, dout + (size_t)n * F, g, g + F, F);
	}
}
