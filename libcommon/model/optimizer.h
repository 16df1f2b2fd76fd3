/* optimizer.h: the optimizer side of training: parameter groups over the
 * model's flat parameter buffer (AdamW on everything, or Muon on the
 * blocks' matrices and AdamW on the rest), the learning-rate schedules, and
 * gradient clipping by global L2 norm.
 *
 * Groups.  With OPTIM_ADAMW every tensor is AdamW's.  With OPTIM_MUON the
 * blocks' 2-D matrices (q, k, v, o, gate, up, down: every model.layers.*
 * tensor with two dimensions) are Muon's, each orthogonalised as its own
 * matrix as torch would with separate parameters (q/k/v share one [3C, C]
 * buffer and gate/up one [2F, C] for the forward pass; Muon never sees
 * them joined), batched by shape; the embedding, the LM head and the
 * RMSNorm gains stay AdamW's.  Each group has its own peak lr and weight
 * decay; the schedule's shape is shared, scaled to each group's peak (and
 * floor lr_min / lr_max of it).  Weight decay applies to the matrices, not
 * to the gains (model_tensor.decay).
 *
 * State: AdamW's moments m and v over the whole buffer; a Muon matrix's
 * momentum buffer lives in m at the matrix's offset (AdamW's m and v are
 * unused there), so the checkpoint's "optimizer.m" holds it; t counts the
 * steps taken (AdamW's bias correction, Muon's momentum warm-up). */
#ifndef LMPIPE_OPTIMIZER_H
#define LMPIPE_OPTIMIZER_H

#include "model/model.h"

typedef enum optim_kind { OPTIM_ADAMW = 0, OPTIM_MUON = 1 } optim_kind;
typedef enum lr_schedule { SCHED_COSINE = 0, SCHED_WSD = 1, SCHED_CONSTANT = 2 } lr_schedule;
typedef enum decay_shape { DECAY_LINEAR = 0, DECAY_SQRT = 1 } decay_shape;

/* The names options and checkpoints use, indexed by the enums above,
 * NULL-terminated. */
extern const char *const optim_kind_names[];
extern const char *const lr_schedule_names[];
extern const char *const decay_shape_names[];
extern const char *const muon_scale_names[];
/* The index of name in a table above, or -1. */
int optim_name_index(const char *const *names, const char *name);

typedef struct muon_config {
	double lr;                   /* peak lr of the Muon group */
	double momentum;             /* after the warm-up */
	double momentum_start;       /* at step 0 of a warm-up */
	long long momentum_warmup;   /* steps from momentum_start to momentum; 0: none */
	double weight_decay;
	int scale;                   /* muon_scale (kernels/muon.h) */
	int ns_steps;                /* Newton-Schulz iterations (0: MUON_NS_STEPS) */
} muon_config;

typedef struct optim_config {
	double lr_max, lr_min;       /* the AdamW group's schedule peak and floor */
	long long warmup, cycle;     /* steps: linear warmup, then the decay ends at cycle */
	double beta1, beta2, eps, weight_decay;   /* AdamW */
	double clip;                 /* max global grad norm; <= 0: no clipping */
	int schedule;                /* lr_schedule; 0: cosine */
	double decay_frac;           /* WSD: the fraction of cycle that decays */
	int decay_shape;             /* WSD: decay_shape */
	int kind;                    /* optim_kind; 0: AdamW everywhere */
	muon_config muon;
} optim_config;

/* The Muon group's matrices of one shape, or of a shape and its transpose
 * (optimizer.c). */
typedef struct optim_muon_set {
	int rows, cols, count;
	int n_tr;                    /* the last n_tr of them are cols x rows */
	size_t *offs;                /* backend memory, count offsets */
	size_t ws_off;               /* its part of muon_ws (bytes): the sets may run side
				      * by side (backend.h muon_join) */
} optim_muon_set;

typedef struct optim {
	optim_config cfg;
	float *m, *v;                /* backend memory, n_params each */
	long long t;                 /* steps taken */
	model_tensor *tensors;
	int n_tensors;
	unsigned char *is_muon;      /* per tensor: 1 in the Muon group */
	optim_muon_set *sets;        /* the Muon group by shape */
	int n_sets;
	void *muon_ws;               /* the Muon steps' workspace (backend memory) */
	double *dv;                  /* backend memory: the staged step's values (OPTIM_DEV_N) */
} optim;

/* o->dv: AdamW's values (kernels/adamw.h's dev), then Muon's. */
enum { OPTIM_DEV_N = ADAMW_DEV_N + MUON_DEV_N };

