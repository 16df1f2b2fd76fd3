/* attn_blas.h: a faster CPU implementation of the attention op, with the
 * signatures of attn_fwd_cpu / attn_bwd_cpu (attention.h), which stay the
 * plain reference twin.  Per (batch, head) slice it forms the T x T scores
 * with sgemm, applies the causal mask and the softmax (saving lse), and
 * multiplies by V with sgemm; the backward pass recomputes the
 * probabilities from lse and gets dQ, dK, dV with four sgemm calls.  Slices
 * run in parallel (OpenMP), each sgemm on one thread.  Scratch: two T x T
 * float matrices per thread.  The CPU backend uses this one; the tests
 * check it against the reference twin. */
#ifndef LMPIPE_ATTN_BLAS_H
#define LMPIPE_ATTN_BLAS_H

int attn_fwd_blas(const float *q, const float *k, const float *v, float *o, float *lse,
		  int B, int H, int T, int D, int causal, float scale);
int attn_bwd_blas(const float *q, const float *k, const float *v, const float *o,
		  const float *dout, const float *lse, float *dq, float *dk, float *dv,
		  int B, int H, int T, int D, int causal, float scale);

#endif
