/* attn_decode.c: CPU attention of new tokens against a KV cache (see
 * attn_decode.h). */
#include "kernels/attn_decode.h"
#include "kernels/decode_ops.h"

#include <omp.h>
#include <stdlib.h>

int attn_decode_cpu(float *o, const float *q, const float *const *kc, const float *const *vc,
		     const int *len, int N, int H, int D, size_t stride, float scale)
{
	int maxlen = 0;
	for (int i = 0; i < N; i++)
		maxlen = len[i] > maxlen ? len[i] : maxlen;
	size_t row = (size_t)(maxlen ? maxlen : 1);
	float *scratch = malloc((size_t)omp_get_max_threads() * row * sizeof *scratch);
	if (!scratch)
		return -1;
#pragma omp parallel
	{
		float *s = scratch + (size_t)omp_get_thread_num() * row;
#pragma omp for collapse(2) schedule(dynamic, 4)
		for (int i = 0; i < N; i++)
			for (int h = 0; h < H; h++) {
				const float *qi = q + ((size_t)h * N + i) * D;
				const float *k = kc[i] + (size_t)h * stride * D;
				const float *v = vc[i] + (size_t)h * stride * D;
				float *oi = o + ((size_t)i * H + h) * D;
				attn_decode_row(oi, qi, k, v, len[i], D, scale, s);
			}
	}
	free(scratch);
	return 0;
}
