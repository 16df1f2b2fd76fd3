/* grade.c: the r1-zero math grader (grade.h): the r1-zero format, \boxed
 * extraction, the comparison of the two normal forms (grade_norm.c) and the
 * exact rational arithmetic that stands in for the grader's sympy. */
#include "tasks/grade.h"

#include <stdint.h>
#include <string.h>

#include "tasks/grade_internal.h"

static const char THINK_ANSWER[] = "</think> <answer>";
static const char ANSWER_OPEN[] = "<answer>";
static const char ANSWER_END[] = "</answer>";
/* Past this many bytes an answer is wrong without grading: the edits are
 * quadratic in the worst case, and no right answer is that long. */
enum { GRADE_MAX_BYTES = 16384, MAX_POWER = 64, MAX_DEPTH = 64 };

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* --- exact rationals: num / den, den > 0, reduced; ok = 0 on overflow --- */

typedef __int128 i128;
typedef struct rat {
	i128 num, den;
	int ok;
} rat;

static i128 gcd128(i128 a, i128 b)
{
	if (a < 0)
		a = -a;
	while (b) {
		i128 t = a % b;
		a = b;
		b = t < 0 ? -t : t;
	}
	return a;
}

static rat mk(i128 num, i128 den, int ok)
{
	rat r = { num, den, ok && den != 0 };
	if (!r.ok)
		return r;
	if (r.den < 0)
		r.num = -r.num, r.den = -r.den;
	i128 g = gcd128(r.num, r.den);
	if (g > 1)
		r.num /= g, r.den /= g;
	return r;
}

static rat bad(void) { return (rat){ 0, 1, 0 }; }

static rat r_add(rat a, rat b, int sign)
{
	i128 x, y, d, bn = sign < 0 ? -b.num : b.num;
	if (!a.ok || !b.ok || __builtin_mul_overflow(a.num, b.den, &x) ||
	    __builtin_mul_overflow(bn, a.den, &y) || __builtin_add_overflow(x, y, &x) ||
	    __builtin_mul_overflow(a.den, b.den, &d))
		return bad();
	return mk(x, d, 1);
}

static rat r_mul(rat a, rat b, int div)
{
	i128 bn = div ? b.den : b.num, bd = div ? b.num : b.den, n, d;
	if (!a.ok || !b.ok || __builtin_mul_overflow(a.num, bn, &n) ||
	    __builtin_mul_overflow(a.den, bd, &d))
		return bad();
	return mk(n, d, 1);
}

/* A recursive-descent reader of + - * / ^ ( ) over decimal numbers. */
typedef struct reader {
	const char *p, *end;
	int depth;
} reader;

static rat expr(reader *r);

static rat number(reader *r)
{
	i128 num = 0, den = 1;
	int digits = 0, ok = 1;
	for (; r->p < r->end && is_digit(*r->p); r->p++, digits++)
		ok &= !__builtin_mul_overflow(num, 10, &num) && !__builtin_add_overflow(num, *r->p - '0', &num);
	if (r->p < r->end && *r->p == '.')
		for (r->p++; r->p < r->end && is_digit(*r->p); r->p++, digits++)
			ok &= !__builtin_mul_overflow(num, 10, &num) &&
			      !__builtin_add_overflow(num, *r->p - '0', &num) &&
			      !__builtin_mul_overflow(den, 10, &den);
	return digits ? mk(num, den, ok) : bad();
}

static rat factor(reader *r)
{
	if (r->p >= r->end || ++r->depth > MAX_DEPTH)
		return bad();
	rat v;
	char c = *r->p;
	if (c == '-' || c == '+') {
		r->p++;
		v = factor(r);
		if (c == '-')
			v.num = -v.num;
	} else if (c == '(') {
		r->p++;
		v = expr(r);
		if (r->p >= r->end || *r->p != ')')
			v = bad();
		else
			r->p++;
	} else {
		v = number(r);
	}
	if (v.ok && r->p < r->end && *r->p == '^') {
		r->p++;
		rat e = factor(r);
		if (!e.ok || e.den != 1 || e.num > MAX_POWER || e.num < -MAX_POWER)
			v = bad();
		else {
			rat one = { 1, 1, 1 }, acc = one;
			int k = (int)(e.num < 0 ? -e.num : e.num);
			for (int i = 0; i < k && acc.ok; i++)
				acc = r_mul(acc, v, 0);
			v = e.num < 0 ? r_mul(one, acc, 1) : acc;
		}
	}
	r->depth--;
	return v;
}

