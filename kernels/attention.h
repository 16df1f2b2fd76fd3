/* attention.h: causal or full scaled dot-product attention, forward and
 * backward, one signature per backend.
 *
 * Layout: q, k, v, o and their gradients are [B, H, T, D] contiguous
 * (batch, heads, sequence, head dimension); lse is [B, H, T], the
 * log-sum-exp of each query's scaled scores (natural log), saved by the
 * forward pass for the backward pass.  scale is usually 1/sqrt(D).
 * With causal set, query i attends to keys 0..i.
 * Return 0, or a negative ATTN_E* code for shapes or types the backend does
 * not support (never a silent wrong result); attn_strerror names the code. */
#ifndef LMPIPE_ATTENTION_H
#define LMPIPE_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	ATTN_OK = 0,
	ATTN_EHEADDIM = -1,  /* head dimension not supported by this backend */
	ATTN_ESHAPE = -2,    /* B, H, T or D not positive, or B*H*T*D too large */
	ATTN_EDEVICE = -3,   /* CUDA error */
	ATTN_ENOMEM = -4,    /* scratch memory could not be allocated */
	ATTN_ENOCUDA = -5,   /* library built without CUDA */
	ATTN_EALIGN = -6,    /* a CUDA tensor pointer is NULL or not 16-byte aligned */
};

const char *attn_strerror(int code);

/* CPU reference twin, float32, any D; OpenMP over (batch, head). */
int attn_fwd_cpu(const float *q, const float *k, const float *v, float *o, float *lse,
		 int B, int H, int T, int D, int causal, float scale);
int attn_bwd_cpu(const float *q, const float *k, const float *v, const float *o,
		 const float *dout, const float *lse, float *dq, float *dk, float *dv,
		 int B, int H, int T, int D, int causal, float scale);

/* CUDA version: bf16 tensors (uint16_t bit patterns) in device memory, fp32
 * lse, accumulation in fp32 on tensor cores; D in {64, 128}, scale > 0
 * (else ATTN_EHEADDIM, ATTN_ESHAPE); 16-byte aligned pointers; stream is a
 * cudaStream_t (void * here so C callers need no CUDA headers).
 *
 * The backward pass accumulates dq in fp32 across key blocks, and needs
 * the row sums dout.o: both live in a device workspace of
 * attn_bwd_cuda_workspace(B, H, T, D) bytes that the caller allocates once
 * (so no allocation happens inside a training step). */
int attn_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
		  float *lse, int B, int H, int T, int D, int causal, float scale, void *stream);
size_t attn_bwd_cuda_workspace(int B, int H, int T, int D);
int attn_bwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		  const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
		  int B, int H, int T, int D, int causal, float scale, void *workspace,
		  void *stream);
/* The same backward pass, bit-identical from run to run (lm-train
 * --deterministic): the thread blocks of 128 keys each store their part
 * of dq in a slice of the workspace of their own, and a second pass adds
 * the slices in key order (the default adds them as the blocks finish, in
 * an order the GPU's scheduling decides).  Its workspace,
 * attn_bwd_det_cuda_workspace(B, H, T, D) bytes, holds ceil(T / 128)
 * fp32 copies of dq: about 4 ceil(T / 128) B H T D bytes. */
size_t attn_bwd_det_cuda_workspace(int B, int H, int T, int D);
int attn_bwd_det_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		      const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk,
		      uint16_t *dv, int B, int H, int T, int D, int causal, float scale,
		      void *workspace, void *stream);

/* The CUDA kernels for short sequences (kernels/cuda/attention_short.cu):
 * the same contract as attn_fwd_cuda and attn_bwd_cuda (no workspace), for
 * the shapes attn_short_applies accepts: D = 32, T <= ATTN_SHORT_T_MAX.
 * The whole head sits in one block's shared memory; the backward pass
 * sums without atomics (the same result run to run).  With o_bthd set,
 * o and dout are [B, T, H, D] (the heads side by side in each token's row)
 * instead of [B, H, T, D]; the other tensors keep theirs. */
enum { ATTN_SHORT_T_MAX = 512 };
int attn_short_applies(int D, int T);
int attn_short_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
			float *lse, int B, int H, int T, int D, int causal, float scale,
			int o_bthd, void *stream);
int attn_short_bwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v,
			const uint16_t *o, const uint16_t *dout, const float *lse, uint16_t *dq,
			uint16_t *dk, uint16_t *dv, int B, int H, int T, int D, int causal,
			float scale, int o_bthd, void *stream);
/* The short kernels on the packed projection qkv[B, T, 3, H, D] (q, k, v
 * of each token's row, before RoPE), causal, o and dout [B, T, H, D]:
 * RoPE (kernels/rope.h, table cs[T, D/2, 2], 16-byte aligned) is applied
 * to q and k on the way in; the backward pass overwrites qkv with dqkv
 * (the gradient with respect to the unrotated q, k and v). */
int attn_short_qkv_fwd_cuda(const uint16_t *qkv, const float *cs, uint16_t *y, float *lse, int B,
			    int H, int T, int D, float scale, void *stream);
int attn_short_qkv_bwd_cuda(uint16_t *qkv, const float *cs, const uint16_t *y, const uint16_t *dy,
			    const float *lse, int B, int H, int T, int D, float scale, void *stream);

/* The flash kernels (D in {64, 128}) on the packed projection qkv[B, T, 3,
 * H, D], causal, y and dy [B, T, H, D], no layout change around them: the
 * forward rotates q and k of qkv in place (RoPE, table cs[T, D/2, 2],
 * 16-byte aligned; v untouched; cs NULL: q and k come rotated already, as
 * gemm_rope_cuda leaves them) and reads the three parts through 4-d
 * tensor maps; the backward (cs never NULL) takes qkv as the forward left it and
 * overwrites it with dqkv, the gradient with respect to the unrotated q,
 * k and v (dK and dQ rotated back as they are stored).  Its workspace is
 * attn_bwd_cuda_workspace(B, H, T, D) bytes, or with det set (the fixed
 * order of attn_bwd_det_cuda) attn_bwd_det_cuda_workspace's. */
int attn_qkv_fwd_cuda(uint16_t *qkv, const float *cs, uint16_t *y, float *lse, int B, int H,
		      int T, int D, float scale, void *stream);
int attn_qkv_bwd_cuda(uint16_t *qkv, const float *cs, const uint16_t *y, const uint16_t *dy,
		      const float *lse, int B, int H, int T, int D, float scale, int det,
		      void *workspace, void *stream);

#ifdef __cplusplus
}
#endif

#endif
