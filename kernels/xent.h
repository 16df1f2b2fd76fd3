/* xent.h: softmax cross-entropy over a vocabulary, numerically stable.
 *
 * logits [N, V]; targets [N] (a negative target is ignored: loss 0, no
 * gradient).  The forward pass writes loss[N] = lse[n] - logits[n, t] and
 * lse[N] = log sum_v exp(logits[n, v]) (lse.h's row log-sum-exp).
 * The backward pass overwrites dlogits[n, v] = (softmax - onehot) * dloss[n];
 * dlogits may be the logits buffer itself (in place). */
#ifndef LMPIPE_XENT_H
#define LMPIPE_XENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void xent_fwd_cpu(float *loss, float *lse, const float *logits, const int32_t *targets,
		  int N, int V);
void xent_bwd_cpu(float *dlogits, const float *logits, const float *lse,
		  const int32_t *targets, const float *dloss, int N, int V);

/* CUDA twin: bf16 logits and dlogits (uint16_t bit patterns), fp32 loss and
 * lse.  The forward pass also adds the losses to *loss_sum (device, double,
 * a fixed order: the same run to run; NULL: not summed).  The backward
 * pass's factor for row n is scale * weights[n] (weights NULL: scale). */
int xent_fwd_cuda(float *loss, float *lse, const uint16_t *logits, const int32_t *targets,
		  int N, int V, double *loss_sum, void *stream);
int xent_bwd_cuda(uint16_t *dlogits, const uint16_t *logits, const float *lse,
		  const int32_t *targets, const float *weights, float scale, int N, int V,
		  void *stream);
/* The same on fp32 logits (the fused LM head's chunks); dlogits bf16. */
int xent_fwd_f32_cuda(float *loss, float *lse, const float *logits, const int32_t *targets,
		      int N, int V, double *loss_sum, void *stream);
int xent_bwd_f32_cuda(uint16_t *dlogits, const float *logits, const float *lse,
		      const int32_t *targets, const float *weights, float scale, int N, int V,
		      void *stream);
/* The LM head's fused pass on a chunk of bf16 logits: the forward pass as
 * xent_fwd_cuda, then (grad nonzero) the gradient, factor scale, written
 * over the logits in place; each row read from memory once when V is a
 * multiple of 8 (held in registers up to V = 32768, else read again from
 * L2), else the two passes above. */
int xent_fused_cuda(uint16_t *logits, float *loss, float *lse, const int32_t *targets,
		    float scale, int N, int V, double *loss_sum, int grad, void *stream);
/* The same, done only if *guard (device memory) is set when its kernels
 * start (the LM head's fallback, kernels/head_exp.h). */
int xent_fused_guarded_cuda(uint16_t *logits, float *loss, float *lse, const int32_t *targets,
			    float scale, int N, int V, double *loss_sum, int grad,
			    const int *guard, void *stream);
/* *loss_sum += the sum of loss[0, N), as the passes above add theirs. */
int xent_sum_cuda(double *loss_sum, const float *loss, int N, void *stream);

#ifdef __cplusplus
}
#endif

#endif
