/* test_attn_row.c: attn_decode_row (decode_ops.h), the decoder's attention
 * of one query against a cache, beside a double-precision softmax(q k) v, at
 * head sizes with their own compiled copy (32, 64) and others, for key
 * counts around the 16-key blocks. */
#include <math.h>
#include <stdlib.h>

#include "../tap.h"
#include "kernels/decode_ops.h"

enum { MAX_D = 64, MAX_N = 70 };
static const double TOL = 1e-5;

static float frand(unsigned *st)
{
	*st = *st * 1103515245u + 12345u;
	return (float)((*st >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void reference(double *o, const float *q, const float *k, const float *v, int n, int D,
		      double scale)
{
	double s[MAX_N], m = -INFINITY, sum = 0;
	for (int j = 0; j < n; j++) {
		double dot = 0;
		for (int d = 0; d < D; d++)
			dot += (double)q[d] * k[j * D + d];
		s[j] = scale * dot;
		m = s[j] > m ? s[j] : m;
	}
	for (int j = 0; j < n; j++)
		sum += s[j] = exp(s[j] - m);
	for (int d = 0; d < D; d++) {
		o[d] = 0;
		for (int j = 0; j < n; j++)
			o[d] += s[j] / sum * v[j * D + d];
	}
}

int main(void)
{
	static const int heads[] = { 8, 16, 32, 48, 64 };
	static const int keys[] = { 1, 5, 15, 16, 17, 33, 64, MAX_N };
	static float q[MAX_D], k[MAX_N * MAX_D], v[MAX_N * MAX_D], o[MAX_D], s[MAX_N];
	unsigned st = 1;
	for (size_t h = 0; h < sizeof heads / sizeof *heads; h++)
		for (size_t c = 0; c < sizeof keys / sizeof *keys; c++) {
			int D = heads[h], n = keys[c];
			double scale = 1.0 / sqrt(D), want[MAX_D], err = 0;
			for (int i = 0; i < D; i++)
				q[i] = 3 * frand(&st);
			for (int i = 0; i < n * D; i++) {
				k[i] = frand(&st);
				v[i] = frand(&st);
			}
			attn_decode_row(o, q, k, v, n, D, (float)scale, s);
			reference(want, q, k, v, n, D, scale);
			for (int d = 0; d < D; d++)
				err = fmax(err, fabs(o[d] - want[d]));
			ok(err < TOL, "head size %d, %d keys: max error %.2g", D, n, err);
		}
	return done_testing();
}
