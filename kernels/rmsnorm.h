/* rmsnorm.h: RMSNorm over the last dimension, forward and backward.
 *
 *   y[n, c] = x[n, c] * rstd[n] * w[c],  rstd[n] = 1 / sqrt(mean_c x[n, c]^2 + eps)
 *
 * x, y, dy, dx are [N, C]; w, dw are [C]; rstd [N] is saved by the forward
 * pass for the backward pass.  The backward pass ACCUMULATES (+=) into dx
 * (the residual stream's gradient) and into dw. */
#ifndef LMPIPE_RMSNORM_H
#define LMPIPE_RMSNORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RMSNORM_EPS 1e-5f

void rmsnorm_fwd_cpu(float *y, float *rstd, const float *x, const float *w,
		     int N, int C, float eps);
void rmsnorm_bwd_cpu(float *dx, float *dw, const float *dy, const float *x,
		     const float *w, const float *rstd, int N, int C);

/* CUDA twin: x, w, rstd, dx, dw fp32; y and dy bf16 (uint16_t bit
 * patterns); device memory, stream a cudaStream_t; 0, or -1 if the launch
 * failed. */
int rmsnorm_fwd_cuda(uint16_t *y, float *rstd, const float *x, const float *w, int N, int C,
		     float eps, void *stream);
int rmsnorm_bwd_cuda(float *dx, float *dw, const uint16_t *dy, const float *x, const float *w,
		     const float *rstd, int N, int C, void *ws, void *stream);
/* rmsnorm_bwd_cuda that also writes the updated dx as bf16 into dx_act
 * (NULL: not), the residual gradient as the next product's input. */
int rmsnorm_bwd_act_cuda(float *dx, uint16_t *dx_act, float *dw, const uint16_t *dy,
			 const float *x, const float *w, const float *rstd, int N, int C, void *ws,
			 void *stream);
/* rmsnorm_bwd_act_cuda in at most `blocks` blocks (0: as many as it
 * takes), for running beside other work on the rest of the GPU
 * (bench/overlap_bench.c); the results are the same but for dw's order of
 * additions. */
int rmsnorm_bwd_act_cuda_blocks(float *dx, uint16_t *dx_act, float *dw, const uint16_t *dy,
				const float *x, const float *w, const float *rstd, int N, int C,
				void *ws, unsigned blocks, void *stream);
/* The residual stream kept in bf16 (lm-train --residual bf16): the same
 * with x bf16 (and so read at half the bytes).  The CPU twin is the fp32
 * functions on x rounded to bf16 (kernels/convert.h's round_bf16_cpu). */
int rmsnorm_fwd_bx_cuda(uint16_t *y, float *rstd, const uint16_t *x, const float *w, int N, int C,
			float eps, void *stream);
int rmsnorm_bwd_act_bx_cuda_blocks(float *dx, uint16_t *dx_act, float *dw, const uint16_t *dy,
				   const uint16_t *x, const float *w, const float *rstd, int N,
				   int C, void *ws, unsigned blocks, void *stream);
/* The backward pass with the stream's gradient kept in bf16 too (dx bf16,
 * x bf16): dx = bf16(dx + the row's gradient, in fp32).  The CPU twin is
 * rmsnorm_bwd_cpu with dx rounded to bf16 after it. */
int rmsnorm_bwd_bx_bdx_cuda_blocks(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
				   const float *w, const float *rstd, int N, int C, void *ws,
				   unsigned blocks, void *stream);
/* The backward pass's device workspace (per-block partial sums of dw):
 * bytes for N rows of C; the same bits run to run.  C at most 7168 (the
 * warps' shared rows must fit in a block's shared memory). */
size_t rmsnorm_bwd_cuda_workspace(int N, int C);

#ifdef __cplusplus
}
#endif

#endif
