// attention_cuda.cuh: what the CUDA attention files share: limits of the
// launch grids, the argument check both entry points run, and the kernels
// that have files of their own.
#ifndef LMPIPE_ATTENTION_CUDA_CUH
#define LMPIPE_ATTENTION_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

enum {
	ATTN_CUDA_MAX_BH = 2147483647,  // grid.x: one block column per (batch, head)
	ATTN_CUDA_MAX_T = 65535 * 64,   // grid.y: tiles of >= 64 rows, at most 65535
	ATTN_CUDA_ALIGN = 16,           // cp.async moves 16-byte chunks
};

// ATTN_OK, or the code for a bad shape, head dimension or pointer (the
// bf16 tensors in ptrs, the fp32 one in f32).
int attn_cuda_check(int B, int H, int T, int D, const void *const *ptrs, int nptrs,
		    const float *f32);

// The forward's arguments (attention.cu), for attn_fwd_cuda and the
// variants (variants/attention_fwd_fa2.cu): attn_cuda_check's, and a
// finite positive scale.
int attn_fwd_check(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		   const float *lse, int B, int H, int T, int D, float scale);

// The warp-specialised forward (attention_fwd_ws.cu), arguments checked.
int attn_fwd_ws(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
		int BH, int T, int D, int causal, float scale, cudaStream_t st);

// The same on the packed qkv[B, T, 3, H, D] (q and k rotated), causal,
// into y [B, T, H, D] (kernels/attention.h, attn_qkv_fwd_cuda).
int attn_fwd_ws_packed(const uint16_t *qkv, uint16_t *y, float *lse, int B, int H, int T, int D,
		       float scale, cudaStream_t st);

// The backward's key blocks with a warpgroup of their own for dQ
// (attention_bwd_ws.cu), arguments checked: dqacc is the zeroed workspace
// in attention_bwd.cuh's tiles, delta the row sums dout.o; with det set,
// dqacc is the deterministic path's slices of partials instead (one per
// key block, attention_bwd.cuh's DQ_KEYS), written, not added to.
int attn_bwd_ws(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
		const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv,
		int BH, int T, int D, int causal, float scale, int det, cudaStream_t st);

// The same for either layout: H = 0 as attn_bwd_ws; H > 0 the packed one
// (q, k, v, dk, dv the parts of qkv[B, T, 3, H, D], dk = k and dv = v
// allowed, dout [B, T, H, D], dK rotated back by the RoPE table cs).
int attn_bwd_ws_any(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
		    const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv,
		    int BH, int H, const float *cs, int T, int D, int causal, float scale, int det,
		    cudaStream_t st);

// The backward's steps around its key blocks (attention_bwd.cu), for
// attn_bwd_cuda and the variants (variants/attention_bwd_fa2.cu): check the
// arguments, zero the dq workspace and compute delta into it (*dqacc,
// *delta: where they are); and dq = bf16 of the workspace in
// attention_bwd.cuh's tiles.
int attn_bwd_begin(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		   const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
		   int B, int H, int T, int D, float scale, void *workspace, cudaStream_t st,
		   float **dqacc, float **delta);
int attn_bwd_convert_tiles(const float *dqacc, uint16_t *dq, int B, int H, int T, int D,
			   cudaStream_t st);

#endif
