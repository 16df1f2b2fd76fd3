/* test_decode_gemm.c: dec_gemm_cols (decode_gemm.h) against a
 * double-precision loop, on sizes that are not multiples of the panel or
 * of the register tile, whole and in column slices, overwriting and
 * accumulating; and the promise that a row's result does not depend on the
 * batch it is in (bit for bit).  Every code path this CPU runs (AVX-512,
 * AVX2, plain). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/decode_gemm.h"

static float frand(unsigned *st)
{
	*st = *st * 1103515245u + 12345u;
	return (float)((*st >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *packed_of(const float *w, int IN, int OUT)
{
	size_t bytes = dec_packed_floats(IN, OUT) * sizeof(float);
	float *p = aligned_alloc(DEC_PACK_ALIGN, (bytes + DEC_PACK_ALIGN - 1) / DEC_PACK_ALIGN * DEC_PACK_ALIGN);
	if (p)
		dec_pack(p, w, IN, OUT);
	return p;
}

/* The product through slices of `slice` columns (a multiple of the panel;
 * 0: all at once) against the loop; out has LDO_PAD extra columns that
 * must stay untouched. */
enum { LDO_PAD = 3 };
static const float CANARY = 1234.5f;

static double check(int path, int N, int IN, int OUT, int slice, int accumulate, unsigned *st)
{
	int ldo = OUT + LDO_PAD;
	float *a = malloc((size_t)N * IN * sizeof *a), *w = malloc((size_t)OUT * IN * sizeof *w);
	float *out = malloc((size_t)N * ldo * sizeof *out), *init = malloc((size_t)N * ldo * sizeof *init);
	for (int i = 0; i < N * IN; i++)
		a[i] = frand(st);
	for (int i = 0; i < OUT * IN; i++)
		w[i] = frand(st);
	for (int i = 0; i < N * ldo; i++)
		init[i] = i % ldo < OUT ? frand(st) : CANARY;
	memcpy(out, init, (size_t)N * ldo * sizeof *out);
	float *p = packed_of(w, IN, OUT);
	int step = slice ? slice : OUT;
	for (int lo = 0; lo < OUT; lo += step)
		dec_gemm_cols_on(path, out, ldo, a, N, IN, p, lo, lo + step < OUT ? lo + step : OUT,
				 accumulate);
	double err = 0;
	for (int n = 0; n < N; n++)
		for (int o = 0; o < ldo; o++) {
			double want = init[n * ldo + o];
			if (o < OUT) {
				double s = 0;
				for (int k = 0; k < IN; k++)
					s += (double)a[n * IN + k] * w[o * IN + k];
				want = accumulate ? want + s : s;
			}
			err = fmax(err, fabs(out[n * ldo + o] - want) / (1 + fabs(want)));
		}
	free(a);
	free(w);
	free(out);
	free(init);
	free(p);
	return err;
}

/* Row r of an N-row product equals the same row computed alone. */
static int rows_alone(int path, int N, int IN, int OUT, unsigned *st)
{
	float *a = malloc((size_t)N * IN * sizeof *a), *w = malloc((size_t)OUT * IN * sizeof *w);
	float *all = malloc((size_t)N * OUT * sizeof *all), *one = malloc((size_t)OUT * sizeof *one);
	for (int i = 0; i < N * IN; i++)
		a[i] = frand(st);
	for (int i = 0; i < OUT * IN; i++)
		w[i] = frand(st);
	float *p = packed_of(w, IN, OUT);
	dec_gemm_cols_on(path, all, OUT, a, N, IN, p, 0, OUT, 0);
	int same = 1;
	for (int r = 0; r < N; r++) {
		dec_gemm_cols_on(path, one, OUT, a + (size_t)r * IN, 1, IN, p, 0, OUT, 0);
		same &= !memcmp(one, all + (size_t)r * OUT, (size_t)OUT * sizeof *one);
	}
	free(a);
	free(w);
	free(all);
	free(one);
	free(p);
	return same;
}

/* dec_gemm_glu_cols through slices of `slice` gate columns (0: all at
 * once) against silu(g) u from double sums; the same rows alone must give
 * the same bits. */
