/* test_lse.c: the row log-sum-exp (kernels/lse.h) against a double
 * reference, on rows that would overflow a naive sum, with -inf and NaN
 * entries (NaN out: callers check rows with dec_row_bad first); and the cross-entropy's lse (xent.h) being that very value. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../tap.h"
#include "kernels/lse.h"
#include "kernels/xent.h"

static double reference(const float *x, size_t n)
{
	double mx = -INFINITY, s = 0;
	for (size_t i = 0; i < n; i++)
		mx = fmax(mx, x[i]);
	for (size_t i = 0; i < n; i++)
		s += exp((double)x[i] - mx);
	return mx + log(s);
}

int main(void)
{
	enum { V = 1003, ROWS = 4 };
	float *z = malloc(sizeof(float) * V * ROWS);
	uint64_t st = 12345;
	for (size_t i = 0; i < (size_t)V * ROWS; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		z[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 20.0 - 10.0);
	}
	for (int r = 0; r < ROWS; r++) {
		const float *row = z + (size_t)r * V;
		double got = lse_row_cpu(row, V), want = reference(row, V);
		near(got, want, 1e-6 * fabs(want) + 1e-6, "row %d: log-sum-exp", r);
	}
	float big[3] = { 1000.0f, 999.0f, -INFINITY };
	near(lse_row_cpu(big, 3), 1000.0 + log(1.0 + exp(-1.0)), 1e-4,
	     "entries near 1000 do not overflow; -inf adds nothing");
	float with_nan[3] = { 1.0f, NAN, 2.0f };
	ok(isnan(lse_row_cpu(with_nan, 3)), "a NaN entry: NaN (the max skips it, the sum does not)");
	float one = 3.5f;
	near(lse_row_cpu(&one, 1), 3.5, 1e-7, "a row of one: the entry itself");

	float loss[ROWS], lse[ROWS];
	int32_t tg[ROWS] = { 0, 5, -1, V - 1 };
	xent_fwd_cpu(loss, lse, z, tg, ROWS, V);
	int same = 1;
	for (int r = 0; r < ROWS; r++)
		same &= lse[r] == (float)lse_row_cpu(z + (size_t)r * V, V);
	ok(same, "the cross-entropy's lse is lse_row_cpu's, bit for bit");
	free(z);
	return done_testing();
}
