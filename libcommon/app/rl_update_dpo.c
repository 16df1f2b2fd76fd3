/* rl_update_dpo.c: the DPO loop of rl-update: the reference's
 * log-likelihood of every response, then per micro-batch of pairs one
 * forward pass, each pair's loss (rl_dpo_loss's arithmetic, on the device:
 * rl/rl_device.h), and one backward pass in which every token of a
 * response has its pair's weight. */
#include <string.h>

#include "app/rl_update_internal.h"
#include "model/ckpt.h"
#include "cli/progress.h"
#include "rl/rl_device.h"

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

/* The pairs of micro-batch b, in a batch of npairs pairs: the pair losses
 * and every response token's weight on the device (rl/rl_device.h). */
static int micro_step(const rlu_opts *o, model *m, rl_dev *d, mbatch *b, size_t npairs,
		      lm_err *e)
{
	if (model_forward(m, b->ids, b->targets, b->B, b->T, NULL, e))
		return -1;
	for (int r = 0; r < b->B; r++)
		b->row_w[r] = b->s[r]->ref_logp;
	return rl_dev_dpo(d, m, b->row_w, o->beta, (double)npairs, e);
}

/* The batch's statistics from the device into st. */
static int take_stats(rl_dev *d, stats *st, lm_err *e)
{
	double s[RL_ST_N];
	if (rl_dev_take(d, s, e))
		return -1;
	st->loss += s[RL_DPO_LOSS];
	st->tokens += (long long)s[RL_DPO_TOKENS];
	st->logp_sum += s[RL_DPO_LOGP];
	st->margin_sum += s[RL_DPO_MARGIN];
	st->right += (long long)s[RL_DPO_RIGHT];
	st->pairs += (long long)s[RL_DPO_PAIRS];
	return 0;
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
	rl_dev d;
	if (mb_init(&b, cap, maxT, e))
		return -1;
	if (rl_dev_init(&d, m->be, cap, maxT, e)) {
		mb_free(&b);
		return -1;
	}
	int rc = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < pairs; lo += batch) {
			size_t hi = lo + batch < pairs ? lo + batch : pairs;
			double t0 = lm_now();
			size_t first, end, j = 0;
			rlu_par_share(par, (hi - lo + per - 1) / per, &first, &end);
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i += per, j++) {
				if (j < first || j >= end)
					continue;
				rlu_par_before(par, j, end);
				take_pairs(&b, v, i, i + per < hi ? i + per : hi);
				rc = micro_step(o, m, &d, &b, hi - lo, e);
			}
			if (rc || (rc = take_stats(&d, st, e)) || (rc = rlu_par_grads(par, NULL, e)))
				break;
			rc = policy_step(o, par, m, opt, st, t0, e);
		}
	rl_dev_free(&d);
	mb_free(&b);
	return rc;
}
