/* test_convert.c: round_bf16_cpu (kernels/convert.h), the CPU's rounding of
 * its residual stream under lm-train --residual bf16: nearest bf16, ties to
 * even, as the CUDA conversions round; NaN, infinities and overflow. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../tap.h"
#include "kernels/convert.h"

static float bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static uint32_t of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static void rounds(uint32_t in, uint32_t want, const char *what)
{
	float x = bits(in);
	round_bf16_cpu(&x, 1);
	ok(of(x) == want, "%s: %08x -> %08x (got %08x)", what, in, want, of(x));
}

int main(void)
{
	rounds(0x3f800000u, 0x3f800000u, "1 is exact");
	rounds(0x3f800001u, 0x3f800000u, "just above 1 rounds down");
	rounds(0x3f808000u, 0x3f800000u, "a tie rounds to the even 1");
	rounds(0x3f818000u, 0x3f820000u, "a tie rounds up to the even neighbour");
	rounds(0x3f808001u, 0x3f810000u, "just past a tie rounds up");
	rounds(0xbf808001u, 0xbf810000u, "negative: by magnitude, the same");
	rounds(0x3f81ffffu, 0x3f820000u, "the carry into the next value");
	rounds(0x00000001u, 0x00000000u, "the smallest subnormal to zero");
	rounds(0x80000000u, 0x80000000u, "-0 stays");
	rounds(0x7f7fffffu, 0x7f800000u, "FLT_MAX overflows to infinity");
	rounds(0x7f800000u, 0x7f800000u, "infinity stays");
	rounds(0xff800000u, 0xff800000u, "-infinity stays");
	float nan = bits(0x7f800001u); /* a NaN whose payload is all in the dropped half */
	round_bf16_cpu(&nan, 1);
	ok(isnan(nan), "a NaN stays a NaN (%08x)", of(nan));
	/* a run of values: each is the bf16 nearest, within half a bf16 step */
	float v[1000], w[1000];
	for (int i = 0; i < 1000; i++)
		v[i] = w[i] = sinf(0.37f * i) * powf(2.0f, (float)(i % 40 - 20));
	round_bf16_cpu(w, 1000);
	int bad = 0;
	for (int i = 0; i < 1000; i++)
		bad += (of(w[i]) & 0xffffu) != 0 || fabsf(w[i] - v[i]) > fabsf(v[i]) * 0x1p-8f;
	ok(!bad, "1000 values: each a bf16, within half a step (%d not)", bad);
	return done_testing();
}
