/* optimizer.c: AdamW over the model's parameter buffer, the cosine schedule and
 * gradient clipping (see optimizer.h). */
#include "model/optimizer.h"

#include "model/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double lr_cosine(long long t, double lr_max, double lr_min, long long warmup, long long cycle)
{
	if (t < warmup)
		return (double)t / warmup * lr_max;
	if (t > cycle || cycle <= warmup)
		return lr_min;
	double frac = (double)(t - warmup) / (double)(cycle - warmup);
	return lr_min + 0.5 * (1.0 + cos(M_PI * frac)) * (lr_max - lr_min);
}

double clip_factor(double norm, double max_norm)
{
	return adamw_clip_factor(norm, max_norm);
}

int optim_init(optim *o, const optim_config *c, model *m, lm_err *e)
{
	memset(o, 0, sizeof *o);
	o->cfg = *c;
	lm_backend *be = m->be;
	o->m = be->alloc(be, m->n_params * sizeof(float));
	o->v = o->m ? be->alloc(be, m->n_params * sizeof(float)) : NULL;
	o->n_tensors = model_tensors(&m->cfg, &o->tensors);
	if (!o->m || !o->v || o->n_tensors < 0) {
		lm_err why;
		be->sync(be, &why);
		optim_free(o, m);
		return lm_seterr(e, "%s, for the optimizer state", why.msg);
	}
	be->zero(be, o->m, m->n_params * sizeof(float));
	be->zero(be, o->v, m->n_params * sizeof(float));
	return be->sync(be, e);
}

void optim_free(optim *o, model *m)
{
	if (o->m)
		m->be->release(m->be, o->m);
	if (o->v)
		m->be->release(m->be, o->v);
	free(o->tensors);
	memset(o, 0, sizeof *o);
}

void optim_clip(optim *o, model *m)
{
	lm_backend *be = m->be;
	PROF(be, "gradient norm", 2.0 * m->n_params, 4.0 * m->n_params,
	     be->sumsq(be, &m->sc->sumsq, m->grads, m->n_params));
	be->clip_scale(be, &m->sc->grad_scale, &m->sc->sumsq, o->cfg.clip);
}

double optim_grad_norm(const model *m)
{
	lm_scalars s;
	m->be->sumsq(m->be, &m->sc->sumsq, m->grads, m->n_params);
	if (model_read_scalars(m, &s, NULL))
		return NAN;
	return sqrt(s.sumsq);
}

/* Tensors are contiguous in buffer order: step each maximal run with the
 * same decay flag in one call. */
void optim_step_clipped(optim *o, model *m, double lr)
{
	lm_backend *be = m->be;
	size_t esize = lm_dtype_size(be->act);
	o->t++;
	adamw_hparams h = {
		.lr = (float)lr, .beta1 = (float)o->cfg.beta1, .beta2 = (float)o->cfg.beta2,
		.eps = (float)o->cfg.eps, .t = o->t,
	};
	for (int i = 0; i < o->n_tensors;) {
		int j = i;
		size_t n = 0;
		while (j < o->n_tensors && o->tensors[j].decay == o->tensors[i].decay)
			n += o->tensors[j++].numel;
		h.weight_decay = o->tensors[i].decay ? (float)o->cfg.weight_decay : 0.0f;
		size_t off = o->tensors[i].offset;
		void *p_act = m->wact == m->params ? NULL : (char *)m->wact + off * esize;
		PROF(be, "AdamW", 12.0 * n, (20.0 + (p_act ? esize : 0)) * n,
		     be->adamw_step(be, m->params + off, m->grads + off, o->m + off, o->v + off, p_act,
				    n, &h, &m->sc->grad_scale));
		i = j;
	}
}

void optim_step(optim *o, model *m, double lr, double grad_scale)
{
	float s = (float)grad_scale;
	m->be->upload(m->be, &m->sc->grad_scale, &s, sizeof s);
	optim_step_clipped(o, m, lr);
}
