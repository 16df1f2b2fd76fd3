/* rope.c: CPU twin of rotary position embedding, rotate-half pairing (see
 * rope.h), and the host-side table of cos/sin. */
#include "kernels/rope.h"

#include <math.h>
#include <stddef.h>

void rope_table(float *cs, const int64_t *pos, int T, int D, double theta)
{
	int half = D / 2;
	for (int t = 0; t < T; t++) {
		double p = pos ? (double)pos[t] : (double)t;
		for (int i = 0; i < half; i++) {
			double a = p * pow(theta, -2.0 * i / D);
			cs[((size_t)t * half + i) * 2] = (float)cos(a);
			cs[((size_t)t * half + i) * 2 + 1] = (float)sin(a);
		}
	}
}

static void rope_apply(float *x, const float *cs, int B, int H, int T, int D, float sign)
{
	int half = D / 2;
#pragma omp parallel for collapse(2) schedule(static)
	for (int bh = 0; bh < B * H; bh++)
		for (int t = 0; t < T; t++) {
			float *r = x + ((size_t)bh * T + t) * D;
			const float *tab = cs + (size_t)t * half * 2;
			for (int i = 0; i < half; i++) {
				float c = tab[2 * i], s = sign * tab[2 * i + 1];
				float x0 = r[i], x1 = r[i + half];
				r[i] = x0 * c - x1 * s;
				r[i + half] = x1 * c + x0 * s;
			}
		}
}

void rope_fwd_cpu(float *x, const float *cs, int B, int H, int T, int D)
{
	rope_apply(x, cs, B, H, T, D, 1.0f);
}

void rope_bwd_cpu(float *dx, const float *cs, int B, int H, int T, int D)
{
	rope_apply(dx, cs, B, H, T, D, -1.0f);
}