/* CS336 get_lr_cosine_schedule: t < warmup: t/warmup * max; warmup <= t <=
 * cycle: min + (1 + cos(pi (t - warmup) / (cycle - warmup))) / 2 * (max -
 * min); after: min. */
double lr_cosine(long long t, double lr_max, double lr_min, long long warmup, long long cycle);
/* Warmup-stable-decay: t < warmup: t/warmup * max; then max until the last
 * decay_frac of cycle, D = round(decay_frac * cycle) steps from S = cycle -
 * D (S at least warmup); over those, with x = (t - S) / D, min + (max - min)
 * (1 - x) (linear) or (1 - sqrt(x)) (sqrt); after cycle: min. */
double lr_wsd(long long t, double lr_max, double lr_min, long long warmup, long long cycle,
	      double decay_frac, decay_shape shape);
/* The schedule of c at step t (steps completed before this one) as a factor
 * of a group's peak: 1 at the peak, lr_min / lr_max at the floor (constant:
 * the warmup, then 1). */
double optim_schedule(const optim_config *c, long long t);
/* The Muon momentum at step t (the linear warm-up, then momentum). */
double optim_muon_momentum(const muon_config *c, long long t);

/* The factor gradients are multiplied by: max_norm / (norm + 1e-6) when
 * norm > max_norm, else 1 (torch.nn.utils.clip_grad_norm_). */
double clip_factor(double norm, double max_norm);

/* A usage error (-1) for a configuration that cannot run: names what. */
int optim_config_check(const optim_config *c, lm_err *e);
int optim_init(optim *o, const optim_config *c, model *m, lm_err *e);
void optim_free(optim *o, model *m);
/* Global L2 norm of m->grads (waits for the device; NaN if it failed). */
double optim_grad_norm(const model *m);
/* One step at AdamW learning rate lr on the gradients times grad_scale
 * (the Muon group, if any, at its peak scaled by lr / lr_max). */
void optim_step(optim *o, model *m, double lr, double grad_scale);

/* The device-resident step, nothing waiting for the host: optim_clip
 * queues the gradient's sum of squares (m->sc->sumsq) and the clip factor
 * for o->cfg.clip (m->sc->grad_scale); optim_step_clipped the step with
 * that factor (AdamW at lr, Muon at its peak scaled by lr / lr_max), which
 * also refreshes the compute copy of the weights; optim_step_scheduled the
 * same with every group at its peak times factor (optim_schedule).  Read
 * the norm afterwards with model_read_scalars. */
void optim_clip(optim *o, model *m);
void optim_step_clipped(optim *o, model *m, double lr);
void optim_step_scheduled(optim *o, model *m, double factor);

/* The steps above in two halves, for a step recorded once and replayed
 * (a CUDA graph): optim_stage_* counts the step and uploads its values
 * (learning rates, AdamW's bias corrections, Muon's momentum) to o->dv;
 * optim_step_staged queues the step itself, which reads them there, so
 * its launches are the same every step.  optim_step_clipped is
 * optim_stage_clipped then optim_step_staged, and likewise scheduled. */
void optim_stage_clipped(optim *o, model *m, double lr);
void optim_stage_scheduled(optim *o, model *m, double factor);
void optim_step_staged(optim *o, model *m);

/* The groups in words (one line each, for the start of a run) and as a
 * JSON array of objects (name, tensors, parameters, lr, weight_decay and
 * the group's own hyper-parameters); 0, or -1 if buf is too small. */
int optim_describe(const optim *o, char *buf, size_t n);
int optim_groups_json(const optim *o, char *buf, size_t n);

/* AdamW over the part [lo, hi) of the flat parameter buffer alone, for
 * the optimizer-state sharding of data parallel training (ZeRO,
 * optimizer_range.c; AdamW everywhere only, a usage error for Muon,
 * which needs whole matrices): optim_init_range allocates m and v for hi - lo
 * values (o->m[i - lo] is parameter i's), optim_step_range steps those
 * parameters on the gradients grads[0 .. hi - lo) (grads[i - lo] is
 * parameter i's: m->grads + lo, or a shard of the gradients alone), with
 * the clip factor in m->sc->grad_scale, refreshes their compute copy and
 * counts the step. */
int optim_init_range(optim *o, const optim_config *c, model *m, size_t lo, size_t hi, lm_err *e);
void optim_step_range(optim *o, model *m, const float *grads, double lr, size_t lo, size_t hi);
/* optim_step_range after optim_stage_clipped or _scheduled: the step at
 * the staged values (optim_step_staged's counterpart). */
void optim_step_range_staged(optim *o, model *m, const float *grads, size_t lo, size_t hi);

#endif
