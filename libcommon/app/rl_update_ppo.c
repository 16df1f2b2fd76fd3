/* rl_update_ppo.c: rl-update --algo ppo (see rl_ppo.h for the math).
 *
 * Before the update, forward passes (a micro-batch each) give the old values
 * (the value head on the final hidden state, on the device: only the
 * values come back) of its completion tokens; with the rollout's
 * log-probs, the reference's (KL penalty) and the reward they give the
 * per-token rewards, GAE advantages and returns, optionally whitened over
 * all the batch's tokens.  Then each epoch walks the sequences in input
 * order in minibatches of --batch: per micro-batch a forward pass, the PPO
 * loss op on the device (rl/rl_device.h: each token's policy weight, the
 * entropy bonus's gradient, the value loss's hidden-state gradient through
 * the head, the head's own gradient and the statistics, all left there),
 * and one backward pass that carries them into the shared trunk
 * (model_backward_ex); per minibatch the statistics and the head's
 * gradient come back, and an AdamW step of the model and of the value head
 * (on the host: d_model + 1 floats), clipped by their joint gradient
 * norm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "model/backend.h"
#include "rl/rl_device.h"
#include "rl/rl_loss.h"

typedef struct ppo_work {
	mbatch b;
	rl_dev d;
	float *values, *adv, *old_v, *ret; /* [cap * maxT]: a micro-batch's rows */
	float *rewards;            /* [maxT] */
} ppo_work;

static void ppo_work_free(ppo_work *p)
{
	mb_free(&p->b);
	rl_dev_free(&p->d);
	float *all[] = { p->values, p->adv, p->old_v, p->ret, p->rewards };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		free(all[i]);
}

