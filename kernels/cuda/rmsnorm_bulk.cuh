// rmsnorm_bulk.cuh: rmsnorm.cu's entry to the backward pass whose rows come
// by bulk copies (rmsnorm_bulk.cu).
#ifndef LMPIPE_RMSNORM_BULK_CUH
#define LMPIPE_RMSNORM_BULK_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// rmsnorm_bwd_act_cuda's work for C = 256 G (G <= 4, pointers 16-byte
// aligned, checked by the caller): dx += the row's gradient, its bf16 copy
// in dx_act when not NULL, and one row of dw partials a block in ws, at
// most max_blocks of them (*blocks says how many).  0 when launched, -1 if
// the launch failed, 1 when not taken (LMPIPE_RMSNORM_BULK=0, a GPU
// before sm_90, or C too large): the caller then runs its own kernel.
// x fp32, or bf16 (the residual stream kept in bf16); dx fp32, or bf16 (its
// gradient kept in bf16, with x bf16 and no dx_act).
int rmsnorm_bwd_bulk(float *dx, uint16_t *dx_act, float *ws, const uint16_t *dy, const float *x,
		     const float *w, const float *rstd, int N, int C, unsigned max_blocks,
		     unsigned *blocks, cudaStream_t st);
int rmsnorm_bwd_bulk(float *dx, uint16_t *dx_act, float *ws, const uint16_t *dy,
		     const __nv_bfloat16 *x, const float *w, const float *rstd, int N, int C,
		     unsigned max_blocks, unsigned *blocks, cudaStream_t st);

int rmsnorm_bwd_bulk(__nv_bfloat16 *dx, uint16_t *dx_act, float *ws, const uint16_t *dy,
		     const __nv_bfloat16 *x, const float *w, const float *rstd, int N, int C,
		     unsigned max_blocks, unsigned *blocks, cudaStream_t st);

#endif
