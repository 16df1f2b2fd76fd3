/* rl_update_metrics.c: rl-update's metrics line, one JSON object with
 * what the update saw and did (rewards, advantages, loss, clipping, KL,
 * gradient norm, the checkpoint written). */
#include <jansson.h>
#include <math.h>

#include "app/rl_update_internal.h"

static double mean_of(const seqs *v, int adv, double *sd, double *mn, double *mx)
{
	double s = 0, ss = 0;
	*mn = INFINITY, *mx = -INFINITY;
	for (size_t i = 0; i < v->n; i++) {
		double x = adv ? v->s[i].adv : v->s[i].reward;
		s += x;
		ss += x * x;
		*mn = fmin(*mn, x), *mx = fmax(*mx, x);
	}
	double mean = s / (double)v->n;
	*sd = sqrt(fmax(0.0, ss / (double)v->n - mean * mean));
	return mean;
}

/* PPO: rewards, per-token advantages, returns and values before the
 * update, and the loss terms' means over all epochs. */
static void ppo_metrics(const seqs *v, const stats *st, json_t *j)
{
	double sd, mn, mx, n = st->ppo.tokens ? (double)st->ppo.tokens : 1;
	json_object_set_new(j, "reward_mean", json_real(mean_of(v, 0, &sd, &mn, &mx)));
	json_object_set_new(j, "reward_std", json_real(sd));
	json_object_set_new(j, "adv_mean", json_real(st->adv_mean));
	json_object_set_new(j, "adv_std", json_real(st->adv_std));
	json_object_set_new(j, "return_mean", json_real(st->ret_mean));
	json_object_set_new(j, "value_mean", json_real(st->value_mean));
	json_object_set_new(j, "value_head", json_string(st->value_head_loaded ? "loaded" : "new"));
	json_object_set_new(j, "kl", json_real(st->kl_mean));
	json_object_set_new(j, "policy_loss", json_real(st->ppo.pg / n));
	json_object_set_new(j, "value_loss", json_real(st->ppo.vf / n));
	json_object_set_new(j, "clip_frac", json_real(st->ppo.clipped / n));
	json_object_set_new(j, "value_clip_frac", json_real(st->ppo.vf_clipped / n));
	json_object_set_new(j, "ratio_mean", json_real(st->ppo.ratio / n));
}

int write_metrics(const rlu_opts *o, const seqs *v, size_t groups, const stats *st,
		  const char *ckpt, double secs, FILE *out, lm_err *e)
{
	static const char *const loss_names[] = { "no_baseline", "reinforce_with_baseline", "grpo_clip" };
	json_t *j = json_object();
	double sd, mn, mx;
	static const char *const algo_names[] = { "grpo", "sft", "dpo", "ppo" };
	json_object_set_new(j, "algo", json_string(algo_names[o->algo]));
	json_object_set_new(j, "sequences", json_integer((json_int_t)v->n));
	if (o->algo == RLU_GRPO) {
		json_object_set_new(j, "loss_type", json_string(loss_names[o->loss]));
		json_object_set_new(j, "groups", json_integer((json_int_t)groups));
		json_object_set_new(j, "reward_mean", json_real(mean_of(v, 0, &sd, &mn, &mx)));
		json_object_set_new(j, "reward_std", json_real(sd));
		json_object_set_new(j, "adv_mean", json_real(mean_of(v, 1, &sd, &mn, &mx)));
		json_object_set_new(j, "adv_std", json_real(sd));
		json_object_set_new(j, "adv_min", json_real(mn));
		json_object_set_new(j, "adv_max", json_real(mx));
		double n = st->tokens ? (double)st->tokens : 1;
		json_object_set_new(j, "clip_frac", json_real(st->clipped / n));
		json_object_set_new(j, "ratio_mean", json_real(st->ratio_sum / n));
		json_object_set_new(j, "kl", json_real(st->kl_sum / n));
	}
	if (o->algo == RLU_PPO)
		ppo_metrics(v, st, j);
	if (o->algo == RLU_DPO) {
		double np = st->pairs ? (double)st->pairs : 1;
		json_object_set_new(j, "beta", json_real(o->beta));
		json_object_set_new(j, "pairs", json_integer((json_int_t)(v->n / 2)));
		json_object_set_new(j, "accuracy", json_real((double)st->right / np));
		json_object_set_new(j, "margin_mean", json_real(st->margin_sum / np));
	}
	double tok = st->tokens ? (double)st->tokens : 1;
	json_object_set_new(j, "steps", json_integer(st->steps));
	/* each batch adds its loss: the mean over the optimizer steps */
	json_object_set_new(j, "loss", json_real(st->steps ? st->loss / (double)st->steps : 0));
	json_object_set_new(j, "response_tokens", json_integer(st->tokens));
	json_object_set_new(j, "logp_mean", json_real(st->logp_sum / tok));
	if (o->algo != RLU_DPO) /* the DPO pass does not look at the logits */
		json_object_set_new(j, "entropy", json_real(st->entropy_sum / tok));
	json_object_set_new(j, "grad_norm", json_real(st->steps ? st->gnorm_sum / (double)st->steps : 0));
	json_object_set_new(j, "checkpoint", json_string(ckpt));
	json_object_set_new(j, "seconds", json_real(secs));
	int rc = json_dumpf(j, out, JSON_COMPACT | JSON_REAL_PRECISION(6)) || fputc('\n', out) == EOF
		 ? lm_seterr(e, "writing the metrics:") : 0;
	json_decref(j);
	return rc;
}
