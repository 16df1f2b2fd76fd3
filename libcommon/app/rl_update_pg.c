/* rl_update_pg.c: the SFT and GRPO-family loop of rl-update: per
 * sequence a forward pass, the loss of rl_grpo_step and the backward pass
 * with each token's weight; per batch an AdamW step. */
#include <math.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "rl/rl_backward.h"
#include "rl/rl_loss.h"

/* Forward and backward on one sequence of a batch of `batch` sequences:
 * the loss of rl_grpo_step (SFT: no_baseline with reward 1), each token's
 * gradient -d loss / d logp as its cross-entropy weight. */
static int seq_step(const rlu_opts *o, model *m, const seq *s, double constant, size_t batch,
		    work *w, stats *st, lm_err *e)
{
	if (s->n_resp == 0)
		return 0;
	if (seq_forward(m, s, w, st, e))
		return -1;
	float one = 1.0f, reward = (float)s->reward, adv = (float)s->adv;
	rl_grpo_args a = {
		{ o->algo == RLU_SFT ? RL_PG_NO_BASELINE : o->loss, o->algo == RLU_SFT ? &one : &reward,
		  &adv, s->old_logp, (float)o->clip_low, (float)o->clip_high },
		o->agg, constant, (int)batch, s->ref_tok, o->kl_beta,
	};
	rl_step_stats ss;
	if (rl_grpo_step(&a, w->logp, w->mask, 1, (size_t)s->T, w->grad, &ss, e))
		return -1;
	for (int t = 0; t < s->T; t++) {
		w->w[t] = -w->grad[t];
		st->logp_sum += w->logp[t];
	}
	st->loss += ss.loss;
	st->tokens += (long long)ss.tokens;
	st->clipped += ss.clip_frac * (double)ss.tokens;
	st->kl_sum += ss.kl * (double)ss.tokens;
	st->ratio_sum += ss.ratio_mean * (double)ss.tokens;
	return rl_backward_tokens(m, w->w, e);
}

int pg_train(const rlu_opts *o, model *m, optim *opt, seqs *v, stats *st, lm_err *e)
{
	double constant = o->constant;
	if (o->agg == RL_AGG_NORMALIZE && constant <= 0)
		for (size_t i = 0; i < v->n; i++)
			constant = fmax(constant, v->s[i].n_resp);
	int maxT = 1;
	for (size_t i = 0; i < v->n; i++)
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
	work w = { 0 };
	if (work_init(&w, maxT, m->cfg.vocab, e))
		return -1;
	size_t batch = o->batch > 0 && (size_t)o->batch < v->n ? (size_t)o->batch : v->n;
	progress pr;
	progress_start(&pr, o->progress, "sequences", "seq", (uint64_t)(v->n * (size_t)o->epochs));
	int rc = 0;
	uint64_t done = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < v->n; lo += batch) {
			size_t hi = lo + batch < v->n ? lo + batch : v->n;
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i++) {
				rc = seq_step(o, m, &v->s[i], constant, hi - lo, &w, st, e);
				progress_update(&pr, ++done, NULL);
			}
			if (rc)
				break;
			rc = policy_step(o, m, opt, st, e);
		}
	progress_end(&pr, done, NULL);
	work_free(&w);
	return rc;
}
