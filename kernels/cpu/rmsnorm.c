/* rmsnorm.c: CPU twin of RMSNorm (see rmsnorm.h). */
#include "kernels/rmsnorm.h"

#include <math.h>
#include <stddef.h>

enum { COL_CHUNK = 64 };

void rmsnorm_fwd_cpu(float *y, float *rstd, const float *x, const float *w,
		     int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * C;
		float *yr = y + (size_t)n * C;
		float ss = 0;
		for (int c = 0; c < C; c++)
			ss += xr[c] * xr[c];
		float r = 1.0f / sqrtf(ss / C + eps);
		rstd[n] = r;
		for (int c = 0; c < C; c++)
			yr[c] = xr[c] * r * w[c];
	}
}

/* dx = rstd * (w dy) - rstd^3 / C * x * sum_c(w dy x);  dw = sum_n dy x rstd */
void rmsnorm_bwd_cpu(float *dx, float *dw, const float *dy, const float *x,
		     const float *w, const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
		float *dxr = dx + (size_t)n * C;
		float r = rstd[n], dot = 0;
		for (int c = 0; c < C; c++)
			dot += w[c] * dyr[c] * xr[c];
		float k = r * r * r * dot / C;
		for (int c = 0; c < C; c++)
			dxr[c] += r * w[c] * dyr[c] - k * xr[c];
	}
	int chunks = (C + COL_CHUNK - 1) / COL_CHUNK;
#pragma omp parallel for schedule(static)
	for (int ch = 0; ch < chunks; ch++) {
		int c0 = ch * COL_CHUNK, c1 = c0 + COL_CHUNK < C ? c0 + COL_CHUNK : C;
		float acc[COL_CHUNK] = { 0 };
		for (int n = 0; n < N; n++) {
			const float *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
			float r = rstd[n];
			for (int c = c0; c < c1; c++)
				acc[c - c0] += dyr[c] * xr[c] * r;
		}
		for (int c = c0; c < c1; c++)
			dw[c] += acc[c - c0];
	}
}
