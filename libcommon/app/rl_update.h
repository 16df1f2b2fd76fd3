/* rl_update.h: one policy update of rl-update: read scored rollouts (GRPO
 * family), {prompt, response} records (SFT) or {prompt, chosen, rejected}
 * records (DPO, against a reference checkpoint), compute the loss per
 * sequence with rl_loss.h, step AdamW, write the new checkpoint and one
 * metrics line.
 *
 * Sequences go through the model in micro-batches (padded to the longest,
 * log-probs and entropies computed on the device); the gradient of each
 * sequence's loss w.r.t. each token's log-prob (rl_grpo_step, the code the
 * CS336 conformance tests check) becomes that token's cross-entropy weight
 * in one backward pass per micro-batch; rl/rl_device.h computes both on
 * the model's device (the op kernels/rl_tok.h, the same arithmetic), so
 * only a few statistics come back per optimizer step.  DPO weights every
 * token of a response alike (rl_dpo_loss).  PPO (rl_ppo.h) adds a value head on the final
 * hidden state (value_head.h), trained with the policy through the shared
 * trunk. */
#ifndef LMPIPE_RL_UPDATE_H
#define LMPIPE_RL_UPDATE_H

#include <stdio.h>

#include "base/err.h"
#include "model/profile.h"
#include "rl/rl_loss.h"

typedef enum rlu_algo { RLU_GRPO, RLU_SFT, RLU_DPO, RLU_PPO } rlu_algo;

typedef struct rlu_opts {
	rlu_algo algo;
	const char *checkpoint;   /* the policy */
	const char *ref;          /* DPO, KL penalty: the reference policy */
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
	long long micro_batch;    /* sequences per forward and backward pass; 0: the default */
	long long epochs;
	double clip_low, clip_high; /* grpo_clip: ratio clipped to [1 - low, 1 + high] */
	double kl_beta;           /* GRPO: KL(policy || ref) penalty; PPO: per-token reward
				     penalty kl_beta (old_logp - ref_logp); needs ref */
	double gamma, lambda;     /* PPO: GAE */
	double vf_coef, vf_clip;  /* PPO: value loss weight, value clip range */
	double ent_coef;          /* PPO: entropy bonus */
	int whiten;               /* PPO: advantages to mean 0, std 1 over the batch's tokens */
	double lr, weight_decay, beta1, beta2, eps, clip_grad;
	int threads;
	int progress;             /* a progress line even when stderr is no terminal */
	int gpus;                 /* --gpus N: the ranks the launcher started (0: any) */
	/* A failure of one rank of several is said here (message prefixed
	 * with the rank) before the job is ended, which the program's main
	 * would not see; NULL: not said. */
	void (*note)(const char *msg);
	/* --profile: every op of the reference passes and the training timed
	 * (profile.h), the rows given to on_profile at the end with the
	 * optimizer steps and the wall time they took (rank 0 only) */
	int profile;
	void (*on_profile)(const lm_prof_row *rows, int n, int steps, double wall_ms);
} rlu_opts;

/* Where an update's wall time went, in seconds (the device waited for at
 * each boundary): reading and encoding the records, the reference passes,
 * the forward and backward passes (with the loss), the optimizer steps,
 * writing the checkpoint and the metrics line, and all of it. */
typedef struct rlu_times {
	double read, ref, fwd_bwd, optim, write, total;
} rlu_times;

/* Run the update on the records of in; the metrics line goes to metrics;
 * times (may be NULL) gets the split of the wall time.  Started by mpirun
 * or srun, the ranks share every batch (each runs its part of the
 * micro-batches, the gradients are summed over the ranks, so N ranks train
 * as one process would) and rank 0 alone writes the checkpoint and the
 * metrics line; in must then be a file every rank reads, not stdin. */
int rlu_run(const rlu_opts *o, FILE *in, const char *in_name, FILE *metrics, rlu_times *times,
	    lm_err *e);

/* --gpus N started plainly: exec the MPI launcher with N ranks of argv
 * (dist/launch.h); 0 when there is nothing to do, -1 when it failed. */
int rlu_launch(int gpus, char **argv, lm_err *e);

#endif
