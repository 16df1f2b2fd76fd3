/* rl_update.c: the policy update of rl-update (see rl_update.h): records to
 * sequences, group advantages, per-sequence forward and backward with the
 * loss weight of rl_loss.h, AdamW steps, checkpoint and metrics. */
#include "app/rl_update.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/rl_update_internal.h"
#include "base/order.h"
#include "cli/progress.h"
#include "cli/tok_options.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "rl/rl_backward.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

enum { NAME_MAX_LEN = 64 };

static void seqs_free(seqs *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->s[i].ids);
		free(v->s[i].targets);
		free(v->s[i].group);
		free(v->s[i].old_logp);
		free(v->s[i].ref_tok);
		free(v->s[i].old_v);
		free(v->s[i].adv_tok);
		free(v->s[i].ret_tok);
	}
	free(v->s);
}

/* Append a sequence from prompt and response token ids. */
static int add_seq(seqs *v, const uint32_t *p, size_t np, const uint32_t *r, size_t nr,
		   unsigned long lineno, int ctx, const char *name, lm_err *e)
{
	size_t L = np + nr;
	if (np == 0)
		return lm_seterr(e, "%s:%lu: empty prompt", name, lineno);
	if (L > (size_t)ctx + 1)
		return lm_seterr(e, "%s:%lu: %zu tokens do not fit the model's context of %d",
				 name, lineno, L, ctx);
	if (v->n == v->cap) {
		size_t nc = v->cap ? 2 * v->cap : 64;
		seq *ns = realloc(v->s, nc * sizeof *ns);
		if (!ns)
			return lm_seterr(e, "out of memory");
		v->s = ns, v->cap = nc;
	}
	seq *s = &v->s[v->n];
	memset(s, 0, sizeof *s);
	s->T = (int)L - 1;
	s->n_resp = (int)nr;
	s->lineno = lineno;
	s->ids = malloc((L ? L : 1) * sizeof *s->ids);
	s->targets = malloc((L ? L : 1) * sizeof *s->targets);
	if (!s->ids || !s->targets) {
		free(s->ids);
		free(s->targets);
		return lm_seterr(e, "out of memory");
	}
	for (size_t i = 0; i < L; i++) {
		uint32_t id = i < np ? p[i] : r[i - np];
		s->ids[i] = (int32_t)id;
		if (i > 0)
			s->targets[i - 1] = i >= np ? (int32_t)id : -1;
	}
	v->n++;
	return 0;
}

/* A JSON array of token ids into a malloc'd array. */
static int ids_field(json_t *o, const char *key, int vocab, uint32_t **out, size_t *n,
		     const char *name, unsigned long lineno, lm_err *e)
{
	json_t *a = json_object_get(o, key);
	if (!json_is_array(a))
		return lm_seterr(e, "%s:%lu: no array '%s' (rollouts come from lm-sample --jsonl)",
				 name, lineno, key);
	*n = json_array_size(a);
	*out = malloc((*n ? *n : 1) * sizeof **out);
	if (!*out)
		return lm_seterr(e, "out of memory");
	for (size_t i = 0; i < *n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= vocab) {
			free(*out);
			*out = NULL;
			return lm_seterr(e, "%s:%lu: '%s'[%zu] is not a token id below %d",
					 name, lineno, key, i, vocab);
		}
		(*out)[i] = (uint32_t)json_integer_value(x);
	}
	return 0;
}

static int encode(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
		  const char *name, unsigned long lineno, lm_err *e)
{
	json_t *s = json_object_get(o, key);
	if (!json_is_string(s))
		return lm_seterr(e, "%s:%lu: no string field '%s'", name, lineno, key);
	bpe_ids ids = { 0 };
	if (bpe_encode(v->w, (const uint8_t *)json_string_value(s), json_string_length(s), &ids, e) < 0)
		return lm_err_prefix(e, "%s:%lu", name, lineno);
	*out = ids.v;
	*n = ids.n;
	return 0;
}

/* A response encoded with end-of-text appended, so the model learns to stop. */
static int encode_response(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
			   const char *name, unsigned long lineno, lm_err *e)
{
	if (encode(v, o, key, out, n, name, lineno, e))
		return -1;
	if (v->tok->eot == BPE_NO_TOKEN)
		return 0;
	uint32_t *grown = realloc(*out, (*n + 1) * sizeof **out);
	if (!grown)
		return lm_seterr(e, "out of memory");
	*out = grown;
	(*out)[(*n)++] = v->tok->eot;
	return 0;
}

