/* test_rl_loss.c: the RL math of rl_loss.c on hand-computed cases, DPO
 * against an independent computation, and every gradient against central
 * finite differences.  (The CS336 snapshot conformance is in
 * test_rl_conformance.c.) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../tap.h"
#include "rl/rl_loss.h"

enum { B = 3, T = 5, V = 7 };
static const double FD_H = 1e-3;   /* finite-difference step */
static const double FD_TOL = 2e-3; /* |analytic - numeric| / max(1, |analytic|) */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double urand(void) /* uniform in [0, 1) */
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int close_rel(double a, double b)
{
	return fabs(a - b) <= FD_TOL * fmax(1.0, fabs(a));
}

static void test_entropy(void)
{
	float z[4] = { 0, 0, 0, 0 }, h;
	rl_entropy(z, 1, 4, &h);
	near(h, log(4.0), 1e-6, "entropy of a uniform row is log V");
	float big[2] = { 1000, 1000 };
	rl_entropy(big, 1, 2, &h);
	near(h, log(2.0), 1e-6, "entropy is stable for large logits");
	float peaked[3] = { 0, -100, -100 };
	rl_entropy(peaked, 1, 3, &h);
	near(h, 0, 1e-6, "entropy of a one-hot row is 0");
	/* p = (1/2, 1/4, 1/4): H = 1.5 log 2 */
	float q[3] = { (float)log(2.0), 0, 0 };
	rl_entropy(q, 1, 3, &h);
	near(h, 1.5 * log(2.0), 1e-6, "entropy of (1/2, 1/4, 1/4)");

	float x[V], g[V];
	for (int j = 0; j < V; j++)
		x[j] = (float)(urand() * 4 - 2);
	rl_entropy_grad(x, V, g);
	int bad = 0;
	for (int j = 0; j < V; j++) {
		float save = x[j], hp, hm;
		x[j] = save + (float)FD_H;
		rl_entropy(x, 1, V, &hp);
		x[j] = save - (float)FD_H;
		rl_entropy(x, 1, V, &hm);
		x[j] = save;
		bad += !close_rel(g[j], (hp - hm) / (2 * FD_H));
	}
	is_int(bad, 0, "entropy gradient matches finite differences");
}

