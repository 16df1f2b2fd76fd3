/* rl_update_pg.c: the SFT and GRPO-family loop of rl-update: per
 * micro-batch one forward pass, each sequence's loss of rl_grpo_step and
 * one backward pass with each token's weight; per batch an AdamW step
 * (data parallel: each rank runs its share of the micro-batches,
 * rlu_par_share, and the gradients are summed before the step). */
#include <math.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "rl/rl_backward.h"
#include "rl/rl_loss.h"

/* Forward and backward on micro-batch b of a batch of `batch` sequences:
 * each row's loss of rl_grpo_step (SFT: no_baseline with reward 1), each
 * token's gradient -d loss / d logp as its cross-entropy weight. */
static int micro_step(const rlu_opts *o, model *m, mbatch *b, double constant, size_t batch,
		      stats *st, lm_err *e)
{
	if (b->B == 0)
		return 0;
	if (mb_forward(m, b, 1, e))
		return -1;
	size_t T = (size_t)b->T;
	memset(b->w, 0, (size_t)b->B * T * sizeof *b->w);
	for (int r = 0; r < b->B; r++) {
		const seq *s = b->s[r];
		const float *lp = b->logp + r * T, *ent = b->ent + r * T;
		const uint8_t *mask = b->mask + r * T;
		float one = 1.0f, reward = (float)s->reward, adv = (float)s->adv;
		rl_grpo_args a = {
			{ o->algo == RLU_SFT ? RL_PG_NO_BASELINE : o->loss,
			  o->algo == RLU_SFT ? &one : &reward, &adv, s->old_logp, (float)o->clip_low,
			  (float)o->clip_high },
			o->agg, constant, (int)batch, s->ref_tok, o->kl_beta,
		};
		rl_step_stats ss;
		if (rl_grpo_step(&a, lp, mask, 1, (size_t)s->T, b->grad, &ss, e))
			return -1;
		for (int t = 0; t < s->T; t++) {
			b->w[r * T + t] = -b->grad[t];
			st->logp_sum += lp[t];
			if (mask[t])
				st->entropy_sum += ent[t];
		}
		st->loss += ss.loss;
		st->tokens += (long long)ss.tokens;
		st->clipped += ss.clip_frac * (double)ss.tokens;
		st->kl_sum += ss.kl * (double)ss.tokens;
		st->ratio_sum += ss.ratio_mean * (double)ss.tokens;
	}
	return rl_backward_tokens(m, b->w, e);
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
	if (mb_init(&b, rlu_micro_batch(o, v->n), maxT, e))
		return -1;
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
			size_t first, end, j = 0;
			rlu_par_share(par, mb_count(&b, v, lo, hi), &first, &end);
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; j++) {
				size_t next = mb_skip(&b, v, i, hi);
				if (j >= first && j < end) {
					rlu_par_before(par, j, end);
					mb_take(&b, v, i, hi);
					rc = micro_step(o, m, &b, constant, hi - lo, st, e);
				}
				done += next - i;
				progress_update(&pr, done, NULL);
				i = next;
			}
			if (rc || (rc = rlu_par_grads(par, NULL, e)))
				break;
			rc = policy_step(o, par, m, opt, st, e);
		}
	progress_end(&pr, done, NULL);
	mb_free(&b);
	return rc;
}
