/* entropy.c: CPU twin of the per-row softmax entropy and its gradient (see
 * entropy.h), accumulated in double. */
#include "kernels/entropy.h"

#include <math.h>
#include <stddef.h>

static double row_entropy(const float *z, float l, int V)
{
	double h = 0;
	for (int v = 0; v < V; v++) {
		double d = (double)l - z[v];
		h += exp(-d) * d;
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
		double h = row_entropy(z, lse[n], V);
		for (int v = 0; v < V; v++) {
			double logp = (double)z[v] - lse[n];
			g[v] = (float)(dent[n] * -exp(logp) * (logp + h));
		}
	}
}
