/* rl_update_internal.h: what the files of rl-update's driver share: the
 * sequences read from the records, the micro-batches of the forward and
 * backward passes, the statistics of the metrics line, and the steps rlu_run
 * (rl_update.c) calls in order:
 *
 *   rl_update_rollouts.c   records to sequences (read_seqs): GRPO's and PPO's
 *                          rollouts skimmed on threads
 *   rl_update_records.c    records parsed by jansson into sequences
 *   rl_update_tokens.c     the sequence store, prompt and response tokens
 *   rl_update_advantages.c GRPO's group advantages
 *   rl_update_forward.c    micro-batches through the model, the reference passes
 *   rl_update_pg.c         the SFT and GRPO-family loop
 *   rl_update_dpo.c        the DPO loop and its reference log-likelihoods
 *   rl_update_ppo.c        the PPO loop
 *   rl_update_step.c       the AdamW step ending an SFT, GRPO or DPO batch
 *   rl_update_metrics.c    the metrics line
 *   rl_update_dist.c       data parallel: the ranks' shares, the sums */
#ifndef LMPIPE_RL_UPDATE_INTERNAL_H
#define LMPIPE_RL_UPDATE_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

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
	double t_fb, t_opt;       /* seconds: forward and backward passes, optimizer steps */
} stats;

/* Data parallel (rl_update_dist.c).  Every rank reads every record and
 * cuts each batch into the micro-batches one process would make; rank r
 * of N runs the micro-batches [M r / N, M (r + 1) / N) of a batch of M
 * (rlu_par_share), the gradients are summed over the ranks in rank order
 * by the communicator of dist/ (ddp.h, ZeRO-0: every rank gets the whole
 * sum and takes the same AdamW step), and the statistics are summed
 * before rank 0 alone writes the checkpoint and the metrics line.  With
 * one micro-batch per rank and batch the sums are those of one process,
 * so the weights equal its weights bit for bit on the CPU; with more, the
 * grouping of the sums differs and so do the last bits.  A world of one
 * goes through the same calls (local communicator, no MPI). */
struct lm_comm;
struct ddp;
typedef struct rlu_par {
	struct lm_comm *comm;
	struct ddp *dp;
	int rank, world;
	int armed;                /* the next backward pass communicates */
} rlu_par;
/* The world from the launcher's environment, the backend (the GPU of the
 * local rank) and the communicator; in_stdin: the records come from
 * stdin, which mpirun gives to rank 0 only (refused on several ranks). */
int rlu_par_open(rlu_par *p, const rlu_opts *o, int in_stdin, lm_backend **be, lm_err *e);
/* The gradient sums over the policy m (after model_init). */
int rlu_par_attach(rlu_par *p, model *m, lm_err *e);
void rlu_par_close(rlu_par *p, int ok);
/* This rank's micro-batches [*first, *end) of a batch of M. */
void rlu_par_share(const rlu_par *p, size_t M, size_t *first, size_t *end);
/* Before the backward pass of micro-batch j of [first, end): whether it
 * communicates (the last one does). */
void rlu_par_before(rlu_par *p, size_t j, size_t end);
/* After this rank's micro-batches of a batch: the gradients summed over
 * the ranks (and the value head's, h not NULL), every rank's the same. */
int rlu_par_grads(rlu_par *p, value_head *h, lm_err *e);
/* x[0..n) summed over the ranks (host memory). */
int rlu_par_sum(rlu_par *p, double *x, int n, lm_err *e);
/* The statistics the micro-batches added, summed over the ranks. */
int rlu_par_stats(rlu_par *p, stats *st, lm_err *e);
/* A rank-0-only result made every rank's (ddp_agree). */
int rlu_par_agree(rlu_par *p, int rc, const char *what, lm_err *e);

/* --micro-batch's default: sequences per forward and backward pass. */
enum { RLU_MICRO_BATCH = 8 };

/* A micro-batch: up to cap sequences, padded to the longest of them (id 0,
 * target -1), run through the model as one [B, T] batch.  The [B, T]
 * arrays hold row r at r * T. */
typedef struct mbatch {
	int cap, maxT;            /* capacity: sequences, tokens a sequence */
	int B, T;                 /* this one: rows, padded length */
	seq **s;                  /* [cap]: the rows' sequences */
	int32_t *ids, *targets;   /* [cap * maxT] */
	float *logp, *ent;        /* [B, T]: targets' log-probs, softmax entropies */
	float *w, *dent;          /* [B, T]: loss weights, d loss / d entropy */
	uint8_t *mask;            /* [B, T]: 1 at counted (response) tokens */
	float *old, *ref, *score; /* [B, T], [B, T], [B]: rl/rl_device.h's inputs */
	double *row_w;            /* [B] */
} mbatch;