/* DPO: the chosen and the rejected sequence, in that order. */
static int read_pair(seqs *v, json_t *obj, int ctx, const char *name, unsigned long lineno,
		     lm_err *e)
{
	uint32_t *p = NULL, *c = NULL, *r = NULL;
	size_t np = 0, nc = 0, nr = 0;
	int rc = encode(v, obj, "prompt", &p, &np, name, lineno, e);
	if (!rc)
		rc = encode_response(v, obj, "chosen", &c, &nc, name, lineno, e);
	if (!rc)
		rc = encode_response(v, obj, "rejected", &r, &nr, name, lineno, e);
	if (!rc)
		rc = add_seq(v, p, np, c, nc, lineno, ctx, name, e);
	if (!rc)
		rc = add_seq(v, p, np, r, nr, lineno, ctx, name, e);
	free(p);
	free(c);
	free(r);
	return rc;
}

/* The rollout's per-token log-probs, placed at their targets. */
static int old_logprobs(seq *s, json_t *a, const char *who, const char *name, unsigned long lineno,
			lm_err *e)
{
	if (!json_is_array(a))
		return lm_seterr(e, "%s:%lu: no 'logprobs' (%s needs the log-probs the rollouts "
				 "were sampled with)", name, lineno, who);
	if (json_array_size(a) != (size_t)s->n_resp)
		return lm_seterr(e, "%s:%lu: %zu logprobs for %d completion tokens", name, lineno,
				 json_array_size(a), s->n_resp);
	if (!(s->old_logp = calloc((size_t)s->T + 1, sizeof *s->old_logp)))
		return lm_seterr(e, "out of memory");
	int first = s->T - s->n_resp;
	for (int k = 0; k < s->n_resp; k++) {
		json_t *x = json_array_get(a, (size_t)k);
		if (!json_is_number(x) || !(json_number_value(x) <= 0) ||
		    !isfinite((float)json_number_value(x)))
			return lm_seterr(e, "%s:%lu: logprobs[%d] is not a log-probability", name, lineno, k);
		s->old_logp[first + k] = (float)json_number_value(x);
	}
	return 0;
}

static int read_record(const rlu_opts *o, seqs *v, json_t *obj, int vocab, int ctx,
		       const char *name, unsigned long lineno, lm_err *e)
{
	uint32_t *p = NULL, *r = NULL;
	size_t np = 0, nr = 0;
	int rc;
	if (o->algo == RLU_DPO)
		return read_pair(v, obj, ctx, name, lineno, e);
	if (o->algo == RLU_SFT) {
		rc = encode(v, obj, "prompt", &p, &np, name, lineno, e);
		if (!rc)
			rc = encode_response(v, obj, "response", &r, &nr, name, lineno, e);
	} else {
		rc = ids_field(obj, "prompt_ids", vocab, &p, &np, name, lineno, e);
		if (!rc)
			rc = ids_field(obj, "completion_ids", vocab, &r, &nr, name, lineno, e);
	}
	if (!rc)
		rc = add_seq(v, p, np, r, nr, lineno, ctx, name, e);
	free(p);
	free(r);
	if (rc || (o->algo != RLU_GRPO && o->algo != RLU_PPO))
		return rc;
	seq *s = &v->s[v->n - 1];
	json_t *rw = json_object_get(obj, "reward"), *g = json_object_get(obj, "group");
	if (!json_is_number(rw))
		return lm_seterr(e, "%s:%lu: no numeric 'reward' (score the rollouts with rl-reward)",
				 name, lineno);
	s->reward = json_number_value(rw);
	if (!isfinite((float)s->reward)) /* computed in float: beyond FLT_MAX is inf */
		return lm_seterr(e, "%s:%lu: reward %g does not fit a float", name, lineno, s->reward);
	if (o->algo == RLU_PPO) /* no groups: the value head is the baseline */
		return old_logprobs(s, json_object_get(obj, "logprobs"), "ppo", name, lineno, e);
	if (!g)
		return lm_seterr(e, "%s:%lu: no 'group' (the samples of one prompt share it)", name, lineno);
	if (!(s->group = json_dumps(g, JSON_COMPACT | JSON_ENCODE_ANY)))
		return lm_seterr(e, "out of memory");
	if (o->loss == RL_PG_GRPO_CLIP)
		return old_logprobs(s, json_object_get(obj, "logprobs"), "grpo_clip", name, lineno, e);
	return 0;
}

