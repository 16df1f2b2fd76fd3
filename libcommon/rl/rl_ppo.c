/* rl_ppo.c: PPO rewards, whitening and loss (see rl_ppo.h); the clipped
 * policy loss and the value loss are rl_loss.c's. */
#include "rl/rl_ppo.h"

#include <math.h>

#include "rl/rl_loss.h"

static const double WHITEN_EPS = 1e-8;

void rl_ppo_rewards(const float *old_logp, const float *ref_logp, size_t n, double reward,
		    double kl_coef, float *rewards)
{
	for (size_t t = 0; t < n; t++)
		rewards[t] = ref_logp ? (float)(-kl_coef * ((double)old_logp[t] - ref_logp[t])) : 0.0f;
	if (n)
		rewards[n - 1] += (float)reward;
}

void rl_whiten(float *x, size_t n)
{
	if (n == 0)
		return;
	double s = 0, ss = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	double mean = s / (double)n;
	for (size_t i = 0; i < n; i++)
		ss += ((double)x[i] - mean) * ((double)x[i] - mean);
	double inv = 1.0 / sqrt(ss / (double)n + WHITEN_EPS);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(((double)x[i] - mean) * inv);
}

double rl_ppo_loss(const rl_ppo_args *a, const float *logp, const float *old_logp,
		   const float *adv, const float *values, const float *old_values,
		   const float *returns, const float *entropy, size_t n, double scale,
		   float *dlogp, float *dvalue, float *dent, rl_ppo_stats *st)
{
	double total = 0;
	for (size_t t = 0; t < n; t++) {
		float pg, dpg;
		uint8_t clipped;
		rl_grpo_clip_loss(&adv[t], &logp[t], &old_logp[t], 1, 1, a->clip_low, a->clip_high,
				  &pg, &dpg, &clipped);
		double dv;
		double vf = rl_value_loss(values[t], old_values[t], returns[t], a->vf_clip, &dv);
		double vu = (double)values[t] - returns[t];
		total += pg + a->vf_coef * vf - a->ent_coef * entropy[t];
		dlogp[t] = (float)(scale * dpg);
		dvalue[t] = (float)(scale * a->vf_coef * dv);
		dent[t] = (float)(-scale * a->ent_coef);
		if (st) {
			st->pg += pg;
			st->vf += vf;
			st->entropy += entropy[t];
			st->clipped += clipped;
			st->vf_clipped += 0.5 * vu * vu < vf; /* the clipped error was the larger */
			st->ratio += exp((double)logp[t] - old_logp[t]);
			st->tokens++;
		}
	}
	return scale * total;
}
