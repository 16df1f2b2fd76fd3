/* rl_update_ppo.c: rl-update --algo ppo (see rl_ppo.h for the math).
 *
 * Before the update, forward passes (a micro-batch each) give the old values
 * (the value head on the final hidden state) of its completion tokens;
 * with the rollout's log-probs, the reference's (KL penalty) and the reward
 * they give the per-token rewards, GAE advantages and returns, optionally
 * whitened over all the batch's tokens.  Then each epoch walks the
 * sequences in input order in minibatches of --batch: per micro-batch a
 * forward pass, each sequence's PPO loss, and one backward pass that
 * carries the policy's per-token weights, the entropy bonus's per-token
 * gradient and the value loss's hidden-state gradient into the shared trunk
 * (model_backward_ex); per minibatch an AdamW step of the model and of the
 * value head, clipped by their joint gradient norm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "model/backend.h"
#include "rl/rl_loss.h"

typedef struct ppo_work {
	mbatch b;
	float *hidden, *dhidden;   /* [cap * maxT, d_model] */
	float *values, *dlogp, *dvalue, *dent, *rewards; /* [maxT] */
} ppo_work;

static void ppo_work_free(ppo_work *p)
{
	mb_free(&p->b);
	float *all[] = { p->hidden, p->dhidden, p->values, p->dlogp, p->dvalue, p->dent,
			 p->rewards };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		free(all[i]);
}

