/* xent.c: CPU twin of the softmax cross-entropy (see xent.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/xent.h"
#include "kernels/lse.h"
#include "vexp.h"
#include "wide.h"

#include <math.h>
#include <stddef.h>

void xent_fwd_cpu(float *loss, float *lse, const float *logits, const int32_t *targets,
		  int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *z = logits + (size_t)n * V;
		float l = (float)lse_row_cpu(z, (size_t)V);
		lse[n] = l;
		loss[n] = targets[n] < 0 ? 0.0f : l - z[targets[n]];
	}
}

/* dz = softmax(z) * d over one row, as wide as the machine allows (the
 * same operations in each lane, so the same bits at any width) */
static WIDE void softmax_scaled_row(float *dz, const float *z, float l, float d, int V)
{
#pragma omp simd
	for (int v = 0; v < V; v++)
		dz[v] = vexpf(z[v] - l) * d;
}

void xent_bwd_cpu(float *dlogits, const float *logits, const float *lse,
		  const int32_t *targets, const float *dloss, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		float *dz = dlogits + (size_t)n * V;
		int t = targets[n];
		float d = t < 0 ? 0.0f : dloss[n];
		softmax_scaled_row(dz, logits + (size_t)n * V, lse[n], d, V);
		if (t >= 0)
			dz[t] -= d;
	}
}
