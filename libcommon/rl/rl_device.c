/* rl_device.c: rl-update's loss op on the backend between a micro-batch's
 * forward and backward passes (see rl_device.h). */
#include "rl/rl_device.h"

#include <string.h>

#include "model/profile.h"

void rl_dev_free(rl_dev *d)
{
	if (!d->be)
		return;
	void *bufs[] = { d->w, d->score, d->old, d->ref, d->row_w, d->stats, d->ws, d->head,
			 d->hgrad, d->dent, d->dvalue, d->dhidden, d->adv, d->old_v, d->ret,
			 d->pstats, d->pws };
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		if (bufs[i])
			d->be->release(d->be, bufs[i]);
	memset(d, 0, sizeof *d);
}

int rl_dev_init(rl_dev *d, lm_backend *be, int maxB, int maxT, lm_err *e)
{
	memset(d, 0, sizeof *d);
	size_t n = (size_t)maxB * maxT;
	d->be = be;
	d->maxB = maxB;
	d->maxT = maxT;
	d->w = be->alloc(be, n * sizeof *d->w);
	d->old = be->alloc(be, n * sizeof *d->old);
	d->ref = be->alloc(be, n * sizeof *d->ref);
	d->score = be->alloc(be, (size_t)maxB * sizeof *d->score);
	d->row_w = be->alloc(be, (size_t)maxB * sizeof *d->row_w);
	d->stats = be->alloc(be, RL_ST_N * sizeof *d->stats);
	d->ws = be->alloc(be, rl_tok_workspace(maxB));
	if (!d->w || !d->old || !d->ref || !d->score || !d->row_w || !d->stats || !d->ws) {
		rl_dev_free(d);
		if (be->sync(be, e) == 0)
			lm_seterr(e, "out of memory for the loss buffers");
		lm_err_prefix(e, "the loss buffers");
		return -1;
	}
	be->zero(be, d->stats, RL_ST_N * sizeof *d->stats);
	return 0;
}

static int fits(const rl_dev *d, const model *m, lm_err *e)
{
	if (m->be != d->be || m->B > d->maxB || m->T > d->maxT)
		return lm_seterr(e, "the loss buffers hold %d x %d tokens, not the batch's %d x %d",
				 d->maxB, d->maxT, m->B, m->T);
	return 0;
}

int rl_dev_pg(rl_dev *d, model *m, const rl_pg_rows *r, lm_err *e)
{
	lm_backend *be = d->be;
	if (fits(d, m, e))
		return -1;
	int B = m->B, T = m->T;
	size_t n = (size_t)B * T;
	double up = 2.0 * B * sizeof(float) + (r->old ? n * sizeof *r->old : 0) +
		    (r->ref ? n * sizeof *r->ref : 0);
	PROF(be, "rl.upload", 0, up, {
		be->upload(be, d->score, r->score, (size_t)B * sizeof *r->score);
		be->upload(be, d->row_w, r->row_w, (size_t)B * sizeof *r->row_w);
		if (r->old)
			be->upload(be, d->old, r->old, n * sizeof *r->old);
		if (r->ref)
			be->upload(be, d->ref, r->ref, n * sizeof *r->ref);
	});
	const float *ent = r->entropy ? model_token_entropy(m, e) : NULL;
	if (r->entropy && !ent)
		return -1;
	PROF(be, "rl.pg_tok", 0, n * 6.0 * sizeof(float),
	     be->rl_tok_pg(be, d->w, d->stats, d->ws, model_token_ce(m), model_token_targets(m),
			   d->score, d->row_w, r->old ? d->old : NULL, r->ref ? d->ref : NULL, ent,
			   B, T, r->a));
	model_grad_in g = { .scale = 1.0f, .weights_dev = d->w };
	return model_backward_ex(m, &g, e);
}

int rl_dev_dpo(rl_dev *d, model *m, const double *ref, double beta, double npairs, lm_err *e)
{
	lm_backend *be = d->be;
	if (fits(d, m, e))
		return -1;
	/* the rows' reference sums go where the scores' doubles are kept */
	be->upload(be, d->row_w, ref, (size_t)m->B * sizeof *ref);
	be->rl_tok_dpo(be, d->w, d->stats, d->ws, model_token_ce(m), model_token_targets(m),
		       d->row_w, beta, npairs, m->B, m->T);
	model_grad_in g = { .scale = 1.0f, .weights_dev = d->w };
	return model_backward_ex(m, &g, e);
}

