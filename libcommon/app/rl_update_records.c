/* rl_update_records.c: the records of rl-update's input, one JSON object
 * a line, into sequences (rl_update_internal.h): rollouts with token ids,
 * rewards, groups and log-probs (GRPO, PPO), {prompt, response} (SFT) or
 * {prompt, chosen, rejected} (DPO), each parsed by jansson.  Rollouts are
 * read by rl_update_rollouts.c, which leaves here what it does not take
 * itself. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "base/jsonl.h"

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

/* DPO: the chosen and the rejected sequence, in that order. */
static int read_pair(seqs *v, json_t *obj, int ctx, const char *name, unsigned long lineno,
		     lm_err *e)
{
	uint32_t *p = NULL, *c = NULL, *r = NULL;
	size_t np = 0, nc = 0, nr = 0;
	int rc = encode_field(v, obj, "prompt", &p, &np, name, lineno, e);
	if (!rc)
		rc = encode_response_field(v, obj, "chosen", &c, &nc, name, lineno, e);
	if (!rc)
		rc = encode_response_field(v, obj, "rejected", &r, &nr, name, lineno, e);
	if (!rc)
		rc = seqs_add(v, p, np, c, nc, lineno, ctx, name, e);
	if (!rc)
		rc = seqs_add(v, p, np, r, nr, lineno, ctx, name, e);
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

int read_record(const rlu_opts *o, seqs *v, json_t *obj, int vocab, int ctx,
		const char *name, unsigned long lineno, lm_err *e)
{
	uint32_t *p = NULL, *r = NULL;
	size_t np = 0, nr = 0;
	int rc;
	if (o->algo == RLU_DPO)
		return read_pair(v, obj, ctx, name, lineno, e);
	if (o->algo == RLU_SFT) {
		rc = encode_field(v, obj, "prompt", &p, &np, name, lineno, e);
		if (!rc)
			rc = encode_response_field(v, obj, "response", &r, &nr, name, lineno, e);
	} else {
		rc = ids_field(obj, "prompt_ids", vocab, &p, &np, name, lineno, e);
		if (!rc)
			rc = ids_field(obj, "completion_ids", vocab, &r, &nr, name, lineno, e);
	}
	if (!rc)
		rc = seqs_add(v, p, np, r, nr, lineno, ctx, name, e);
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

int read_records(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab, int ctx,
		 lm_err *e)
{
	jsonl_reader jr;
	jsonl_batch b;
	jsonl_init(&jr, in, name);
	jsonl_batch_init(&b);
	int rc, bad = 0;
	/* the records parsed on threads a batch at a time, taken in order */
	do {
		rc = jsonl_next_batch(&jr, JSON_ALLOW_NUL, &b, JSONL_BATCH, e);
		for (size_t i = 0; !bad && i < b.n; i++)
			bad = read_record(o, v, b.obj[i], vocab, ctx, name, b.lineno[i], e) != 0;
	} while (!bad && rc == JSONL_OK);
	jsonl_batch_free(&b);
	jsonl_free(&jr);
	if (bad || rc != JSONL_END)
		return -1;
	if (v->n == 0)
		return lm_seterr(e, "%s: no records", name);
	return 0;
}
