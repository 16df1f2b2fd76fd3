/* headnorm.c: CPU twin of the per-head RMSNorm of QK-norm (see headnorm.h). */
#include "kernels/headnorm.h"

#include <math.h>
#include <stdlib.h>

enum { COL_CHUNK = 64 };

void headnorm_fwd_cpu(float *y, float *rstd, const float *x, const float *w, size_t rows, int D,
		      float eps)
{
#pragma omp parallel for schedule(static)
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * D;
		float *yr = y + r * D;
		float ss = 0;
		for (int d = 0; d < D; d++)
			ss += xr[d] * xr[d];
		float s = 1.0f / sqrtf(ss / D + eps);
		rstd[r] = s;
		for (int d = 0; d < D; d++)
			yr[d] = xr[d] * s * w[d];
	}
}

/* dx = rstd (w dy) - rstd^3 / D x sum_d(w dy x);  dw += sum_r dy x rstd.
 * dw first: dx may overwrite dy. */
void headnorm_bwd_cpu(float *dx, float *dw, const float *dy, const float *x, const float *w,
		      const float *rstd, size_t rows, int D)
{
	int chunks = (D + COL_CHUNK - 1) / COL_CHUNK;
	for (int ch = 0; ch < chunks; ch++) {
		int d0 = ch * COL_CHUNK, d1 = d0 + COL_CHUNK < D ? d0 + COL_CHUNK : D;
		float acc[COL_CHUNK] = { 0 };
		for (size_t r = 0; r < rows; r++)
			for (int d = d0; d < d1; d++)
				acc[d - d0] += dy[r * D + d] * x[r * D + d] * rstd[r];
		for (int d = d0; d < d1; d++)
			dw[d] += acc[d - d0];
	}
#pragma omp parallel for schedule(static)
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * D, *dyr = dy + r * D;
		float *dxr = dx + r * D;
		float s = rstd[r], dot = 0;
		for (int d = 0; d < D; d++)
			dot += w[d] * dyr[d] * xr[d];
		float k = s * s * s * dot / D;
		for (int d = 0; d < D; d++)
			dxr[d] = s * w[d] * dyr[d] - k * xr[d];
	}
}

void qkv_headnorm_cpu(float *qkv, const float *wq, const float *wk, int N, int H, int Hkv, int D,
		      float eps)
{
	size_t heads = (size_t)H + Hkv, width = (heads + Hkv) * D;
#pragma omp parallel for schedule(static)
	for (size_t r = 0; r < (size_t)N * heads; r++) {
		size_t i = r / heads, j = r % heads;
		float *x = qkv + i * width + j * D, s;
		headnorm_fwd_cpu(x, &s, x, j < (size_t)H ? wq : wk, 1, D, eps);
	}
}
