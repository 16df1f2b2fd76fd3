/* rl_ppo.h: the math of PPO in the classic RLHF recipe (Ziegler et al.
 * 2019, Ouyang et al. 2022) on one completion of n tokens, plain float
 * arrays in host memory:
 *
 *   rewards   r_t = -kl_coef (old_logp_t - ref_logp_t), plus the scalar
 *             reward at the last token (a KL penalty to the reference,
 *             estimated with the log-probs the rollouts were sampled with)
 *   GAE       adv, returns = rl_gae (rl_loss.h) over r and the old values,
 *             the completion's end being terminal (value 0 after it)
 *   loss      per token: the clipped policy loss of rl_grpo_clip_loss with
 *             the token's advantage, plus vf_coef times the clipped value
 *             loss rl_value_loss, minus ent_coef times the token's entropy;
 *             the sum over tokens times a scale (the aggregation).
 *
 * rl_ppo_loss returns the gradients w.r.t. the log-probs, the values and
 * the entropies, which rl-update sends back through the model (the
 * log-probs as cross-entropy weights, the entropies through
 * rl_entropy_grad, the values through the value head, value_head.h). */
#ifndef LMPIPE_RL_PPO_H
#define LMPIPE_RL_PPO_H

#include <stddef.h>

/* Per-token rewards of one completion (ref_logp NULL: no KL penalty). */
void rl_ppo_rewards(const float *old_logp, const float *ref_logp, size_t n, double reward,
		    double kl_coef, float *rewards);

/* Whiten in place: (x - mean) / sqrt(var + 1e-8), the variance biased. */
void rl_whiten(float *x, size_t n);

typedef struct rl_ppo_args {
	float clip_low, clip_high; /* the ratio is clipped to [1 - clip_low, 1 + clip_high] */
	float vf_clip;             /* the value is clipped to old_value +- vf_clip */
	double vf_coef, ent_coef;
} rl_ppo_args;

/* Token sums over the calls (not scaled): add, do not reset. */
typedef struct rl_ppo_stats {
	double pg, vf, entropy;    /* policy loss, value loss, entropy */
	double clipped, vf_clipped, ratio;
	long long tokens;
} rl_ppo_stats;

/* The PPO loss of one completion: scale * sum_t [pg_t + vf_coef vf_t -
 * ent_coef H_t].  dlogp, dvalue, dent (n each) get its derivatives w.r.t.
 * logp_t, values_t and H_t; st (may be NULL) gets the sums. */
double rl_ppo_loss(const rl_ppo_args *a, const float *logp, const float *old_logp,
		   const float *adv, const float *values, const float *old_values,
		   const float *returns, const float *entropy, size_t n, double scale,
		   float *dlogp, float *dvalue, float *dent, rl_ppo_stats *st);

#endif
