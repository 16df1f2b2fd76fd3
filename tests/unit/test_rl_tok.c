/* test_rl_tok.c: the C twin of rl-update's loss op (kernels/rl_tok.h)
 * against the code the CS336 conformance tests check (rl_loss.h), as
 * rl-update called it before the op existed: rl_grpo_step on each row
 * alone (B = 1, grad_accum = the batch) for SFT, no_baseline,
 * reinforce_with_baseline and grpo_clip (symmetric and clip-higher), with
 * and without the KL term, masked mean and normalize; rl_dpo_loss for
 * pairs.  The weights must be equal bit for bit, the statistics within
 * 1e-12.  A planted fault (clip-higher moved by 0.05) must be seen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/rl_tok.h"
#include "rl/rl_loss.h"

enum { B = 6, T = 17, BATCH = 11 };
static const double TOL = 1e-12;

static float ce[B * T], old[B * T], ref[B * T], ent[B * T];
static int32_t tg[B * T];
static int len[B];

static float frand(void) { return (float)rand() / (float)RAND_MAX; }

/* Rows of lengths len[b] (padding after), prompts of b % 4 + 1 tokens, one
 * row without response tokens. */
static void make_batch(unsigned seed)
{
	srand(seed);
	for (int b = 0; b < B; b++) {
		len[b] = T - 2 * b;
		int prompt = b % 4 + 1;
		for (int t = 0; t < T; t++) {
			size_t i = (size_t)b * T + t;
			int counted = t < len[b] && t >= prompt && b != 3;
			tg[i] = counted ? 7 : -1;
			ce[i] = counted ? 0.05f + 3.0f * frand() : 0.0f;
			old[i] = -ce[i] + 0.4f * (frand() - 0.5f);
			ref[i] = -ce[i] + 0.6f * (frand() - 0.5f);
			ent[i] = 4.0f * frand();
		}
	}
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

typedef struct pg_case {
	const char *name;
	int sft;
	rl_pg_type type;
	float clip_low, clip_high;
	int kl;
	rl_agg agg;
} pg_case;

/* The op's weights and statistics against rl_grpo_step row by row; 1 when
 * the weights are equal bit for bit.  fault: clip_high for the op moved. */
static int check_pg(const pg_case *c, float fault)
{
	float score[B], w[B * T], want[B * T], lp[B * T], grad[T];
	double row_w[B], stats[RL_ST_N] = { 0 }, ws[B * RL_ST_N], constant = 9;
	double loss = 0, tokens = 0, clipped = 0, kl = 0, ratio = 0, logp = 0, entsum = 0;
	for (int i = 0; i < B * T; i++)
		lp[i] = ce[i] == 0 ? 0.0f : -ce[i];
	for (int b = 0; b < B; b++) {
		float one = 1.0f, reward = 0.3f * (float)b - 0.5f, adv = 0.7f - 0.25f * (float)b;
		score[b] = c->sft ? 1.0f : c->type == RL_PG_NO_BASELINE ? reward : adv;
		size_t o = (size_t)b * T, cnt = 0;
		uint8_t mask[T];
		for (int t = 0; t < T; t++)
			cnt += (mask[t] = tg[o + t] >= 0);
		double denom = c->agg == RL_AGG_NORMALIZE ? constant : (double)cnt;
		row_w[b] = cnt ? 1.0 / (denom * 1.0 * (double)BATCH) : 0.0;
		rl_grpo_args a = {
			{ c->sft ? RL_PG_NO_BASELINE : c->type, c->sft ? &one : &reward, &adv, old + o,
			  c->clip_low, c->clip_high },
			c->agg, constant, BATCH, c->kl ? ref + o : NULL, 0.05,
		};
		rl_step_stats ss;
		lm_err e;
		if (rl_grpo_step(&a, lp + o, mask, 1, (size_t)len[b], grad, &ss, &e))
			return ok(0, "%s: rl_grpo_step: %s", c->name, e.msg), 0;
		for (int t = 0; t < T; t++)
			want[o + t] = t < len[b] && mask[t] ? -grad[t] : 0.0f;
		for (int t = 0; t < len[b]; t++) {
			logp += lp[o + t];
			entsum += mask[t] ? ent[o + t] : 0.0;
		}
		loss += ss.loss;
		tokens += (double)ss.tokens;
		clipped += ss.clip_frac * (double)ss.tokens;
		kl += ss.kl * (double)ss.tokens;
		ratio += ss.ratio_mean * (double)ss.tokens;
	}
	int clip = !c->sft && c->type == RL_PG_GRPO_CLIP;
	rl_tok_args ta = { .clip = clip, .clip_low = c->clip_low, .clip_high = c->clip_high + fault,
			   .kl_beta = 0.05 };
	rl_tok_pg_cpu(w, stats, ws, ce, tg, score, row_w, clip ? old : NULL, c->kl ? ref : NULL, ent,
		      B, T, ta);
	int same = !memcmp(w, want, sizeof w);
	if (fault != 0)
		return same;
	ok(same, "%s: the weights equal rl_grpo_step's bit for bit", c->name);
	ok(rel(stats[RL_ST_LOSS], loss) < TOL, "%s: loss %.17g (want %.17g)", c->name,
	   stats[RL_ST_LOSS], loss);
	ok(stats[RL_ST_TOKENS] == tokens && fabs(stats[RL_ST_CLIPPED] - clipped) < 1e-9,
	   "%s: tokens %g (want %g), clipped %g (want %g)", c->name, stats[RL_ST_TOKENS], tokens,
	   stats[RL_ST_CLIPPED], clipped);
	ok(fabs(stats[RL_ST_KL] - kl) < 1e-9 && rel(stats[RL_ST_RATIO], ratio) < TOL,
	   "%s: kl %.12g (want %.12g), ratio %.12g (want %.12g)", c->name, stats[RL_ST_KL], kl,
	   stats[RL_ST_RATIO], ratio);
	ok(rel(stats[RL_ST_LOGP], logp) < TOL && rel(stats[RL_ST_ENT], entsum) < TOL,
	   "%s: logp and entropy sums", c->name);
	return same;
}

static void check_dpo(void)
{
	double refs[B], beta = 0.7, npairs = 5, stats[RL_ST_N] = { 0 }, ws[B * RL_ST_N];
	float w[B * T], want[B * T];
	double loss = 0, margin = 0, right = 0, logp = 0, tokens = 0;
	for (int b = 0; b < B; b++)
		refs[b] = -10.0 * frand();
	for (int k = 0; k < B / 2; k++) {
		double l[2], n[2] = { 0, 0 };
		for (int j = 0; j < 2; j++) {
			size_t o = (size_t)(2 * k + j) * T;
			l[j] = 0;
			for (int t = 0; t < T; t++)
				if (tg[o + t] >= 0)
					l[j] += ce[o + t] == 0 ? 0.0f : -ce[o + t], n[j]++;
		}
		double d_lc, d_lr, m = (l[0] - refs[2 * k]) - (l[1] - refs[2 * k + 1]);
		loss += rl_dpo_loss(beta, l[0], l[1], refs[2 * k], refs[2 * k + 1], &d_lc, &d_lr) / npairs;
		margin += m, right += m > 0, logp += l[0] + l[1], tokens += n[0] + n[1];
		float wc = (float)(-d_lc / npairs), wr = (float)(-d_lr / npairs);
		for (int t = 0; t < T; t++) {
			want[2 * k * T + t] = tg[2 * k * T + t] >= 0 ? wc : 0.0f;
			want[(2 * k + 1) * T + t] = tg[(2 * k + 1) * T + t] >= 0 ? wr : 0.0f;
		}
	}
	rl_tok_dpo_cpu(w, stats, ws, ce, tg, refs, beta, npairs, B, T);
	ok(!memcmp(w, want, sizeof w), "dpo: the weights equal rl_dpo_loss's bit for bit");
	ok(rel(stats[RL_DPO_LOSS], loss) < TOL && rel(stats[RL_DPO_MARGIN], margin) < TOL,
	   "dpo: loss %.17g (want %.17g), margin %.17g (want %.17g)", stats[RL_DPO_LOSS], loss,
	   stats[RL_DPO_MARGIN], margin);
	ok(stats[RL_DPO_RIGHT] == right && stats[RL_DPO_PAIRS] == B / 2 &&
	   stats[RL_DPO_TOKENS] == tokens && rel(stats[RL_DPO_LOGP], logp) < TOL,
	   "dpo: pairs right %g (want %g), tokens %g (want %g), logp sum", stats[RL_DPO_RIGHT], right,
	   stats[RL_DPO_TOKENS], tokens);
}

int main(void)
{
	static const pg_case cases[] = {
		{ "sft", 1, RL_PG_NO_BASELINE, 0.2f, 0.2f, 0, RL_AGG_NORMALIZE },
		{ "no_baseline", 0, RL_PG_NO_BASELINE, 0.2f, 0.2f, 0, RL_AGG_MASKED_MEAN },
		{ "reinforce_with_baseline", 0, RL_PG_REINFORCE_BASELINE, 0.2f, 0.2f, 0, RL_AGG_MASKED_MEAN },
		{ "grpo_clip", 0, RL_PG_GRPO_CLIP, 0.2f, 0.2f, 0, RL_AGG_MASKED_MEAN },
		{ "grpo_clip, clip-higher", 0, RL_PG_GRPO_CLIP, 0.05f, 0.08f, 0, RL_AGG_MASKED_MEAN },
		{ "grpo_clip, KL", 0, RL_PG_GRPO_CLIP, 0.05f, 0.05f, 1, RL_AGG_MASKED_MEAN },
		{ "Dr. GRPO (normalize), KL", 0, RL_PG_GRPO_CLIP, 0.05f, 0.05f, 1, RL_AGG_NORMALIZE },
		{ "reinforce, KL, normalize", 0, RL_PG_REINFORCE_BASELINE, 0.2f, 0.2f, 1, RL_AGG_NORMALIZE },
	};
	make_batch(20261201);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		check_pg(&cases[i], 0);
	ok(!check_pg(&cases[4], 0.05f), "planted fault: clip-higher moved by 0.05 changes the weights");
	check_dpo();
	return done_testing();
}
