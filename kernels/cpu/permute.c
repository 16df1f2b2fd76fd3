/* permute.c: CPU twins of the layout changes around attention (see
 * permute.h). */
#include "kernels/permute.h"

#include <stddef.h>
#include <string.h>

void qkv_split_cpu(float *q, float *k, float *v, const float *qkv, int B, int T, int H, int D)
{
	size_t C = (size_t)H * D, row = D * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *src = qkv + ((size_t)b * T + t) * 3 * C;
			for (int h = 0; h < H; h++) {
				size_t dst = (((size_t)b * H + h) * T + t) * D;
				memcpy(q + dst, src + h * D, row);
				memcpy(k + dst, src + C + h * D, row);
				memcpy(v + dst, src + 2 * C + h * D, row);
			}
		}
}

void qkv_merge_cpu(float *dqkv, const float *dq, const float *dk, const float *dv,
		   int B, int T, int H, int D)
{
	size_t C = (size_t)H * D, row = D * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			float *dst = dqkv + ((size_t)b * T + t) * 3 * C;
			for (int h = 0; h < H; h++) {
				size_t src = (((size_t)b * H + h) * T + t) * D;
				memcpy(dst + h * D, dq + src, row);
				memcpy(dst + C + h * D, dk + src, row);
				memcpy(dst + 2 * C + h * D, dv + src, row);
			}
		}
}

void heads_merge_cpu(float *y, const float *o, int B, int T, int H, int D)
{
	size_t row = D * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < H; h++)
				memcpy(y + (((size_t)b * T + t) * H + h) * D,
				       o + (((size_t)b * H + h) * T + t) * D, row);
}

void heads_split_cpu(float *dO, const float *dy, int B, int T, int H, int D)
{
	size_t row = D * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < H; h++)
				memcpy(dO + (((size_t)b * H + h) * T + t) * D,
				       dy + (((size_t)b * T + t) * H + h) * D, row);
}
