/* rl_ppo_tok.h: rl-update's PPO loss where the tokens' log-probs and the final
 * hidden states are: the value head (a d_model -> 1 linear layer, head =
 * [w_0 .. w_{C-1}, b], fp32) on the hidden states, each token's clipped
 * policy loss, clipped value loss and entropy bonus, and the gradients the
 * weighted backward pass reads (the log-probs' weights, the entropies'
 * gradient, the hidden states' gradient through the head) with the head's
 * own gradient and the statistics of the metrics line added to device
 * memory, so that a PPO micro-batch crosses to the host only as those few
 * scalars.  The arithmetic is that of libcommon/rl (rl_ppo_loss, whose
 * clipped policy term is rl_grpo_clip_loss's and value term rl_value_loss's,
 * and value_head.c's vh_forward and vh_backward); the C twin reproduces its
 * results bit for bit (tests/unit/test_rl_ppo_tok.c).
 *
 * A [B, T] micro-batch, N = B*T tokens: ce [N] the tokens' cross-entropy
 * (logp = -ce; 0 where not counted), targets [N] (a token counts where its
 * target is >= 0), hidden [N, C] the final hidden states (model_hidden, in
 * the backend's activation type: fp32 on the CPU, bf16 on CUDA), ent [N]
 * the tokens' entropies; old, adv, old_v, ret [N] the rollout's log-probs,
 * the advantages, the values before the update and the returns, at the
 * counted tokens (anything elsewhere); row_scale [B] each row's aggregation
 * weight 1 / (denominator * minibatch).
 *
 *   value:  v = b + sum_j w_j h_j (double, j in order), as float
 *   policy: ratio = exp(logp - old), pg = -min(ratio A, clip(ratio) A),
 *           dpg = 0 where the clipped term is the smaller, else -A ratio
 *   value:  rl_value_loss(v, old_v, ret, vf_clip): vf, dv
 *   row:    loss = scale * sum_t (pg + vf_coef vf - ent_coef H)
 *   out:    w = -(float)(scale dpg), dvalue = (float)(scale vf_coef dv),
 *           dent = (float)(-scale ent_coef) at counted tokens, 0 elsewhere;
 *           dhidden [N, C] (fp32) = dvalue w_j (0 at uncounted tokens);
 *           hgrad [C + 1] ACCUMULATES the head's gradient (the micro-
 *           batch's sums over counted tokens in order, float, then added);
 *           stats[RL_PPO_*] ACCUMULATE (doubles).
 * ws: rl_ppo_workspace(B, T, C) bytes of the backend's memory. */
#ifndef LMPIPE_RL_PPO_TOK_H
#define LMPIPE_RL_PPO_TOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rl_ppo_stat {
	RL_PPO_LOSS, RL_PPO_PG, RL_PPO_VF, RL_PPO_ENT, RL_PPO_CLIPPED, RL_PPO_VF_CLIPPED,
	RL_PPO_RATIO, RL_PPO_TOKENS, RL_PPO_LOGP, RL_PPO_N
};

typedef struct rl_ppo_tok_args {
	float clip_low, clip_high; /* the ratio is clipped to [1 - clip_low, 1 + clip_high] */
	float vf_clip;             /* the value to old_value +- vf_clip */
	double vf_coef, ent_coef;
} rl_ppo_tok_args;

/* Tokens of one partial sum of the head's gradient on CUDA. */
enum { RL_PPO_CHUNK = 256 };

/* Bytes of workspace for B rows of T tokens of width C: the rows' partial
 * statistics and (CUDA) the chunks' partial head gradients. */
static inline size_t rl_ppo_workspace(int B, int T, int C)
{
	size_t b = (size_t)(B > 0 ? B : 1), n = b * (size_t)(T > 0 ? T : 1);
	size_t chunks = (n + RL_PPO_CHUNK - 1) / RL_PPO_CHUNK;
	return b * RL_PPO_N * sizeof(double) + chunks * ((size_t)C + 1) * sizeof(float);
}

/* values[i] = the head on hidden row i, for N rows (the value line above). */
void rl_ppo_value_cpu(float *values, const float *hidden, const float *head, int N, int C);

void rl_ppo_tok_cpu(float *w, float *dent, float *dvalue, float *dhidden, float *hgrad,
		    double *stats, double *ws, const float *ce, const int32_t *targets,
		    const float *hidden, const float *head, const float *ent, const float *old,
		    const float *adv, const float *old_v, const float *ret,
		    const double *row_scale, int B, int T, int C, rl_ppo_tok_args a);

/* CUDA twins: every pointer device memory, hidden bf16. */
int rl_ppo_value_cuda(float *values, const void *hidden, const float *head, int N, int C,
		      void *stream);
int rl_ppo_tok_cuda(float *w, float *dent, float *dvalue, float *dhidden, float *hgrad,
		    double *stats, double *ws, const float *ce, const int32_t *targets,
		    const void *hidden, const float *head, const float *ent, const float *old,
		    const float *adv, const float *old_v, const float *ret,
		    const double *row_scale, int B, int T, int C, rl_ppo_tok_args a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
