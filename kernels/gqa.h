/* gqa.h: the layout changes of grouped-query attention, where Hkv key/value
 * heads (Hkv dividing H) serve H query heads in groups of G = H / Hkv.
 *
 * The fused projection produces qkv[B, T, H + 2 Hkv, D]: a token's H query
 * heads, then its Hkv key heads, then its Hkv value heads.  The split
 * writes q, k, v as [B, H, T, D] each, with key/value head j copied into
 * query heads j G .. j G + G - 1 (expanded, so that attention, RoPE and
 * QK-norm run on H heads unchanged).  The merge is its backward pass: dq
 * copied, each kv head's dk and dv the sum of its G expanded heads, in head
 * order.  Every function overwrites its output. */
#ifndef LMPIPE_GQA_H
#define LMPIPE_GQA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void qkv_split_gqa_cpu(float *q, float *k, float *v, const float *qkv, int B, int T, int H,
		       int Hkv, int D);
void qkv_merge_gqa_cpu(float *dqkv, const float *dq, const float *dk, const float *dv, int B,
		       int T, int H, int Hkv, int D);

/* CUDA twins on bf16 (uint16_t bit patterns; the sums in fp32). */
int qkv_split_gqa_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv, int B, int T,
		       int H, int Hkv, int D, void *stream);
int qkv_merge_gqa_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk,
		       const uint16_t *dv, int B, int T, int H, int Hkv, int D, void *stream);

#ifdef __cplusplus
}
#endif

#endif
