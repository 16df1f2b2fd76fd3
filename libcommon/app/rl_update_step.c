/* rl_update_step.c: the optimizer step that ends a batch of rl-update's SFT,
 * GRPO and DPO loops (PPO's also steps the value head, on the joint norm),
 * and the finite guard before every step. */
#include "app/rl_update_internal.h"

#include <math.h>

#include "cli/progress.h"
#include "model/optimizer.h"

int rlu_check_finite(rlu_par *par, const stats *st, double gnorm, lm_err *e)
{
	double loss = st->loss;  /* data parallel: this rank's part, so the ranks decide together */
	if (par->world > 1 && rlu_par_sum(par, &loss, 1, e))
		return -1;
	const char *what = !isfinite(loss) ? "loss" : !isfinite(gnorm) ? "gradient norm" : NULL;
	if (what)
		return lm_seterr(e, "step %lld: the %s is not finite (%g); stopped, nothing written",
				 st->steps + 1, what, !isfinite(loss) ? loss : gnorm);
	return 0;
}

int policy_step(const rlu_opts *o, rlu_par *par, model *m, optim *opt, stats *st, double t0,
		lm_err *e)
{
	double t1 = lm_now();
	double gn = optim_grad_norm(m);
	if (rlu_check_finite(par, st, gn, e))
		return -1;
	st->gnorm_sum += gn;
	st->steps++;
	optim_step(opt, m, o->lr, clip_factor(gn, o->clip_grad));
	int rc = m->be->sync(m->be, e);
	st->t_fb += t1 - t0;
	st->t_opt += lm_now() - t1;
	return rc;
}