static void test_masked(void)
{
	/* x = [[1 2 3] [4 5 6]], mask = [[1 0 1] [0 0 0]] */
	const float x[6] = { 1, 2, 3, 4, 5, 6 };
	const uint8_t m[6] = { 1, 0, 1, 0, 0, 0 };
	const size_t shape[2] = { 2, 3 };
	float out[3];
	lm_err e;
	rl_masked_mean(x, m, shape, 2, 1, out, &e);
	near(out[0], 2.0, 1e-7, "masked mean dim 1: row 0 = (1+3)/2");
	ok(isnan(out[1]), "masked mean dim 1: an empty row is NaN");
	rl_masked_mean(x, m, shape, 2, -1, out, &e);
	near(out[0], 2.0, 1e-7, "masked mean dim -1 is dim 1");
	rl_masked_mean(x, m, shape, 2, 0, out, &e);
	ok(out[0] == 1 && isnan(out[1]) && out[2] == 3, "masked mean dim 0: 1, NaN, 3");
	rl_masked_mean(x, m, shape, 2, RL_DIM_ALL, out, &e);
	near(out[0], 2.0, 1e-7, "masked mean over all");
	rl_masked_normalize(x, m, shape, 2, RL_DIM_ALL, 8.0, out, &e);
	near(out[0], 0.5, 1e-7, "masked normalize over all: (1+3)/8");
	rl_masked_normalize(x, m, shape, 2, 0, 2.0, out, &e);
	ok(out[0] == 0.5f && out[1] == 0 && out[2] == 1.5f, "masked normalize dim 0");
	is_int(rl_masked_mean(x, m, shape, 2, 2, out, &e), -1, "dim 2 of a matrix is refused");
	is_int(rl_masked_normalize(x, m, shape, 2, 0, 0.0, out, &e), -1, "a zero constant is refused");

	/* three dimensions: reduce the middle one */
	const float y[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const uint8_t my[8] = { 1, 1, 1, 0, 0, 1, 1, 1 };
	const size_t s3[3] = { 2, 2, 2 };
	float o3[4];
	rl_masked_mean(y, my, s3, 3, 1, o3, &e);
	ok(o3[0] == 2 && o3[1] == 2 && o3[2] == 7 && o3[3] == 7,
	   "masked mean over the middle of three dims");
}

static void test_group(void)
{
	const float r[6] = { 1, 0, 0, 1, 1, 1 };
	float a[6];
	lm_err e;
	is_int(rl_group_normalize(r, 6, 2, 1, 1e-6, a, &e), 0, "group normalize by std");
	near(a[0], 0.5 / (sqrt(0.5) + 1e-6), 1e-6, "(1 - 0.5) / unbiased std 0.7071");
	near(a[1], -0.5 / (sqrt(0.5) + 1e-6), 1e-6, "(0 - 0.5) / 0.7071");
	near(a[4], 0, 1e-7, "a group of equal rewards gives 0");
	rl_group_normalize(r, 6, 3, 0, 1e-6, a, &e);
	near(a[0], 1 - 1.0 / 3, 1e-6, "without std: r - mean");
	near(a[3], 0, 1e-6, "without std, a group of equal rewards gives 0");
	is_int(rl_group_normalize(r, 6, 4, 1, 1e-6, a, &e), -1, "6 rewards in groups of 4 are refused");
	is_int(rl_group_normalize(r, 6, 1, 1, 1e-6, a, &e), -1, "groups of size 1 with std are refused");
	ok(strstr(e.msg, "size 1") != NULL, "the message says why: %s", e.msg);
	is_int(rl_group_normalize(r, 6, 1, 0, 1e-6, a, &e), 0, "groups of size 1 without std are fine");
}

static void test_pg(void)
{
	const float adv[2] = { 2, -1 };
	const float logp[4] = { -1, -2, -0.5f, -3 };
	float loss[4], dl[4];
	rl_naive_pg_loss(adv, logp, 2, 2, loss, dl);
	ok(loss[0] == 2 && loss[1] == 4 && loss[2] == -0.5f && loss[3] == -3, "naive loss = -A logp");
	ok(dl[0] == -2 && dl[3] == 1, "naive gradient = -A");

	/* ratio = e^{logp - old}: 1.5 (A>0, clipped at 1.2), 0.5 (A>0, not clipped: min picks 0.5),
	 * 0.5 (A<0, clipped at 0.8), 1.5 (A<0, min picks -1.5 A... unclipped) */
	float old[4], lp[4];
	const float ratio[4] = { 1.5f, 0.5f, 0.5f, 1.5f };
	for (int i = 0; i < 4; i++) {
		old[i] = -1;
		lp[i] = (float)(-1 + log(ratio[i]));
	}
	uint8_t cl[4];
	rl_grpo_clip_loss(adv, lp, old, 2, 2, 0.2f, 0.2f, loss, dl, cl);
	near(loss[0], -1.2 * 2, 1e-5, "A>0, ratio 1.5: clipped at 1.2");
	near(loss[1], -0.5 * 2, 1e-5, "A>0, ratio 0.5: unclipped");
	near(loss[2], 0.8 * 1, 1e-5, "A<0, ratio 0.5: clipped at 0.8");
	near(loss[3], 1.5 * 1, 1e-5, "A<0, ratio 1.5: unclipped");
	ok(cl[0] && !cl[1] && cl[2] && !cl[3], "clipped flags");
	ok(dl[0] == 0 && dl[2] == 0, "no gradient through a clipped token");
	near(dl[1], -2 * 0.5, 1e-5, "gradient -A ratio when unclipped");
	rl_grpo_clip_loss(adv, lp, old, 2, 2, 0.2f, 0.6f, loss, dl, cl);
	near(loss[0], -1.5 * 2, 1e-5, "clip-higher 0.6 leaves ratio 1.5 unclipped for A>0");
	near(loss[2], 0.8 * 1, 1e-5, "clip-higher keeps the low side at 0.8");

	rl_pg_args a = { RL_PG_GRPO_CLIP, NULL, adv, NULL, 0.2f, 0.2f };
	lm_err e;
	is_int(rl_pg_loss(&a, lp, 2, 2, loss, dl, cl, &e), -1, "grpo_clip without old log-probs is refused");
	ok(strstr(e.msg, "old log-probs") != NULL, "message: %s", e.msg);
	a.type = RL_PG_NO_BASELINE;
	is_int(rl_pg_loss(&a, lp, 2, 2, loss, dl, cl, &e), -1, "no_baseline without raw rewards is refused");
	rl_pg_type t;
	ok(!rl_pg_type_parse("reinforce_with_baseline", &t, &e) && t == RL_PG_REINFORCE_BASELINE,
	   "loss type names parse");
	is_int(rl_pg_type_parse("ppo", &t, &e), -1, "an unknown loss type is refused");
}

/* Random [B, T] inputs away from the clip boundaries. */
static void random_batch(float *logp, float *old, float *ref, uint8_t *mask)
{
	for (int i = 0; i < B * T; i++) {
		old[i] = (float)(-0.2 - 3 * urand());
		/* ratio in (0.5, 0.75) or (1.05, 1.15) or (1.4, 2): off the kinks at 0.8 and 1.2/1.3 */
		double u = urand(), r = u < 0.33 ? 0.5 + 0.25 * urand()
				      : u < 0.66 ? 1.05 + 0.1 * urand() : 1.4 + 0.6 * urand();
		logp[i] = old[i] + (float)log(r);
		ref[i] = logp[i] + (float)(urand() - 0.5);
		mask[i] = (uint8_t)(urand() < 0.7);
	}
	mask[0] = 1;
	for (int t = 0; t < T; t++)
		mask[2 * T + t] = 0; /* one row without response tokens */
}

static void fd_grpo(const char *name, rl_grpo_args *a, const uint8_t *mask, float *logp)
{
	float grad[B * T], dummy[B * T];
	lm_err e;
	rl_step_stats st;
	if (!ok(rl_grpo_step(a, logp, mask, B, T, grad, &st, &e) == 0, "%s: step runs", name))
		diag("%s", e.msg);
	int bad = 0;
	for (int i = 0; i < B * T; i++) {
		float save = logp[i];
		rl_step_stats sp, sm;
		logp[i] = save + (float)FD_H;
		rl_grpo_step(a, logp, mask, B, T, dummy, &sp, &e);
		logp[i] = save - (float)FD_H;
		rl_grpo_step(a, logp, mask, B, T, dummy, &sm, &e);
		logp[i] = save;
		double num = (sp.loss - sm.loss) / (2 * FD_H);
		if (!close_rel(grad[i], num)) {
			bad++;
			diag("%s: token %d analytic %g numeric %g", name, i, grad[i], num);
		}
	}
	is_int(bad, 0, "%s: gradient matches finite differences", name);
}

static void test_steps(void)
{
	float logp[B * T], old[B * T], ref[B * T], grad[B * T];
	uint8_t mask[B * T];
	const float raw[B] = { 1, 0, 0.5f }, adv[B] = { 0.7f, -1.3f, 0.2f };
	random_batch(logp, old, ref, mask);

	double loss = rl_sft_step(logp, mask, B, T, 2, 1.0, grad);
	double s = 0;
	for (int i = 0; i < B * T; i++)
		s += mask[i] ? logp[i] : 0;
	near(loss, -s / (1.0 * B * 2), 1e-6, "SFT loss = -sum(m logp) / (c B accum)");
	int bad = 0;
	for (int i = 0; i < B * T; i++) {
		float save = logp[i], g2[B * T];
		logp[i] = save + (float)FD_H;
		double lp = rl_sft_step(logp, mask, B, T, 2, 42.0, g2);
		logp[i] = save - (float)FD_H;
		double lm = rl_sft_step(logp, mask, B, T, 2, 42.0, g2);
		logp[i] = save;
		rl_sft_step(logp, mask, B, T, 2, 42.0, grad);
		bad += !close_rel(grad[i], (lp - lm) / (2 * FD_H));
	}
	is_int(bad, 0, "SFT gradient matches finite differences");

	rl_grpo_args a = { { RL_PG_GRPO_CLIP, raw, adv, old, 0.2f, 0.3f },
			   RL_AGG_MASKED_MEAN, 0, 2, NULL, 0 };
	fd_grpo("grpo_clip, masked mean", &a, mask, logp);
	a.agg = RL_AGG_NORMALIZE;
	a.constant = 7;
	fd_grpo("grpo_clip, normalize", &a, mask, logp);
	a.ref_logp = ref;
	a.kl_beta = 0.1;
	fd_grpo("grpo_clip + KL", &a, mask, logp);
	a.pg.type = RL_PG_NO_BASELINE;
	fd_grpo("no_baseline + KL", &a, mask, logp);
	a.pg.type = RL_PG_REINFORCE_BASELINE;
	a.ref_logp = NULL;
	a.agg = RL_AGG_MASKED_MEAN;
	fd_grpo("reinforce_with_baseline", &a, mask, logp);

	/* The masked-mean loss equals the mean over rows (with tokens) of the
	 * masked mean of -A logp, divided by the accumulation steps (and B
	 * counts the empty row, as in CS336). */
	rl_step_stats st;
	lm_err e;
	rl_grpo_step(&a, logp, mask, B, T, grad, &st, &e);
	double want = 0;
	for (int b = 0; b < B; b++) {
		double sb = 0, n = 0;
		for (int t = 0; t < T; t++)
			if (mask[b * T + t])
				sb += -adv[b] * logp[b * T + t], n++;
		want += n ? sb / n : 0;
	}
	near(st.loss, want / B / 2, 1e-6, "reinforce masked-mean loss by hand");
	ok(grad[2 * T] == 0 && grad[2 * T + 4] == 0, "a row without tokens gets no gradient");

	a.pg.type = RL_PG_GRPO_CLIP;
	a.pg.clip_low = a.pg.clip_high = 0.2f;
	rl_grpo_step(&a, logp, mask, B, T, grad, &st, &e);
	size_t n = 0, c = 0;
	for (int i = 0; i < B * T; i++) {
		double r = exp((double)logp[i] - old[i]);
		int b = i / T;
		double rc = fmin(fmax(r, 0.8), 1.2);
		n += mask[i] != 0;
		c += mask[i] && rc * adv[b] < r * adv[b];
	}
	is_int(st.tokens, n, "stats count the response tokens");
	near(st.clip_frac, (double)c / (double)n, 1e-12, "clip fraction");
	a.grad_accum = 0;
	is_int(rl_grpo_step(&a, logp, mask, B, T, grad, &st, &e), -1, "0 accumulation steps are refused");
}

/* An independent DPO: -log(sigmoid(z)) through the logistic function itself. */
static double dpo_direct(double beta, double lc, double lr, double rc, double rr)
{
	double z = beta * ((lc - rc) - (lr - rr));
	return -log(1.0 / (1.0 + exp(-z)));
}

static void test_dpo(void)
{
	double dc, dr;
	const double cases[][5] = {
		{ 0.5, -12.3, -14.1, -12.9, -13.0 },
		{ 0.1, -40.0, -35.0, -41.0, -30.0 },
		{ 2.0, -3.0, -3.0, -3.0, -3.0 },
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		const double *c = cases[k];
		double l = rl_dpo_loss(c[0], c[1], c[2], c[3], c[4], &dc, &dr);
		near(l, dpo_direct(c[0], c[1], c[2], c[3], c[4]), 1e-12, "DPO case %zu equals -log sigmoid", k);
		double nc = (dpo_direct(c[0], c[1] + FD_H, c[2], c[3], c[4]) -
			     dpo_direct(c[0], c[1] - FD_H, c[2], c[3], c[4])) / (2 * FD_H);
		double nr = (dpo_direct(c[0], c[1], c[2] + FD_H, c[3], c[4]) -
			     dpo_direct(c[0], c[1], c[2] - FD_H, c[3], c[4])) / (2 * FD_H);
		near(dc, nc, 1e-7, "DPO case %zu: d/d chosen matches finite differences", k);
		near(dr, nr, 1e-7, "DPO case %zu: d/d rejected matches finite differences", k);
	}
	near(rl_dpo_loss(0.5, 0, 0, 0, 0, NULL, NULL), log(2.0), 1e-12, "DPO at z = 0 is log 2");
	double big = rl_dpo_loss(1.0, -2000, 0, 0, 0, NULL, NULL);
	near(big, 2000, 1e-9, "DPO is finite for a huge margin");
}

static void test_value_and_gae(void)
{
	int bad = 0;
	const float cases[][4] = { /* v, old_v, ret, clip */
		{ 1.0f, 0.5f, 2.0f, 0.2f }, { 0.1f, 0.5f, 2.0f, 0.2f }, { 0.55f, 0.5f, 0.0f, 0.2f },
		{ 1.0f, 0.5f, -1.0f, 0.2f }, { 0.9f, 0.5f, 0.6f, 0.2f },
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		const float *c = cases[k];
		double dv, d2;
		rl_value_loss(c[0], c[1], c[2], c[3], &dv);
		double num = (rl_value_loss(c[0] + (float)FD_H, c[1], c[2], c[3], &d2) -
			      rl_value_loss(c[0] - (float)FD_H, c[1], c[2], c[3], &d2)) / (2 * FD_H);
		bad += !close_rel(dv, num);
	}
	is_int(bad, 0, "value loss gradient matches finite differences");
	double dv;
	near(rl_value_loss(1.0f, 0.5f, 2.0f, 0.2f, &dv), 0.5 * 1.3 * 1.3, 1e-6,
	     "clipped value error is the larger one");

	const float r[3] = { 0, 0, 1 }, v[3] = { 0.5f, 0.25f, 0.75f };
	float adv[3], ret[3];
	rl_gae(r, v, 3, 0, 1.0f, 1.0f, adv, ret);
	ok(fabs(ret[0] - 1) < 1e-6 && fabs(ret[1] - 1) < 1e-6 && fabs(ret[2] - 1) < 1e-6,
	   "GAE with gamma = lambda = 1 returns the Monte Carlo return");
	near(adv[0], 0.5, 1e-6, "and advantage = return - value");
	rl_gae(r, v, 3, 0, 0.9f, 0.0f, adv, ret);
	near(adv[1], 0 + 0.9 * 0.75 - 0.25, 1e-6, "GAE lambda = 0 is the one-step TD error");
	near(adv[2], 1 - 0.75, 1e-6, "the last step bootstraps from last_value 0");
	rl_gae(r, v, 3, 2.0f, 0.5f, 0.5f, adv, ret);
	double d2 = 1 + 0.5 * 2 - 0.75, d1 = 0 + 0.5 * 0.75 - 0.25, d0 = 0 + 0.5 * 0.25 - 0.5;
	near(adv[0], d0 + 0.25 * (d1 + 0.25 * d2), 1e-6, "GAE by hand with a bootstrap value");
}

int main(void)
{
	test_entropy();
	test_masked();
	test_group();
	test_pg();
	test_steps();
	test_dpo();
	test_value_and_gae();
	return done_testing();
}
