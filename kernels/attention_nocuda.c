/* attention_nocuda.c: the CUDA entry points of attention.h in a build
 * without CUDA (make CUDA=0), so programs link and report ATTN_ENOCUDA. */
#include "kernels/attention.h"

#ifndef LMPIPE_CUDA
int attn_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
		  float *lse, int B, int H, int T, int D, int causal, float scale, void *stream)
{
	return ATTN_ENOCUDA;
}

size_t attn_bwd_cuda_workspace(int B, int H, int T, int D)
{
	return 0;
}

int attn_bwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		  const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
		  int B, int H, int T, int D, int causal, float scale, void *workspace,
		  void *stream)
{
	return ATTN_ENOCUDA;
}

size_t attn_bwd_det_cuda_workspace(int B, int H, int T, int D)
{
	return 0;
}

int attn_bwd_det_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		      const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk,
		      uint16_t *dv, int B, int H, int T, int D, int causal, float scale,
		      void *workspace, void *stream)
{
	return ATTN_ENOCUDA;
}
#endif
