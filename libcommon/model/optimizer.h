/* optimizer.h: the optimizer side of training: AdamW state over the model's
 * flat parameter buffer, the learning-rate schedule, and gradient clipping
 * by global L2 norm.
 *
 * Weight decay applies to the matrices (embedding, projections, LM head),
 * not to the RMSNorm gains (model_tensor.decay). */
#ifndef LMPIPE_OPTIMIZER_H
#define LMPIPE_OPTIMIZER_H

#include "model/model.h"

typedef struct optim_config {
	double lr_max, lr_min;       /* schedule peak and floor */
	long long warmup, cycle;     /* steps: linear warmup, then cosine until cycle */
	double beta1, beta2, eps, weight_decay;
	double clip;                 /* max global grad norm; <= 0: no clipping */
} optim_config;

typedef struct optim {
	optim_config cfg;
	float *m, *v;                /* backend memory, n_params each */
	long long t;                 /* AdamW steps taken */
	model_tensor *tensors;
	int n_tensors;
} optim;

/* CS336 get_lr_cosine_schedule: t < warmup: t/warmup * max; warmup <= t <=
 * cycle: min + (1 + cos(pi (t - warmup) / (cycle - warmup))) / 2 * (max -
 * min); after: min. */
double lr_cosine(long long t, double lr_max, double lr_min, long long warmup, long long cycle);

/* The factor gradients are multiplied by: max_norm / (norm + 1e-6) when
 * norm > max_norm, else 1 (torch.nn.utils.clip_grad_norm_). */
double clip_factor(double norm, double max_norm);

int optim_init(optim *o, const optim_config *c, model *m, lm_err *e);
void optim_free(optim *o, model *m);
/* Global L2 norm of m->grads (waits for the device; NaN if it failed). */
double optim_grad_norm(const model *m);
/* One AdamW step at learning rate lr on the gradients times grad_scale. */
void optim_step(optim *o, model *m, double lr, double grad_scale);

/* The device-resident step, nothing waiting for the host: optim_clip
 * queues the gradient's sum of squares (m->sc->sumsq) and the clip factor
 * for o->cfg.clip (m->sc->grad_scale); optim_step_clipped the AdamW step
 * with that factor, which also refreshes the compute copy of the weights.
 * Read the norm afterwards with model_read_scalars. */
void optim_clip(optim *o, model *m);
void optim_step_clipped(optim *o, model *m, double lr);

/* AdamW over the part [lo, hi) of the flat parameter buffer alone, for
 * the optimizer-state sharding of data parallel training (ZeRO,
 * optimizer_range.c): optim_init_range allocates m and v for hi - lo
 * values (o->m[i - lo] is parameter i's), optim_step_range steps those
 * parameters (with the clip factor in m->sc->grad_scale, and their
 * compute copy) and counts the step. */
int optim_init_range(optim *o, const optim_config *c, model *m, size_t lo, size_t hi, lm_err *e);
void optim_step_range(optim *o, model *m, double lr, size_t lo, size_t hi);

#endif
