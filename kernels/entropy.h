/* entropy.h: the entropy of the softmax of each row of logits, and its
 * gradient, from the logits and their row log-sum-exp (xent_fwd's lse),
 * which RL needs per token (the entropy statistic, PPO's entropy bonus).
 *
 * logits [N, V]; lse [N].  With p = exp(z - lse):
 *   forward:  ent[n] = sum_v p_v (lse[n] - z_v)
 *   backward: dz[n, v] = dent[n] * -p_v (log p_v + H_n), H_n the row's
 *             entropy (recomputed), dz fp32 [N, V], overwritten; a row
 *             with dent[n] == 0 gets zeros. */
#ifndef LMPIPE_ENTROPY_H
#define LMPIPE_ENTROPY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void entropy_fwd_cpu(float *ent, const float *logits, const float *lse, int N, int V);
void entropy_bwd_cpu(float *dz, const float *logits, const float *lse, const float *dent,
		     int N, int V);

/* CUDA twins: bf16 logits (uint16_t bit patterns), computed in fp32 with
 * one block a row; everything else fp32 device memory. */
int entropy_fwd_cuda(float *ent, const uint16_t *logits, const float *lse, int N, int V,
		     void *stream);
int entropy_bwd_cuda(float *dz, const uint16_t *logits, const float *lse, const float *dent,
		     int N, int V, void *stream);

#ifdef __cplusplus
}
#endif

#endif
