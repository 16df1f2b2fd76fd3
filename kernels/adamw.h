/* adamw.h: one AdamW step (decoupled weight decay, bias correction), as
 * torch.optim.AdamW computes it, and the sum of squares for the global
 * gradient norm.
 *
 *   p -= lr * wd * p
 *   m  = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2     (g = grad * grad_scale)
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *
 * t is the 1-based step count.  grad_scale folds gradient clipping into the
 * step (1 when not clipping). */
#ifndef LMPIPE_ADAMW_H
#define LMPIPE_ADAMW_H

#include <stddef.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct adamw_hparams {
	float lr, beta1, beta2, eps, weight_decay;
	long long t;
	float grad_scale;
	/* NULL, or memory beside the parameters (the device's for CUDA) holding
	 * this step's {lr, 1 - beta1^t, 1 - beta2^t} as doubles, read in place
	 * of lr and t when the step runs: a recorded CUDA graph replays the
	 * same launches with the values of each new step.  The result is the
	 * same bits as with lr and t given. */
	const double *dev;
} adamw_hparams;

enum { ADAMW_DEV_LR = 0, ADAMW_DEV_BC1 = 1, ADAMW_DEV_BC2 = 2, ADAMW_DEV_N = 3 };
/* The three values of dev for lr and t, as the step computes them. */
void adamw_dev_values(double out[ADAMW_DEV_N], double lr, float beta1, float beta2, long long t);

void adamw_step_cpu(float *p, const float *g, float *m, float *v, size_t n,
		    const adamw_hparams *h);
/* The factor gradients are multiplied by for clipping at max_norm: max_norm
 * / (norm + 1e-6) when norm > max_norm, else 1 (max_norm <= 0: no clipping),
 * as torch.nn.utils.clip_grad_norm_.  The CUDA backend computes the same
 * expression on the device. */
#define ADAMW_CLIP_EPS 1e-6
double adamw_clip_factor(double norm, double max_norm);
/* sum of g[i]^2, accumulated in double */
double sumsq_cpu(const float *g, size_t n);

/* CUDA twins, device memory, stream a cudaStream_t, 0 or -1 if a launch
 * failed.  sumsq_cuda writes *out (double) through SUMSQ_CUDA_PARTIALS
 * doubles of scratch, in a fixed order; clip_scale_cuda writes *scale =
 * adamw_clip_factor(sqrt(*sumsq), max_norm); adamw_step_cuda multiplies
 * the gradients by *grad_scale (device; h->grad_scale is ignored) and, with
 * p_act, also writes the new weights in bf16 (uint16_t bit patterns). */
enum { SUMSQ_CUDA_PARTIALS = 1024 };
int sumsq_cuda(double *out, const float *g, size_t n, double *partials, void *stream);
int clip_scale_cuda(float *scale, const double *sumsq, double max_norm, void *stream);
int adamw_step_cuda(float *p, const float *g, float *m, float *v, uint16_t *p_act, size_t n,
		    const adamw_hparams *h, const float *grad_scale, void *stream);
/* Several tensors in one launch: segment i is n[i] elements at off[i]
 * (elements) into p, g, m, v and p_act, with h's weight decay where
 * decay[i] is set and none elsewhere; each element's arithmetic is
 * adamw_step_cuda's (the same bits).  Segments beyond ADAMW_SEGS_MAX take
 * more launches. */
enum { ADAMW_SEGS_MAX = 64 };
typedef struct adamw_seg {
	size_t off, n;
	int decay;
} adamw_seg;
int adamw_multi_cuda(float *p, const float *g, float *m, float *v, uint16_t *p_act,
		     const adamw_seg *segs, int n_segs, const adamw_hparams *h,
		     const float *grad_scale, void *stream);

#ifdef __cplusplus
}
#endif

#endif
