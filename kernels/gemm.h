/* gemm.h: lmpipe's own Hopper product (kernels/cuda/gemm_ws.cu), the first
 * step towards products whose epilogues do the model's element-wise work
 * (SwiGLU, the cross-entropy's row statistics) where cuBLASLt cannot.
 *
 *   C[M, N] (bf16) = A[M, K] . B[N, K]^T      bf16 operands, fp32 sums
 *
 * the forward linear layer's layout (kernels/matmul.h: out = inp . W^T).
 * Rows of A, B and C are contiguous (ld = K, K and N).  bn is the tile's
 * width, 128 or 256, or 192: ping-pong consumers, each warpgroup a whole
 * 128 x 192 tile, one's epilogue under the other's products.  Needs
 * sm_90a, K and N multiples of 8, 16-byte aligned pointers; returns 0, or
 * -1 (shapes refused, no tensor map, or the launch failed).
 * LMPIPE_GEMM_CLUSTER and LMPIPE_GEMM_EPI (lmpipe(7)) choose its variants,
 * for measuring.  The model takes gemm_swiglu_cuda (lm-train's gate/up
 * product), the head's two and the q/k/v product with RoPE below;
 * bench/gemm.sh measures them against cuBLASLt. */
#ifndef LMPIPE_GEMM_H
#define LMPIPE_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int gemm_tn_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K, int bn,
		 void *stream);

/* The gate/up product with SwiGLU in its epilogue (kernels/swiglu.h):
 *   h[M, 2F] = A[M, K] . W[2F, K]^T,   out[M, F] = silu(gate) * up
 * with the gates in h's columns [0, F) (W's rows [0, F)) and the ups in
 * [F, 2F); out is computed from h's bf16 values as swiglu_fwd_cuda does.
 * F a multiple of 8; bn 128 or 256 (cooperative tiles of 64 or 128
 * features) or 192 (ping-pong tiles of 96 features, stored 32 at a time:
 * what lm-train's CUDA backend takes); otherwise as gemm_tn_cuda. */
int gemm_swiglu_cuda(uint16_t *h, uint16_t *out, const uint16_t *A, const uint16_t *W, int M,
		     int F, int K, int bn, void *stream);

/* The LM head's products (kernels/head_exp.h says how the head uses them),
 * in 192-wide ping-pong tiles, cl blocks a cluster (1 or 2):
 * gemm_exp_cuda stores E[M, N] = exp(A . B^T), rounded to bf16 (no shift:
 * the head checks the range afterwards), and the fp32 sum of each row's
 * exponentials over each tile, part[m * ntn + j] for the columns of tile j
 * (192 j ... 192 j + 191, those below N), ntn = ceil(N / 192); and sets
 * *flag to 0 (device memory) before the products complete.
 * gemm_tn_guarded_cuda is gemm_tn_cuda at bn = 192, made only if *guard
 * (device memory) is nonzero when the kernel starts: the launch is queued
 * either way, so a captured step may hold it. */
enum { GEMM_EXP_BN = 192 };
int gemm_exp_cuda(uint16_t *E, float *part, int *flag, const uint16_t *A, const uint16_t *B, int M,
		  int N, int K, int cl, void *stream);
int gemm_tn_guarded_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K,
			 int cl, const int *guard, void *stream);

/* The q/k/v product with RoPE in its epilogue (kernels/rope.h's rotate-half
 * convention, heads of GEMM_ROPE_D = 64 columns): C = A . B^T with the
 * pairs (i, i + 32) of each head in columns [0, cols) (the q and k heads)
 * turned by the angle p theta^(-2i/64), p = row % T (rows are tokens of
 * sequences of T), in fp32 before C is rounded; the other columns (v) as
 * gemm_tn_cuda stores them.  The epilogue computes the angles itself (no
 * table): within 6e-7 of rope_table's cosines and sines.  192-wide
 * ping-pong tiles, cl blocks a cluster (1 or 2); N and cols multiples of
 * 64, cols <= N, 1 <= T <= GEMM_ROPE_MAX_T, theta > 1 (finite); otherwise
 * as gemm_tn_cuda. */
enum { GEMM_ROPE_D = 64, GEMM_ROPE_MAX_T = 1 << 17 };
int gemm_rope_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K, int T,
		   int cols, double theta, int cl, void *stream);

#ifdef __cplusplus
}
#endif

#endif
