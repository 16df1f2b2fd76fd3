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

typedef struct adamw_hparams {
	float lr, beta1, beta2, eps, weight_decay;
	long long t;
	float grad_scale;
} adamw_hparams;

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

#endif