static rat term(reader *r)
{
	rat v = factor(r);
	while (v.ok && r->p < r->end && (*r->p == '*' || *r->p == '/')) {
		int div = *r->p++ == '/';
		v = r_mul(v, factor(r), div);
	}
	return v;
}

static rat expr(reader *r)
{
	rat v = term(r);
	while (v.ok && r->p < r->end && (*r->p == '+' || *r->p == '-')) {
		int sign = *r->p++ == '-' ? -1 : 1;
		v = r_add(v, term(r), sign);
	}
	return v;
}

static rat evaluate(const char *p, size_t n)
{
	reader r = { p, p + n, 0 };
	rat v = expr(&r);
	return r.p == r.end ? v : bad();
}

/* --- the comparison --- */

/* The grader's _is_frac: -?[0-9]+.?/0*[1-9][0-9]*.? (any one character
 * where the dots are). */
static int digits_opt(const char *p, size_t n, int nonzero)
{
	for (int last = 0; last < 2; last++) {
		if ((size_t)last >= n)
			continue;
		size_t k = n - (size_t)last, z = 0;
		size_t i = 0;
		for (; i < k && is_digit(p[i]); i++)
			z += p[i] != '0';
		if (i == k && (!nonzero || z))
			return 1;
	}
	return 0;
}

static int is_frac(const char *p, size_t n)
{
	size_t off = n && *p == '-';
	for (size_t s = off + 1; s + 1 < n; s++)
		if (p[s] == '/' && digits_opt(p + off, s - off, 0) && digits_opt(p + s + 1, n - s - 1, 1))
			return 1;
	return 0;
}

/* split_tuple: the elements of "(a,b)" or "[a,b)" etc. (commas of
 * thousands removed first), each trimmed; else the whole. */
typedef struct span {
	const char *p;
	size_t n;
} span;

static int is_bracket(char c) { return c && strchr("()[]", c); }

static size_t split_tuple(gstr *s, span *out, size_t max)
{
	grade_strip_commas(s);
	if (s->oom || s->n == 0)
		return 0;
	int inner_brackets = 0;
	for (size_t i = 1; i + 1 < s->n; i++)
		inner_brackets |= is_bracket(s->p[i]);
	if (s->n <= 2 || !is_bracket(s->p[0]) || !is_bracket(s->p[s->n - 1]) || inner_brackets) {
		out[0] = (span){ s->p, s->n };
		return 1;
	}
	size_t k = 0;
	const char *a = s->p + 1, *end = s->p + s->n - 1;
	while (k < max) {
		const char *c = memchr(a, ',', (size_t)(end - a));
		const char *e = c ? c : end;
		const char *x = a;
		while (x < e && *x == ' ')
			x++;
		while (e > x && e[-1] == ' ')
			e--;
		out[k++] = (span){ x, (size_t)(e - x) };
		if (!c)
			break;
		a = c + 1;
	}
	return k;
}

static int elem_equal(span t, span g)
{
	if (is_frac(t.p, t.n) && is_frac(g.p, g.n))
		return t.n == g.n && !memcmp(t.p, g.p, t.n);
	if (grade_str_is_int(t.p, t.n) != grade_str_is_int(g.p, g.n))
		return 0;
	rat a = evaluate(t.p, t.n), b = evaluate(g.p, g.n);
	return a.ok && b.ok && a.num == b.num && a.den == b.den;
}

enum { MAX_ELEMS = 64 };