static int read_seqs(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab, int ctx,
		     lm_err *e)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	int rc = 0;
	for (unsigned long lineno = 1; rc == 0 && (got = getline(&line, &cap, in)) >= 0; lineno++) {
		size_t n = (size_t)got;
		while (n && strchr(" \t\r\n", line[n - 1]))
			n--;
		if (n == 0)
			continue;
		json_error_t je;
		json_t *obj = json_loadb(line, n, 0, &je);
		if (!obj || !json_is_object(obj))
			rc = obj ? lm_seterr(e, "%s:%lu: not a JSON object", name, lineno)
				 : lm_seterr(e, "%s:%lu: bad JSON: %s (column %d)", name, lineno, je.text, je.column);
		else
			rc = read_record(o, v, obj, vocab, ctx, name, lineno, e);
		json_decref(obj);
	}
	if (rc == 0 && ferror(in))
		rc = lm_seterr(e, "%s: read error:", name);
	if (rc == 0 && v->n == 0)
		rc = lm_seterr(e, "%s: no records", name);
	free(line);
	return rc;
}

/* Advantages within each group (rl_group_normalize on the group alone). */
static int advantages(const rlu_opts *o, seqs *v, size_t *n_groups, const char *name, lm_err *e)
{
	size_t n = v->n, *idx = NULL;
	const char **keys = malloc(n * sizeof *keys);
	float *r = malloc(n * sizeof *r), *a = malloc(n * sizeof *a);
	int rc = 0;
	for (size_t i = 0; keys && i < n; i++)
		keys[i] = v->s[i].group;
	if (keys)
		idx = order_by_key(keys, n);
	if (n && (!idx || !keys || !r || !a))
		rc = lm_seterr(e, "out of memory");
	*n_groups = 0;
	for (size_t lo = 0; rc == 0 && lo < n;) {
		size_t hi = lo + 1;
		while (hi < n && !strcmp(keys[idx[hi]], keys[idx[lo]]))
			hi++;
		for (size_t k = lo; k < hi; k++)
			r[k - lo] = (float)v->s[idx[k]].reward;
		if (rl_group_normalize(r, hi - lo, hi - lo, !o->no_std, o->adv_eps, a, e)) {
			rc = lm_err_prefix(e, "%s: group %s (line %lu)", name, keys[idx[lo]],
					   v->s[idx[lo]].lineno);
			break;
		}
		for (size_t k = lo; k < hi; k++)
			v->s[idx[k]].adv = a[k - lo];
		(*n_groups)++;
		lo = hi;
	}
	free(idx);
	free(keys);
	free(r);
	free(a);
	return rc;
}

void work_free(work *w)
{
	free(w->logits);
	free(w->logp);
	free(w->grad);
	free(w->w);
	free(w->mask);
}

