/* embedding.h: token embedding lookup, forward and backward.
 *
 * table is [V, C] row-major; ids are N token ids in [0, V).  The forward
 * pass writes out[N, C]; the backward pass ACCUMULATES (+=) into
 * dtable[V, C], so tied input/output embeddings and gradient accumulation
 * need no extra buffer.  Ids are trusted (the model checks them). */
#ifndef LMPIPE_EMBEDDING_H
#define LMPIPE_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void embedding_fwd_cpu(float *out, const int32_t *ids, const float *table, int N, int C);
void embedding_bwd_cpu(float *dtable, const int32_t *ids, const float *dout, int N, int C);

/* CUDA twin: the same on device memory (fp32 table and rows), stream a
 * cudaStream_t; 0, or -1 if the launch failed.  The backward pass adds with
 * atomics, so the last bits of a row hit by several tokens may differ run
 * to run. */
int embedding_fwd_cuda(float *out, const int32_t *ids, const float *table, int N, int C,
		       void *stream);
/* The forward pass into a bf16 out (the residual stream kept in bf16): each
 * value rounded to the nearest bf16. */
int embedding_fwd_bf16_cuda(uint16_t *out, const int32_t *ids, const float *table, int N, int C,
			    void *stream);
int embedding_bwd_cuda(float *dtable, const int32_t *ids, const float *dout, int N, int C,
		       void *stream);
/* The deterministic backward pass (--deterministic): the same sum, each
 * row's contributions added in position order and then once into dtable
 * (as the CPU twin), so the bits are the same run to run; ws holds
 * embedding_bwd_det_cuda_workspace(N) bytes of device memory. */
size_t embedding_bwd_det_cuda_workspace(int N);
int embedding_bwd_det_cuda(float *dtable, const int32_t *ids, const float *dout, int N, int C,
			   void *ws, void *stream);

/* The backward passes from a bf16 dout (the residual stream's gradient
 * kept in bf16), adding in fp32 as above. */
int embedding_bwd_bf16_cuda(float *dtable, const int32_t *ids, const uint16_t *dout, int N, int C,
			    void *stream);
int embedding_bwd_det_bf16_cuda(float *dtable, const int32_t *ids, const uint16_t *dout, int N,
				int C, void *ws, void *stream);

#ifdef __cplusplus
}
#endif

#endif
