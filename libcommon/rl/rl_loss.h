/* rl_loss.h: the math of fine-tuning and RL (rl-update) on plain float
 * arrays: token entropy, masked reductions, group-normalised advantages,
 * policy-gradient losses (naive, GRPO-clip with clip-higher), the SFT and
 * GRPO microbatch steps with their gradient w.r.t. the policy log-probs
 * returned explicitly, DPO, the PPO value loss and GAE.
 *
 * The semantics follow the Stanford CS336 assignment 5 reference (the names
 * in brackets) so that its test snapshots check this code; where CS336 calls
 * backward() through a loss, these functions return d loss / d input.
 *
 * Layout: every [B, T] array is row-major, one row per sequence; masks are
 * bytes, nonzero meaning "counts" (a response token).  Sums run in double.
 *
 * To the model: logp_t = -CE_t (the token's cross-entropy), so a gradient
 * g_t = d loss / d logp_t reaches the logits as a cross-entropy backward in
 * which token t is weighted by -g_t: d loss / d z_t = -g_t (softmax(z_t) -
 * onehot(y_t)).  The entropy bonus goes through rl_entropy_grad instead. */
#ifndef LMPIPE_RL_LOSS_H
#define LMPIPE_RL_LOSS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Reduce over every element (CS336 dim=None). */
enum { RL_DIM_ALL = INT_MIN };

/* Entropy of softmax(logits) for each of rows rows of vocab logits
 * [compute_entropy]: out[r] = logsumexp(z) - sum_j p_j z_j. */
void rl_entropy(const float *logits, size_t rows, size_t vocab, float *out);
/* d H / d logits for one row: -p_j (log p_j + H).  grad has vocab entries. */
void rl_entropy_grad(const float *logits, size_t vocab, float *grad);

/* Masked reductions of x (shape[0..ndim-1], row-major) along dim (negative
 * counts from the end, or RL_DIM_ALL).  out gets the shape without that dim
 * (one element for RL_DIM_ALL).
 *   masked mean      [masked_mean]:      sum(x*m, dim) / sum(m, dim); 0/0 is NaN, as in torch
 *   masked normalize [masked_normalize]: sum(x*m, dim) / constant
 * Return 0, or -1 when dim is out of range. */
int rl_masked_mean(const float *x, const uint8_t *mask, const size_t *shape, int ndim,
		   int dim, float *out, lm_err *e);
int rl_masked_normalize(const float *x, const uint8_t *mask, const size_t *shape, int ndim,
			int dim, double constant, float *out, lm_err *e);

/* Group-normalised advantages [compute_group_normalized_rewards]: n rewards
 * in consecutive groups of group_size; adv = r - mean(group), divided by
 * (std + eps) when by_std (std unbiased, as torch.std).  Fails when n is not
 * a multiple of group_size, or when by_std and group_size < 2 (the std of
 * one sample is undefined). */
int rl_group_normalize(const float *rewards, size_t n, size_t group_size, int by_std,
		       double eps, float *adv, lm_err *e);

typedef enum rl_pg_type {
	RL_PG_NO_BASELINE,        /* -R * logp with the raw reward */
	RL_PG_REINFORCE_BASELINE, /* -A * logp with the advantage */
	RL_PG_GRPO_CLIP,          /* -min(ratio A, clip(ratio) A) */
} rl_pg_type;

/* Parse "no_baseline", "reinforce_with_baseline", "grpo_clip". */
int rl_pg_type_parse(const char *s, rl_pg_type *t, lm_err *e);

/* Per-token losses on [B, T] arrays; the score (reward or advantage) is one
 * per row.  dloss (may be NULL) gets d loss[b,t] / d logp[b,t].
 * Naive [compute_naive_policy_gradient_loss]: loss = -score[b] * logp. */
void rl_naive_pg_loss(const float *score, const float *logp, size_t B, size_t T,
		      float *loss, float *dloss);
/* GRPO-clip [compute_grpo_clip_loss]: ratio = exp(logp - old_logp),
 * loss = -min(ratio A, clip(ratio, 1 - clip_low, 1 + clip_high) A); clip_high
 * > clip_low is DAPO's clip-higher.  clipped (may be NULL) gets 1 where the
 * clipped term is the smaller one (then the gradient is 0). */
