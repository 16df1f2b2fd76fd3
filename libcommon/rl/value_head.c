/* value_head.c: the PPO value head, forward, backward, AdamW and its
 * checkpoint tensors (see value_head.h). */
#include "rl/value_head.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vh_init(value_head *h, int d, lm_err *e)
{
	memset(h, 0, sizeof *h);
	h->d = d;
	h->w = calloc((size_t)d, sizeof *h->w);
	h->gw = calloc((size_t)d, sizeof *h->gw);
	h->mw = calloc((size_t)d, sizeof *h->mw);
	h->vw = calloc((size_t)d, sizeof *h->vw);
	if (!h->w || !h->gw || !h->mw || !h->vw) {
		vh_free(h);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

void vh_free(value_head *h)
{
	free(h->w);
	free(h->gw);
	free(h->mw);
	free(h->vw);
	memset(h, 0, sizeof *h);
}

int vh_load(value_head *h, const char *path, lm_err *e)
{
	sft_file f;
	if (sft_open(&f, path, e))
		return -1;
	int rc = 0;
	const sft_tensor *w, *b;
	int64_t ws[2] = { 1, h->d }, bs[1] = { 1 };
	if (sft_find(&f, VALUE_HEAD_WEIGHT) || sft_find(&f, VALUE_HEAD_BIAS)) {
		if (sft_expect(&f, VALUE_HEAD_WEIGHT, SFT_F32, 2, ws, &w, e) ||
		    sft_expect(&f, VALUE_HEAD_BIAS, SFT_F32, 1, bs, &b, e)) {
			rc = -1;
		} else {
			memcpy(h->w, w->data, (size_t)h->d * sizeof *h->w);
			memcpy(h->b, b->data, sizeof h->b);
			rc = 1;
		}
	}
	sft_close(&f);
	return rc;
}

void vh_tensors(const value_head *h, sft_tensor out[2])
{
	sft_tensor w = { VALUE_HEAD_WEIGHT, SFT_F32, 2, { 1, h->d }, h->w, (size_t)h->d * sizeof *h->w };
	sft_tensor b = { VALUE_HEAD_BIAS, SFT_F32, 1, { 1 }, h->b, sizeof h->b };
	out[0] = w;
	out[1] = b;
}

void vh_forward(const value_head *h, const float *hidden, size_t n, float *values)
{
	for (size_t i = 0; i < n; i++) {
		const float *x = hidden + i * (size_t)h->d;
		double s = h->b[0];
		for (int j = 0; j < h->d; j++)
			s += (double)h->w[j] * x[j];
		values[i] = (float)s;
	}
}

void vh_backward(value_head *h, const float *hidden, const float *dvalues, size_t n,
		 float *dhidden)
{
	for (size_t i = 0; i < n; i++) {
		const float *x = hidden + i * (size_t)h->d;
		float g = dvalues[i], *dx = dhidden + i * (size_t)h->d;
		for (int j = 0; j < h->d; j++) {
			h->gw[j] += g * x[j];
			dx[j] = g * h->w[j];
		}
		h->gb[0] += g;
	}
}

void vh_zero_grad(value_head *h)
{
	memset(h->gw, 0, (size_t)h->d * sizeof *h->gw);
	h->gb[0] = 0;
}

double vh_grad_sumsq(const value_head *h)
{
	double s = (double)h->gb[0] * h->gb[0];
	for (int j = 0; j < h->d; j++)
		s += (double)h->gw[j] * h->gw[j];
	return s;
}

static void adamw(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1,
		  double b2, double eps, double scale, long long t)
{
	double c1 = 1 - pow(b1, (double)t), c2 = 1 - pow(b2, (double)t);
	for (size_t i = 0; i < n; i++) {
		double gi = g[i] * scale;
		m[i] = (float)(b1 * m[i] + (1 - b1) * gi);
		v[i] = (float)(b2 * v[i] + (1 - b2) * gi * gi);
		p[i] -= (float)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps));
	}
}

void vh_step(value_head *h, double lr, double beta1, double beta2, double eps, double grad_scale)
{
	h->t++;
	adamw(h->w, h->gw, h->mw, h->vw, (size_t)h->d, lr, beta1, beta2, eps, grad_scale, h->t);
	adamw(h->b, h->gb, h->mb, h->vb, 1, lr, beta1, beta2, eps, grad_scale, h->t);
}