int rl_dev_take(rl_dev *d, double out[RL_ST_N], lm_err *e)
{
	lm_backend *be = d->be;
	be->download(be, out, d->stats, RL_ST_N * sizeof *out);
	if (be->sync(be, e))
		return -1;
	be->zero(be, d->stats, RL_ST_N * sizeof *d->stats);
	return 0;
}

int rl_dev_ppo_init(rl_dev *d, lm_backend *be, int maxB, int maxT, int C, lm_err *e)
{
	if (rl_dev_init(d, be, maxB, maxT, e))
		return -1;
	size_t n = (size_t)maxB * maxT, h = ((size_t)C + 1) * sizeof(float);
	d->C = C;
	d->head = be->alloc(be, h);
	d->hgrad = be->alloc(be, h);
	float **tok[] = { &d->dent, &d->dvalue, &d->adv, &d->old_v, &d->ret };
	int fail = !d->head || !d->hgrad;
	for (size_t i = 0; i < sizeof tok / sizeof *tok; i++)
		fail |= !(*tok[i] = be->alloc(be, n * sizeof(float)));
	d->dhidden = be->alloc(be, n * (size_t)C * sizeof *d->dhidden);
	d->pstats = be->alloc(be, RL_PPO_N * sizeof *d->pstats);
	d->pws = be->alloc(be, rl_ppo_workspace(maxB, maxT, C));
	if (fail || !d->dhidden || !d->pstats || !d->pws) {
		rl_dev_free(d);
		if (be->sync(be, e) == 0)
			lm_seterr(e, "out of memory for the PPO buffers");
		lm_err_prefix(e, "the loss buffers");
		return -1;
	}
	be->zero(be, d->hgrad, h);
	be->zero(be, d->pstats, RL_PPO_N * sizeof *d->pstats);
	return 0;
}

void rl_dev_set_head(rl_dev *d, const value_head *h)
{
	d->be->upload(d->be, d->head, h->w, (size_t)d->C * sizeof *h->w);
	d->be->upload(d->be, d->head + d->C, h->b, sizeof h->b);
}

int rl_dev_values(rl_dev *d, const model *m, float *values, lm_err *e)
{
	lm_backend *be = d->be;
	if (fits(d, m, e))
		return -1;
	size_t N = (size_t)m->B * m->T;
	be->ppo_value(be, d->dvalue, model_hidden(m), d->head, (int)N, d->C);
	be->download(be, values, d->dvalue, N * sizeof *values);
	return be->sync(be, e);
}

int rl_dev_ppo(rl_dev *d, model *m, const rl_ppo_rows *r, lm_err *e)
{
	lm_backend *be = d->be;
	if (fits(d, m, e))
		return -1;
	int B = m->B, T = m->T;
	size_t n = (size_t)B * T * sizeof(float);
	PROF(be, "rl.upload", 0, 4.0 * n + (double)B * sizeof *r->row_scale, {
		be->upload(be, d->old, r->old, n);
		be->upload(be, d->adv, r->adv, n);
		be->upload(be, d->old_v, r->old_v, n);
		be->upload(be, d->ret, r->ret, n);
		be->upload(be, d->row_w, r->row_scale, (size_t)B * sizeof *r->row_scale);
	});
	const float *ent = model_token_entropy(m, e);
	if (!ent)
		return -1;
	PROF(be, "rl.ppo_tok", 0, (double)B * T * (2.0 * d->C + 8) * sizeof(float),
	     be->ppo_tok(be, d->w, d->dent, d->dvalue, d->dhidden, d->hgrad, d->pstats, d->pws,
			 model_token_ce(m), model_token_targets(m), model_hidden(m), d->head, ent,
			 d->old, d->adv, d->old_v, d->ret, d->row_w, B, T, d->C, r->a));
	model_grad_in g = { .scale = 1.0f, .weights_dev = d->w, .dhidden_dev = d->dhidden,
			    .dentropy_dev = r->a.ent_coef != 0 ? d->dent : NULL };
	return model_backward_ex(m, &g, e);
}

int rl_dev_ppo_take(rl_dev *d, double out[RL_PPO_N], value_head *h, lm_err *e)
{
	lm_backend *be = d->be;
	be->download(be, out, d->pstats, RL_PPO_N * sizeof *out);
	be->download(be, h->gw, d->hgrad, (size_t)d->C * sizeof *h->gw);
	be->download(be, h->gb, d->hgrad + d->C, sizeof h->gb);
	if (be->sync(be, e))
		return -1;
	be->zero(be, d->pstats, RL_PPO_N * sizeof *d->pstats);
	be->zero(be, d->hgrad, ((size_t)d->C + 1) * sizeof *d->hgrad);
	return 0;
}
