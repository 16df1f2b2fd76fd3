/* optimizer_range.c: AdamW on a part of the parameter buffer, with state
 * for that part alone (the ZeRO shards of data parallel training; see
 * optimizer.h).  Each element's update is the one optim_step_clipped
 * makes, so the shards together step exactly as one whole-buffer step. */
#include "model/optimizer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/muon.h"
#include "model/profile.h"

int optim_init_range(optim *o, const optim_config *c, model *m, size_t lo, size_t hi, lm_err *e)
{
	memset(o, 0, sizeof *o);
	if (optim_config_check(c, e))
		return -1;
	if (c->kind != OPTIM_ADAMW)
		return lm_usage_err(e, "the optimizer state can be sharded (ZeRO) for AdamW only: Muon "
				    "orthogonalises whole matrices; give --zero 0 with Muon");
	return optim_state_init(o, c, m, hi > lo ? hi - lo : 1, "the optimizer state's shard", e);
}

void optim_step_range(optim *o, model *m, const float *grads, double lr, size_t lo, size_t hi)
{
	optim_stage_clipped(o, m, lr);
	optim_step_range_staged(o, m, grads, lo, hi);
}

void optim_step_range_staged(optim *o, model *m, const float *grads, size_t lo, size_t hi)
{
	lm_backend *be = m->be;
	size_t esize = lm_dtype_size(be->act);
	adamw_hparams h = {
		.beta1 = (float)o->cfg.beta1, .beta2 = (float)o->cfg.beta2, .eps = (float)o->cfg.eps,
		.dev = o->dv,
	};
	/* one call per run of adjacent tensors with the same decay flag, as
	 * optim_step's adamw_steps: the buffer holds the tensors in order */
	for (int i = 0; i < o->n_tensors;) {
		const model_tensor *t = &o->tensors[i];
		int j = i + 1;
		while (j < o->n_tensors && o->tensors[j].decay == t->decay &&
		       o->tensors[j].offset == o->tensors[j - 1].offset + o->tensors[j - 1].numel)
			j++;
		const model_tensor *last = &o->tensors[j - 1];
		i = j;
		size_t a = t->offset > lo ? t->offset : lo;
		size_t b = last->offset + last->numel < hi ? last->offset + last->numel : hi;
		if (b <= a)
			continue;
		size_t n = b - a;
		h.weight_decay = t->decay ? (float)o->cfg.weight_decay : 0.0f;
		void *p_act = m->wact == m->params ? NULL : (char *)m->wact + a * esize;
		/* bytes as adamw_flush counts them (optimizer.c) */
		PROF(be, "AdamW", 12.0 * n, (28.0 + (p_act ? esize : 0)) * n,
		     be->adamw_step(be, m->params + a, grads + (a - lo), o->m + (a - lo), o->v + (a - lo),
				    p_act, n, &h, &m->sc->grad_scale));
	}
}