static int ppo_work_init(ppo_work *p, model *m, int cap, int maxT, lm_err *e)
{
	memset(p, 0, sizeof *p);
	if (mb_init(&p->b, cap, maxT, e))
		return -1;
	if (rl_dev_ppo_init(&p->d, m->be, cap, maxT, m->cfg.d_model, e)) {
		mb_free(&p->b);
		return -1;
	}
	size_t N = (size_t)cap * maxT;
	float **bufs[] = { &p->values, &p->adv, &p->old_v, &p->ret };
	int fail = !(p->rewards = malloc((size_t)maxT * sizeof *p->rewards));
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		fail |= !(*bufs[i] = calloc(N, sizeof **bufs[i]));
	if (fail) {
		ppo_work_free(p);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

static int forward(model *m, const mbatch *b, lm_err *e)
{
	return model_forward(m, b->ids, b->targets, b->B, b->T, NULL, e);
}

/* Old values, rewards, GAE and returns of every sequence; their means. */
static int prepare(const rlu_opts *o, model *m, seqs *v, ppo_work *p, stats *st, lm_err *e)
{
	double n = 0, adv = 0, adv2 = 0, ret = 0, val = 0, kl = 0;
	for (size_t i = 0; i < v->n;) {
		size_t next = mb_take(&p->b, v, i, v->n);
		if (p->b.B && (forward(m, &p->b, e) || rl_dev_values(&p->d, m, p->values, e)))
			return -1;
		for (int r = 0; r < p->b.B; r++) {
			seq *s = p->b.s[r];
			size_t k = (size_t)s->n_resp, first = (size_t)(s->T - s->n_resp);
			s->old_v = malloc(k * sizeof *s->old_v);
			s->adv_tok = malloc(k * sizeof *s->adv_tok);
			s->ret_tok = malloc(k * sizeof *s->ret_tok);
			if (!s->old_v || !s->adv_tok || !s->ret_tok)
				return lm_seterr(e, "out of memory");
			memcpy(s->old_v, p->values + (size_t)r * p->b.T + first, k * sizeof *s->old_v);
			const float *ref = s->ref_tok ? s->ref_tok + first : NULL, *old = s->old_logp + first;
			rl_ppo_rewards(old, ref, k, s->reward, o->kl_beta, p->rewards);
			rl_gae(p->rewards, s->old_v, k, 0.0f, (float)o->gamma, (float)o->lambda,
			       s->adv_tok, s->ret_tok);
			for (size_t t = 0; t < k; t++) {
				adv += s->adv_tok[t];
				adv2 += (double)s->adv_tok[t] * s->adv_tok[t];
				ret += s->ret_tok[t];
				val += s->old_v[t];
				kl += ref ? (double)old[t] - ref[t] : 0;
			}
			n += (double)k;
		}
		i = next;
	}
	if (n > 0) {
		st->adv_mean = adv / n;
		st->adv_std = sqrt(fmax(0.0, adv2 / n - st->adv_mean * st->adv_mean));
		st->ret_mean = ret / n;
		st->value_mean = val / n;
		st->kl_mean = kl / n;
	}
	return 0;
}

/* Whiten the advantages over all the completion tokens of the batch. */
static int whiten_all(seqs *v, lm_err *e)
{
	size_t n = 0, at = 0;
	for (size_t i = 0; i < v->n; i++)
		n += (size_t)v->s[i].n_resp;
	float *all = malloc((n ? n : 1) * sizeof *all);
	if (!all)
		return lm_seterr(e, "out of memory");
	for (size_t i = 0; i < v->n; i++) {
		size_t k = (size_t)v->s[i].n_resp;
		if (k)
			memcpy(all + at, v->s[i].adv_tok, k * sizeof *all);
		at += k;
	}
	rl_whiten(all, n);
	at = 0;
	for (size_t i = 0; i < v->n; i++) {
		size_t k = (size_t)v->s[i].n_resp;
		if (k)
			memcpy(v->s[i].adv_tok, all + at, k * sizeof *all);
		at += k;
	}
	free(all);
	return 0;
}

/* Forward and backward of micro-batch p->b in a minibatch of mb sequences:
 * the rows' inputs to the device, the PPO loss op and one backward pass
 * there (rl_dev_ppo). */
static int micro_step(const rlu_opts *o, model *m, double constant, size_t mb, ppo_work *p,
		      lm_err *e)
{
	mbatch *b = &p->b;
	if (b->B == 0)
		return 0;
	if (forward(m, b, e))
		return -1;
	size_t T = (size_t)b->T, N = (size_t)b->B * T;
	float *rows[] = { b->old, p->adv, p->old_v, p->ret };
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		memset(rows[i], 0, N * sizeof *rows[i]);
	for (int r = 0; r < b->B; r++) {
		const seq *s = b->s[r];
		size_t k = (size_t)s->n_resp, first = (size_t)(s->T - s->n_resp);
		size_t at = (size_t)r * T + first, bytes = k * sizeof(float);
		memcpy(b->old + at, s->old_logp + first, bytes);
		memcpy(p->adv + at, s->adv_tok, bytes);
		memcpy(p->old_v + at, s->old_v, bytes);
		memcpy(p->ret + at, s->ret_tok, bytes);
		double per_seq = o->agg == RL_AGG_MASKED_MEAN ? (double)k : constant;
		b->row_w[r] = 1.0 / (per_seq * (double)mb);
	}
	rl_ppo_rows in = { .old = b->old, .adv = p->adv, .old_v = p->old_v, .ret = p->ret,
			   .row_scale = b->row_w,
			   .a = { (float)o->clip_low, (float)o->clip_high, (float)o->vf_clip,
				  o->vf_coef, o->ent_coef } };
	return rl_dev_ppo(&p->d, m, &in, e);
}

/* The minibatch's statistics and the head's gradient from the device. */
static int take_stats(ppo_work *p, value_head *h, stats *st, lm_err *e)
{
	double s[RL_PPO_N];
	if (rl_dev_ppo_take(&p->d, s, h, e))
		return -1;
	long long tokens = (long long)s[RL_PPO_TOKENS];
	st->loss += s[RL_PPO_LOSS];
	st->entropy_sum += s[RL_PPO_ENT];
	st->tokens += tokens;
	st->logp_sum += s[RL_PPO_LOGP];
	st->ppo.pg += s[RL_PPO_PG];
	st->ppo.vf += s[RL_PPO_VF];
	st->ppo.entropy += s[RL_PPO_ENT];
	st->ppo.clipped += s[RL_PPO_CLIPPED];
	st->ppo.vf_clipped += s[RL_PPO_VF_CLIPPED];
	st->ppo.ratio += s[RL_PPO_RATIO];
	st->ppo.tokens += tokens;
	return 0;
}

int ppo_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, value_head *h, seqs *v,
	      stats *st, lm_err *e)
{
	int maxT = 1;
	double constant = o->constant;
	for (size_t i = 0; i < v->n; i++) {
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
		if (o->agg == RL_AGG_NORMALIZE && o->constant <= 0)
			constant = fmax(constant, v->s[i].n_resp);
	}
	ppo_work p;
	if (ppo_work_init(&p, m, rlu_micro_batch(o, v->n), maxT, e))
		return -1;
	rl_dev_set_head(&p.d, h);
	int rc = prepare(o, m, v, &p, st, e);
	if (rc == 0 && o->whiten)
		rc = whiten_all(v, e);
	size_t batch = o->batch > 0 && (size_t)o->batch < v->n ? (size_t)o->batch : v->n;
	progress pr;
	progress_start(&pr, o->progress, "sequences", "seq", (uint64_t)(v->n * (size_t)o->epochs));
	if (par->rank)
		pr.on = 0;
	uint64_t done = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < v->n; lo += batch) {
			size_t hi = lo + batch < v->n ? lo + batch : v->n;
			double t0 = lm_now();
			size_t first, end, j = 0;
			rlu_par_share(par, mb_count(&p.b, v, lo, hi), &first, &end);
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; j++) {
				size_t next = mb_skip(&p.b, v, i, hi);
				if (j >= first && j < end) {
					rlu_par_before(par, j, end);
					mb_take(&p.b, v, i, hi);
					rc = micro_step(o, m, constant, hi - lo, &p, e);
				}
				done += next - i;
				progress_update(&pr, done, NULL);
				i = next;
			}
			if (rc || (rc = take_stats(&p, h, st, e)) || (rc = rlu_par_grads(par, h, e)) ||
			    (rc = m->be->sync(m->be, e)))
				break;
			double t1 = lm_now();
			double gm = optim_grad_norm(m), gn = sqrt(gm * gm + vh_grad_sumsq(h));
			if ((rc = rlu_check_finite(par, st, gn, e)))
				break;
			double f = clip_factor(gn, o->clip_grad);
			st->gnorm_sum += gn;
			st->steps++;
			optim_step(opt, m, o->lr, f);
			vh_step(h, o->lr, opt->cfg.beta1, opt->cfg.beta2, opt->cfg.eps, f);
			rl_dev_set_head(&p.d, h);
			rc = m->be->sync(m->be, e);
			st->t_fb += t1 - t0;
			st->t_opt += lm_now() - t1;
		}
	progress_end(&pr, done, NULL);
	ppo_work_free(&p);
	return rc;
}
