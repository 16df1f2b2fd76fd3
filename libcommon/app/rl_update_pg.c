/* rl_update_pg.c: the SFT and GRPO-family loop of rl-update: per
 * micro-batch one forward pass, each row's loss and each token's weight
 * computed on the device from the log-probs left there (rl/rl_device.h:
 * the arithmetic of rl_grpo_step), and one backward pass with those
 * weights; per batch the statistics read back and an AdamW step (data
 * parallel: each rank runs its share of the micro-batches, rlu_par_share,
 * and the gradients are summed before the step). */
#include <math.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "rl/rl_device.h"
#include "rl/rl_loss.h"

/* Forward and backward on micro-batch b of a batch of `batch` sequences:
 * row r's score (SFT: 1, no_baseline: its reward, else its advantage) and
 * weight 1 / (denominator * batch), as rl_grpo_step's with B = 1 and
 * grad_accum = batch; the rows' rollout and reference log-probs. */
static int micro_step(const rlu_opts *o, model *m, rl_dev *d, mbatch *b, double constant,
		      size_t batch, lm_err *e)
{
	if (b->B == 0)
		return 0;
	if (model_forward(m, b->ids, b->targets, b->B, b->T, NULL, e))
		return -1;
	size_t T = (size_t)b->T;
	int sft = o->algo == RLU_SFT, clip = !sft && o->loss == RL_PG_GRPO_CLIP;
	int kl = !sft && o->kl_beta > 0;
	for (int r = 0; r < b->B; r++) {
		const seq *s = b->s[r];
		size_t o_ = (size_t)r * T, n = (size_t)s->T;
		b->score[r] = sft ? 1.0f : o->loss == RL_PG_NO_BASELINE ? (float)s->reward : (float)s->adv;
		size_t cnt = 0;
		for (size_t t = 0; t < n; t++)
			cnt += b->targets[o_ + t] >= 0;
		/* a row without response tokens contributes nothing (torch: NaN) */
		double denom = o->agg == RL_AGG_NORMALIZE ? constant : (double)cnt;
		b->row_w[r] = cnt ? 1.0 / (denom * 1.0 * (double)(int)batch) : 0.0;
		if (clip) {
			memcpy(b->old + o_, s->old_logp, n * sizeof *b->old);
			memset(b->old + o_ + n, 0, (T - n) * sizeof *b->old);
		}
		if (kl) {
			memcpy(b->ref + o_, s->ref_tok, n * sizeof *b->ref);
			memset(b->ref + o_ + n, 0, (T - n) * sizeof *b->ref);
		}
	}
	rl_pg_rows rows = {
		.score = b->score, .row_w = b->row_w, .old = clip ? b->old : NULL,
		.ref = kl ? b->ref : NULL, .entropy = 1,
		.a = { .clip = clip, .clip_low = (float)o->clip_low, .clip_high = (float)o->clip_high,
		       .kl_beta = o->kl_beta },
	};
	return rl_dev_pg(d, m, &rows, e);
}

/* The batch's statistics from the device into st. */
static int take_stats(rl_dev *d, stats *st, lm_err *e)
{
	double s[RL_ST_N];
	if (rl_dev_take(d, s, e))
		return -1;
	st->loss += s[RL_ST_LOSS];
	st->tokens += (long long)s[RL_ST_TOKENS];
	st->clipped += s[RL_ST_CLIPPED];
	st->kl_sum += s[RL_ST_KL];
	st->ratio_sum += s[RL_ST_RATIO];
	st->logp_sum += s[RL_ST_LOGP];
	st->entropy_sum += s[RL_ST_ENT];
	return 0;
}

int pg_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, seqs *v, stats *st,
	     lm_err *e)
{
	double constant = o->constant;
	if (o->agg == RL_AGG_NORMALIZE && constant <= 0)
		for (size_t i = 0; i < v->n; i++)
			constant = fmax(constant, v->s[i].n_resp);
	int maxT = 1;
	for (size_t i = 0; i < v->n; i++)
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
	mbatch b;
	rl_dev d;
	int cap = rlu_micro_batch(o, v->n);
	if (mb_init(&b, cap, maxT, e))
		return -1;
	if (rl_dev_init(&d, m->be, cap, maxT, e)) {
		mb_free(&b);
		return -1;
	}
	size_t batch = o->batch > 0 && (size_t)o->batch < v->n ? (size_t)o->batch : v->n;
	progress pr;
	progress_start(&pr, o->progress, "sequences", "seq", (uint64_t)(v->n * (size_t)o->epochs));
	if (par->rank)
		pr.on = 0;
	int rc = 0;
	uint64_t done = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < v->n; lo += batch) {
			size_t hi = lo + batch < v->n ? lo + batch : v->n;
			double t0 = lm_now();
			size_t first, end, j = 0;
			rlu_par_share(par, mb_count(&b, v, lo, hi), &first, &end);
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; j++) {
				size_t next = mb_skip(&b, v, i, hi);
				if (j >= first && j < end) {
					rlu_par_before(par, j, end);
					mb_take(&b, v, i, hi);
					rc = micro_step(o, m, &d, &b, constant, hi - lo, e);
				}
				done += next - i;
				progress_update(&pr, done, NULL);
				i = next;
			}
			if (rc || (rc = take_stats(&d, st, e)) || (rc = rlu_par_grads(par, NULL, e)))
				break;
			rc = policy_step(o, par, m, opt, st, t0, e);
		}
	progress_end(&pr, done, NULL);
	rl_dev_free(&d);
	mb_free(&b);
	return rc;
}
