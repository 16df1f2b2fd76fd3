/* head_exp.h: the LM head's cross-entropy without a pass over the logits
 * (CUDA only; the CPU's meaning is the backend's head_xent).
 *
 * A chunk of N rows: x [N, C], the head's weight w [V, C], targets [N]
 * (negative: ignored), the gradient's factor `scale`.  The usual way
 * writes the logits z = x w^T, reads them back for the softmax and writes
 * dz = scale (softmax(z) - onehot(t)) over them: 4 N V bytes through
 * memory (1.65 GB a 8192-row chunk at V = 50304).  Here the product's
 * epilogue stores E = exp(z) instead (kernels/gemm.h, gemm_exp_cuda), with
 * no shift, and each row's sum of exponentials tile by tile; then
 *
 *   S = sum of the row's partial sums      lse = log S
 *   z_t = x . w[t] (fp32)                  loss = lse - z_t
 *   rs = scale / S (0 for an ignored row)  E[n, t] = exp(z_t) - S
 *
 * so that dz = rs E exactly where the softmax's target entry, P_t - 1,
 * would lose its digits if it were formed from a rounded exp(z_t).  The
 * products then give dx = rs (E w) (head_exp_dx_cuda, from an fp32 E w)
 * and dW += E^T (rs x) (xs = rs x, rounded to bf16).
 *
 * exp(z) without a shift is in range only while S stays in [2^-60,
 * 2^120] (lse in [-41.6, 83.2]); head_exp_finish_cuda sets *flag for a
 * chunk where any row's is not, and the fallback, queued after it in any
 * case and a no-op unless *flag is set, redoes the chunk the usual way:
 * the logits by gemm_tn_guarded_cuda, xent_fused_guarded_cuda over them,
 * and head_exp_plain_cuda (rs = 1, xs = x), so that the same two
 * products that follow give the usual gradients.  Nothing reads *flag on
 * the host: a captured step holds every launch.
 *
 * C a multiple of 8 and V a multiple of 8; pointers 16-byte aligned.
 * Each returns 0, or -1 if the launch failed. */
#ifndef LMPIPE_HEAD_EXP_H
#define LMPIPE_HEAD_EXP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* From gemm_exp_cuda's E and part (ntn partial sums a row): loss[N], lse[N],
 * and *flag set where a row is out of range (gemm_exp_cuda zeroed it);
 * with grad also rs[N], xs[N, C] and E's target entries. */
int head_exp_finish_cuda(uint16_t *E, float *rs, uint16_t *xs, float *loss, float *lse,
			 int *flag, const float *part, int ntn, const uint16_t *x,
			 const uint16_t *w, const int32_t *targets, float scale, int N, int C,
			 int V, int grad, void *stream);
/* The fallback's last step, only if *flag: rs[N] = 1, xs = x. */
int head_exp_plain_cuda(float *rs, uint16_t *xs, const uint16_t *x, const int *flag, int N,
			int C, void *stream);
/* dx[n, :] = rs[n] dxf[n, :], rounded to bf16. */
int head_exp_dx_cuda(uint16_t *dx, const float *dxf, const float *rs, int N, int C, void *stream);

#ifdef __cplusplus
}
#endif

#endif