int work_init(work *w, int maxT, int V, lm_err *e)
{
	w->logits = malloc((size_t)maxT * V * sizeof *w->logits);
	w->logp = malloc((size_t)maxT * sizeof *w->logp);
	w->grad = malloc((size_t)maxT * sizeof *w->grad);
	w->w = malloc((size_t)maxT * sizeof *w->w);
	w->mask = malloc((size_t)maxT);
	if (!w->logits || !w->logp || !w->grad || !w->w || !w->mask) {
		work_free(w);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

int seq_forward(model *m, const seq *s, work *w, stats *st, lm_err *e)
{
	double mean_ce;
	if (model_forward(m, s->ids, s->targets, 1, s->T, &mean_ce, e))
		return -1;
	int V = m->cfg.vocab;
	if (model_read_logits(m, w->logits, (size_t)s->T, e))
		return -1;
	for (int t = 0; t < s->T; t++) {
		w->mask[t] = s->targets[t] >= 0;
		w->logp[t] = 0;
		if (!w->mask[t])
			continue;
		const float *z = w->logits + (size_t)t * V;
		float mx = z[0];
		for (int j = 1; j < V; j++)
			mx = z[j] > mx ? z[j] : mx;
		double se = 0;
		for (int j = 0; j < V; j++)
			se += exp((double)z[j] - mx);
		w->logp[t] = (float)((double)z[s->targets[t]] - mx - log(se));
		if (st) {
			float h;
			rl_entropy(z, 1, (size_t)V, &h);
			st->entropy_sum += h;
		}
	}
	return 0;
}

/* Forward and backward on one sequence of a batch of `batch` sequences:
 * the loss of rl_grpo_step (SFT: no_baseline with reward 1), each token's
 * gradient -d loss / d logp as its cross-entropy weight. */
static int seq_step(const rlu_opts *o, model *m, const seq *s, double constant, size_t batch,
		    work *w, stats *st, lm_err *e)
{
	if (s->n_resp == 0)
		return 0;
	if (seq_forward(m, s, w, st, e))
		return -1;
	float one = 1.0f, reward = (float)s->reward, adv = (float)s->adv;
	rl_grpo_args a = {
		{ o->algo == RLU_SFT ? RL_PG_NO_BASELINE : o->loss, o->algo == RLU_SFT ? &one : &reward,
		  &adv, s->old_logp, (float)o->clip_low, (float)o->clip_high },
		o->agg, constant, (int)batch, s->ref_tok, o->kl_beta,
	};
	rl_step_stats ss;
	if (rl_grpo_step(&a, w->logp, w->mask, 1, (size_t)s->T, w->grad, &ss, e))
		return -1;
	for (int t = 0; t < s->T; t++) {
		w->w[t] = -w->grad[t];
		st->logp_sum += w->logp[t];
	}
	st->loss += ss.loss;
	st->tokens += (long long)ss.tokens;
	st->clipped += ss.clip_frac * (double)ss.tokens;
	st->kl_sum += ss.kl * (double)ss.tokens;
	st->ratio_sum += ss.ratio_mean * (double)ss.tokens;
	return rl_backward_tokens(m, w->w, e);
}

int reference_tokens(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		     int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	work w = { 0 };
	if (model_init(&ref, cfg, be, 1, maxT, e))
		return -1;
	int rc = work_init(&w, maxT, cfg->vocab, e);
	if (rc == 0 && (rc = ckpt_load(o->ref, &ref, NULL, NULL, e)))
		lm_err_prefix(e, "reference checkpoint");
	for (size_t i = 0; rc == 0 && i < v->n; i++) {
		seq *s = &v->s[i];
		if (!(s->ref_tok = malloc(((size_t)s->T + 1) * sizeof *s->ref_tok)))
			rc = lm_seterr(e, "out of memory");
		else if (!(rc = seq_forward(&ref, s, &w, NULL, e)))
			memcpy(s->ref_tok, w.logp, (size_t)s->T * sizeof *s->ref_tok);
	}
	work_free(&w);
	model_free(&ref);
	return rc;
}

/* Forward one sequence; *sum_logp gets its response log-likelihood. */
static int seq_logp(model *m, const seq *s, double *sum_logp, lm_err *e)
{
	double mean_ce;
	if (model_forward(m, s->ids, s->targets, 1, s->T, &mean_ce, e))
		return -1;
	*sum_logp = -mean_ce * (double)model_count(m);
	return 0;
}

/* The reference's log-likelihood of every response, with the policy's shape. */
static int reference_logps(const rlu_opts *o, const model_config *cfg, lm_backend *be,
			   int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	if (model_init(&ref, cfg, be, 1, maxT, e))
		return -1;
	int rc = ckpt_load(o->ref, &ref, NULL, NULL, e);
	if (rc)
		lm_err_prefix(e, "reference checkpoint");
	for (size_t i = 0; rc == 0 && i < v->n; i++)
		rc = seq_logp(&ref, &v->s[i], &v->s[i].ref_logp, e);
	model_free(&ref);
	return rc;
}

/* One DPO pair: chosen c, rejected r; the batch has npairs pairs. */
static int dpo_pair(const rlu_opts *o, model *m, const seq *c, const seq *r, size_t npairs,
		    stats *st, lm_err *e)
{
	double lr, lc, d_lc, d_lr;
	if (seq_logp(m, r, &lr, e) || seq_logp(m, c, &lc, e))
		return -1;
	double loss = rl_dpo_loss(o->beta, lc, lr, c->ref_logp, r->ref_logp, &d_lc, &d_lr);
	double margin = (lc - c->ref_logp) - (lr - r->ref_logp);
	st->loss += loss / (double)npairs;
	st->margin_sum += margin;
	st->right += margin > 0;
	st->pairs++;
	st->logp_sum += lc + lr;
	st->tokens += c->n_resp + r->n_resp;
	/* the chosen sequence's activations are live: its backward first */
	if (model_backward(m, (float)(-d_lc / (double)npairs), e) || seq_logp(m, r, &lr, e))
		return -1;
	return model_backward(m, (float)(-d_lr / (double)npairs), e);
}

int rlu_check_finite(const stats *st, double gnorm, lm_err *e)
{
	const char *what = !isfinite(st->loss) ? "loss" : !isfinite(gnorm) ? "gradient norm" : NULL;
	if (what)
		return lm_seterr(e, "step %lld: the %s is not finite (%g); stopped, nothing written",
				 st->steps + 1, what, !isfinite(st->loss) ? st->loss : gnorm);
	return 0;
}

static int train_dpo(const rlu_opts *o, model *m, optim *opt, seqs *v, stats *st, lm_err *e)
{
	size_t pairs = v->n / 2;
	size_t batch = o->batch > 0 && (size_t)o->batch < pairs ? (size_t)o->batch : pairs;
	int rc = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < pairs; lo += batch) {
			size_t hi = lo + batch < pairs ? lo + batch : pairs;
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i++)
				rc = dpo_pair(o, m, &v->s[2 * i], &v->s[2 * i + 1], hi - lo, st, e);
			if (rc)
				break;
			double gn = optim_grad_norm(m);
			if ((rc = rlu_check_finite(st, gn, e)))
				break;
			st->gnorm_sum += gn;
			st->steps++;
			optim_step(opt, m, o->lr, clip_factor(gn, o->clip_grad));
		}
	return rc;
}

