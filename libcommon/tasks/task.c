/* task.c: arithmetic word problems, GSM8K records and the JSON line both
 * are written as (see task.h). */
#include "tasks/task.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonl.h"

const char TASK_R1_ZERO_TEMPLATE[] =
	"A conversation between User and Assistant. The User asks a question, and the Assistant "
	"solves it. The Assistant first thinks about the reasoning process in the mind and then "
	"provides the User with the answer. The reasoning process is enclosed within <think> "
	"</think> and answer is enclosed within <answer> </answer> tags, respectively, i.e., "
	"<think> reasoning process here </think> <answer> answer here </answer>.\n"
	"User: {question}\n"
	"Assistant: <think>";

static const char QUESTION_MARK[] = "{question}";
static const char GSM8K_SEP[] = "####";
enum { TEXT_MAX = 4096, MAX_DIVISOR_SCAN = 10000 };

void task_item_free(task_item *it)
{
	free(it->question);
	free(it->answer);
	free(it->solution);
	memset(it, 0, sizeof *it);
}

/* splitmix64: a tiny, well-mixed generator whose output depends only on the
 * state, so problems are the same everywhere. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi] without modulo bias. */
static long long rng_range(uint64_t *s, long long lo, long long hi)
{
	uint64_t span = (uint64_t)(hi - lo) + 1, limit = UINT64_MAX - UINT64_MAX % span, x;
	do
		x = rng_next(s);
	while (x >= limit);
	return lo + (long long)(x % span);
}

typedef struct person { const char *name, *subj, *obj; } person;
static const person PEOPLE[] = {
	{ "Ava", "she", "her" }, { "Ben", "he", "him" }, { "Chloe", "she", "her" },
	{ "Daniel", "he", "him" }, { "Emma", "she", "her" }, { "Farid", "he", "him" },
	{ "Grace", "she", "her" }, { "Hiro", "he", "him" }, { "Ines", "she", "her" },
	{ "Jonas", "he", "him" }, { "Kemi", "she", "her" }, { "Liam", "he", "him" },
};
static const char *const ITEMS[] = {
	"apples", "marbles", "stickers", "books", "coins", "pencils", "shells", "cards",
	"stamps", "cookies", "beads", "tickets",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Sentences for each operation: %1 the subject pronoun (capitalised), %2 the
 * object pronoun, %3 the operand, %4 the items, %5 a friend's name. */
static const char *const ADD[] = {
	"%1 buys %3 more %4.", "%5 gives %2 %3 more %4.", "%1 finds %3 more %4.",
};
static const char *const SUB[] = {
	"%1 gives %3 %4 to %5.", "%1 sells %3 of the %4.", "%1 loses %3 %4.",
};
static const char *const MUL[] = {
	"%1 then ends up with %3 times as many %4 as before.",
	"%5 makes the pile %3 times as large.",
};
static const char *const DIV[] = {
	"%1 splits the %4 into %3 equal piles and keeps one pile.",
	"%1 packs the %4 into %3 equal boxes and keeps only one box.",
};

typedef struct sbuf { char s[TEXT_MAX]; size_t n; int overflow; } sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof b->s - b->n)
		b->overflow = 1;
	else
		b->n += (size_t)w;
}

static void sb_sentence(sbuf *b, const char *pat, const person *p, long long x,
			const char *items, const char *friend)
{
	sb_add(b, " ");
	for (const char *c = pat; *c; c++) {
		if (*c != '%' || c[1] < '1' || c[1] > '5') {
			sb_add(b, "%c", *c);
			continue;
		}
		switch (*++c) {
		case '1': sb_add(b, "%c%s", p->subj[0] - 'a' + 'A', p->subj + 1); break;
		case '2': sb_add(b, "%s", p->obj); break;
		case '3': sb_add(b, "%lld", x); break;
		case '4': sb_add(b, "%s", items); break;
		default: sb_add(b, "%s", friend); break;
		}
	}
}

int task_arith_check(const task_arith_cfg *c, lm_err *e)
{
	if (c->digits < 1 || c->digits > TASK_MAX_DIGITS)
		return lm_usage_err(e, "digits must be in [1, %d]", TASK_MAX_DIGITS);
	if (c->steps < 1 || c->steps > TASK_MAX_STEPS)
		return lm_usage_err(e, "steps must be in [1, %d]", TASK_MAX_STEPS);
	if (!c->ops || !*c->ops)
		return lm_usage_err(e, "no operations given");
	for (const char *o = c->ops; *o; o++)
		if (!strchr("+-*/", *o))
			return lm_usage_err(e, "unknown operation '%c' (use + - * /)", *o);
	return 0;
}

