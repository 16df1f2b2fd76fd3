/* rl_update_dpo.c: the DPO loop of rl-update: the reference's
 * log-likelihood of every response, then per pair the policy's, the loss
 * of rl_dpo_loss and one backward pass per response. */
#include "app/rl_update_internal.h"
#include "model/ckpt.h"
#include "rl/rl_loss.h"

/* Forward one sequence; *sum_logp gets its response log-likelihood. */
static int seq_logp(model *m, const seq *s, double *sum_logp, lm_err *e)
{
	double mean_ce;
	if (model_forward(m, s->ids, s->targets, 1, s->T, &mean_ce, e))
		return -1;
	*sum_logp = -mean_ce * (double)model_count(m);
	return 0;
}

/* The reference's log-likelihood of every response, with the policy's shape. */
int reference_logps(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		    int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	if (model_init(&ref, cfg, be, 1, maxT, e))
		return -1;
	int rc = ckpt_load(o->ref, &ref, NULL, NULL, e);
	if (rc)
		lm_err_prefix(e, "reference checkpoint");
	for (size_t i = 0; rc == 0 && i < v->n; i++)
		rc = seq_logp(&ref, &v->s[i], &v->s[i].ref_logp, e);
	model_free(&ref);
	return rc;
}

/* One DPO pair: chosen c, rejected r; the batch has npairs pairs. */
static int dpo_pair(const rlu_opts *o, model *m, const seq *c, const seq *r, size_t npairs,
		    stats *st, lm_err *e)
{
	double lr, lc, d_lc, d_lr;
	if (seq_logp(m, r, &lr, e) || seq_logp(m, c, &lc, e))
		return -1;
	double loss = rl_dpo_loss(o->beta, lc, lr, c->ref_logp, r->ref_logp, &d_lc, &d_lr);
	double margin = (lc - c->ref_logp) - (lr - r->ref_logp);
	st->loss += loss / (double)npairs;
	st->margin_sum += margin;
	st->right += margin > 0;
	st->pairs++;
	st->logp_sum += lc + lr;
	st->tokens += c->n_resp + r->n_resp;
	/* the chosen sequence's activations are live: its backward first */
	if (model_backward(m, (float)(-d_lc / (double)npairs), e) || seq_logp(m, r, &lr, e))
		return -1;
	return model_backward(m, (float)(-d_lr / (double)npairs), e);
}

int dpo_train(const rlu_opts *o, model *m, optim *opt, seqs *v, stats *st, lm_err *e)
{
	size_t pairs = v->n / 2;
	size_t batch = o->batch > 0 && (size_t)o->batch < pairs ? (size_t)o->batch : pairs;
	int rc = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < pairs; lo += batch) {
			size_t hi = lo + batch < pairs ? lo + batch : pairs;
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i++)
				rc = dpo_pair(o, m, &v->s[2 * i], &v->s[2 * i + 1], hi - lo, st, e);
			if (rc)
				break;
			rc = policy_step(o, m, opt, st, e);
		}
	return rc;
}
