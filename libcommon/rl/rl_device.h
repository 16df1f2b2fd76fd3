/* rl_device.h: rl-update's losses on the model's backend: after a
 * micro-batch's forward pass, the rows' inputs are uploaded (scores,
 * aggregation weights, the rollout's and the reference's log-probs), the
 * loss op (kernels/rl_tok.h, through the op table) turns the per-token
 * cross-entropy left on the device into each token's loss weight, and the
 * weighted backward pass reads those weights where they are.  The
 * statistics of the metrics line stay on the device until rl_dev_take
 * reads them (once per optimizer step): no per-token array comes back.
 * PPO's op (kernels/rl_ppo_tok.h) also runs the value head on the final
 * hidden states and leaves the hidden states' gradient and the head's
 * gradient there; rl_dev_ppo_take reads the head's gradient with the
 * statistics. */
#ifndef LMPIPE_RL_DEVICE_H
#define LMPIPE_RL_DEVICE_H

#include "base/err.h"
#include "kernels/rl_tok.h"
#include "model/backend.h"
#include "model/model.h"
#include "rl/value_head.h"
#include "kernels/rl_ppo_tok.h"

typedef struct rl_dev {
	lm_backend *be;
	int maxB, maxT;
	float *w, *score, *old, *ref;  /* backend memory: [maxB*maxT] and [maxB] */
	double *row_w, *stats, *ws;    /* [maxB], [RL_ST_N], rl_tok_workspace(maxB) bytes */
	/* PPO (rl_dev_ppo_init): the value head [C + 1] and its gradient
	 * [C + 1], the per-token buffers [maxB*maxT] and dhidden [maxB*maxT,
	 * C], the statistics [RL_PPO_N], rl_ppo_workspace bytes */
	int C;
	float *head, *hgrad, *dent, *dvalue, *dhidden, *adv, *old_v, *ret;
	double *pstats, *pws;
} rl_dev;

/* Buffers for micro-batches of up to maxB rows of maxT tokens on be, the
 * statistics zeroed. */
int rl_dev_init(rl_dev *d, lm_backend *be, int maxB, int maxT, lm_err *e);
void rl_dev_free(rl_dev *d);

/* A policy-gradient micro-batch's inputs, host memory, for the model's
 * last forward shape [B, T]: score and row_w [B]; old (clip) and ref (KL)
 * [B*T] or NULL; entropy: sum the tokens' entropies too. */
typedef struct rl_pg_rows {
	const float *score;
	const double *row_w;
	const float *old, *ref;
	rl_tok_args a;
	int entropy;
} rl_pg_rows;

/* After model_forward with targets on m (m->be == d->be): the loss op,
 * then model_backward_ex with its weights; ACCUMULATES into m->grads. */
int rl_dev_pg(rl_dev *d, model *m, const rl_pg_rows *r, lm_err *e);
/* The same for DPO: rows 2k, 2k+1 the chosen and rejected responses of
 * pair k, ref [B] their reference log-likelihoods (host), npairs the
 * pairs of the optimizer step. */
int rl_dev_dpo(rl_dev *d, model *m, const double *ref, double beta, double npairs, lm_err *e);

/* The statistics since the last call into out (waits for the device, and
 * returns its first error), then zeroed there. */
int rl_dev_take(rl_dev *d, double out[RL_ST_N], lm_err *e);

/* PPO: the buffers above and those of PPO for hidden states of C floats,
 * the head's gradient and statistics zeroed. */
int rl_dev_ppo_init(rl_dev *d, lm_backend *be, int maxB, int maxT, int C, lm_err *e);
/* The value head's weights h->w, h->b to the device (after each step). */
void rl_dev_set_head(rl_dev *d, const value_head *h);
/* After model_forward on m: the head's values of all B*T tokens into
 * values (host memory; waits). */
int rl_dev_values(rl_dev *d, const model *m, float *values, lm_err *e);

/* A PPO micro-batch's inputs, host memory, for the model's last forward
 * shape [B, T]: old, adv, old_v, ret [B*T] at the counted tokens;
 * row_scale [B]. */
typedef struct rl_ppo_rows {
	const float *old, *adv, *old_v, *ret;
	const double *row_scale;
	rl_ppo_tok_args a;
} rl_ppo_rows;

/* After model_forward with targets on m: the tokens' entropies, the PPO
 * loss op, then model_backward_ex with its weights and gradients
 * (policy, entropy bonus, value head through the hidden states);
 * ACCUMULATES into m->grads, the head's gradient and the statistics on
 * the device. */
int rl_dev_ppo(rl_dev *d, model *m, const rl_ppo_rows *r, lm_err *e);
/* The PPO statistics and the head's gradient (into h->gw, h->gb) since
 * the last call (waits), then zeroed there. */
int rl_dev_ppo_take(rl_dev *d, double out[RL_PPO_N], value_head *h, lm_err *e);

#endif
