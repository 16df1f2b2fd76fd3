/* convert.c: the CPU's one type change (kernels/convert.h): fp32 rounded in
 * place to bf16's values, as the CUDA conversions round (nearest, ties to
 * even). */
#include "kernels/convert.h"

#include <string.h>

void round_bf16_cpu(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
			u |= 0x00400000u; /* a NaN stays a (quiet) NaN */
		} else {
			u += 0x7fffu + ((u >> 16) & 1u); /* an overflow rounds to infinity, as it should */
		}
		u &= 0xffff0000u;
		memcpy(&x[i], &u, sizeof u);
	}
}
