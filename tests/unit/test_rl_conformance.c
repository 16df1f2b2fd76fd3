/* test_rl_conformance.c: rl_loss.c against the Stanford CS336 assignment 5
 * snapshots (../shared/data/cs336-a5/safetensors; see
 * ../shared/data/notes/a5-tests.md): entropy, masked mean and normalize
 * over every dim, group-normalised rewards, the naive, GRPO-clip and typed
 * policy-gradient losses, and the SFT and GRPO microbatch steps (loss and
 * gradient, one step and ten accumulated).  CS336 allows rtol 1e-4 and
 * atol 1e-2; this test holds the values to atol 1e-5 as well.  Skips when
 * the data is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "model/safetensors.h"
#include "rl/rl_loss.h"

static const double RTOL = 1e-4, ATOL = 1e-5;
enum { B = 2, T = 10, V = 100, GROUP = 4, N_ROLLOUTS = 8, STEPS = 10 };
static const double NORMALIZE_CONSTANT = 42.0, ADV_EPS = 1e-6, GRPO_CLIP = 0.1, PG_CLIP = 0.5;
static const int GRAD_ACCUM = 2;

static char dir[4096];
static sft_file inputs;

/* A copy of a tensor as floats (F32 or BOOL), count in *n; exits on error. */
static float *load(sft_file *f, const char *name, size_t *n)
{
	const sft_tensor *t = sft_find(f, name);
	if (!t) {
		printf("Bail out! %s: no tensor %s\n", f->path, name);
		exit(1);
	}
	size_t k = t->nbytes / sft_dtype_size(t->dtype);
	float *x = malloc((k ? k : 1) * sizeof *x);
	if (t->dtype == SFT_F32)
		memcpy(x, t->data, t->nbytes);
	else
		for (size_t i = 0; i < k; i++)
			x[i] = ((const uint8_t *)t->data)[i] ? 1.0f : 0.0f;
	if (n)
		*n = k;
	return x;
}

static uint8_t *load_mask(sft_file *f, const char *name)
{
	size_t n;
	float *x = load(f, name, &n);
	uint8_t *m = malloc(n);
	for (size_t i = 0; i < n; i++)
		m[i] = x[i] != 0;
	free(x);
	return m;
}

static int open_ref(sft_file *f, const char *test)
{
	char path[8192];
	lm_err e;
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, test);
	if (sft_open(f, path, &e)) {
		printf("Bail out! %s\n", e.msg);
		exit(1);
	}
	return 0;
}

/* got[0..n) against the tensor key of the snapshot test. */
static void check(const char *test, const char *key, const float *got, size_t n, size_t stride_repeat)
{
	sft_file f;
	open_ref(&f, test);
	size_t nw;
	float *want = load(&f, key, &nw);
	int bad = 0;
	double worst = 0;
	if (nw != n * stride_repeat) {
		ok(0, "%s/%s: %zu values, want %zu", test, key, n * stride_repeat, nw);
	} else {
		for (size_t i = 0; i < nw; i++) {
			double g = got[i % n], w = want[i];
			if (isnan(w) || isnan(g)) {
				bad += isnan(w) != isnan(g);
				continue;
			}
			double d = fabs(g - w);
			worst = fmax(worst, d);
			bad += d > ATOL + RTOL * fabs(w);
		}
		ok(bad == 0, "%s/%s: %zu values match (max |diff| %.2g)", test, key, nw, worst);
	}
	free(want);
	sft_close(&f);
}

static void test_entropy(void)
{
	float *logits = load(&inputs, "logits", NULL), out[B * T];
	rl_entropy(logits, B * T, V, out);
	check("test_compute_entropy", "array", out, B * T, 1);
	free(logits);
}

static void test_masked(void)
{
	float *x = load(&inputs, "tensor", NULL);
	uint8_t *m = load_mask(&inputs, "mask");
	const size_t shape[3] = { B, T, V };
	static const struct { int dim; const char *suffix; size_t n; } dims[] = {
		{ 0, "dim0", T * V }, { 1, "dim1", B * V }, { -1, "dimlast", B * T }, { RL_DIM_ALL, "dimNone", 1 },
	};
	float *out = malloc(B * T * V * sizeof *out);
	lm_err e;
	char name[64];
	for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
		rl_masked_mean(x, m, shape, 3, dims[k].dim, out, &e);
		snprintf(name, sizeof name, "test_masked_mean_%s", dims[k].suffix);
		check(name, "array", out, dims[k].n, 1);
		rl_masked_normalize(x, m, shape, 3, dims[k].dim, NORMALIZE_CONSTANT, out, &e);
		snprintf(name, sizeof name, "test_masked_normalize_%s", dims[k].suffix);
		check(name, "array", out, dims[k].n, 1);
	}
	free(out);
	free(x);
	free(m);
}

static void test_group(void)
{
	const char *tests[2] = { "test_compute_group_normalized_rewards_no_normalize_by_std",
				 "test_compute_group_normalized_rewards_normalize_by_std" };
	for (int by_std = 0; by_std < 2; by_std++) {
		sft_file f;
		open_ref(&f, tests[by_std]);
		/* the raw rewards are the notes' sha256 reward_fn of the fixed responses */
		float *raw = load(&f, "raw_rewards", NULL), adv[N_ROLLOUTS];
		lm_err e;
		is_int(rl_group_normalize(raw, N_ROLLOUTS, GROUP, by_std, ADV_EPS, adv, &e), 0,
		       "group normalize (by std %d) runs", by_std);
		check(tests[by_std], "normalized_rewards", adv, N_ROLLOUTS, 1);
		free(raw);
		sft_close(&f);
	}
}

