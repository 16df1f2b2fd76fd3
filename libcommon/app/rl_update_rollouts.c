/* rl_update_rollouts.c: GRPO's and PPO's rollout records (rl-reward's
 * output) into sequences without building them as JSON: a batch of lines
 * is read in order, then on threads each line is skimmed (base/json_skim.h)
 * and its token ids, log-probs, reward and group are taken straight from
 * its text.  Building the ~800 numbers of a rollout as jansson values was
 * most of rl-update's reading.  A line the skimmer declines, or whose
 * fields are not all those of a good rollout, is parsed by jansson and
 * goes through read_record like every other record, so the sequences and
 * the messages are the same either way.  read_seqs is here: SFT and DPO
 * records go to read_records (rl_update_records.c). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "base/grow.h"
#include "base/json_skim.h"
#include "base/jsonl.h"

enum { FAST = 1, SLOW, BAD };

/* One line of the batch and what the threads made of it. */
typedef struct line {
	char *text;
	size_t len;
	unsigned long lineno;
	int how;                  /* FAST: the fields below; SLOW: obj; BAD: err */
	uint32_t *p, *r;
	size_t np, nr;
	double reward;
	double *lp;               /* [nr] when the loss needs them */
	char *group;              /* GRPO */
	json_t *obj;
	lm_err *err;
} line;

typedef struct lines {
	line *l;
	size_t n, cap;
} lines;