void rl_grpo_clip_loss(const float *adv, const float *logp, const float *old_logp,
		       size_t B, size_t T, float clip_low, float clip_high,
		       float *loss, float *dloss, uint8_t *clipped);

/* The three loss types behind one call [compute_policy_gradient_loss].
 * raw_rewards is needed by no_baseline, adv by the others, old_logp by
 * grpo_clip; a missing one is an error. */
typedef struct rl_pg_args {
	rl_pg_type type;
	const float *raw_rewards; /* [B] */
	const float *adv;         /* [B] */
	const float *old_logp;    /* [B, T] */
	float clip_low, clip_high;
} rl_pg_args;
int rl_pg_loss(const rl_pg_args *a, const float *logp, size_t B, size_t T,
	       float *loss, float *dloss, uint8_t *clipped, lm_err *e);

/* How per-token losses become one number per sequence. */
typedef enum rl_agg {
	RL_AGG_MASKED_MEAN, /* sum(m l) / sum(m) per row (GRPO); a row without tokens counts 0 */
	RL_AGG_NORMALIZE,   /* sum(m l) / constant per row (Dr. GRPO, SFT) */
} rl_agg;

/* SFT microbatch step [sft_microbatch_train_step]: loss =
 * -sum(m logp) / (constant * B * grad_accum), the mean over the batch of
 * the masked-normalised log-likelihood, scaled for gradient accumulation.
 * Writes d loss / d logp into grad ([B, T]) and returns the loss. */
double rl_sft_step(const float *logp, const uint8_t *mask, size_t B, size_t T,
		   int grad_accum, double constant, float *grad);

/* GRPO microbatch step [grpo_microbatch_train_step]: the per-token policy
 * gradient loss (plus kl_beta times the k3 estimate of KL(policy || ref),
 * exp(ref - logp) - (ref - logp) - 1, when ref_logp is given), aggregated per
 * row (agg), averaged over the batch and divided by grad_accum. */
typedef struct rl_grpo_args {
	rl_pg_args pg;
	rl_agg agg;
	double constant;         /* RL_AGG_NORMALIZE */
	int grad_accum;
	const float *ref_logp;   /* [B, T] or NULL */
	double kl_beta;
} rl_grpo_args;

typedef struct rl_step_stats {
	double loss;
	double clip_frac;  /* clipped tokens / response tokens */
	double kl;         /* mean k3 KL per response token (0 without ref) */
	double ratio_mean; /* mean exp(logp - old) per response token (grpo_clip) */
	size_t tokens;     /* response tokens */
} rl_step_stats;

/* Writes d loss / d logp into grad ([B, T]); fills st (may be NULL). */
int rl_grpo_step(const rl_grpo_args *a, const float *logp, const uint8_t *mask,
		 size_t B, size_t T, float *grad, rl_step_stats *st, lm_err *e);

/* Per-instance DPO loss [compute_per_instance_dpo_loss] from the summed
 * log-probs of the chosen and rejected responses under the policy and the
 * reference: -log sigmoid(beta ((lc - ref_c) - (lr - ref_r))).  d_lc and d_lr
 * (may be NULL) get its derivatives w.r.t. the policy's lc and lr. */
double rl_dpo_loss(double beta, double lc, double lr, double ref_c, double ref_r,
		   double *d_lc, double *d_lr);

/* PPO clipped value loss for one token: 0.5 max((v - ret)^2,
 * (old_v + clip(v - old_v, -clip, clip) - ret)^2); *dv gets d/dv. */
double rl_value_loss(float v, float old_v, float ret, float clip, double *dv);

/* Generalised advantage estimation over one sequence of T steps:
 * delta_t = r_t + gamma V_{t+1} - V_t, adv_t = delta_t + gamma lambda adv_{t+1},
 * ret_t = adv_t + V_t, with V_T = last_value (0 when the sequence ended,
 * the value estimate when it was cut off). */
void rl_gae(const float *rewards, const float *values, size_t T, float last_value,
	    float gamma, float lambda, float *adv, float *ret);

#endif
