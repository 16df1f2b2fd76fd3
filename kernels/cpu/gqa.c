/* gqa.c: CPU twins of grouped-query attention's layout changes (see gqa.h). */
#include "kernels/gqa.h"

#include <stddef.h>
#include <string.h>

void qkv_split_gqa_cpu(float *q, float *k, float *v, const float *qkv, int B, int T, int H,
		       int Hkv, int D)
{
	size_t C = (size_t)H * D, KV = (size_t)Hkv * D, row = D * sizeof(float);
	int G = H / Hkv;
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *src = qkv + ((size_t)b * T + t) * (C + 2 * KV);
			for (int h = 0; h < H; h++) {
				size_t dst = (((size_t)b * H + h) * T + t) * D, j = (size_t)(h / G) * D;
				memcpy(q + dst, src + (size_t)h * D, row);
				memcpy(k + dst, src + C + j, row);
				memcpy(v + dst, src + C + KV + j, row);
			}
		}
}

void qkv_merge_gqa_cpu(float *dqkv, const float *dq, const float *dk, const float *dv, int B,
		       int T, int H, int Hkv, int D)
{
	size_t C = (size_t)H * D, KV = (size_t)Hkv * D, row = D * sizeof(float);
	int G = H / Hkv;
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			float *dst = dqkv + ((size_t)b * T + t) * (C + 2 * KV);
			for (int h = 0; h < H; h++)
				memcpy(dst + (size_t)h * D, dq + (((size_t)b * H + h) * T + t) * D, row);
			for (int j = 0; j < Hkv; j++) {
				float *sk = dst + C + (size_t)j * D, *sv = dst + C + KV + (size_t)j * D;
				for (int d = 0; d < D; d++) {
					float ak = 0, av = 0;
					for (int g = 0; g < G; g++) {
						size_t src = (((size_t)b * H + j * G + g) * T + t) * D + d;
						ak += dk[src];
						av += dv[src];
					}
					sk[d] = ak;
					sv[d] = av;
				}
			}
		}
}
