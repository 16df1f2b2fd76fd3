/* test_rl_ppo.c: the PPO math of rl_ppo.h (per-token rewards with the KL
 * penalty and GAE against a hand computation, whitening, the loss's
 * gradients w.r.t. log-probs, values and entropies against finite
 * differences, ratio 1 on-policy) and the value head's checkpoint round
 * trip (value_head.h, ckpt_save_extra). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "base/rng_stream.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "rl/rl_loss.h"
#include "rl/rl_ppo.h"
#include "rl/value_head.h"

enum { N = 24 };
static const double FD_H = 1e-3;

static int close_fd(double analytic, double numeric)
{
	return fabs(analytic - numeric) <= 2e-3 * fmax(fabs(analytic), fabs(numeric)) + 2e-4;
}

static void test_rewards_gae(void)
{
	const float old[3] = { -1.0f, -2.0f, -0.5f }, ref[3] = { -1.5f, -1.0f, -0.5f };
	const float v[3] = { 0.2f, 0.4f, 0.6f };
	float r[3], adv[3], ret[3];
	rl_ppo_rewards(old, ref, 3, 1.0, 0.1, r);
	ok(fabs(r[0] + 0.05) < 1e-6 && fabs(r[1] - 0.1) < 1e-6 && fabs(r[2] - 1.0) < 1e-6,
	   "rewards: -kl (old - ref) per token, the reward at the last (%g %g %g)", r[0], r[1], r[2]);
	rl_ppo_rewards(old, NULL, 3, 2.0, 0.1, r);
	ok(r[0] == 0 && r[1] == 0 && r[2] == 2, "without a reference only the reward");
	rl_ppo_rewards(old, ref, 3, 1.0, 0.1, r);
	rl_gae(r, v, 3, 0.0f, 0.9f, 0.8f, adv, ret);
	/* by hand: delta_t = r_t + 0.9 V_{t+1} - V_t, V_3 = 0; A_t = delta_t + 0.72 A_{t+1} */
	double d2 = 1.0 - 0.6, d1 = 0.1 + 0.9 * 0.6 - 0.4, d0 = -0.05 + 0.9 * 0.4 - 0.2;
	double a2 = d2, a1 = d1 + 0.72 * a2, a0 = d0 + 0.72 * a1;
	ok(fabs(adv[0] - a0) < 1e-6 && fabs(adv[1] - a1) < 1e-6 && fabs(adv[2] - a2) < 1e-6,
	   "GAE of the KL-penalised rewards by hand (%g %g %g)", adv[0], adv[1], adv[2]);
	ok(fabs(ret[0] - (a0 + 0.2)) < 1e-6 && fabs(ret[2] - (a2 + 0.6)) < 1e-6,
	   "returns = advantages + values");

	float x[5] = { 1, 2, 3, 4, 10 };
	rl_whiten(x, 5);
	double s = 0, ss = 0;
	for (int i = 0; i < 5; i++)
		s += x[i], ss += (double)x[i] * x[i];
	ok(fabs(s / 5) < 1e-6 && fabs(ss / 5 - 1) < 1e-5, "whitening: mean 0, variance 1");
}

static double loss_at(const rl_ppo_args *a, const float *logp, const float *old, const float *adv,
		      const float *v, const float *oldv, const float *ret, const float *ent)
{
	float d1[N], d2[N], d3[N];
	return rl_ppo_loss(a, logp, old, adv, v, oldv, ret, ent, N, 0.5, d1, d2, d3, NULL);
}

