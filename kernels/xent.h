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

void xent_fwd_cpu(float *loss, float *lse, const float *logits, const int32_t *targets,
		  int N, int V);
void xent_bwd_cpu(float *dlogits, const float *logits, const float *lse,
		  const int32_t *targets, const float *dloss, int N, int V);

#endif
