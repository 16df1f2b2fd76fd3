/* reward_read.c: rl-reward's rollouts in: the lines read in order, then,
 * on threads, each one skimmed (base/json_skim.h) or, where the skimmer
 * declines, parsed by jansson, its fields taken out and, for the built-in
 * reward functions, scored (see reward_internal.h).  The skimmer spares
 * building the hundreds of numbers of a rollout that nothing here reads. */
#include "tasks/reward_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/json_skim.h"
#include "base/jsonl.h"

/* Rollouts a thread takes at a time. */
enum { CHUNK = 8 };

void reward_batch_free(batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		rollout *r = &b->r[i];
		free(r->line);
		free(r->comp);
		free(r->ref);
		free(r->group);
		free(r->err);
		json_decref(r->obj);
	}
	free(b->r);
	memset(b, 0, sizeof *b);
}

int reward_report(const rollout *r, lm_err *e)
{
	if (!r->err)
		return lm_seterr(e, "out of memory");
	*e = *r->err;
	return -1;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The lines that are not blank, as jsonl_next reads them: what ended the
 * reading (JSONL_END, JSONL_BAD or -1 with the message in e). */
static int read_lines(FILE *in, const char *name, batch *b, lm_err *e)
{
	jsonl_reader jr;
	jsonl_init(&jr, in, name);
	int rc;
	while ((rc = jsonl_read_line(&jr, e)) == JSONL_OK) {
		while (jr.len && is_space(jr.line[jr.len - 1]))
			jr.len--;
		if (!jr.len)
			continue;
		if (lm_grow((void **)&b->r, &b->cap, b->n + 1, sizeof *b->r, e)) {
			rc = -1;
			break;
		}
		rollout *r = &b->r[b->n];
		memset(r, 0, sizeof *r);
		r->lineno = jr.lineno;
		r->len = jr.len;
		r->n_ids = -1;
		if (!(r->line = malloc(jr.len + 1))) {
			rc = lm_seterr(e, "out of memory");
			break;
		}
		memcpy(r->line, jr.line, jr.len);
		r->line[jr.len] = '\0';
		b->n++;
	}
	jsonl_free(&jr);
	return rc;
}

/* The reference answer as text: a string, or a number written as JSON. */
static char *answer_text(json_t *v)
{
	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_number(v))
		return json_dumps(v, JSON_ENCODE_ANY);
	return NULL;
}

static int fields_json(const reward_cfg *c, rollout *r, json_t *o, lm_err *e)
{
	for (int k = 0; k < REWARD_OUT_KEYS; k++)
		r->had |= json_object_get(o, reward_out_keys[k]) != NULL;
	r->empty = json_object_size(o) == 0;
	json_t *comp = json_object_get(o, c->completion_key);
	if (json_is_string(comp)) {
		r->comp_len = json_string_length(comp);
		if (!(r->comp = malloc(r->comp_len + 1)))
			return lm_seterr(e, "out of memory");
		memcpy(r->comp, json_string_value(comp), r->comp_len + 1);
	}
	json_t *av = json_object_get(o, c->answer_key);
	r->ref = av ? answer_text(av) : NULL;
	json_t *ids = json_object_get(o, "completion_ids");
	r->n_ids = json_is_array(ids) ? (long long)json_array_size(ids) : -1;
	json_t *g = json_object_get(o, "group");
	if (g && !(r->group = json_dumps(g, JSON_COMPACT | JSON_ENCODE_ANY)))
		return lm_seterr(e, "out of memory");
	return 0;
}

