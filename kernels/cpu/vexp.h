/* vexp.h: an expf that the compiler can vectorize (glibc's expf is a call
 * it cannot, without -ffast-math).  Range reduction x = k ln2 + r with
 * |r| <= ln2/2 (ln2 split in two parts), a degree-6 Taylor polynomial for
 * e^r, and 2^k put into the exponent bits.  Relative error below 3e-7 (a
 * few ulp); 0 below -87.3, +inf above 88.7, NaN for NaN.
 *
 * The selects vectorize only when comparisons may be speculated: a file
 * that uses vexpf in a loop starts with
 * #pragma GCC optimize("no-trapping-math"), before any include. */
#ifndef LMPIPE_VEXP_H
#define LMPIPE_VEXP_H

#include <math.h>
#include <stdint.h>

static inline float vexpf(float x)
{
	const float LOG2E = 1.44269504f, LN2_HI = 0.693145752f, LN2_LO = 1.42860677e-6f;
	const float ROUND = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
	const float LO = -87.3f, HI = 88.7f;
	float xc = x > LO ? x : LO;       /* NaN becomes LO here: k stays finite */
	xc = xc < HI ? xc : HI;
	float k = (xc * LOG2E + ROUND) - ROUND;
	float r = (xc - k * LN2_HI) - k * LN2_LO;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
		  r * (1.0f / 720))))));
	union { float f; int32_t i; } u = { p };
	u.i += (int32_t)k * (1 << 23);
	float y = x < LO ? 0.0f : u.f;
	y = x > HI ? HUGE_VALF : y;
	return x == x ? y : x;
}

#endif
