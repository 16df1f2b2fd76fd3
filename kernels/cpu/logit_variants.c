/* logit_variants.c: CPU twins of soft-capping and the cross-entropy backward
 * with z-loss and capping (see logit_variants.h). */
#include "kernels/logit_variants.h"

#include <math.h>

void softcap_fwd_cpu(float *x, size_t n, float cap)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] = cap * tanhf(x[i] / cap);
}

void logit_bwd_cpu(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
		   const float *f, const float *extra, int N, int V, float z_loss, float cap)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *y = logits + (size_t)n * V;
		const float *ex = extra ? extra + (size_t)n * V : NULL;
		float *dz = dlogits + (size_t)n * V;
		int t = targets[n];
		float d = t < 0 ? 0.0f : f[n], l = lse[n], p = d * (1.0f + 2.0f * z_loss * l);
		for (int v = 0; v < V; v++) {
			float yv = y[v];
			float g = p * expf(yv - l) - (v == t ? d : 0.0f) + (ex ? ex[v] : 0.0f);
			if (cap > 0) {
				float r = yv / cap;
				g *= 1.0f - r * r;
			}
			dz[v] = g;
		}
	}
}