void seqs_free(seqs *v);
/* Append a sequence from prompt and response token ids (the record's line
 * lineno of the input name, for errors). */
int seqs_add(seqs *v, const uint32_t *p, size_t np, const uint32_t *r, size_t nr,
	     unsigned long lineno, int ctx, const char *name, lm_err *e);
/* The string field key of o encoded with v->tok into a malloc'd array;
 * the _response variant appends end-of-text, so the model learns to stop. */
int encode_field(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
		 const char *name, unsigned long lineno, lm_err *e);
int encode_response_field(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
			  const char *name, unsigned long lineno, lm_err *e);

/* Every record of in (named name) as sequences of at most ctx + 1 tokens
 * below vocab; an input without records is an error. */
int read_seqs(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab, int ctx,
	      lm_err *e);

/* read_seqs's ways: each record parsed by jansson (read_records, SFT and
 * DPO: jsonl_next_batch), one record into sequences (read_record); GRPO's
 * and PPO's rollouts are skimmed on threads a batch at a time, and what
 * the skimmer does not take goes through read_record. */
int read_records(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab, int ctx,
		 lm_err *e);
int read_record(const rlu_opts *o, seqs *v, json_t *obj, int vocab, int ctx,
		const char *name, unsigned long lineno, lm_err *e);

/* GRPO: each sequence's advantage within its group; *n_groups groups. */
int grpo_advantages(const rlu_opts *o, seqs *v, size_t *n_groups, const char *name, lm_err *e);

/* Sequences a micro-batch of the n records holds (--micro-batch, at most
 * n; DPO: an even number, pairs stay together). */
int rlu_micro_batch(const rlu_opts *o, size_t n);
int mb_init(mbatch *b, int cap, int maxT, lm_err *e);
void mb_free(mbatch *b);
/* Make b the micro-batch of list[0..n) (n <= cap; list may be b->s). */
void mb_pack(mbatch *b, seq *const *list, int n);
/* Make b the micro-batch of the next sequences of v[i..hi) with response
 * tokens, at most cap of them; returns where the next one starts.
 * mb_skip returns the same without making it, mb_count the number of
 * micro-batches of v[lo..hi). */
size_t mb_take(mbatch *b, seqs *v, size_t i, size_t hi);
size_t mb_skip(const mbatch *b, const seqs *v, size_t i, size_t hi);
size_t mb_count(const mbatch *b, const seqs *v, size_t lo, size_t hi);
/* Forward b through m: b->logp, b->mask, and (entropy) b->ent. */
int mb_forward(model *m, mbatch *b, int entropy, lm_err *e);

/* The reference's per-token log-probs of every sequence (s->ref_tok). */
int reference_tokens(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		     int maxT, seqs *v, lm_err *e);

/* Before optimizer step st->steps + 1: the loss so far and the gradient
 * norm must be finite, or -1 with a message naming the step (nothing of
 * the run is written then). */
int rlu_check_finite(rlu_par *par, const stats *st, double gnorm, lm_err *e);

/* The end of a batch: the gradient norm into st, then AdamW on m with the
 * step clipped to o->clip_grad, waited for; the batch's time since t0 (its
 * forward and backward passes) and the step's time added to st; -1 (no
 * step) when the loss or the norm is not finite (rlu_check_finite). */
int policy_step(const rlu_opts *o, rlu_par *par, model *m, optim *opt, stats *st, double t0,
		lm_err *e);

/* SFT and the GRPO family: the epochs of batch steps on the policy m. */
int pg_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, seqs *v, stats *st,
	     lm_err *e);

/* DPO: the reference's log-likelihood of every response (s->ref_logp),
 * then the epochs of pair-batch steps on m. */
int reference_logps(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		    int maxT, seqs *v, lm_err *e);
int dpo_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, seqs *v, stats *st,
	      lm_err *e);

/* PPO: values, GAE and returns of every sequence, then the epochs of
 * minibatch steps on the policy m and the value head h. */
int ppo_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, value_head *h, seqs *v,
	      stats *st, lm_err *e);

/* The metrics line of the update (ckpt: the checkpoint written, secs:
 * its wall time) to out. */
int write_metrics(const rlu_opts *o, const seqs *v, size_t groups, const stats *st,
		  const char *ckpt, double secs, FILE *out, lm_err *e);

#endif
