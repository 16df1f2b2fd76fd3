/* headnorm.h: RMSNorm of the rows of an activation tensor with gains of the
 * row's length: QK-norm, each head vector of q and k (rows of D) normalised
 * before RoPE, as Qwen3's q_norm and k_norm.
 *
 *   y[r, d] = x[r, d] * rstd[r] * w[d],  rstd[r] = 1 / sqrt(mean_d x[r, d]^2 + eps)
 *
 * x, y, dy, dx are rows x D (y may be x: in place); w, dw are [D]; rstd
 * [rows] is saved by the forward pass.  The backward pass OVERWRITES dx (dx
 * may be dy) and ACCUMULATES into dw.
 *
 * qkv_headnorm is the forward pass for decoding, in place on the fused
 * projection qkv[N][(H + 2 Hkv) D] (gqa.h's layout): each token's H query
 * heads with gains wq, its Hkv key heads with wk, the values untouched;
 * no rstd is kept. */
#ifndef LMPIPE_HEADNORM_H
#define LMPIPE_HEADNORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void headnorm_fwd_cpu(float *y, float *rstd, const float *x, const float *w, size_t rows, int D,
		      float eps);
void headnorm_bwd_cpu(float *dx, float *dw, const float *dy, const float *x, const float *w,
		      const float *rstd, size_t rows, int D);
void qkv_headnorm_cpu(float *qkv, const float *wq, const float *wk, int N, int H, int Hkv, int D,
		      float eps);

/* CUDA twin: x, y, dy, dx bf16 (uint16_t bit patterns), w, dw, rstd fp32,
 * device memory; D at most HEADNORM_CUDA_D_MAX.  The backward pass sums dw
 * in per-block partials of its workspace in a fixed order (the same bits
 * run to run). */
enum { HEADNORM_CUDA_D_MAX = 256 };
int headnorm_fwd_cuda(uint16_t *y, float *rstd, const uint16_t *x, const float *w, size_t rows,
		      int D, float eps, void *stream);
int headnorm_bwd_cuda(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
		      const float *w, const float *rstd, size_t rows, int D, void *ws, void *stream);
size_t headnorm_bwd_cuda_workspace(size_t rows, int D);
int qkv_headnorm_cuda(uint16_t *qkv, const float *wq, const float *wk, int N, int H, int Hkv,
		      int D, float eps, void *stream);

#ifdef __cplusplus
}
#endif

#endif
