/* reward_run.c: rl-reward's pass over a rollout file (reward_run in
 * reward.h): the rollouts read and scored (reward_read.c) or sent to an
 * external scorer, the length penalty within groups, the lines written
 * back with the fields added, the summary. */
#include "tasks/reward_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/order.h"

enum { NUM_BUF = 32 };

static int score_cmd(const reward_cfg *c, batch *b, const char *name, lm_err *e)
{
	const char **lines = malloc((b->n + 1) * sizeof *lines);
	size_t *lens = malloc((b->n + 1) * sizeof *lens);
	reward_scores *s = malloc((b->n + 1) * sizeof *s);
	int rc = 0;
	if (!lines || !lens || !s)
		rc = lm_seterr(e, "out of memory");
	for (size_t i = 0; rc == 0 && i < b->n; i++)
		lines[i] = b->r[i].line, lens[i] = b->r[i].len;
	if (rc == 0 && b->n && reward_cmd(c->cmd, lines, lens, b->n, c->cmd_timeout, s, e))
		rc = lm_err_prefix(e, "scoring %s", name);
	for (size_t i = 0; rc == 0 && i < b->n; i++)
		b->r[i].s = s[i];
	free(lines);
	free(lens);
	free(s);
	return rc;
}

/* Sorted order of the rollouts by group (stable); NULL when out of memory. */
static size_t *group_order(const batch *b)
{
	const char **keys = malloc((b->n + 1) * sizeof *keys);
	if (!keys)
		return NULL;
	for (size_t i = 0; i < b->n; i++)
		keys[i] = b->r[i].group ? b->r[i].group : "";
	size_t *idx = order_by_key(keys, b->n);
	free(keys);
	return idx;
}

static int length_penalty(const reward_cfg *c, batch *b, const char *name, lm_err *e)
{
	for (size_t i = 0; i < b->n; i++) {
		rollout *r = &b->r[i];
		if (!r->group)
			return lm_seterr(e, "%s:%lu: no 'group' field (the length penalty compares "
					 "the responses of a group)", name, r->lineno);
		if (r->n_ids >= 0)
			r->length = (double)r->n_ids;
		else if (r->comp)
			r->length = (double)r->comp_len;
		else
			return lm_seterr(e, "%s:%lu: no 'completion_ids' nor '%s' to measure the length",
					 name, r->lineno, c->completion_key);
	}
	if (b->n == 0)
		return 0;
	size_t *idx = group_order(b);
	if (!idx)
		return lm_seterr(e, "out of memory");
	for (size_t lo = 0; lo < b->n;) {
		size_t hi = lo + 1;
		while (hi < b->n && !strcmp(b->r[idx[hi]].group, b->r[idx[lo]].group))
			hi++;
		double mn = INFINITY, mx = -INFINITY;
		for (size_t k = lo; k < hi; k++) {
			mn = fmin(mn, b->r[idx[k]].length);
			mx = fmax(mx, b->r[idx[k]].length);
		}
		for (size_t k = lo; k < hi; k++) {
			rollout *r = &b->r[idx[k]];
			r->s.reward += c->length_weight *
				       reward_length_lambda(r->length, mn, mx, r->s.answer > 0);
		}
		lo = hi;
	}
	free(idx);
	return 0;
}

/* The line with the three fields inserted before its closing brace. */
static int write_one(FILE *out, rollout *r, const char *out_name, lm_err *e)
{
	const double v[3] = { r->s.reward, r->s.format, r->s.answer };
	const char *text = r->line;
	size_t len = r->len;
	char *redone = NULL;
	int empty = r->empty;
	if (r->had) {
		/* scored before: the old fields go, the rest is written anew (the
		 * input bytes are kept only when nothing has to be removed) */
		for (int k = 0; k < REWARD_OUT_KEYS; k++)
			json_object_del(r->obj, reward_out_keys[k]);
		if (!(redone = json_dumps(r->obj, JSON_COMPACT)))
			return lm_seterr(e, "out of memory");
		text = redone;
		len = strlen(redone);
		empty = json_object_size(r->obj) == 0;
	}
	size_t close = len;
	while (close > 0 && text[close - 1] != '}')
		close--;
	close--;
	char num[3][NUM_BUF];
	for (int k = 0; k < 3; k++)
		reward_format_double(v[k], num[k], sizeof num[k]);
	int bad = fwrite(text, 1, close, out) != close ||
		  fprintf(out, "%s\"reward\":%s,\"format_reward\":%s,\"answer_reward\":%s}\n",
			  empty ? "" : ",", num[0], num[1], num[2]) < 0;
	free(redone);
	return bad ? lm_seterr(e, "%s: write error:", out_name) : 0;
}

int reward_run(const reward_cfg *c, FILE *in, const char *in_name, FILE *out,
	       const char *out_name, reward_summary *sum, lm_err *e)
{
	batch b = { 0 };
	int builtin = c->kind != REWARD_CMD;
	int rc = reward_read_all(c, in, in_name, &b, builtin, e);
	for (size_t i = 0; rc == 0 && builtin && i < b.n; i++)
		if (b.r[i].bad)
			rc = reward_report(&b.r[i], e);
	if (rc == 0 && !builtin)
		rc = score_cmd(c, &b, in_name, e);
	for (size_t i = 0; rc == 0 && c->format_only && i < b.n; i++)
		b.r[i].s.reward = b.r[i].s.format;
	if (rc == 0 && c->length_weight > 0)
		rc = length_penalty(c, &b, in_name, e);
	for (size_t i = 0; rc == 0 && i < b.n; i++)
		rc = write_one(out, &b.r[i], out_name, e);
	if (rc == 0 && sum) {
		memset(sum, 0, sizeof *sum);
		sum->rollouts = b.n;
		size_t *idx = b.n ? group_order(&b) : NULL;
		for (size_t i = 0; i < b.n; i++) {
			sum->reward += b.r[i].s.reward / (double)b.n;
			sum->format += b.r[i].s.format / (double)b.n;
			sum->answer += b.r[i].s.answer / (double)b.n;
			if (idx && b.r[idx[i]].group &&
			    (i == 0 || !b.r[idx[i - 1]].group || strcmp(b.r[idx[i]].group, b.r[idx[i - 1]].group)))
				sum->groups++;
		}
		free(idx);
	}
	reward_batch_free(&b);
	return rc;
}
