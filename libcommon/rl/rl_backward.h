/* rl_backward.h: the model's backward pass with one loss weight per token,
 * which the RL losses need (a token's weight is -d loss / d logp of it:
 * see rl_loss.h), and optionally extra gradients on the logits (an entropy
 * bonus) and on the final hidden states (a value head, PPO).
 *
 * model_backward (model.h) scales every token's cross-entropy gradient by
 * one factor.  This runs the same backward pass through a copy of the
 * model's op table whose cross-entropy backward takes the per-token weights
 * instead (and adds the extra logit gradient), and whose matmul backward
 * adds the extra hidden-state gradient where the LM head's input gradient
 * is formed, so the model code is used unchanged and any backend works.
 * One call at a time per process (the weights live in the interposed ops). */
#ifndef LMPIPE_RL_BACKWARD_H
#define LMPIPE_RL_BACKWARD_H

#include "base/err.h"
#include "model/model.h"

/* After model_forward with targets: ACCUMULATE into m->grads the gradient
 * of sum_t weights[t] * CE_t over the B*T tokens of the last forward
 * (weights in host memory; tokens with a negative target get none). */
int rl_backward_tokens(model *m, const float *weights, lm_err *e);

/* The same, plus the gradient of a loss that also depends on the logits
 * through dlogits ([B*T, vocab], d loss / d logits, added to the weighted
 * cross-entropy gradient) and on the final hidden states (model_hidden)
 * through dhidden ([B*T, d_model]).  Both host memory, either may be NULL. */
int rl_backward_extra(model *m, const float *weights, const float *dlogits,
		      const float *dhidden, lm_err *e);

#endif
