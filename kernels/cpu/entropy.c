/* entropy.c: CPU twin of the per-row softmax entropy and its gradient (see
 * entropy.h), accumulated in double.  The exponentials are vexp.h's float
 * ones (a few ulp), so that a row vectorizes: glibc's double exp, one
 * call an id, was a quarter of rl-update's time on a 10000-id model. */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/entropy.h"
#include "vexp.h"
#include "wide.h"

#include <math.h>
#include <stddef.h>

/* sum_v p_v (l - z_v) with p_v = e^(z_v - l): the entropy of the row, as
 * wide as the machine allows (wide.h; the sum's order follows the width,
 * so its last bits are the machine's) */
static WIDE double row_entropy(const float *z, float l, int V)
{
	double h = 0;
#pragma omp simd reduction(+ : h)
	for (int v = 0; v < V; v++) {
		float d = l - z[v];
		h += (double)(vexpf(-d) * d);
	}
	return h;
}

void entropy_fwd_cpu(float *ent, const float *logits, const float *lse, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++)
		ent[n] = (float)row_entropy(logits + (size_t)n * V, lse[n], V);
}

void entropy_bwd_cpu(float *dz, const float *logits, const float *lse, const float *dent,
		     int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *z = logits + (size_t)n * V;
		float *g = dz + (size_t)n * V;
		if (dent[n] == 0) {
			for (int v = 0; v < V; v++)
				g[v] = 0;
			continue;
		}
		double h = row_entropy(z, lse[n], V), s = -(double)dent[n];
		float l = lse[n];
#pragma omp simd
		for (int v = 0; v < V; v++) {
			double logp = (double)z[v] - l;
			g[v] = (float)(s * vexpf((float)logp) * (logp + h));
		}
	}
}
