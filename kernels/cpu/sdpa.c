/* sdpa.c: CPU reference of masked attention with Tq != Tk (see sdpa.h).
 * One (slice, query) pair per OpenMP iteration; scores are recomputed per
 * key on the second pass so no scratch row is needed. */
#include "kernels/sdpa.h"

#include <math.h>
#include <stddef.h>

static float dot(const float *a, const float *b, int n)
{
	float s = 0;
	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void sdpa_fwd_cpu(float *o, const float *q, const float *k, const float *v,
		  const uint8_t *mask, int BH, int Tq, int Tk, int D, float scale)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int s = 0; s < BH; s++)
		for (int i = 0; i < Tq; i++) {
			const float *qi = q + ((size_t)s * Tq + i) * D;
			const float *ks = k + (size_t)s * Tk * D, *vs = v + (size_t)s * Tk * D;
			const uint8_t *mi = mask ? mask + ((size_t)s * Tq + i) * Tk : NULL;
			float *oi = o + ((size_t)s * Tq + i) * D;
			float mx = -INFINITY, sum = 0;
			for (int j = 0; j < Tk; j++)
				if (!mi || mi[j])
					mx = fmaxf(mx, scale * dot(qi, ks + (size_t)j * D, D));
			for (int d = 0; d < D; d++)
				oi[d] = 0;
			if (mx == -INFINITY)
				continue;
			for (int j = 0; j < Tk; j++) {
				if (mi && !mi[j])
					continue;
				float p = expf(scale * dot(qi, ks + (size_t)j * D, D) - mx);
				sum += p;
				for (int d = 0; d < D; d++)
					oi[d] += p * vs[(size_t)j * D + d];
			}
			for (int d = 0; d < D; d++)
				oi[d] /= sum;
		}
}
