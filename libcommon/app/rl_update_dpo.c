/* rl_update_dpo.c: the DPO loop of rl-update: the reference's
 * log-likelihood of every response, then per micro-batch of pairs one
 * forward pass, each pair's loss of rl_dpo_loss, and one backward pass in
 * which every token of a response has its pair's weight. */
#include <string.h>

#include "app/rl_update_internal.h"
#include "model/ckpt.h"
#include "rl/rl_backward.h"
#include "rl/rl_loss.h"

/* Row r's response log-likelihood. */
static double row_logp(const mbatch *b, int r)
{
	double sum = 0;
	for (int t = 0; t < b->T; t++)
		sum += b->mask[(size_t)r * b->T + t] ? b->logp[(size_t)r * b->T + t] : 0.0;
	return sum;
}

/* The pairs [lo, hi) as the micro-batch b: chosen, rejected, chosen, ... */
static void take_pairs(mbatch *b, seqs *v, size_t lo, size_t hi)
{
	int n = 0;
	for (size_t i = lo; i < hi; i++) {
		b->s[n++] = &v->s[2 * i];
		b->s[n++] = &v->s[2 * i + 1];
	}
	mb_pack(b, b->s, n);
}

/* The reference's log-likelihood of every response, with the policy's shape. */
int reference_logps(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		    int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	mbatch b;
	int cap = rlu_micro_batch(o, v->n);
	if (model_init(&ref, cfg, be, cap, maxT, e))
		return -1;
	int rc = mb_init(&b, cap, maxT, e);
	if (rc == 0 && (rc = ckpt_load(o->ref, &ref, NULL, NULL, e)))
		lm_err_prefix(e, "reference checkpoint");
	size_t pairs = v->n / 2, per = (size_t)cap / 2;
	for (size_t lo = 0; rc == 0 && lo < pairs; lo += per) {
		take_pairs(&b, v, lo, lo + per < pairs ? lo + per : pairs);
		if ((rc = mb_forward(&ref, &b, 0, e)))
			break;
		for (int r = 0; r < b.B; r++)
			b.s[r]->ref_logp = row_logp(&b, r);
	}
	mb_free(&b);
	model_free(&ref);
	return rc;
}

/* The pairs of micro-batch b, in a batch of npairs pairs. */
static int micro_step(const rlu_opts *o, model *m, mbatch *b, size_t npairs, stats *st,
		      lm_err *e)
{
	if (mb_forward(m, b, 0, e))
		return -1;
	size_t T = (size_t)b->T;
	for (int k = 0; 2 * k < b->B; k++) {
		const seq *c = b->s[2 * k], *r = b->s[2 * k + 1];
		double lc = row_logp(b, 2 * k), lr = row_logp(b, 2 * k + 1), d_lc, d_lr;
		double loss = rl_dpo_loss(o->beta, lc, lr, c->ref_logp, r->ref_logp, &d_lc, &d_lr);
		double margin = (lc - c->ref_logp) - (lr - r->ref_logp);
		st->loss += loss / (double)npairs;
		st->margin_sum += margin;
		st->right += margin > 0;
		st->pairs++;
		st->logp_sum += lc + lr;
		st->tokens += c->n_resp + r->n_resp;
		/* d loss / d CE_t = -d loss / d logp_t, the same for every token of a response */
		float wc = (float)(-d_lc / (double)npairs), wr = (float)(-d_lr / (double)npairs);
		for (size_t t = 0; t < T; t++) {
			b->w[2 * k * T + t] = b->mask[2 * k * T + t] ? wc : 0.0f;
			b->w[(2 * k + 1) * T + t] = b->mask[(2 * k + 1) * T + t] ? wr : 0.0f;
		}
	}
	return rl_backward_tokens(m, b->w, e);
}

int dpo_train(const rlu_opts *o, rlu_par *par, model *m, optim *opt, seqs *v, stats *st,
	      lm_err *e)
{
	size_t pairs = v->n / 2;
	size_t batch = o->batch > 0 && (size_t)o->batch < pairs ? (size_t)o->batch : pairs;
	int maxT = 1;
	for (size_t i = 0; i < v->n; i++)
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
	mbatch b;
	int cap = rlu_micro_batch(o, v->n);
	size_t per = (size_t)cap / 2;
	if (mb_init(&b, cap, maxT, e))
		return -1;
	int rc = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < pairs; lo += batch) {
			size_t hi = lo + batch < pairs ? lo + batch : pairs;
			size_t first, end, j = 0;
			rlu_par_share(par, (hi - lo + per - 1) / per, &first, &end);
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i += per, j++) {
				if (j < first || j >= end)
					continue;
				rlu_par_before(par, j, end);
				take_pairs(&b, v, i, i + per < hi ? i + per : hi);
				rc = micro_step(o, m, &b, hi - lo, st, e);
			}
			if (rc || (rc = rlu_par_grads(par, NULL, e)))
				break;
			rc = policy_step(o, par, m, opt, st, e);
		}
	mb_free(&b);
	return rc;
}
