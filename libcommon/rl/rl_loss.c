/* rl_loss.c: fine-tuning and RL losses with their gradients (see rl_loss.h). */
#include "rl/rl_loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rl_entropy(const float *logits, size_t rows, size_t vocab, float *out)
{
	for (size_t r = 0; r < rows; r++) {
		const float *z = logits + r * vocab;
		float mx = -INFINITY;
		for (size_t j = 0; j < vocab; j++)
			mx = z[j] > mx ? z[j] : mx;
		double se = 0, sez = 0;
		for (size_t j = 0; j < vocab; j++) {
			double w = exp((double)z[j] - mx);
			se += w;
			sez += w * ((double)z[j] - mx);
		}
		/* H = log sum e^z - E_p[z], both shifted by the max */
		out[r] = (float)(log(se) - sez / se);
	}
}

void rl_entropy_grad(const float *logits, size_t vocab, float *grad)
{
	float h;
	rl_entropy(logits, 1, vocab, &h);
	float mx = -INFINITY;
	for (size_t j = 0; j < vocab; j++)
		mx = logits[j] > mx ? logits[j] : mx;
	double se = 0;
	for (size_t j = 0; j < vocab; j++)
		se += exp((double)logits[j] - mx);
	double lse = log(se);
	for (size_t j = 0; j < vocab; j++) {
		double logp = (double)logits[j] - mx - lse;
		grad[j] = (float)(-exp(logp) * (logp + h));
	}
}

/* Split shape around dim into outer x n x inner. */
static int split_dims(const size_t *shape, int ndim, int dim, size_t *outer, size_t *n,
		      size_t *inner, lm_err *e)
{
	size_t total = 1;
	for (int i = 0; i < ndim; i++)
		total *= shape[i];
	if (dim == RL_DIM_ALL) {
		*outer = 1, *n = total, *inner = 1;
		return 0;
	}
	int d = dim < 0 ? dim + ndim : dim;
	if (d < 0 || d >= ndim)
		return lm_seterr(e, "dimension %d is out of range for %d dimensions", dim, ndim);
	*outer = 1, *inner = 1, *n = shape[d];
	for (int i = 0; i < d; i++)
		*outer *= shape[i];
	for (int i = d + 1; i < ndim; i++)
		*inner *= shape[i];
	return 0;
}

/* constant <= 0 means "divide by the mask count" (masked mean). */
static int masked_reduce(const float *x, const uint8_t *mask, const size_t *shape, int ndim,
			 int dim, double constant, float *out, lm_err *e)
{
	size_t outer = 0, n = 0, inner = 0;
	if (split_dims(shape, ndim, dim, &outer, &n, &inner, e))
		return -1;
	for (size_t o = 0; o < outer; o++)
		for (size_t i = 0; i < inner; i++) {
			double s = 0, cnt = 0;
			for (size_t k = 0; k < n; k++) {
				size_t at = (o * n + k) * inner + i;
				if (mask[at]) {
					s += x[at];
					cnt += 1;
				}
			}
			out[o * inner + i] = (float)(s / (constant > 0 ? constant : cnt));
		}
	return 0;
}

int rl_masked_mean(const float *x, const uint8_t *mask, const size_t *shape, int ndim,
		   int dim, float *out, lm_err *e)
{
	return masked_reduce(x, mask, shape, ndim, dim, 0, out, e);
}

int rl_masked_normalize(const float *x, const uint8_t *mask, const size_t *shape, int ndim,
			int dim, double constant, float *out, lm_err *e)
{
	if (!(constant > 0))
		return lm_seterr(e, "normalize constant must be positive (got %g)", constant);
	return masked_reduce(x, mask, shape, ndim, dim, constant, out, e);
}

int rl_group_normalize(const float *rewards, size_t n, size_t group_size, int by_std,
		       double eps, float *adv, lm_err *e)
{
	if (group_size == 0 || n % group_size)
		return lm_seterr(e, "%zu rewards do not split into groups of %zu", n, group_size);
	if (by_std && group_size < 2)
		return lm_seterr(e, "groups of size 1: the standard deviation is undefined "
				 "(sample several completions per prompt, or do not divide by the std)");
	for (size_t g = 0; g < n; g += group_size) {
		double mean = 0, ss = 0;
		for (size_t i = 0; i < group_size; i++)
			mean += rewards[g + i];
		mean /= (double)group_size;
		for (size_t i = 0; i < group_size; i++)
			ss += (rewards[g + i] - mean) * (rewards[g + i] - mean);
		double div = by_std ? sqrt(ss / (double)(group_size - 1)) + eps : 1;
		for (size_t i = 0; i < group_size; i++)
			adv[g + i] = (float)((rewards[g + i] - mean) / div);
	}
	return 0;
}

