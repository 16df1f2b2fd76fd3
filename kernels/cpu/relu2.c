/* relu2.c: CPU twin of the squared ReLU (see relu2.h). */
#include "kernels/relu2.h"

void relu2_fwd_cpu(float *out, const float *h, size_t n)
{
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float r = h[i] > 0 ? h[i] : 0.0f;
		out[i] = r * r;
	}
}

void relu2_bwd_cpu(float *dh, const float *dout, const float *h, size_t n)
{
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++)
		dh[i] = h[i] > 0 ? 2.0f * h[i] * dout[i] : 0.0f;
}
