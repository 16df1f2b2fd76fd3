/* embedding.c: CPU twin of the token embedding (see embedding.h). */
#include "kernels/embedding.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { COL_CHUNK = 64 };

void embedding_fwd_cpu(float *out, const int32_t *ids, const float *table, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++)
		memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, (size_t)C * sizeof *out);
}

/* The tokens in order of (id, position), so that a row's contributions
 * can be summed before they are added.  qsort's comparator. */
static int by_id(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Each row's contributions of this call are summed (in position order)
 * before they are added to dtable, so a call adds the same sum whatever
 * dtable held: the gradient accumulated over micro-batches is the sum of
 * their separate gradients, which is what data-parallel ranks add up
 * (libcommon/dist).  Threads own column chunks, so repeated ids never race.
 * Without memory for the order, tokens are added one by one. */
void embedding_bwd_cpu(float *dtable, const int32_t *ids, const float *dout, int N, int C)
{
	int chunks = (C + COL_CHUNK - 1) / COL_CHUNK;
	int32_t *order = malloc((size_t)N * 2 * sizeof *order);
	if (!order) {
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
		return;
	}
	for (int n = 0; n < N; n++) {
		order[2 * n] = ids[n];
		order[2 * n + 1] = n;
	}
	qsort(order, (size_t)N, 2 * sizeof *order, by_id);
#pragma omp parallel for schedule(static)
	for (int ch = 0; ch < chunks; ch++) {
		int c0 = ch * COL_CHUNK, c1 = c0 + COL_CHUNK < C ? c0 + COL_CHUNK : C;
		float acc[COL_CHUNK];
		for (int i = 0; i < N;) {
			int id = order[2 * i];
			memset(acc, 0, sizeof acc);
			for (; i < N && order[2 * i] == id; i++) {
				const float *src = dout + (size_t)order[2 * i + 1] * C;
				for (int c = c0; c < c1; c++)
					acc[c - c0] += src[c];
			}
			float *dst = dtable + (size_t)id * C;
			for (int c = c0; c < c1; c++)
				dst[c] += acc[c - c0];
		}
	}
	free(order);
}