static int ppo_work_init(ppo_work *p, int cap, int maxT, const model_config *c, lm_err *e)
{
	memset(p, 0, sizeof *p);
	if (mb_init(&p->b, cap, maxT, e))
		return -1;
	size_t T = (size_t)maxT, N = (size_t)cap * T;
	p->hidden = malloc(N * c->d_model * sizeof *p->hidden);
	p->dhidden = malloc(N * c->d_model * sizeof *p->dhidden);
	float **small[] = { &p->values, &p->dlogp, &p->dvalue, &p->dent, &p->rewards };
	int fail = !p->hidden || !p->dhidden;
	for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
		fail |= !(*small[i] = malloc(T * sizeof **small[i]));
	if (fail) {
		ppo_work_free(p);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

/* Forward the micro-batch p->b; the final hidden states into p->hidden. */
static int mb_hidden(model *m, ppo_work *p, int entropy, lm_err *e)
{
	return mb_forward(m, &p->b, entropy, e) ||
	       model_read_hidden(m, p->hidden, (size_t)p->b.B * p->b.T, e) ? -1 : 0;
}

/* Row r's completion tokens' hidden states. */
static float *row_hidden(const ppo_work *p, int r, size_t C)
{
	const seq *s = p->b.s[r];
	return p->hidden + ((size_t)r * p->b.T + (size_t)(s->T - s->n_resp)) * C;
}

/* Old values, rewards, GAE and returns of every sequence; their means. */
static int prepare(const rlu_opts *o, model *m, const value_head *h, seqs *v, ppo_work *p,
		   stats *st, lm_err *e)
{
	double n = 0, adv = 0, adv2 = 0, ret = 0, val = 0, kl = 0;
	size_t C = (size_t)m->cfg.d_model;
	for (size_t i = 0; i < v->n;) {
		size_t next = mb_take(&p->b, v, i, v->n);
		if (p->b.B && mb_hidden(m, p, 0, e))
			return -1;
		for (int r = 0; r < p->b.B; r++) {
			seq *s = p->b.s[r];
			size_t k = (size_t)s->n_resp, first = (size_t)(s->T - s->n_resp);
			s->old_v = malloc(k * sizeof *s->old_v);
			s->adv_tok = malloc(k * sizeof *s->adv_tok);
			s->ret_tok = malloc(k * sizeof *s->ret_tok);
			if (!s->old_v || !s->adv_tok || !s->ret_tok)
				return lm_seterr(e, "out of memory");
			vh_forward(h, row_hidden(p, r, C), k, s->old_v);
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
 * per row the PPO loss; one backward pass with the policy's per-token
 * weights, the entropy bonus's per-token gradient (on the device) and the
 * value loss's hidden-state gradient. */
static int micro_step(const rlu_opts *o, model *m, value_head *h, double constant, size_t mb,
		      ppo_work *p, stats *st, lm_err *e)
{
	mbatch *b = &p->b;
	if (b->B == 0)
		return 0;
	if (mb_hidden(m, p, 1, e))
		return -1;
	size_t T = (size_t)b->T, C = (size_t)m->cfg.d_model, N = (size_t)b->B * T;
	memset(b->w, 0, N * sizeof *b->w);
	memset(b->dent, 0, N * sizeof *b->dent);
	memset(p->dhidden, 0, N * C * sizeof *p->dhidden);
	for (int r = 0; r < b->B; r++) {
		const seq *s = b->s[r];
		size_t k = (size_t)s->n_resp, first = (size_t)(s->T - s->n_resp), row = (size_t)r * T;
		const float *lp = b->logp + row, *ent = b->ent + row + first, *hid = row_hidden(p, r, C);
		vh_forward(h, hid, k, p->values);
		for (size_t t = 0; t < k; t++)
			st->entropy_sum += ent[t];
		double per_seq = o->agg == RL_AGG_MASKED_MEAN ? (double)k : constant;
		rl_ppo_args a = { (float)o->clip_low, (float)o->clip_high, (float)o->vf_clip,
				  o->vf_coef, o->ent_coef };
		st->loss += rl_ppo_loss(&a, lp + first, s->old_logp + first, s->adv_tok, p->values,
					s->old_v, s->ret_tok, ent, k, 1.0 / (per_seq * (double)mb),
					p->dlogp, p->dvalue, p->dent, &st->ppo);
		st->tokens += (long long)k;
		for (size_t t = 0; t < (size_t)s->T; t++)
			st->logp_sum += lp[t];
		for (size_t t = 0; t < k; t++) {
			b->w[row + first + t] = -p->dlogp[t];
			b->dent[row + first + t] = p->dent[t];
		}
		vh_backward(h, hid, p->dvalue, k, p->dhidden + (row + first) * C);
	}
	model_grad_in g = { .scale = 1.0f, .weights = b->w, .dhidden = p->dhidden,
			    .dentropy = o->ent_coef != 0 ? b->dent : NULL };
	return model_backward_ex(m, &g, e);
}

int ppo_train(const rlu_opts *o, model *m, optim *opt, value_head *h, seqs *v, stats *st,
	      lm_err *e)
{
	int maxT = 1;
	double constant = o->constant;
	for (size_t i = 0; i < v->n; i++) {
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
		if (o->agg == RL_AGG_NORMALIZE && o->constant <= 0)
			constant = fmax(constant, v->s[i].n_resp);
	}
	ppo_work p;
	if (ppo_work_init(&p, rlu_micro_batch(o, v->n), maxT, &m->cfg, e))
		return -1;
	int rc = prepare(o, m, h, v, &p, st, e);
	if (rc == 0 && o->whiten)
		rc = whiten_all(v, e);
	size_t batch = o->batch > 0 && (size_t)o->batch < v->n ? (size_t)o->batch : v->n;
	progress pr;
	progress_start(&pr, o->progress, "sequences", "seq", (uint64_t)(v->n * (size_t)o->epochs));
	uint64_t done = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < v->n; lo += batch) {
			size_t hi = lo + batch < v->n ? lo + batch : v->n;
			double t0 = lm_now();
			model_zero_grad(m);
			vh_zero_grad(h);
			for (size_t i = lo; rc == 0 && i < hi;) {
				size_t next = mb_take(&p.b, v, i, hi);
				rc = micro_step(o, m, h, constant, hi - lo, &p, st, e);
				done += next - i;
				progress_update(&pr, done, NULL);
				i = next;
			}
			if (rc || (rc = m->be->sync(m->be, e)))
				break;
			double t1 = lm_now();
			double gm = optim_grad_norm(m), gn = sqrt(gm * gm + vh_grad_sumsq(h));
			if ((rc = rlu_check_finite(st, gn, e)))
				break;
			double f = clip_factor(gn, o->clip_grad);
			st->gnorm_sum += gn;
			st->steps++;
			optim_step(opt, m, o->lr, f);
			vh_step(h, o->lr, opt->cfg.beta1, opt->cfg.beta2, opt->cfg.eps, f);
			rc = m->be->sync(m->be, e);
			st->t_fb += t1 - t0;
			st->t_opt += lm_now() - t1;
		}
	progress_end(&pr, done, NULL);
	ppo_work_free(&p);
	return rc;
}
