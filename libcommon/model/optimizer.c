/* optimizer.c: AdamW over the model's parameter buffer, the cosine schedule and
 * gradient clipping (see optimizer.h). */
#include "model/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double CLIP_EPS = 1e-6;

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
	if (max_norm <= 0 || !(norm > max_norm))
		return 1.0;
	return max_norm / (norm + CLIP_EPS);
}

int optim_init(optim *o, const optim_config *c, model *m, lm_err *e)
{
	memset(o, 0, sizeof *o);
	o->cfg = *c;
	o->m = m->be->alloc(m->n_params * sizeof(float));
	o->v = m->be->alloc(m->n_params * sizeof(float));
	o->n_tensors = model_tensors(&m->cfg, &o->tensors);
	if (!o->m || !o->v || o->n_tensors < 0) {
		optim_free(o, m);
		return lm_seterr(e, "out of memory for the optimizer state");
	}
	m->be->zero(o->m, m->n_params * sizeof(float));
	m->be->zero(o->v, m->n_params * sizeof(float));
	return 0;
}

void optim_free(optim *o, model *m)
{
	if (o->m)
		m->be->release(o->m);
	if (o->v)
		m->be->release(o->v);
	free(o->tensors);
	memset(o, 0, sizeof *o);
}

double optim_grad_norm(const model *m)
{
	return sqrt(m->be->sumsq(m->grads, m->n_params));
}

/* Tensors are contiguous in buffer order: step each maximal run with the
 * same decay flag in one call. */
void optim_step(optim *o, model *m, double lr, double grad_scale)
{
	o->t++;
	adamw_hparams h = {
		.lr = (float)lr, .beta1 = (float)o->cfg.beta1, .beta2 = (float)o->cfg.beta2,
		.eps = (float)o->cfg.eps, .t = o->t, .grad_scale = (float)grad_scale,
	};
	for (int i = 0; i < o->n_tensors;) {
		int j = i;
		size_t n = 0;
		while (j < o->n_tensors && o->tensors[j].decay == o->tensors[i].decay)
			n += o->tensors[j++].numel;
		h.weight_decay = o->tensors[i].decay ? (float)o->cfg.weight_decay : 0.0f;
		size_t off = o->tensors[i].offset;
		m->be->adamw_step(m->params + off, m->grads + off, o->m + off, o->v + off, n, &h);
		i = j;
	}
}
