/* rl_update_forward.c: the forward passes every algorithm of rl-update
 * shares: the per-sequence scratch, one sequence's response log-probs and
 * entropies, and the reference policy's per-token log-probs. */
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "kernels/lse.h"
#include "model/ckpt.h"
#include "rl/rl_loss.h"

void work_free(work *w)
{
	free(w->logits);
	free(w->logp);
	free(w->grad);
	free(w->w);
	free(w->mask);
}

int work_init(work *w, int maxT, int V, lm_err *e)
{
	w->logits = malloc((size_t)maxT * V * sizeof *w->logits);
	w->logp = malloc((size_t)maxT * sizeof *w->logp);
	w->grad = malloc((size_t)maxT * sizeof *w->grad);
	w->w = malloc((size_t)maxT * sizeof *w->w);
	w->mask = malloc((size_t)maxT);
	if (!w->logits || !w->logp || !w->grad || !w->w || !w->mask) {
		work_free(w);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

int seq_forward(model *m, const seq *s, work *w, stats *st, lm_err *e)
{
	double mean_ce;
	if (model_forward(m, s->ids, s->targets, 1, s->T, &mean_ce, e))
		return -1;
	int V = m->cfg.vocab;
	if (model_read_logits(m, w->logits, (size_t)s->T, e))
		return -1;
	for (int t = 0; t < s->T; t++) {
		w->mask[t] = s->targets[t] >= 0;
		w->logp[t] = 0;
		if (!w->mask[t])
			continue;
		const float *z = w->logits + (size_t)t * V;
		w->logp[t] = (float)((double)z[s->targets[t]] - lse_row_cpu(z, (size_t)V));
		if (st) {
			float h;
			rl_entropy(z, 1, (size_t)V, &h);
			st->entropy_sum += h;
		}
	}
	return 0;
}
int reference_tokens(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		     int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	work w = { 0 };
	if (model_init(&ref, cfg, be, 1, maxT, e))
		return -1;
	int rc = work_init(&w, maxT, cfg->vocab, e);
	if (rc == 0 && (rc = ckpt_load(o->ref, &ref, NULL, NULL, e)))
		lm_err_prefix(e, "reference checkpoint");
	for (size_t i = 0; rc == 0 && i < v->n; i++) {
		seq *s = &v->s[i];
		if (!(s->ref_tok = malloc(((size_t)s->T + 1) * sizeof *s->ref_tok)))
			rc = lm_seterr(e, "out of memory");
		else if (!(rc = seq_forward(&ref, s, &w, NULL, e)))
			memcpy(s->ref_tok, w.logp, (size_t)s->T * sizeof *s->ref_tok);
	}
	work_free(&w);
	model_free(&ref);
	return rc;
}
