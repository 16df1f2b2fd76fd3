/* rl_ppo_tok.c: C twin of rl-update's PPO loss op (see rl_ppo_tok.h): the
 * arithmetic of rl_ppo_loss and the value head's forward and backward
 * passes (libcommon/rl), in the same order and the same roundings, row by
 * row and token by token. */
#include "kernels/rl_ppo_tok.h"

#include <math.h>
#include <string.h>

static float value_of(const float *x, const float *head, int C)
{
	double s = head[C];
	for (int j = 0; j < C; j++)
		s += (double)head[j] * x[j];
	return (float)s;
}

void rl_ppo_value_cpu(float *values, const float *hidden, const float *head, int N, int C)
{
	for (int i = 0; i < N; i++)
		values[i] = value_of(hidden + (size_t)i * C, head, C);
}

/* rl_value_loss: the larger of the plain and the clipped squared error. */
static double value_loss(float v, float old_v, float ret, float clip, double *dv)
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

/* Row r's tokens: weights, gradients and its partial statistics ws. */
static void ppo_row(float *w, float *dent, float *dvalue, double *ws, const float *ce,
		    const int32_t *tg, const float *ent, const float *old, const float *adv,
		    const float *old_v, const float *ret, double scale, int T, rl_ppo_tok_args a)
{
	double total = 0;
	memset(ws, 0, RL_PPO_N * sizeof *ws);
	for (int t = 0; t < T; t++) {
		if (tg[t] < 0) {
			w[t] = dent[t] = dvalue[t] = 0.0f;
			continue;
		}
		float lp = ce[t] == 0 ? 0.0f : -ce[t], v = dvalue[t];
		double A = adv[t], ratio = exp((double)lp - (double)old[t]);
		double rc = ratio < 1.0 - a.clip_low ? 1.0 - a.clip_low
			  : ratio > 1.0 + a.clip_high ? 1.0 + a.clip_high : ratio;
		double un = ratio * A, cl = rc * A;
		int clipped = cl < un;
		float pg = (float)-(clipped ? cl : un), dpg = clipped ? 0.0f : (float)(-A * ratio);
		double dv, vf = value_loss(v, old_v[t], ret[t], a.vf_clip, &dv);
		double vu = (double)v - ret[t];
		total += pg + a.vf_coef * vf - a.ent_coef * ent[t];
		w[t] = -(float)(scale * dpg);
		dvalue[t] = (float)(scale * a.vf_coef * dv);
		dent[t] = (float)(-scale * a.ent_coef);
		ws[RL_PPO_PG] += pg;
		ws[RL_PPO_VF] += vf;
		ws[RL_PPO_ENT] += ent[t];
		ws[RL_PPO_CLIPPED] += clipped;
		ws[RL_PPO_VF_CLIPPED] += 0.5 * vu * vu < vf; /* the clipped error was the larger */
		ws[RL_PPO_RATIO] += exp((double)lp - old[t]);
		ws[RL_PPO_TOKENS] += 1.0;
		ws[RL_PPO_LOGP] += lp;
	}
	ws[RL_PPO_LOSS] = scale * total;
}

void rl_ppo_tok_cpu(float *w, float *dent, float *dvalue, float *dhidden, float *hgrad,
		    double *stats, double *ws, const float *ce, const int32_t *targets,
		    const float *hidden, const float *head, const float *ent, const float *old,
		    const float *adv, const float *old_v, const float *ret,
		    const double *row_scale, int B, int T, int C, rl_ppo_tok_args a)
{
	size_t N = (size_t)B * T;
	for (size_t i = 0; i < N; i++)
		dvalue[i] = targets[i] >= 0 ? value_of(hidden + i * C, head, C) : 0.0f;
	for (int b = 0; b < B; b++) {
		size_t o = (size_t)b * T;
		ppo_row(w + o, dent + o, dvalue + o, ws + (size_t)b * RL_PPO_N, ce + o, targets + o,
			ent + o, old + o, adv + o, old_v + o, ret + o, row_scale[b], T, a);
	}
	for (int k = 0; k < RL_PPO_N; k++)
		for (int b = 0; b < B; b++)
			stats[k] += ws[(size_t)b * RL_PPO_N + k];
	/* the head's gradient: the micro-batch's sum on its own, then added */
	float *gsum = (float *)(ws + (size_t)B * RL_PPO_N), gb = 0.0f;
	memset(gsum, 0, (size_t)C * sizeof *gsum);
	for (size_t i = 0; i < N; i++) {
		const float *x = hidden + i * C;
		float g = dvalue[i], *dx = dhidden + i * C;
		if (targets[i] < 0) {
			memset(dx, 0, (size_t)C * sizeof *dx);
			continue;
		}
		for (int j = 0; j < C; j++) {
			gsum[j] += g * x[j];
			dx[j] = g * head[j];
		}
		gb += g;
	}
	for (int j = 0; j < C; j++)
		hgrad[j] += gsum[j];
	hgrad[C] += gb;
}
