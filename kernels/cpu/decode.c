/* decode.c: CPU twins of the generation step's cache ops (see decode.h). */
#include "kernels/decode.h"
#include "kernels/decode_ops.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static size_t cache_at(decode_shape s, int32_t slot, int h, int32_t pos)
{
	return (((size_t)slot * s.Hkv + h) * s.n_ctx + (size_t)pos) * s.D;
}

void decode_qkv_cpu(float *q, float *kc, float *vc, const float *qkv, const float *cs,
		    const int32_t *pos, const int32_t *slot, decode_shape s)
{
	size_t D = (size_t)s.D, row = (size_t)(s.H + 2 * s.Hkv) * D;
#pragma omp parallel for if (s.N > 16)
	for (int i = 0; i < s.N; i++) {
		const float *r = qkv + (size_t)i * row, *c = cs + (size_t)pos[i] * D;
		for (int h = 0; h < s.H; h++) {
			float *qi = q + ((size_t)i * s.H + h) * D;
			memcpy(qi, r + h * D, D * sizeof *qi);
			dec_rope_row(qi, c, s.D);
		}
		for (int h = 0; h < s.Hkv; h++) {
			float *k = kc + cache_at(s, slot[i], h, pos[i]);
			float *v = vc + cache_at(s, slot[i], h, pos[i]);
			memcpy(k, r + (s.H + h) * D, D * sizeof *k);
			dec_rope_row(k, c, s.D);
			memcpy(v, r + (s.H + s.Hkv + h) * D, D * sizeof *v);
		}
	}
}

int attn_decode_cache_cpu(float *o, const float *q, const float *kc, const float *vc,
			  const int32_t *pos, const int32_t *slot, decode_shape s, float scale)
{
	float *scratch = malloc((size_t)omp_get_max_threads() * s.n_ctx * sizeof *scratch);
	if (!scratch)
		return -1;
	int group = s.H / s.Hkv;
#pragma omp parallel
	{
		float *sc = scratch + (size_t)omp_get_thread_num() * s.n_ctx;
#pragma omp for collapse(2) schedule(dynamic, 4)
		for (int i = 0; i < s.N; i++)
			for (int h = 0; h < s.H; h++) {
				size_t at = cache_at(s, slot[i], h / group, 0), qo = ((size_t)i * s.H + h) * s.D;
				attn_decode_row(o + qo, q + qo, kc + at, vc + at, pos[i] + 1, s.D, scale, sc);
			}
	}
	free(scratch);
	return 0;
}

void rows_gather_cpu(float *dst, const float *src, const int32_t *idx, int n, int C)
{
	for (int j = 0; j < n; j++)
		memcpy(dst + (size_t)j * C, src + (size_t)idx[j] * C, (size_t)C * sizeof *dst);
}

void rows_scatter_cpu(float *dst, const float *src, const int32_t *idx, int n, int V)
{
	for (int j = 0; j < n; j++)
		memcpy(dst + (size_t)idx[j] * V, src + (size_t)j * V, (size_t)V * sizeof *dst);
}
