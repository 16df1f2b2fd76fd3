/* rl_backward.h: the model's backward pass with one loss weight per token,
 * which the RL losses need (a token's weight is -d loss / d logp of it:
 * see rl_loss.h), and optionally extra gradients on the logits (an entropy
 * bonus) and on the final hidden states (a value head, PPO).
 *
 * They are model_backward_ex (model.h) with scale 1, kept as the RL code's
 * own names for the two uses. */
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
