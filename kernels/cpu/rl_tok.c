/* rl_tok.c: C twin of rl-update's per-token losses (see rl_tok.h): the
 * arithmetic of rl_grpo_step and rl_dpo_loss (libcommon/rl/rl_loss.c), in
 * the same order and the same roundings, row by row. */
#include "kernels/rl_tok.h"

#include <math.h>
#include <string.h>

/* The row's statistics into ws (RL_ST_N doubles), its weights into w. */
static void pg_row(float *w, double *ws, const float *ce, const int32_t *tg, float score,
		   double row_w, const float *old, const float *ref, const float *ent, int T,
		   rl_tok_args a)
{
	memset(ws, 0, RL_ST_N * sizeof *ws);
	for (int t = 0; t < T; t++) {
		if (tg[t] < 0) {
			w[t] = 0.0f;
			continue;
		}
		float lp = ce[t] == 0 ? 0.0f : -ce[t];
		double l, d;
		if (a.clip) {
			double adv = score, ratio = exp((double)lp - (double)old[t]);
			double rc = ratio < 1.0 - a.clip_low ? 1.0 - a.clip_low
				  : ratio > 1.0 + a.clip_high ? 1.0 + a.clip_high : ratio;
			double un = ratio * adv, cl = rc * adv;
			int clipped = cl < un;
			l = (float)-(clipped ? cl : un);
			d = clipped ? 0.0f : (float)(-adv * ratio);
			ws[RL_ST_CLIPPED] += clipped;
			ws[RL_ST_RATIO] += ratio;
		} else {
			l = -score * lp;
			d = -score;
			ws[RL_ST_RATIO] += 1.0;
		}
		if (ref) {
			double x = (double)ref[t] - (double)lp, k = exp(x) - x - 1.0;
			l += a.kl_beta * k;
			d += a.kl_beta * (1.0 - exp(x));
			ws[RL_ST_KL] += k;
		}
		ws[RL_ST_LOSS] += l * row_w;
		ws[RL_ST_TOKENS] += 1.0;
		ws[RL_ST_LOGP] += lp;
		if (ent)
			ws[RL_ST_ENT] += ent[t];
		w[t] = -(float)(d * row_w);
	}
}

void rl_tok_pg_cpu(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		   const float *score, const double *row_w, const float *old, const float *ref,
		   const float *ent, int B, int T, rl_tok_args a)
{
	for (int b = 0; b < B; b++) {
		size_t o = (size_t)b * T;
		pg_row(w + o, ws + (size_t)b * RL_ST_N, ce + o, targets + o, score[b], row_w[b],
		       old ? old + o : NULL, ref ? ref + o : NULL, ent ? ent + o : NULL, T, a);
	}
	for (int k = 0; k < RL_ST_N; k++)
		for (int b = 0; b < B; b++)
			stats[k] += ws[(size_t)b * RL_ST_N + k];
}

/* Row r's summed log-prob and its counted tokens. */
static double row_logp(const float *ce, const int32_t *tg, int T, double *count)
{
	double s = 0;
	*count = 0;
	for (int t = 0; t < T; t++)
		if (tg[t] >= 0) {
			s += ce[t] == 0 ? 0.0f : -ce[t];
			*count += 1;
		}
	return s;
}

static double softplus(double x)
{
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

void rl_tok_dpo_cpu(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		    const double *ref, double beta, double npairs, int B, int T)
{
	for (int k = 0; 2 * k + 1 < B; k++) {
		size_t c = (size_t)2 * k * T, r = c + (size_t)T;
		double nc, nr, lc = row_logp(ce + c, targets + c, T, &nc),
		       lr = row_logp(ce + r, targets + r, T, &nr);
		double margin = (lc - ref[2 * k]) - (lr - ref[2 * k + 1]), z = beta * margin;
		double sig_neg = 1.0 / (1.0 + exp(z));
		float wc = (float)(beta * sig_neg / npairs), wr = (float)(-(beta * sig_neg) / npairs);
		for (int t = 0; t < T; t++) {
			w[c + t] = targets[c + t] >= 0 ? wc : 0.0f;
			w[r + t] = targets[r + t] >= 0 ? wr : 0.0f;
		}
		double *p = ws + (size_t)k * RL_ST_N;
		memset(p, 0, RL_ST_N * sizeof *p);
		p[RL_DPO_LOSS] = softplus(-z) / npairs;
		p[RL_DPO_TOKENS] = nc + nr;
		p[RL_DPO_LOGP] = lc + lr;
		p[RL_DPO_MARGIN] = margin;
		p[RL_DPO_RIGHT] = margin > 0;
		p[RL_DPO_PAIRS] = 1;
	}
	for (int j = 0; j < RL_ST_N; j++)
		for (int k = 0; 2 * k + 1 < B; k++)
			stats[j] += ws[(size_t)k * RL_ST_N + j];
}
