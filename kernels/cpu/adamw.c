/* adamw.c: CPU twin of the AdamW step and the gradient sum of squares (see
 * adamw.h). */
#include "kernels/adamw.h"

#include <math.h>
#include <string.h>

void adamw_dev_values(double out[ADAMW_DEV_N], double lr, float beta1, float beta2, long long t)
{
	out[ADAMW_DEV_LR] = lr;
	out[ADAMW_DEV_BC1] = 1.0 - pow(beta1, (double)t);
	out[ADAMW_DEV_BC2] = 1.0 - pow(beta2, (double)t);
}

void adamw_step_cpu(float *p, const float *g, float *m, float *v, size_t n,
		    const adamw_hparams *h)
{
	double dv[ADAMW_DEV_N];
	if (h->dev)
		memcpy(dv, h->dev, sizeof dv);
	else
		adamw_dev_values(dv, h->lr, h->beta1, h->beta2, h->t);
	float lr = (float)dv[ADAMW_DEV_LR];
	float step = (float)(lr / dv[ADAMW_DEV_BC1]), rbc2 = (float)(1.0 / sqrt(dv[ADAMW_DEV_BC2]));
	float decay = 1.0f - lr * h->weight_decay;
	float b1 = h->beta1, b2 = h->beta2, s = h->grad_scale, eps = h->eps;
	/* lanes of the same IEEE operations (the build gives the CPU twins
	 * -fno-math-errno, so sqrtf vectorizes): the same bits as one by one */
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * s;
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = p[i] * decay - step * mi / (sqrtf(vi) * rbc2 + eps);
	}
}

double sumsq_cpu(const float *g, size_t n)
{
	double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * g[i];
	return s;
}

double adamw_clip_factor(double norm, double max_norm)
{
	if (max_norm <= 0 || !(norm > max_norm))
		return 1.0;
	return max_norm / (norm + ADAMW_CLIP_EPS);
}