static void test_loss_grad(void)
{
	lm_rng r;
	rng_seed(&r, 11);
	float logp[N], old[N], adv[N], v[N], oldv[N], ret[N], ent[N];
	for (int t = 0; t < N; t++) {
		old[t] = (float)(-3 * rng_uniform(&r));
		logp[t] = old[t] + (float)(0.6 * (rng_uniform(&r) - 0.5)); /* some ratios clip */
		adv[t] = (float)rng_normal(&r);
		oldv[t] = (float)rng_normal(&r);
		v[t] = oldv[t] + (float)(0.8 * (rng_uniform(&r) - 0.5)); /* some values clip */
		ret[t] = (float)rng_normal(&r);
		ent[t] = (float)(2 * rng_uniform(&r));
	}
	rl_ppo_args a = { 0.1f, 0.15f, 0.2f, 0.5, 0.01 };
	float dl[N], dv[N], de[N];
	rl_ppo_stats st = { 0 };
	rl_ppo_loss(&a, logp, old, adv, v, oldv, ret, ent, N, 0.5, dl, dv, de, &st);
	int bad_l = 0, bad_v = 0, bad_e = 0;
	for (int t = 0; t < N; t++) {
		float *xs[3] = { logp, v, ent }, *gs[3] = { dl, dv, de };
		int *bads[3] = { &bad_l, &bad_v, &bad_e };
		for (int k = 0; k < 3; k++) {
			float save = xs[k][t];
			xs[k][t] = save + (float)FD_H;
			double hp = loss_at(&a, logp, old, adv, v, oldv, ret, ent);
			xs[k][t] = save - (float)FD_H;
			double hm = loss_at(&a, logp, old, adv, v, oldv, ret, ent);
			xs[k][t] = save;
			*bads[k] += !close_fd(gs[k][t], (hp - hm) / (2 * FD_H));
		}
	}
	is_int(bad_l, 0, "PPO loss: gradient w.r.t. the log-probs matches finite differences");
	is_int(bad_v, 0, "PPO loss: gradient w.r.t. the values matches finite differences");
	is_int(bad_e, 0, "PPO loss: gradient w.r.t. the entropies is -scale ent_coef");
	ok(st.clipped > 0 && st.clipped < N && st.vf_clipped > 0 && st.vf_clipped < N,
	   "the case clips some ratios (%g) and some values (%g) of %d", st.clipped, st.vf_clipped, N);

	rl_ppo_stats on = { 0 };
	rl_ppo_loss(&a, old, old, adv, oldv, oldv, ret, ent, N, 1.0, dl, dv, de, &on);
	int grad_is_adv = 1;
	for (int t = 0; t < N; t++)
		grad_is_adv &= fabsf(dl[t] + adv[t]) < 1e-6f;
	ok(fabs(on.ratio / N - 1) < 1e-12 && on.clipped == 0 && on.vf_clipped == 0,
	   "on-policy first epoch: ratio 1, nothing clipped");
	ok(grad_is_adv, "on-policy: d loss / d logp = -advantage (the policy gradient)");
}

static void test_checkpoint(void)
{
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model_config c = { 64, 16, 32, 2, 4, 64, 10000.0, 0, MODEL_PLAIN };
	model m;
	lm_rng r;
	rng_seed(&r, 5);
	value_head h, g;
	if (!ok(be && !model_init(&m, &c, be, 1, 8, &e) && !model_init_weights(&m, &r, &e) &&
		!vh_init(&h, c.d_model, &e) && !vh_init(&g, c.d_model, &e), "a tiny model and value head"))
		return;
	for (int j = 0; j < c.d_model; j++)
		h.w[j] = (float)rng_normal(&r);
	h.b[0] = 0.25f;
	char dir[] = "/tmp/test_rl_ppo.XXXXXX", path[64], plain[64], hf[64], hfmodel[128];
	if (!ok(mkdtemp(dir) != NULL, "a scratch directory"))
		return;
	snprintf(path, sizeof path, "%s/vh.safetensors", dir);
	snprintf(plain, sizeof plain, "%s/plain.safetensors", dir);
	snprintf(hf, sizeof hf, "%s/hf", dir);
	snprintf(hfmodel, sizeof hfmodel, "%s/model.safetensors", hf);
	sft_tensor vt[2];
	vh_tensors(&h, vt);
	is_int(ckpt_save_extra(path, &m, NULL, NULL, vt, 2, &e), 0, "save with the value head");
	is_int(vh_load(&g, path, &e), 1, "the value head is found");
	ok(!memcmp(g.w, h.w, (size_t)c.d_model * sizeof *h.w) && g.b[0] == h.b[0],
	   "and comes back bit for bit");
	model m2;
	ok(!model_init(&m2, &c, be, 1, 8, &e) && !ckpt_load(path, &m2, NULL, NULL, &e),
	   "the model loads from it as from any checkpoint");
	model_free(&m2);
	ckpt_save(plain, &m, NULL, NULL, &e);
	value_head z;
	vh_init(&z, c.d_model, &e);
	int zero = 1;
	is_int(vh_load(&z, plain, &e), 0, "a checkpoint without a value head: none loaded");
	for (int j = 0; j < c.d_model; j++)
		zero &= z.w[j] == 0;
	ok(zero && z.b[0] == 0, "the head stays initialised to zero");
	value_head wrong;
	vh_init(&wrong, c.d_model + 1, &e);
	is_int(vh_load(&wrong, path, &e), -1, "a value head of another width is an error");
	ok(strstr(e.msg, VALUE_HEAD_WEIGHT) != NULL, "... naming the tensor (%s)", e.msg);
	sft_file f;
	is_int(ckpt_export_hf(hf, &m, &e), 0, "export to Hugging Face");
	ok(!sft_open(&f, hfmodel, &e) && !sft_find(&f, VALUE_HEAD_WEIGHT), "the export has no value head");
	sft_close(&f);
	unlink(path), unlink(plain), unlink(hfmodel);
	snprintf(hfmodel, sizeof hfmodel, "%s/config.json", hf);
	unlink(hfmodel), rmdir(hf), rmdir(dir);
	vh_free(&h), vh_free(&g), vh_free(&z), vh_free(&wrong);
	model_free(&m);
	be->close(be);
}

int main(void)
{
	test_rewards_gae();
	test_loss_grad();
	test_checkpoint();
	return done_testing();
}
