/* permute.h: the layout changes around attention.
 *
 * The fused q/k/v projection produces qkv[B, T, 3, H, D] (q, then k, then
 * v for each token); attention wants q, k, v as [B, H, T, D] each.
 *   qkv_split:  qkv -> q, k, v         qkv_merge: dq, dk, dv -> dqkv (backward)
 *   heads_merge: o[B, H, T, D] -> y[B, T, H, D]   heads_split: the backward
 * Every function overwrites its output. */
#ifndef LMPIPE_PERMUTE_H
#define LMPIPE_PERMUTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void qkv_split_cpu(float *q, float *k, float *v, const float *qkv, int B, int T, int H, int D);
void qkv_merge_cpu(float *dqkv, const float *dq, const float *dk, const float *dv,
		   int B, int T, int H, int D);
void heads_merge_cpu(float *y, const float *o, int B, int T, int H, int D);
void heads_split_cpu(float *dO, const float *dy, int B, int T, int H, int D);

/* CUDA twins on bf16 (uint16_t bit patterns), device memory, stream a
 * cudaStream_t; 0, or -1 if the launch failed. */
int qkv_split_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv, int B, int T,
		   int H, int D, void *stream);
int qkv_merge_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk, const uint16_t *dv,
		   int B, int T, int H, int D, void *stream);
int heads_merge_cuda(uint16_t *y, const uint16_t *o, int B, int T, int H, int D, void *stream);
int heads_split_cuda(uint16_t *dO, const uint16_t *dy, int B, int T, int H, int D, void *stream);
/* qkv_split then rope_fwd (kernels/rope.h, table cs) of q and k, in one
 * pass, the same bits; and the backward: rope_bwd of dq and dk, then
 * qkv_merge.  D a multiple of 16; 16-byte aligned tensors and table. */
int qkv_rope_split_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv,
			const float *cs, int B, int T, int H, int D, void *stream);
int qkv_rope_merge_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk,
			const uint16_t *dv, const float *cs, int B, int T, int H, int D,
			void *stream);
/* rope_fwd of the q and k parts of qkv[B, T, 3, H, D], in place (v kept):
 * the same bits as qkv_rope_split's q and k.  D a multiple of 16. */
int qkv_rope_cuda(uint16_t *qkv, const float *cs, int B, int T, int H, int D, void *stream);
/* Rows of Ds values to rows of Dd: the first min(Dd, Ds) copied, the rest
 * zero (a head dimension padded for a kernel that takes only some, and
 * back). */
int rows_pad_cuda(uint16_t *dst, int Dd, const uint16_t *src, int Ds, size_t rows, void *stream);

#ifdef __cplusplus
}
#endif

#endif
