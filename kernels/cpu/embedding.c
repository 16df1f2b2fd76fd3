/* embedding.c: CPU twin of the token embedding (see embedding.h). */
#include "kernels/embedding.h"

#include <stddef.h>
#include <string.h>

enum { COL_CHUNK = 64 };

void embedding_fwd_cpu(float *out, const int32_t *ids, const float *table, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++)
		memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, (size_t)C * sizeof *out);
}

/* Threads own column chunks, so repeated ids never race. */
void embedding_bwd_cpu(float *dtable, const int32_t *ids, const float *dout, int N, int C)
{
	int chunks = (C + COL_CHUNK - 1) / COL_CHUNK;
#pragma omp parallel for schedule(static)
	for (int ch = 0; ch < chunks; ch++) {
		int c0 = ch * COL_CHUNK, c1 = c0 + COL_CHUNK < C ? c0 + COL_CHUNK : C;
		for (int n = 0; n < N; n++) {
			float *dst = dtable + (size_t)ids[n] * C;
			const float *src = dout + (size_t)n * C;
			for (int c = c0; c < c1; c++)
				dst[c] += src[c];
		}
	}
}