static int sympy_equal(const char *given, size_t n, const char *truth, size_t nt)
{
	gstr g = { 0 }, t = { 0 };
	gs_set(&g, given, n);
	gs_set(&t, truth, nt);
	grade_normalize(&g);
	grade_normalize(&t);
	int r = -1;
	if (g.oom || t.oom)
		goto out;
	r = g.n == t.n && !memcmp(g.p, t.p, g.n);
	if (r || g.n == 0)
		goto out;
	char g0 = g.p[0], g1 = g.p[g.n - 1], t0 = t.n ? t.p[0] : 0, t1 = t.n ? t.p[t.n - 1] : 0;
	span te[MAX_ELEMS], ge[MAX_ELEMS];
	size_t nte = split_tuple(&t, te, MAX_ELEMS), nge = split_tuple(&g, ge, MAX_ELEMS);
	if (g.oom || t.oom) {
		r = -1;
		goto out;
	}
	if ((nte > 1 && (t0 != g0 || t1 != g1)) || nte != nge)
		goto out;
	r = 1;
	for (size_t i = 0; r && i < nte; i++)
		r = elem_equal(te[i], ge[i]);
out:
	gs_free(&g);
	gs_free(&t);
	return r;
}

static int mathd_equal(const char *given, size_t n, const char *truth, size_t nt)
{
	gstr g = { 0 }, t = { 0 };
	gs_set(&g, given, n);
	gs_set(&t, truth, nt);
	grade_mathd(&g);
	grade_mathd(&t);
	int r = g.oom || t.oom ? -1 : g.n == t.n && !memcmp(g.p, t.p, g.n);
	gs_free(&g);
	gs_free(&t);
	return r;
}

/* The last \boxed{...} (or \fbox) of s, braces balanced, as its content:
 * 1 and the span, 0 when there is none or it is not \boxed{...}. */
static long rfind(const char *s, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (size_t i = n >= m ? n - m + 1 : 0; i-- > 0;)
		if (!memcmp(s + i, needle, m))
			return (long)i;
	return -1;
}

static int last_boxed(const char *s, size_t n, const char **in, size_t *nin)
{
	long at = rfind(s, n, "\\boxed");
	if (at < 0)
		at = rfind(s, n, "\\fbox");
	if (at < 0)
		return 0;
	int depth = 0;
	for (size_t i = (size_t)at; i < n; i++) {
		depth += s[i] == '{';
		if (s[i] == '}' && --depth == 0) {
			static const char open[] = "\\boxed{";
			size_t m = sizeof open - 1, len = i + 1 - (size_t)at;
			if (len < m + 1 || memcmp(s + at, open, m))
				return 0;
			*in = s + at + m;
			*nin = len - m - 1;
			return 1;
		}
	}
	return 0;
}

static int has(const char *s, size_t n, const char *needle) { return rfind(s, n, needle) >= 0; }

int grade_answer(const char *given, size_t n, const char *truth, size_t nt)
{
	if (has(truth, nt, "\\boxed") && !last_boxed(truth, nt, &truth, &nt))
		return 0;
	if (n > GRADE_MAX_BYTES || nt > GRADE_MAX_BYTES)
		return 0;
	int r = mathd_equal(given, n, truth, nt);
	return r ? r : sympy_equal(given, n, truth, nt);
}

int grade_r1_zero(const char *completion, size_t n, const char *truth, size_t nt,
		  int *format, int *answer)
{
	*format = *answer = 0;
	if (!has(completion, n, THINK_ANSWER) || !has(completion, n, ANSWER_END))
		return 0;
	*format = 1;
	size_t from = (size_t)rfind(completion, n, ANSWER_OPEN) + sizeof ANSWER_OPEN - 1;
	gstr a = { 0 };
	gs_set(&a, completion + from, n - from);
	gs_replace(&a, ANSWER_END, "");
	const char *p = a.p;
	size_t na = a.n;
	int r = 0;
	if (!a.oom && (!has(a.p, a.n, "\\boxed") || last_boxed(a.p, a.n, &p, &na)))
		r = grade_answer(p, na, truth, nt);
	if (a.oom)
		r = -1;
	gs_free(&a);
	if (r < 0)
		return -1;
	*answer = r;
	return 0;
}
