/* swiglu.c: CPU twin of the SwiGLU gate (see swiglu.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/swiglu.h"
#include "vexp.h"

#include <math.h>
#include <stddef.h>

void swiglu_fwd_cpu(float *out, const float *h, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *g = h + (size_t)n * 2 * F, *u = g + F;
		float *o = out + (size_t)n * F;
#pragma omp simd
		for (int i = 0; i < F; i++) {
			float sig = 1.0f / (1.0f + vexpf(-g[i]));
			o[i] = g[i] * sig * u[i];
		}
	}
}

/* d silu(g)/dg = sig * (1 + g (1 - sig)) */
void swiglu_bwd_cpu(float *dh, const float *dout, const float *h, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *g = h + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
		float *dg = dh + (size_t)n * 2 * F, *du = dg + F;
#pragma omp simd
		for (int i = 0; i < F; i++) {
			float sig = 1.0f / (1.0f + vexpf(-g[i]));
			float silu = g[i] * sig;
			du[i] = d[i] * silu;
			dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
		}
	}
}