static void test_losses(void)
{
	float *rw = load(&inputs, "raw_rewards_or_advantages", NULL);
	float *raw = load(&inputs, "raw_rewards", NULL);
	float *adv = load(&inputs, "advantages", NULL);
	float *logp = load(&inputs, "policy_log_probs", NULL);
	float *old = load(&inputs, "old_log_probs", NULL);
	float loss[B * T];
	lm_err e;
	rl_naive_pg_loss(rw, logp, B, T, loss, NULL);
	check("test_compute_naive_policy_gradient_loss", "array", loss, B * T, 1);
	rl_grpo_clip_loss(adv, logp, old, B, T, 10.0f, 10.0f, loss, NULL, NULL);
	check("test_compute_grpo_clip_loss_large_cliprange", "array", loss, B * T, 1);
	rl_grpo_clip_loss(adv, logp, old, B, T, (float)GRPO_CLIP, (float)GRPO_CLIP, loss, NULL, NULL);
	check("test_compute_grpo_clip_loss_small_cliprange", "array", loss, B * T, 1);
	static const char *const types[] = { "no_baseline", "reinforce_with_baseline", "grpo_clip" };
	for (int k = 0; k < 3; k++) {
		rl_pg_args a = { 0, raw, adv, old, (float)PG_CLIP, (float)PG_CLIP };
		char name[96];
		rl_pg_type_parse(types[k], &a.type, &e);
		is_int(rl_pg_loss(&a, logp, B, T, loss, NULL, NULL, &e), 0, "%s runs", types[k]);
		snprintf(name, sizeof name, "test_compute_policy_gradient_loss_%s", types[k]);
		check(name, "array", loss, B * T, 1);
	}
	free(rw);
	free(raw);
	free(adv);
	free(logp);
	free(old);
}

static void test_steps(void)
{
	float *logp = load(&inputs, "policy_log_probs", NULL);
	float *raw = load(&inputs, "raw_rewards", NULL);
	float *adv = load(&inputs, "advantages", NULL);
	float *old = load(&inputs, "old_log_probs", NULL);
	uint8_t *mask = load_mask(&inputs, "response_mask");
	float grad[B * T], acc[B * T] = { 0 }, losses[STEPS];

	float loss = (float)rl_sft_step(logp, mask, B, T, GRAD_ACCUM, 1.0, grad);
	check("test_sft_microbatch_train_step", "loss", &loss, 1, 1);
	check("test_sft_microbatch_train_step", "policy_log_probs_grad", grad, B * T, 1);
	loss = (float)rl_sft_step(logp, mask, B, T, GRAD_ACCUM, NORMALIZE_CONSTANT, grad);
	check("test_sft_microbatch_train_step_normalize", "loss", &loss, 1, 1);
	check("test_sft_microbatch_train_step_normalize", "policy_log_probs_grad", grad, B * T, 1);
	/* ten steps: the snapshot stacks the .grad tensor after the last step */
	for (int s = 0; s < STEPS; s++) {
		losses[s] = (float)rl_sft_step(logp, mask, B, T, GRAD_ACCUM, 1.0, grad);
		for (int i = 0; i < B * T; i++)
			acc[i] += grad[i];
	}
	check("test_sft_microbatch_train_step_10_steps", "loss", losses, STEPS, 1);
	check("test_sft_microbatch_train_step_10_steps", "policy_log_probs_grad", acc, B * T, STEPS);

	rl_grpo_args a = { { RL_PG_GRPO_CLIP, raw, adv, old, (float)GRPO_CLIP, (float)GRPO_CLIP },
			   RL_AGG_MASKED_MEAN, 0, GRAD_ACCUM, NULL, 0 };
	rl_step_stats st;
	lm_err e;
	is_int(rl_grpo_step(&a, logp, mask, B, T, grad, &st, &e), 0, "GRPO step runs");
	loss = (float)st.loss;
	check("test_grpo_microbatch_train_step_grpo_clip", "loss", &loss, 1, 1);
	check("test_grpo_microbatch_train_step_grpo_clip", "policy_log_probs_grad", grad, B * T, 1);
	memset(acc, 0, sizeof acc);
	for (int s = 0; s < STEPS; s++) {
		rl_grpo_step(&a, logp, mask, B, T, grad, &st, &e);
		losses[s] = (float)st.loss;
		for (int i = 0; i < B * T; i++)
			acc[i] += grad[i];
	}
	check("test_grpo_microbatch_train_step_grpo_clip_10_steps", "loss", losses, STEPS, 1);
	check("test_grpo_microbatch_train_step_grpo_clip_10_steps", "policy_log_probs_grad", acc, B * T, STEPS);
	free(logp);
	free(raw);
	free(adv);
	free(old);
	free(mask);
}

int main(void)
{
	const char *d = tap_data_dir();
	if (!d)
		skip_all("needs ../shared/data (CS336 assignment 5 snapshots)");
	snprintf(dir, sizeof dir, "%s/cs336-a5/safetensors", d);
	char path[8192];
	lm_err e;
	snprintf(path, sizeof path, "%s/inputs-conftest_inputs.safetensors", dir);
	if (sft_open(&inputs, path, &e)) {
		printf("Bail out! %s\n", e.msg);
		return 1;
	}
	test_entropy();
	test_masked();
	test_group();
	test_losses();
	test_steps();
	sft_close(&inputs);
	return done_testing();
}