int rl_pg_type_parse(const char *s, rl_pg_type *t, lm_err *e)
{
	static const struct { const char *name; rl_pg_type t; } names[] = {
		{ "no_baseline", RL_PG_NO_BASELINE },
		{ "reinforce_with_baseline", RL_PG_REINFORCE_BASELINE },
		{ "grpo_clip", RL_PG_GRPO_CLIP },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i].name)) {
			*t = names[i].t;
			return 0;
		}
	return lm_usage_err(e, "unknown loss type '%s' (no_baseline, reinforce_with_baseline, grpo_clip)", s);
}

void rl_naive_pg_loss(const float *score, const float *logp, size_t B, size_t T,
		      float *loss, float *dloss)
{
	for (size_t b = 0; b < B; b++)
		for (size_t t = 0; t < T; t++) {
			loss[b * T + t] = -score[b] * logp[b * T + t];
			if (dloss)
				dloss[b * T + t] = -score[b];
		}
}

void rl_grpo_clip_loss(const float *adv, const float *logp, const float *old_logp,
		       size_t B, size_t T, float clip_low, float clip_high,
		       float *loss, float *dloss, uint8_t *clipped)
{
	for (size_t b = 0; b < B; b++)
		for (size_t t = 0; t < T; t++) {
			size_t i = b * T + t;
			double a = adv[b];
			double ratio = exp((double)logp[i] - (double)old_logp[i]);
			double rc = ratio < 1.0 - clip_low ? 1.0 - clip_low
				  : ratio > 1.0 + clip_high ? 1.0 + clip_high : ratio;
			double un = ratio * a, cl = rc * a;
			int is_clipped = cl < un;
			loss[i] = (float)-(is_clipped ? cl : un);
			/* d(ratio)/d(logp) = ratio; the clipped term is constant in logp */
			if (dloss)
				dloss[i] = is_clipped ? 0.0f : (float)(-a * ratio);
			if (clipped)
				clipped[i] = (uint8_t)is_clipped;
		}
}

int rl_pg_loss(const rl_pg_args *a, const float *logp, size_t B, size_t T,
	       float *loss, float *dloss, uint8_t *clipped, lm_err *e)
{
	if (clipped)
		memset(clipped, 0, B * T);
	switch (a->type) {
	case RL_PG_NO_BASELINE:
		if (!a->raw_rewards)
			return lm_seterr(e, "no_baseline needs the raw rewards");
		rl_naive_pg_loss(a->raw_rewards, logp, B, T, loss, dloss);
		return 0;
	case RL_PG_REINFORCE_BASELINE:
		if (!a->adv)
			return lm_seterr(e, "reinforce_with_baseline needs the advantages");
		rl_naive_pg_loss(a->adv, logp, B, T, loss, dloss);
		return 0;
	case RL_PG_GRPO_CLIP:
		if (!a->adv)
			return lm_seterr(e, "grpo_clip needs the advantages");
		if (!a->old_logp)
			return lm_seterr(e, "grpo_clip needs the old log-probs of the rollouts");
		rl_grpo_clip_loss(a->adv, logp, a->old_logp, B, T, a->clip_low, a->clip_high,
				  loss, dloss, clipped);
		return 0;
	}
	return lm_seterr(e, "unknown policy-gradient loss type %d", (int)a->type);
}

double rl_sft_step(const float *logp, const uint8_t *mask, size_t B, size_t T,
		   int grad_accum, double constant, float *grad)
{
	double scale = 1.0 / (constant * (double)B * grad_accum), s = 0;
	for (size_t i = 0; i < B * T; i++) {
		s += mask[i] ? logp[i] : 0.0;
		grad[i] = mask[i] ? (float)-scale : 0.0f;
	}
	return -s * scale;
}

/* The k3 estimator of KL(policy || ref) for one token and its derivative. */
static double kl_k3(double logp, double ref, double *d)
{
	double x = ref - logp;
	*d = 1.0 - exp(x);
	return exp(x) - x - 1.0;
}

