/* rl_update_internal.h: what rl_update.c shares with the PPO update
 * (rl_update_ppo.c): the sequences read from the records, the per-sequence
 * scratch, the statistics of the metrics line, and the forward passes. */
#ifndef LMPIPE_RL_UPDATE_INTERNAL_H
#define LMPIPE_RL_UPDATE_INTERNAL_H

#include "app/rl_update.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "rl/rl_ppo.h"
#include "rl/value_head.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

/* One training sequence: inputs ids[0..T) predict targets[0..T); targets
 * of prompt tokens are -1, so only response tokens count (the last n_resp
 * positions). */
typedef struct seq {
	int32_t *ids, *targets;
	int T, n_resp;
	double reward, adv;
	double ref_logp;          /* DPO: summed response log-probs under the reference */
	float *old_logp;          /* [T]: the rollout's log-probs at the response targets */
	float *ref_tok;           /* [T]: the reference's, for the KL penalty */
	float *old_v, *adv_tok, *ret_tok; /* PPO, [n_resp]: values before the update, GAE, returns */
	unsigned long lineno;
	char *group;
} seq;

typedef struct seqs {
	seq *s;
	size_t n, cap;
	const bpe_tokenizer *tok;
	bpe_worker *w;
} seqs;

typedef struct stats {
	double loss, entropy_sum, gnorm_sum, logp_sum;
	long long tokens, steps;
	double clipped, kl_sum, ratio_sum; /* token sums (GRPO) */
	double margin_sum;        /* DPO: (lc - ref_c) - (lr - ref_r) */
	long long pairs, right;   /* DPO: pairs seen, pairs with a positive margin */
	rl_ppo_stats ppo;         /* PPO: token sums over all epochs */
	double adv_mean, adv_std, ret_mean, value_mean, kl_mean; /* PPO: per token, before the update */
	int value_head_loaded;    /* PPO: the checkpoint had a value head */
} stats;

/* Per-sequence scratch, sized for the longest sequence. */
typedef struct work {
	float *logits, *logp, *grad, *w;
	uint8_t *mask;
} work;

int work_init(work *w, int maxT, int V, lm_err *e);
void work_free(work *w);

/* Forward s; the response tokens' log-probs into w->logp, their mask into
 * w->mask, the logits into w->logits, and (when st) their entropies into
 * the stats. */
int seq_forward(model *m, const seq *s, work *w, stats *st, lm_err *e);

/* The reference's per-token log-probs of every sequence (s->ref_tok). */
int reference_tokens(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		     int maxT, seqs *v, lm_err *e);

/* Before optimizer step st->steps + 1: the loss so far and the gradient
 * norm must be finite, or -1 with a message naming the step (nothing of
 * the run is written then). */
int rlu_check_finite(const stats *st, double gnorm, lm_err *e);

/* PPO: values, GAE and returns of every sequence, then the epochs of
 * minibatch steps on the policy m and the value head h. */
int ppo_train(const rlu_opts *o, model *m, optim *opt, value_head *h, seqs *v, stats *st,
	      lm_err *e);

#endif
