/* rl_device.c: rl-update's loss op on the backend between a micro-batch's
 * forward and backward passes (see rl_device.h). */
#include "rl/rl_device.h"

#include <string.h>

void rl_dev_free(rl_dev *d)
{
	if (!d->be)
		return;
	void *bufs[] = { d->w, d->score, d->old, d->ref, d->row_w, d->stats, d->ws };
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
	be->upload(be, d->score, r->score, (size_t)B * sizeof *r->score);
	be->upload(be, d->row_w, r->row_w, (size_t)B * sizeof *r->row_w);
	if (r->old)
		be->upload(be, d->old, r->old, n * sizeof *r->old);
	if (r->ref)
		be->upload(be, d->ref, r->ref, n * sizeof *r->ref);
	const float *ent = r->entropy ? model_token_entropy(m, e) : NULL;
	if (r->entropy && !ent)
		return -1;
	be->rl_tok_pg(be, d->w, d->stats, d->ws, model_token_ce(m), model_token_targets(m),
		      d->score, d->row_w, r->old ? d->old : NULL, r->ref ? d->ref : NULL, ent, B, T,
		      r->a);
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
