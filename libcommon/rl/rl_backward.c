/* rl_backward.c: the per-token weighted backward of rl_backward.h, as
 * model_backward_ex's weights and extra gradients. */
#include "rl/rl_backward.h"

int rl_backward_extra(model *m, const float *weights, const float *dlogits,
		      const float *dhidden, lm_err *e)
{
	model_grad_in g = { .scale = 1.0f, .weights = weights, .dlogits = dlogits,
			    .dhidden = dhidden };
	return model_backward_ex(m, &g, e);
}

int rl_backward_tokens(model *m, const float *weights, lm_err *e)
{
	return rl_backward_extra(m, weights, NULL, NULL, e);
}