static void line_clear(line *l)
{
	free(l->text);
	free(l->p);
	free(l->r);
	free(l->lp);
	free(l->group);
	json_decref(l->obj);
	free(l->err);
	memset(l, 0, sizeof *l);
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Up to max lines that are not blank, as jsonl_next reads them: what
 * ended the reading (JSONL_OK: max lines). */
static int read_lines(jsonl_reader *jr, lines *b, size_t max, lm_err *e)
{
	while (b->n < max) {
		int rc = jsonl_read_line(jr, e);
		if (rc != JSONL_OK)
			return rc;
		while (jr->len && is_space(jr->line[jr->len - 1]))
			jr->len--;
		if (!jr->len)
			continue;
		if (lm_grow((void **)&b->l, &b->cap, b->n + 1, sizeof *b->l, e))
			return -1;
		line *l = &b->l[b->n];
		memset(l, 0, sizeof *l);
		if (!(l->text = malloc(jr->len + 1)))
			return lm_seterr(e, "out of memory");
		memcpy(l->text, jr->line, jr->len);
		l->text[jr->len] = '\0';
		l->len = jr->len;
		l->lineno = jr->lineno;
		b->n++;
	}
	return JSONL_OK;
}

/* A number element's value as jansson's json_number_value gives it; 0
 * when it is no number, *integer when it is written as one. */
static int number(const char *s, size_t n, double *x, long long *i, int *integer)
{
	if (!n || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return 0;
	*integer = !memchr(s, '.', n) && !memchr(s, 'e', n) && !memchr(s, 'E', n);
	if (*integer) {
		/* the skimmer took at most 18 digits: no overflow */
		long long v = 0;
		for (size_t k = *s == '-'; k < n; k++)
			v = v * 10 + (s[k] - '0');
		*i = *s == '-' ? -v : v;
		*x = (double)*i;
	} else {
		*x = strtod(s, NULL); /* as jansson: the C locale's strtod of the text */
	}
	return 1;
}

/* An array member of token ids below vocab into *out (n of them); 0 when
 * it is anything else. */
static int ids(const char *t, const json_member *m, int vocab, uint32_t **out, size_t *n)
{
	if (!m || t[m->val] != '[')
		return 0;
	*n = m->items;
	if (!(*out = malloc((*n ? *n : 1) * sizeof **out)))
		return 0;
	size_t at = 0, el, len, k = 0;
	while (json_skim_item(t + m->val, m->val_len, &at, &el, &len)) {
		double x;
		long long v;
		int integer;
		if (!number(t + m->val + el, len, &x, &v, &integer) || !integer || v < 0 || v >= vocab)
			return 0;
		(*out)[k++] = (uint32_t)v;
	}
	return k == *n;
}

/* The log-probs as old_logprobs takes them: nr numbers <= 0, finite as floats. */
static int logprobs(const char *t, const json_member *m, size_t nr, double **out)
{
	if (!m || t[m->val] != '[' || m->items != nr)
		return 0;
	if (!(*out = malloc((nr ? nr : 1) * sizeof **out)))
		return 0;
	size_t at = 0, el, len, k = 0;
	while (json_skim_item(t + m->val, m->val_len, &at, &el, &len)) {
		double x;
		long long v;
		int integer;
		if (!number(t + m->val + el, len, &x, &v, &integer) || !(x <= 0) || !isfinite((float)x))
			return 0;
		(*out)[k++] = x;
	}
	return k == nr;
}

/* The fields of a good rollout for o's algorithm, straight from the text. */
static int fast(const rlu_opts *o, line *l, const json_skim *s, int vocab)
{
	const char *t = l->text;
	const json_member *rw = json_skim_get(s, t, "reward"), *g = json_skim_get(s, t, "group");
	double x;
	long long v;
	int integer, need_lp = o->algo == RLU_PPO || o->loss == RL_PG_GRPO_CLIP;
	if (!ids(t, json_skim_get(s, t, "prompt_ids"), vocab, &l->p, &l->np) ||
	    !ids(t, json_skim_get(s, t, "completion_ids"), vocab, &l->r, &l->nr) || !rw ||
	    !number(t + rw->val, rw->val_len, &x, &v, &integer) || !isfinite((float)x))
		return 0;
	l->reward = x;
	if (o->algo == RLU_GRPO && (!g || !(l->group = json_skim_dump(t + g->val, g->val_len))))
		return 0;
	return !need_lp || logprobs(t, json_skim_get(s, t, "logprobs"), l->nr, &l->lp);
}

/* On a thread: the line's fields, or jansson's object, or its message. */
static void look(const rlu_opts *o, line *l, json_skim *s, int vocab, const char *name)
{
	lm_err e;
	int got = json_skim_object(l->text, l->len, s, &e);
	if (got > 0 && fast(o, l, s, vocab)) {
		l->how = FAST;
		return;
	}
	json_error_t je;
	l->obj = got < 0 ? NULL : json_loadb(l->text, l->len, JSON_ALLOW_NUL, &je);
	if (got < 0)
		lm_seterr(&e, "out of memory");
	else if (!l->obj)
		lm_seterr(&e, "%s:%lu: bad JSON: %s (column %d)%s", name, l->lineno, je.text, je.column,
			  jsonl_bad_hint(l->text, l->len));
	else if (!json_is_object(l->obj))
		lm_seterr(&e, "%s:%lu: not a JSON object", name, l->lineno);
	else {
		l->how = SLOW;
		return;
	}
	l->how = BAD;
	if ((l->err = malloc(sizeof *l->err)))
		*l->err = e;
}

/* A fast line as read_record would have added it. */
static int add(const rlu_opts *o, seqs *v, line *l, int ctx, const char *name, lm_err *e)
{
	if (seqs_add(v, l->p, l->np, l->r, l->nr, l->lineno, ctx, name, e))
		return -1;
	seq *s = &v->s[v->n - 1];
	s->reward = l->reward;
	if (l->group) {
		s->group = l->group;
		l->group = NULL;
	}
	if (l->lp) {
		if (!(s->old_logp = calloc((size_t)s->T + 1, sizeof *s->old_logp)))
			return lm_seterr(e, "out of memory");
		int first = s->T - s->n_resp;
		for (int k = 0; k < s->n_resp; k++)
			s->old_logp[first + k] = (float)l->lp[k];
	}
	return 0;
}

static int read_rollouts(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab,
			 int ctx, lm_err *e)
{
	jsonl_reader jr;
	jsonl_init(&jr, in, name);
	lines b = { 0 };
	lm_err read_e;
	int rc, bad = 0;
	do {
		for (size_t i = 0; i < b.n; i++)
			line_clear(&b.l[i]);
		b.n = 0;
		rc = read_lines(&jr, &b, JSONL_BATCH, &read_e);
		long n = (long)b.n;
#pragma omp parallel if (n > 1)
		{
			json_skim s = { 0 };
#pragma omp for schedule(dynamic, 4)
			for (long i = 0; i < n; i++)
				look(o, &b.l[i], &s, vocab, name);
			json_skim_free(&s);
		}
		/* in line order: the first problem is the one named */
		for (size_t i = 0; !bad && i < b.n; i++) {
			line *l = &b.l[i];
			if (l->how == BAD)
				bad = l->err ? (*e = *l->err, 1) : (lm_seterr(e, "out of memory"), 1);
			else if (l->how == SLOW)
				bad = read_record(o, v, l->obj, vocab, ctx, name, l->lineno, e) != 0;
			else
				bad = add(o, v, l, ctx, name, e) != 0;
		}
	} while (!bad && rc == JSONL_OK);
	for (size_t i = 0; i < b.n; i++)
		line_clear(&b.l[i]);
	free(b.l);
	jsonl_free(&jr);
	if (bad)
		return -1;
	if (rc != JSONL_END) {
		*e = read_e;
		return -1;
	}
	if (v->n == 0)
		return lm_seterr(e, "%s: no records", name);
	return 0;
}

int read_seqs(const rlu_opts *o, seqs *v, FILE *in, const char *name, int vocab, int ctx,
	      lm_err *e)
{
	if (o->algo == RLU_GRPO || o->algo == RLU_PPO)
		return read_rollouts(o, v, in, name, vocab, ctx, e);
	return read_records(o, v, in, name, vocab, ctx, e);
}
