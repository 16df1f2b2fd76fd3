/* rlupdate.h: one policy update of rl-update: read scored rollouts (GRPO
 * family), {prompt, response} records (SFT) or {prompt, chosen, rejected}
 * records (DPO, against a reference checkpoint), compute the loss per
 * sequence with rl_loss.h, step AdamW, write the new checkpoint and one
 * metrics line.
 *
 * The model's backward pass (model.h) scales every token's cross-entropy
 * gradient by one factor, so each sequence is run on its own, with the
 * factor its loss gives its tokens.  That is exact for SFT and for the
 * no_baseline and reinforce_with_baseline losses (one weight per
 * sequence) and for DPO (one weight per response); grpo_clip and the KL
 * penalty weight tokens one by one and need a per-token backward, which
 * model.h does not offer yet: they are refused. */
#ifndef LMPIPE_RLUPDATE_H
#define LMPIPE_RLUPDATE_H

#include <stdio.h>

#include "err.h"
#include "rl_loss.h"

typedef enum rlu_algo { RLU_GRPO, RLU_SFT, RLU_DPO } rlu_algo;

typedef struct rlu_opts {
	rlu_algo algo;
	const char *checkpoint;   /* the policy */
	const char *ref;          /* DPO: the reference policy */
	double beta;              /* DPO */
	const char *tokenizer;    /* SFT: to encode prompt and response */
	const char *out_dir;
	const char *device;
	rl_pg_type loss;
	int no_std;               /* Dr. GRPO: advantages r - mean, no std */
	double adv_eps;
	rl_agg agg;
	double constant;          /* RL_AGG_NORMALIZE; 0: the longest response */
	long long batch;          /* sequences per optimizer step; 0: all */
	long long epochs;
	double lr, weight_decay, beta1, beta2, clip_grad;
	int threads;
} rlu_opts;

/* Run the update on the records of in; the metrics line goes to metrics. */
int rlu_run(const rlu_opts *o, FILE *in, const char *in_name, FILE *metrics, lm_err *e);

#endif