static double check_glu(int path, int N, int IN, int F, int slice, int *alone, unsigned *st)
{
	int ldo = F + LDO_PAD;
	float *a = malloc((size_t)N * IN * sizeof *a), *w = malloc((size_t)2 * F * IN * sizeof *w);
	float *out = malloc((size_t)N * ldo * sizeof *out), *one = malloc((size_t)ldo * sizeof *one);
	size_t bytes = dec_packed_glu_floats(IN, F) * sizeof(float);
	float *p = aligned_alloc(DEC_PACK_ALIGN, (bytes + DEC_PACK_ALIGN - 1) / DEC_PACK_ALIGN * DEC_PACK_ALIGN);
	for (int i = 0; i < N * IN; i++)
		a[i] = frand(st);
	for (int i = 0; i < 2 * F * IN; i++)
		w[i] = frand(st);
	for (int i = 0; i < N * ldo; i++)
		out[i] = CANARY;
	dec_pack_glu(p, w, IN, F);
	int step = slice ? slice : F;
	for (int lo = 0; lo < F; lo += step)
		dec_gemm_glu_cols_on(path, out, ldo, a, N, IN, p, lo, lo + step < F ? lo + step : F);
	double err = 0;
	for (int n = 0; n < N; n++) {
		for (int o = 0; o < ldo; o++) {
			double want = CANARY;
			if (o < F) {
				double g = 0, u = 0;
				for (int k = 0; k < IN; k++) {
					g += (double)a[n * IN + k] * w[o * IN + k];
					u += (double)a[n * IN + k] * w[(F + o) * IN + k];
				}
				want = g / (1 + exp(-g)) * u;
			}
			err = fmax(err, fabs(out[n * ldo + o] - want) / (1 + fabs(want)));
		}
		dec_gemm_glu_cols_on(path, one, ldo, a + (size_t)n * IN, 1, IN, p, 0, F);
		*alone &= !memcmp(one, out + (size_t)n * ldo, (size_t)F * sizeof *one);
	}
	free(a);
	free(w);
	free(out);
	free(one);
	free(p);
	return err;
}

int main(void)
{
	static const int rows[] = { 1, 2, 5, 6, 7, 13, 64 };
	static const int ins[] = { 1, 3, 17, 64 };
	static const int outs[] = { 1, 15, 16, 17, 50, 100 };
	static const char *const names[] = { "plain", "AVX2", "AVX-512" };
	const double TOL = 1e-5;
	unsigned st = 7;
	for (int path = dec_gemm_best(); path >= DEC_GEMM_BASE; path--) {
		for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
			double worst = 0;
			for (size_t i = 0; i < sizeof ins / sizeof *ins; i++)
				for (size_t o = 0; o < sizeof outs / sizeof *outs; o++)
					for (int slice = 0; slice <= 2 * DEC_PANEL; slice += DEC_PANEL)
						for (int acc = 0; acc < 2; acc++)
							worst = fmax(worst, check(path, rows[r], ins[i], outs[o],
										  slice, acc, &st));
			ok(worst < TOL, "%s: %d rows, every depth, width, slice and mode within %.0g (%.2g)",
			   names[path], rows[r], TOL, worst);
		}
		ok(rows_alone(path, 13, 37, 70, &st), "%s: 13 rows at once equal each row alone, bit for bit",
		   names[path]);
		ok(rows_alone(path, 64, 256, 96, &st), "%s: 64 rows at once equal each row alone, bit for bit",
		   names[path]);
		double worst = 0;
		int alone = 1;
		for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
			for (size_t i = 0; i < sizeof ins / sizeof *ins; i++)
				for (size_t o = 0; o < sizeof outs / sizeof *outs; o++)
					for (int slice = 0; slice <= 2 * DEC_PANEL; slice += DEC_PANEL)
						worst = fmax(worst, check_glu(path, rows[r], ins[i], outs[o],
									      slice, &alone, &st));
		ok(worst < TOL, "%s: gated product (silu(gate) up), every size and slice within %.0g (%.2g)",
		   names[path], TOL, worst);
		ok(alone, "%s: gated product, each row alone gives the same bits", names[path]);
	}
	return done_testing();
}