/* A divisor of v in [2, hi], uniformly among those below MAX_DIVISOR_SCAN, or 0. */
static long long pick_divisor(uint64_t *rng, long long v, long long hi)
{
	long long top = hi < MAX_DIVISOR_SCAN ? hi : MAX_DIVISOR_SCAN, n = 0;
	for (long long d = 2; d <= top && d <= v; d++)
		n += v % d == 0;
	if (n == 0)
		return 0;
	long long k = rng_range(rng, 1, n);
	for (long long d = 2;; d++)
		if (v % d == 0 && --k == 0)
			return d;
}

int task_arith(uint64_t *rng, const task_arith_cfg *c, task_item *out, lm_err *e)
{
	if (task_arith_check(c, e))
		return -1;
	long long lo = 2, hi = 9; /* one digit: 2..9, so no "1 apples" */
	for (int i = 1; i < c->digits; i++)
		lo = hi + 1, hi = hi * 10 + 9;
	const person *p = &PEOPLE[rng_range(rng, 0, COUNT(PEOPLE) - 1)];
	const person *f = p;
	while (f == p)
		f = &PEOPLE[rng_range(rng, 0, COUNT(PEOPLE) - 1)];
	const char *items = ITEMS[rng_range(rng, 0, COUNT(ITEMS) - 1)];
	size_t n_ops = strlen(c->ops);
	long long v = rng_range(rng, lo, hi);
	sbuf q = { .n = 0 }, sol = { .n = 0 };
	sb_add(&q, "%s has %lld %s.", p->name, v, items);
	for (int s = 0; s < c->steps; s++) {
		char op = c->ops[rng_range(rng, 0, (long long)n_ops - 1)];
		long long x = 0;
		if (op == '-') {
			long long top = v < hi ? v : hi;
			x = top >= lo ? rng_range(rng, lo, top) : top >= 1 ? rng_range(rng, 1, top) : 0;
		} else if (op == '*') {
			x = rng_range(rng, lo, hi);
		} else if (op == '/') {
			x = pick_divisor(rng, v, hi);
		}
		if (x == 0 || (op == '*' && v > TASK_ARITH_MAX / x))
			op = '+';
		if (op == '+') {
			x = rng_range(rng, lo, hi);
			if (v > TASK_ARITH_MAX - x)
				x = 0;
		}
		const char *const *pats = op == '+' ? ADD : op == '-' ? SUB : op == '*' ? MUL : DIV;
		size_t n_pats = op == '+' ? COUNT(ADD) : op == '-' ? COUNT(SUB) : op == '*' ? COUNT(MUL) : COUNT(DIV);
		sb_sentence(&q, pats[rng_range(rng, 0, (long long)n_pats - 1)], p, x, items, f->name);
		long long nv = op == '+' ? v + x : op == '-' ? v - x : op == '*' ? v * x : v / x;
		sb_add(&sol, "%s%lld %c %lld = %lld.", s ? " " : "", v, op, x, nv);
		v = nv;
	}
	sb_add(&q, " How many %s does %s have now?", items, p->name);
	char ans[32];
	snprintf(ans, sizeof ans, "%lld", v);
	if (q.overflow || sol.overflow)
		return lm_seterr(e, "problem text too long");
	out->question = strdup(q.s);
	out->solution = strdup(sol.s);
	out->answer = strdup(ans);
	if (!out->question || !out->solution || !out->answer) {
		task_item_free(out);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

static const char *find_last(const char *s, const char *needle)
{
	const char *hit = NULL;
	for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
		hit = p;
	return hit;
}

static char *trimmed_copy(const char *s, size_t n)
{
	while (n && strchr(" \t\r\n", *s))
		s++, n--;
	while (n && strchr(" \t\r\n", s[n - 1]))
		n--;
	return strndup(s, n);
}

int task_gsm8k(const char *question, const char *answer_field, task_item *out, lm_err *e)
{
	const char *sep = find_last(answer_field, GSM8K_SEP);
	if (!sep)
		return lm_seterr(e, "the answer has no '%s' before the final answer", GSM8K_SEP);
	char *ans = trimmed_copy(sep + strlen(GSM8K_SEP), strlen(sep + strlen(GSM8K_SEP)));
	char *sol = trimmed_copy(answer_field, (size_t)(sep - answer_field));
	out->question = strdup(question);
	out->answer = ans;
	out->solution = sol;
	if (!ans || !sol || !out->question) {
		task_item_free(out);
		return lm_seterr(e, "out of memory");
	}
	size_t k = 0;
	for (size_t i = 0; ans[i]; i++)
		if (ans[i] != ',')
			ans[k++] = ans[i];
	ans[k] = '\0';
	if (!*ans) {
		task_item_free(out);
		return lm_seterr(e, "the final answer after '%s' is empty", GSM8K_SEP);
	}
	/* drop the <<expression=value>> calculator annotations */
	k = 0;
	for (size_t i = 0; sol[i];) {
		const char *close;
		if (sol[i] == '<' && sol[i + 1] == '<' && (close = strstr(sol + i + 2, ">>"))) {
			i = (size_t)(close - sol) + 2;
			continue;
		}
		sol[k++] = sol[i++];
	}
	sol[k] = '\0';
	return 0;
}

int task_template_check(const char *tmpl, lm_err *e)
{
	if (!strstr(tmpl, QUESTION_MARK))
		return lm_usage_err(e, "the template has no %s", QUESTION_MARK);
	return 0;
}

/* tmpl with every "{question}" replaced by q. */
static char *fill(const char *tmpl, const char *q)
{
	size_t nq = strlen(q), nm = strlen(QUESTION_MARK), n = 0;
	for (const char *p = strstr(tmpl, QUESTION_MARK); p; p = strstr(p + nm, QUESTION_MARK))
		n++;
	char *out = malloc(strlen(tmpl) + n * nq + 1), *w = out;
	if (!out)
		return NULL;
	for (const char *p = tmpl;;) {
		const char *m = strstr(p, QUESTION_MARK);
		size_t run = m ? (size_t)(m - p) : strlen(p);
		memcpy(w, p, run);
		w += run;
		if (!m)
			break;
		memcpy(w, q, nq);
		w += nq;
		p = m + nm;
	}
	*w = '\0';
	return out;
}

int task_write(FILE *fp, const char *tmpl, const task_item *it, int with_response,
	       const char *name, lm_err *e)
{
	char *prompt = fill(tmpl, it->question), *resp = NULL;
	json_t *o = json_object();
	int rc = -1;
	if (!prompt || !o)
		goto oom;
	if (json_object_set_new(o, "prompt", json_string(prompt)) ||
	    json_object_set_new(o, "answer", json_string(it->answer)))
		goto oom;
	if (with_response) {
		size_t n = strlen(it->solution) + strlen(it->answer) + 64;
		if (!(resp = malloc(n)))
			goto oom;
		snprintf(resp, n, " %s </think> <answer> %s </answer>", it->solution, it->answer);
		if (json_object_set_new(o, "response", json_string(resp)))
			goto oom;
	}
	if (json_dumpf(o, fp, JSON_COMPACT) || fputc('\n', fp) == EOF)
		lm_seterr(e, "%s: write error:", name);
	else
		rc = 0;
	goto done;
oom:
	/* json_string returns NULL for text that is not UTF-8 */
	lm_seterr(e, "%s: out of memory or text that is not UTF-8", name);
done:
	json_decref(o);
	free(prompt);
	free(resp);
	return rc;
}

int task_arith_write(FILE *fp, const task_arith_cfg *c, uint64_t count, uint64_t seed,
		     const char *tmpl, int with_response, const char *name, lm_err *e)
{
	uint64_t rng = seed;
	for (uint64_t i = 0; i < count; i++) {
		task_item it = { 0 };
		if (task_arith(&rng, c, &it, e))
			return -1;
		int rc = task_write(fp, tmpl, &it, with_response, name, e);
		task_item_free(&it);
		if (rc)
			return -1;
	}
	return 0;
}

static const char *string_field(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int task_gsm8k_read(FILE *in, const char *in_name, task_item_fn fn, void *ctx, uint64_t *left,
		    lm_err *e)
{
	jsonl_reader jr;
	jsonl_init(&jr, in, in_name);
	json_t *o;
	int rc = JSONL_END;
	while ((!left || *left) && (rc = jsonl_next(&jr, 0, &o, e)) == JSONL_OK) {
		const char *q = string_field(o, "question"), *a = string_field(o, "answer");
		task_item it = { 0 };
		if (!q || !a)
			rc = lm_seterr(e, "%s:%lu: need an object with string fields 'question' and 'answer'",
				       in_name, jr.lineno);
		else if (task_gsm8k(q, a, &it, e))
			rc = lm_err_prefix(e, "%s:%lu", in_name, jr.lineno);
		else if (!(rc = fn(&it, ctx, e)) && left)
			--*left;
		task_item_free(&it);
		json_decref(o);
		if (rc)
			break;
	}
	jsonl_free(&jr);
	return rc == JSONL_END ? 0 : -1;
}

typedef struct write_ctx {
	FILE *fp;
	const char *tmpl, *name;
	int with_response;
} write_ctx;

static int write_one(task_item *it, void *ctx, lm_err *e)
{
	const write_ctx *w = ctx;
	return task_write(w->fp, w->tmpl, it, w->with_response, w->name, e);
}

int task_gsm8k_write(FILE *in, const char *in_name, FILE *fp, const char *tmpl,
		     int with_response, uint64_t *left, const char *name, lm_err *e)
{
	write_ctx w = { fp, tmpl, name, with_response };
	return task_gsm8k_read(in, in_name, write_one, &w, left, e);
}
