/* attention_variants.h: the CUDA attention kernels that the default build
 * leaves out, kept buildable for the benchmarks and the notes that cite
 * them (bench/attention-notes.md), as llm.c keeps its dev/cuda/ kernels.
 *
 * `make attention-variants` builds BUILD/libattn_variants.a from
 * the .cu files of kernels/cuda/variants; link it before BUILD/libkernels.a (it calls
 * the default entry points and the shared launch checks there).
 * bench/attention.sh VARIANT=wgmma|mma builds and times one of them.
 *
 * Each entry point takes the arguments of kernels/attention.h's
 * attn_fwd_cuda / attn_bwd_cuda (the same workspace of
 * attn_bwd_cuda_workspace bytes) after the variant, and returns the same
 * codes (ATTN_ESHAPE for an unknown variant). */
#ifndef LMPIPE_ATTENTION_VARIANTS_H
#define LMPIPE_ATTENTION_VARIANTS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	ATTN_VARIANT_DEFAULT = 0, /* attn_fwd_cuda, attn_bwd_cuda themselves */
	ATTN_VARIANT_WGMMA = 1,   /* FlashAttention-2 on Hopper's warpgroup MMA (sm_90a):
				     the default forward before the warp-specialised one;
				     the backward whose key warpgroups also compute dQ */
	ATTN_VARIANT_MMA = 2,     /* FlashAttention-2 on mma.sync m16n8k16 (any sm_80+) */
};

int attn_fwd_cuda_variant(int variant, const uint16_t *q, const uint16_t *k, const uint16_t *v,
			  uint16_t *o, float *lse, int B, int H, int T, int D, int causal,
			  float scale, void *stream);
int attn_bwd_cuda_variant(int variant, const uint16_t *q, const uint16_t *k, const uint16_t *v,
			  const uint16_t *o, const uint16_t *dout, const float *lse, uint16_t *dq,
			  uint16_t *dk, uint16_t *dv, int B, int H, int T, int D, int causal,
			  float scale, void *workspace, void *stream);

#ifdef __cplusplus
}
#endif

#endif
