/* logit_variants.h: the variants of the LM head's output: soft-capping of
 * the logits and the z-loss, with the cross-entropy backward pass that
 * takes both.
 *
 * Soft-capping (in place, n values):  y = cap tanh(z / cap).
 *
 * logit_bwd, for row n of logits y (after any capping; dlogits may be
 * logits itself) with lse[n] of y (xent.h's forward) and factor f[n]:
 *   g = f[n] ((1 + 2 z_loss lse[n]) softmax(y) - onehot(target))  (0 when
 *       the target is negative: ignored tokens have no loss),
 *   g += extra[n] (a gradient with respect to y from elsewhere; NULL: none),
 *   dlogits = cap ? g (1 - (y / cap)^2) : g    (the gradient w.r.t. z).
 * That is the gradient of f (CE + z_loss lse^2): the PaLM z-loss, which
 * keeps the log-normaliser near 0. */
#ifndef LMPIPE_LOGIT_VARIANTS_H
#define LMPIPE_LOGIT_VARIANTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void softcap_fwd_cpu(float *x, size_t n, float cap);
void logit_bwd_cpu(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
		   const float *f, const float *extra, int N, int V, float z_loss, float cap);

/* CUDA twins.  softcap on bf16 (act) or fp32 (the fused head's chunks);
 * logit_bwd with f[n] = scale * weights[n] (weights NULL: scale), bf16
 * dlogits from bf16 or fp32 logits, extra fp32 (NULL: none). */
int softcap_fwd_cuda(uint16_t *x, size_t n, float cap, void *stream);
int softcap_fwd_f32_cuda(float *x, size_t n, float cap, void *stream);
int logit_bwd_cuda(uint16_t *dlogits, const uint16_t *logits, const float *lse,
		   const int32_t *targets, const float *weights, const float *extra, float scale,
		   int N, int V, float z_loss, float cap, void *stream);
int logit_bwd_f32_cuda(uint16_t *dlogits, const float *logits, const float *lse,
		       const int32_t *targets, const float *weights, const float *extra,
		       float scale, int N, int V, float z_loss, float cap, void *stream);

#ifdef __cplusplus
}
#endif

#endif