static int fields_skim(const reward_cfg *c, rollout *r, const json_skim *s, lm_err *e)
{
	const char *t = r->line;
	r->empty = s->n == 0;
	const json_member *m = json_skim_get(s, t, c->completion_key);
	if (m && t[m->val] == '"' &&
	    json_skim_string(t + m->val, m->val_len, &r->comp, &r->comp_len, e))
		return -1;
	m = json_skim_get(s, t, c->answer_key);
	if (m && t[m->val] == '"') {
		size_t n;
		if (json_skim_string(t + m->val, m->val_len, &r->ref, &n, e))
			return -1;
	} else if (m && (t[m->val] == '-' || (t[m->val] >= '0' && t[m->val] <= '9'))) {
		r->ref = json_skim_dump(t + m->val, m->val_len); /* a number: the same either way */
	}
	m = json_skim_get(s, t, "completion_ids");
	r->n_ids = m && t[m->val] == '[' ? (long long)m->items : -1;
	if ((m = json_skim_get(s, t, "group")) && !(r->group = json_skim_dump(t + m->val, m->val_len)))
		return lm_seterr(e, "out of memory");
	return 0;
}

static int has_out_key(const json_skim *s, const char *text)
{
	for (int k = 0; k < REWARD_OUT_KEYS; k++)
		if (json_skim_get(s, text, reward_out_keys[k]))
			return 1;
	return 0;
}

/* The line's fields: skimmed, or by jansson for what the skimmer declines
 * and for lines to be written anew (their object is kept). */
static int fields(const reward_cfg *c, rollout *r, json_skim *s, const char *name, lm_err *e)
{
	int got = json_skim_object(r->line, r->len, s, e);
	if (got < 0)
		return -1;
	if (got > 0 && !has_out_key(s, r->line))
		return fields_skim(c, r, s, e);
	json_error_t je;
	json_t *o = json_loadb(r->line, r->len, JSON_ALLOW_NUL, &je);
	int rc;
	if (!o)
		rc = lm_seterr(e, "%s:%lu: bad JSON: %s (column %d)%s", name, r->lineno, je.text,
			       je.column, jsonl_bad_hint(r->line, r->len));
	else if (!json_is_object(o))
		rc = lm_seterr(e, "%s:%lu: not a JSON object", name, r->lineno);
	else
		rc = fields_json(c, r, o, e);
	if (rc == 0 && r->had)
		r->obj = o;
	else
		json_decref(o);
	return rc;
}

int reward_score_one(const reward_cfg *c, rollout *r, const char *name, lm_err *e)
{
	if (!r->comp)
		return lm_seterr(e, "%s:%lu: no string field '%s'", name, r->lineno, c->completion_key);
	if (!r->ref && !c->format_only)
		return lm_seterr(e, "%s:%lu: no string or number field '%s' (the reference answer)",
				 name, r->lineno, c->answer_key);
	if (reward_score(c->kind, r->comp, r->comp_len, r->ref ? r->ref : "",
			 r->ref ? strlen(r->ref) : 0, &r->s, e))
		return lm_err_prefix(e, "%s:%lu", name, r->lineno);
	return 0;
}

static void fail(rollout *r, int why, const lm_err *e)
{
	r->bad = why;
	if ((r->err = malloc(sizeof *r->err)))
		*r->err = *e;
}

int reward_read_all(const reward_cfg *c, FILE *in, const char *name, batch *b, int score,
		    lm_err *e)
{
	lm_err read_e;
	int rc = read_lines(in, name, b, &read_e);
	long n = (long)b->n;
	int threads = c->threads > 0 ? c->threads : omp_get_max_threads();
#pragma omp parallel num_threads(threads) if (n > 1)
	{
		json_skim s = { 0 };
		lm_err re;
#pragma omp for schedule(dynamic, CHUNK)
		for (long i = 0; i < n; i++) {
			rollout *r = &b->r[i];
			if (fields(c, r, &s, name, &re))
				fail(r, ROLLOUT_PARSE, &re);
			else if (score && reward_score_one(c, r, name, &re))
				fail(r, ROLLOUT_SCORE, &re);
		}
		json_skim_free(&s);
	}
	/* the first bad line comes before the reading's own end */
	for (size_t i = 0; i < b->n; i++)
		if (b->r[i].bad == ROLLOUT_PARSE)
			return reward_report(&b->r[i], e);
	if (rc != JSONL_END) {
		*e = read_e;
		return -1;
	}
	return 0;
}
