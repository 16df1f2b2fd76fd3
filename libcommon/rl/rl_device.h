/* rl_device.h: rl-update's losses on the model's backend: after a
 * micro-batch's forward pass, the rows' inputs are uploaded (scores,
 * aggregation weights, the rollout's and the reference's log-probs), the
 * loss op (kernels/rl_tok.h, through the op table) turns the per-token
 * cross-entropy left on the device into each token's loss weight, and the
 * weighted backward pass reads those weights where they are.  The
 * statistics of the metrics line stay on the device until rl_dev_take
 * reads them (once per optimizer step): no per-token array comes back. */
#ifndef LMPIPE_RL_DEVICE_H
#define LMPIPE_RL_DEVICE_H

#include "base/err.h"
#include "kernels/rl_tok.h"
#include "model/backend.h"
#include "model/model.h"

typedef struct rl_dev {
	lm_backend *be;
	int maxB, maxT;
	float *w, *score, *old, *ref;  /* backend memory: [maxB*maxT] and [maxB] */
	double *row_w, *stats, *ws;    /* [maxB], [RL_ST_N], rl_tok_workspace(maxB) bytes */
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

#endif