int rl_grpo_step(const rl_grpo_args *a, const float *logp, const uint8_t *mask,
		 size_t B, size_t T, float *grad, rl_step_stats *st, lm_err *e)
{
	if (a->grad_accum < 1)
		return lm_seterr(e, "gradient accumulation steps must be at least 1");
	if (a->agg == RL_AGG_NORMALIZE && !(a->constant > 0))
		return lm_seterr(e, "normalize constant must be positive (got %g)", a->constant);
	float *loss = malloc(B * T * sizeof *loss);
	uint8_t *clipped = malloc(B * T);
	if (!loss || !clipped) {
		free(loss);
		free(clipped);
		return lm_seterr(e, "out of memory (%zu x %zu tokens)", B, T);
	}
	/* per-token losses into loss, their derivatives into grad, then scaled */
	if (rl_pg_loss(&a->pg, logp, B, T, loss, grad, clipped, e)) {
		free(loss);
		free(clipped);
		return -1;
	}
	rl_step_stats s = { 0 };
	double kl_sum = 0, ratio_sum = 0;
	size_t clipped_n = 0;
	for (size_t b = 0; b < B; b++) {
		size_t cnt = 0;
		for (size_t t = 0; t < T; t++)
			cnt += mask[b * T + t] != 0;
		double denom = a->agg == RL_AGG_NORMALIZE ? a->constant : (double)cnt;
		/* a row without response tokens contributes nothing (torch: NaN) */
		double w = cnt ? 1.0 / (denom * (double)B * a->grad_accum) : 0.0;
		for (size_t t = 0; t < T; t++) {
			size_t i = b * T + t;
			double l = loss[i], d = grad[i];
			if (a->ref_logp) {
				double dk, k = kl_k3(logp[i], a->ref_logp[i], &dk);
				l += a->kl_beta * k;
				d += a->kl_beta * dk;
				kl_sum += mask[i] ? k : 0.0;
			}
			if (mask[i]) {
				s.loss += l * w;
				clipped_n += clipped[i];
				if (a->pg.type == RL_PG_GRPO_CLIP)
					ratio_sum += exp((double)logp[i] - a->pg.old_logp[i]);
			}
			grad[i] = mask[i] ? (float)(d * w) : 0.0f;
		}
		s.tokens += cnt;
	}
	if (s.tokens) {
		s.clip_frac = (double)clipped_n / (double)s.tokens;
		s.kl = kl_sum / (double)s.tokens;
		s.ratio_mean = a->pg.type == RL_PG_GRPO_CLIP ? ratio_sum / (double)s.tokens : 1.0;
	}
	if (st)
		*st = s;
	free(loss);
	free(clipped);
	return 0;
}

/* log(1 + e^x) without overflow. */
static double softplus(double x)
{
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

double rl_dpo_loss(double beta, double lc, double lr, double ref_c, double ref_r,
		   double *d_lc, double *d_lr)
{
	double z = beta * ((lc - ref_c) - (lr - ref_r));
	/* -log sigmoid(z) = softplus(-z); d/dz = -sigmoid(-z) */
	double sig_neg = 1.0 / (1.0 + exp(z));
	if (d_lc)
		*d_lc = -beta * sig_neg;
	if (d_lr)
		*d_lr = beta * sig_neg;
	return softplus(-z);
}

double rl_value_loss(float v, float old_v, float ret, float clip, double *dv)
{
	double diff = (double)v - old_v;
	double dc = diff < -clip ? -clip : diff > clip ? clip : diff;
	double vc = old_v + dc;
	double e1 = (double)v - ret, e2 = vc - ret;
	if (e1 * e1 >= e2 * e2) {
		*dv = e1;
		return 0.5 * e1 * e1;
	}
	*dv = (diff > -clip && diff < clip) ? e2 : 0.0;
	return 0.5 * e2 * e2;
}

void rl_gae(const float *rewards, const float *values, size_t T, float last_value,
	    float gamma, float lambda, float *adv, float *ret)
{
	double next_v = last_value, next_adv = 0;
	for (size_t k = T; k-- > 0;) {
		double delta = rewards[k] + gamma * next_v - values[k];
		next_adv = delta + (double)gamma * lambda * next_adv;
		adv[k] = (float)next_adv;
		ret[k] = (float)(next_adv + values[k]);
		next_v = values[k];
	}
}