static int train(const rlu_opts *o, model *m, optim *opt, seqs *v, stats *st, lm_err *e)
{
	double constant = o->constant;
	if (o->agg == RL_AGG_NORMALIZE && constant <= 0)
		for (size_t i = 0; i < v->n; i++)
			constant = fmax(constant, v->s[i].n_resp);
	int maxT = 1;
	for (size_t i = 0; i < v->n; i++)
		maxT = v->s[i].T > maxT ? v->s[i].T : maxT;
	work w = { 0 };
	if (work_init(&w, maxT, m->cfg.vocab, e))
		return -1;
	size_t batch = o->batch > 0 && (size_t)o->batch < v->n ? (size_t)o->batch : v->n;
	progress pr;
	progress_start(&pr, o->progress, "sequences", "seq", (uint64_t)(v->n * (size_t)o->epochs));
	int rc = 0;
	uint64_t done = 0;
	for (long long ep = 0; rc == 0 && ep < o->epochs; ep++)
		for (size_t lo = 0; rc == 0 && lo < v->n; lo += batch) {
			size_t hi = lo + batch < v->n ? lo + batch : v->n;
			model_zero_grad(m);
			for (size_t i = lo; rc == 0 && i < hi; i++) {
				rc = seq_step(o, m, &v->s[i], constant, hi - lo, &w, st, e);
				progress_update(&pr, ++done, NULL);
			}
			if (rc)
				break;
			double gn = optim_grad_norm(m);
			if ((rc = rlu_check_finite(st, gn, e)))
				break;
			st->gnorm_sum += gn;
			st->steps++;
			optim_step(opt, m, o->lr, clip_factor(gn, o->clip_grad));
		}
	progress_end(&pr, done, NULL);
	work_free(&w);
	return rc;
}

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

