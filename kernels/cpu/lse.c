/* lse.c: the log-sum-exp of a row (see lse.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/lse.h"

#include <math.h>

#include "vexp.h"

/* The loop runs where the work is: the build targets x86-64-v2, and a
 * version for AVX2 and for AVX-512 doubles or quadruples its width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WIDE
#endif

WIDE double lse_row_cpu(const float *x, size_t n)
{
	float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
	for (size_t i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	double sum = 0;
#pragma omp simd reduction(+ : sum)
	for (size_t i = 0; i < n; i++)
		sum += vexpf(x[i] - mx);
	return mx + log(sum);
}
