/* lse.c: the log-sum-exp of a row (see lse.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/lse.h"

#include <math.h>

#include "vexp.h"
#include "wide.h"

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