static int write_metrics(const rlu_opts *o, const seqs *v, size_t groups, const stats *st,
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

int rlu_run(const rlu_opts *o, FILE *in, const char *in_name, FILE *metrics, lm_err *e)
{
	if ((o->algo == RLU_GRPO || o->algo == RLU_PPO) && o->kl_beta > 0 && !o->ref)
		return lm_usage_err(e, "the KL penalty needs the reference checkpoint (--ref)");
	double t0 = lm_now();
	model_config cfg;
	if (ckpt_read_config(o->checkpoint, &cfg, e))
		return -1;
	backend_set_threads(o->threads);
	lm_backend *be = backend_open(o->device ? o->device : "cpu", e);
	if (!be)
		return -1;
	seqs v = { 0 };
	value_head vh = { 0 };
	bpe_tokenizer tok = { 0 };
	bpe_encoder *enc = NULL;
	model m = { 0 };
	optim opt = { 0 };
	int have_m = 0, have_o = 0, have_t = 0, rc = 0;
	size_t groups = 0;
	stats st = { 0 };
	char name[NAME_MAX_LEN], path[4096];
	if (o->algo == RLU_DPO && !o->ref)
		rc = lm_usage_err(e, "DPO needs the reference checkpoint (--ref)");
	if (rc == 0 && (o->algo == RLU_SFT || o->algo == RLU_DPO)) {
		bpe_source src = { .tokenizer = o->tokenizer };
		if (!o->tokenizer)
			rc = lm_usage_err(e, "%s needs the tokenizer (-t)", o->algo == RLU_SFT ? "SFT" : "DPO");
		else if ((rc = bpe_open(&tok, &src, e)) == 0) {
			have_t = 1;
			v.tok = &tok;
			if (!(enc = bpe_encoder_new(&tok, 1, e)) || !(v.w = bpe_worker_new(enc, e)))
				rc = -1;
			else if (tok.n_vocab > (uint32_t)cfg.vocab)
				rc = lm_seterr(e, "the tokenizer has %u tokens but %s has a vocabulary of %d",
					       tok.n_vocab, o->checkpoint, cfg.vocab);
		}
	}
	if (rc == 0)
		rc = read_seqs(o, &v, in, in_name, cfg.vocab, cfg.ctx, e);
	if (rc == 0 && o->algo == RLU_GRPO)
		rc = advantages(o, &v, &groups, in_name, e);
	int maxT = 1;
	for (size_t i = 0; i < v.n; i++)
		maxT = v.s[i].T > maxT ? v.s[i].T : maxT;
	optim_config oc = { o->lr, o->lr, 0, 1, o->beta1, o->beta2, 1e-8, o->weight_decay, o->clip_grad };
	train_state ts = { 0 };
	if (rc == 0 && !(rc = model_init(&m, &cfg, be, 1, maxT, e)))
		have_m = 1;
	if (rc == 0 && !(rc = optim_init(&opt, &oc, &m, e)))
		have_o = 1;
	if (rc == 0)
		rc = ckpt_load(o->checkpoint, &m, NULL, &ts, e);
	if (rc == 0 && o->algo == RLU_PPO && !(rc = vh_init(&vh, cfg.d_model, e))) {
		int got = vh_load(&vh, o->checkpoint, e);
		rc = got < 0 ? -1 : 0;
		st.value_head_loaded = got > 0;
	}
	if (rc == 0 && o->algo == RLU_DPO)
		rc = reference_logps(o, &cfg, be, maxT, &v, e);
	if (rc == 0 && (o->algo == RLU_GRPO || o->algo == RLU_PPO) && o->kl_beta > 0)
		rc = reference_tokens(o, &cfg, be, maxT, &v, e);
	if (rc == 0 && mkdir(o->out_dir, 0777) && errno != EEXIST)
		rc = lm_seterr(e, "%s:", o->out_dir);
	if (rc == 0)
		rc = o->algo == RLU_DPO ? train_dpo(o, &m, &opt, &v, &st, e)
		   : o->algo == RLU_PPO ? ppo_train(o, &m, &opt, &vh, &v, &st, e)
		   : train(o, &m, &opt, &v, &st, e);
	if (rc == 0) {
		ts.step += st.steps;
		snprintf(name, sizeof name, "step-%08lld.safetensors", ts.step);
		snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
		sft_tensor vt[2];
		vh_tensors(&vh, vt);
		rc = ckpt_save_extra(path, &m, &opt, &ts, vt, o->algo == RLU_PPO ? 2 : 0, e);
	}
	if (rc == 0)
		rc = ckpt_set_latest(o->out_dir, name, e);
	if (rc == 0)
		rc = write_metrics(o, &v, groups, &st, path, lm_now() - t0, metrics, e);
	vh_free(&vh);
	if (have_o)
		optim_free(&opt, &m);
	if (have_m)
		model_free(&m);
	if (v.w)
		bpe_worker_free(v.w);
	if (enc)
		bpe_encoder_free(enc);
	if (have_t)
		bpe_free(&tok);
	seqs_free(&v);
	be->close(be);
	return rc;
}
