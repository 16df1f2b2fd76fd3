/* rl_update_step.c: the optimizer step that ends a batch of rl-update's SFT,
 * GRPO and DPO loops (PPO's also steps the value head, on the joint norm). */
#include "app/rl_update_internal.h"
#include "model/optimizer.h"

void policy_step(const rlu_opts *o, model *m, optim *opt, stats *st)
{
	double gn = optim_grad_norm(m);
	st->gnorm_sum += gn;
	st->steps++;
	optim_step(opt, m, o->lr, clip_factor(gn, o->clip_grad));
}
