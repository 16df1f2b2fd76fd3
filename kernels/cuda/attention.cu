// attention.cu: the attention forward's entry points (the [B, H, T, D] layout and
// the packed qkv rows) and the launch checks both passes share.  The forward itself,
// FlashAttention-3 style, is in attention_fwd_ws.cu; the FlashAttention-2 kernels it
// replaced (wgmma and mma.sync) are out of the default build, in variants/attention_fwd_fa2.cu.
#include "attention_cuda.cuh"
#include "kernels/attention.h"
#include "kernels/permute.h"

#include <cuda_runtime.h>
#include <math.h>

int attn_cuda_check(int B, int H, int T, int D, const void *const *ptrs, int nptrs,
		    const float *f32)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return ATTN_ESHAPE;
	if ((long long)B * H > ATTN_CUDA_MAX_BH || T > ATTN_CUDA_MAX_T)
		return ATTN_ESHAPE;
	if (D != 64 && D != 128)
		return ATTN_EHEADDIM;
	for (int i = 0; i < nptrs; i++)
		if (!ptrs[i] || ((uintptr_t)ptrs[i] & (ATTN_CUDA_ALIGN - 1)))
			return ATTN_EALIGN;
	if (!f32 || ((uintptr_t)f32 & (sizeof *f32 - 1)))
		return ATTN_EALIGN;
	return ATTN_OK;
}

int attn_fwd_check(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		   const float *lse, int B, int H, int T, int D, float scale)
{
	const void *ptrs[] = {q, k, v, o};
	int rc = attn_cuda_check(B, H, T, D, ptrs, 4, lse);
	if (rc)
		return rc;
	if (!(scale > 0 && scale < INFINITY))  // the running max assumes scores keep their order
		return ATTN_ESHAPE;
	return ATTN_OK;
}

extern "C" int attn_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
			     float *lse, int B, int H, int T, int D, int causal, float scale,
			     void *stream)
{
	int rc = attn_fwd_check(q, k, v, o, lse, B, H, T, D, scale);
	if (rc)
		return rc;
	return attn_fwd_ws(q, k, v, o, lse, B * H, T, D, causal, scale, (cudaStream_t)stream);
}

/* The packed layout (kernels/attention.h, attn_qkv_fwd_cuda): q and k of
 * qkv rotated in place (unless cs is NULL: rotated by the product), then
 * the warp-specialised forward reading the three parts through 4-d tensor
 * maps and writing y [B, T, H, D]. */
extern "C" int attn_qkv_fwd_cuda(uint16_t *qkv, const float *cs, uint16_t *y, float *lse, int B,
				 int H, int T, int D, float scale, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	const void *ptrs[] = {qkv, y, cs};
	int rc = attn_cuda_check(B, H, T, D, ptrs, cs ? 3 : 2, lse);
	if (rc)
		return rc;
	if ((size_t)B * T * 3 * H * D > UINT32_MAX)
		return ATTN_ESHAPE;
	if (!(scale > 0 && scale < INFINITY))
		return ATTN_ESHAPE;
	if (cs && qkv_rope_cuda(qkv, cs, B, T, H, D, st))
		return ATTN_EDEVICE;
	return attn_fwd_ws_packed(qkv, y, lse, B, H, T, D, scale, st);
}
