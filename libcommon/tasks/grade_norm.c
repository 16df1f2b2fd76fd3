/* grade_norm.c: the two normal forms of an answer that the CS336 drgrpo
 * grader compares (grade_internal.h): its mathd string (Hendrycks's
 * _strip_string) and its form before the sympy step (_normalize), rewritten
 * here step by step from the description in grade.h, with our own tables of
 * unit words. */
#include "tasks/grade_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Within this of an integer, a float counts as one (_is_int, _str_is_int). */
static const double INT_TOL = 1e-7;

/* Unit words the mathd step removes where they stand alone (between
 * non-word characters), with their plural in s: common units of length,
 * time, mass, area, volume, and a few counted things (not money). */
static const char *const MATHD_UNITS[] = {
	"degree", "deg", "mph", "kmph", "kmh", "ft", "feet", "inch", "inches", "mile", "yard",
	"mm", "cm", "m", "km", "kg", "g", "gm", "lb", "gallon", "liter", "litre", "meter",
	"metre", "acre", "hectare", "hour", "hr", "minute", "min", "second", "sec", "day",
	"week", "month", "year", "yr", "percent", "unit", "cubic", "square", "sq",
	"apple", "coin", "toy", "man", "men", "woman", "women", "rupee", "mark",
};

/* Unit words the sympy step's normalisation removes wherever they occur
 * (with an optional "es" or "s", spaces and a power ^N). */
static const char *const SYMPY_UNITS[] = {
	"degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day",
	"week", "month", "year", "foot", "feet", "inch", "yard",
};

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
/* Python's \w on UTF-8 text: letters, digits, '_' and (taken as letters)
 * every byte of a multi-byte character. */
static int is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_' || (unsigned char)c >= 0x80; }

int grade_py_float(const char *s, size_t n, double *x)
{
	while (n && is_space(*s))
		s++, n--;
	while (n && is_space(s[n - 1]))
		n--;
	if (n == 0 || n > 400)
		return 0;
	char buf[401];
	memcpy(buf, s, n);
	buf[n] = '\0';
	size_t i = buf[0] == '+' || buf[0] == '-';
	const char *w = buf + i;
	if (!strcasecmp(w, "inf") || !strcasecmp(w, "infinity") || !strcasecmp(w, "nan")) {
		*x = strtod(buf, NULL);
		return 1;
	}
	size_t digits = 0;
	for (; is_digit(buf[i]); i++)
		digits++;
	if (buf[i] == '.')
		for (i++; is_digit(buf[i]); i++)
			digits++;
	if (!digits)
		return 0;
	if (buf[i] == 'e' || buf[i] == 'E') {
		i++;
		i += buf[i] == '+' || buf[i] == '-';
		if (!is_digit(buf[i]))
			return 0;
		while (is_digit(buf[i]))
			i++;
	}
	if (buf[i])
		return 0;
	*x = strtod(buf, NULL);
	return 1;
}

static int near_int(double x) { return isfinite(x) && fabs(x - rint(x)) <= INT_TOL; }

void grade_strip_commas(gstr *s)
{
	for (int changed = 1; changed && !s->oom;) {
		changed = 0;
		for (size_t i = 1; i + 3 < s->n; i++)
			if (s->p[i] == ',' && is_digit(s->p[i - 1]) && is_digit(s->p[i + 1]) &&
			    is_digit(s->p[i + 2]) && is_digit(s->p[i + 3]) &&
			    (i + 4 == s->n || !is_digit(s->p[i + 4]))) {
				gs_cut(s, i, 1);
				changed = 1;
			}
	}
}

int grade_str_is_int(const char *p, size_t n)
{
	gstr s = { 0 };
	double x;
	gs_set(&s, p, n);
	grade_strip_commas(&s);
	int r = !s.oom && grade_py_float(s.p, s.n, &x) && near_int(x);
	gs_free(&s);
	return r;
}

/* An integer-valued double as Python's str(int(x)). */
static void set_int(gstr *s, double x)
{
	char buf[400];
	snprintf(buf, sizeof buf, "%.0f", x == 0 ? 0.0 : x);
	gs_set(s, buf, strlen(buf));
}

/* `\text{...}` around the whole answer: what is inside. */
static void unwrap_text(gstr *s)
{
	if (s->n > 7 && gs_starts(s, "\\text{") && gs_ends(s, "}"))
		gs_keep(s, 6, s->n - 7);
}

/* mathd: remove unit u where it stands between non-word characters (or
 * the ends), unless that leaves nothing. */
static void cut_word(gstr *s, const char *u)
{
	size_t m = strlen(u), i = 0;
	/* most answers hold none of the units: nothing to cut, nothing copied */
	if (!s->n || !memmem(s->p, s->n, u, m))
		return;
	gstr t = { 0 };
	gs_set(&t, s->p, s->n);
	while (!t.oom && i + m <= t.n) {
		size_t at = i == 0 && !memcmp(t.p, u, m) ? 0 : (size_t)-1;
		if (at && i + 1 + m <= t.n && !is_word(t.p[i]) && !memcmp(t.p + i + 1, u, m))
			at = i + 1;
		size_t end = at == (size_t)-1 ? 0 : at + m;
		if (at == (size_t)-1 || (end < t.n && is_word(t.p[end]))) {
			i++;
			continue;
		}
		gs_cut(&t, at, m);
		/* the match also took the boundary characters on both sides */
		i = at + (end < t.n + m);
	}
	if (!t.oom && t.n)
		gs_set(s, t.p, t.n);
	s->oom |= t.oom;
	gs_free(&t);
}

/* \sqrt3 -> \sqrt{3}; 0 when \sqrt ends the string (the grader fails). */
static int fix_sqrt(gstr *s)
{
	for (long at = gs_find(s, "\\sqrt", 0); at >= 0; at = gs_find(s, "\\sqrt", (size_t)at + 5)) {
		size_t c = (size_t)at + 5;
		if (c >= s->n)
			return 0;
		if (s->p[c] != '{') {
			gs_insert(s, c + 1, "}", 1);
			gs_insert(s, c, "{", 1);
		}
	}
	return 1;
}

/* \frac12 -> \frac{1}{2}, \frac1{2} -> \frac{1}{2} (_fix_fracs); 0 when
 * \frac ends the string (the grader fails). */
static int fix_fracs(gstr *s)
{
	gstr t = { 0 };
	gs_set(&t, s->p, s->n);
	for (long at = gs_find(&t, "\\frac", 0); at >= 0; at = gs_find(&t, "\\frac", (size_t)at + 5)) {
		size_t c = (size_t)at + 5;
		if (t.p[c] == '{')
			continue;
		long next = gs_find(&t, "\\frac", c);
		size_t seg = next < 0 ? t.n - c : (size_t)next - c;
		if (seg < 2) {
			/* an empty part fails; a one-character part leaves all as is */
			gs_free(&t);
			return seg == 1;
		}
		int b_open = t.p[c + 1] == '{';
		if (!b_open) {
			gs_insert(&t, c + 2, "}", 1);
			gs_insert(&t, c + 1, "}{", 2);
		} else {
			gs_insert(&t, c + 1, "}", 1);
		}
		gs_insert(&t, c, "{", 1);
	}
	if (!t.oom)
		gs_set(s, t.p, t.n);
	s->oom |= t.oom;
	gs_free(&t);
	return 1;
}

/* "a/b" of two plain integers -> \frac{a}{b} (_fix_a_slash_b). */
static int plain_int(const char *p, size_t n)
{
	size_t i = n && *p == '-';
	if (i == n || (p[i] == '0' && n - i > 1) || (p[i] == '0' && i))
		return 0;
	for (; i < n; i++)
		if (!is_digit(p[i]))
			return 0;
	return 1;
}

static void fix_slash(gstr *s)
{
	long at = gs_find(s, "/", 0);
	if (at < 0 || gs_find(s, "/", (size_t)at + 1) >= 0)
		return;
	size_t a = (size_t)at;
	if (!plain_int(s->p, a) || !plain_int(s->p + a + 1, s->n - a - 1))
		return;
	gs_cut(s, a, 1);
	gs_insert(s, a, "}{", 2);
	gs_insert(s, 0, "\\frac{", 6);
	gs_insert(s, s->n, "}", 1);
}

/* Hendrycks's _strip_string; 0 where the grader's Python raises (then it
 * compares the answer as it came). */
static int strip_string(gstr *s)
{
	gs_replace(s, "\n", "");
	gs_replace(s, "\\!", "");
	gs_replace(s, "\\\\", "\\");
	gs_replace(s, "bmatrix", "pmatrix");
	gs_replace(s, "tfrac", "frac");
	gs_replace(s, "dfrac", "frac");
	gs_replace(s, "\\neq", "\\ne");
	gs_replace(s, "\\leq", "\\le");
	gs_replace(s, "\\geq", "\\ge");
	gs_replace(s, "\\left", "");
	gs_replace(s, "\\right", "");
	/* a \text{...} that ends the answer is a unit, unless it is all */
	long t = gs_find(s, "\\text{", 0);
	if (t >= 0 && gs_ends(s, "}") && s->n >= (size_t)t + 7) {
		gstr head = { 0 };
		gs_set(&head, s->p, (size_t)t);
		gs_trim(&head);
		if (!head.oom && head.n)
			gs_set(s, head.p, head.n);
		s->oom |= head.oom;
		gs_free(&head);
	}
	for (int round = 0; round < 2; round++)
		for (size_t u = 0; u < sizeof MATHD_UNITS / sizeof *MATHD_UNITS; u++) {
			char plural[32];
			size_t m = strlen(MATHD_UNITS[u]);
			cut_word(s, MATHD_UNITS[u]);
			memcpy(plural, MATHD_UNITS[u], m);
			memcpy(plural + m, "s", 2);
			cut_word(s, plural);
		}
	gs_replace(s, "^{\\circ}", "");
	gs_replace(s, "^\\circ", "");
	gs_replace(s, "\\$", "");
	long u = gs_find(s, "\\text{ ", 0);
	if (u >= 0) {
		if (gs_find(s, "\\text{ ", (size_t)u + 1) >= 0)
			return 0;
		gs_keep(s, 0, (size_t)u);
	}
	gs_replace(s, "\\%", "");
	gs_replace(s, " .", " 0.");
	gs_replace(s, "{.", "{0.");
	if (s->n == 0)
		return 1;
	if (s->p[0] == '.')
		gs_insert(s, 0, "0", 1);
	long eq = gs_find(s, "=", 0);
	if (eq >= 0 && eq <= 2 && gs_find(s, "=", (size_t)eq + 1) < 0)
		gs_cut(s, 0, (size_t)eq + 1);
	if (!fix_sqrt(s))
		return 0;
	gs_replace(s, " ", "");
	if (!fix_fracs(s))
		return 0;
	if (s->n == 3 && !memcmp(s->p, "0.5", 3))
		gs_set(s, "\\frac{1}{2}", 11);
	fix_slash(s);
	return 1;
}

void grade_mathd(gstr *s)
{
	gs_trim(s);
	if (s->n > 7 && gs_starts(s, "\\text{") && gs_ends(s, "}")) {
		gs_keep(s, 6, s->n - 7);
		gs_trim(s);
	}
	gstr orig = { 0 };
	gs_set(&orig, s->p, s->n);
	if (!strip_string(s) && !orig.oom)
		gs_set(s, orig.p, orig.n);
	s->oom |= orig.oom;
	gs_free(&orig);
}

/* The sympy step: unit u (any case of it in the text), an optional "es"
 * or "s", spaces and ^N. */
static void cut_unit(gstr *s, const char *u)
{
	size_t m = strlen(u);
	for (long at = gs_find(s, u, 0); at >= 0; at = gs_find(s, u, (size_t)at)) {
		size_t e = (size_t)at + m;
		if (e + 1 < s->n && s->p[e] == 'e' && s->p[e + 1] == 's')
			e += 2;
		if (e < s->n && s->p[e] == 's')
			e++;
		while (e < s->n && s->p[e] == ' ')
			e++;
		if (e + 1 < s->n && s->p[e] == '^' && is_digit(s->p[e + 1]))
			for (e++; e < s->n && is_digit(s->p[e]);)
				e++;
		gs_cut(s, (size_t)at, e - (size_t)at);
	}
}

/* The balanced {...} group starting at open: its end (after '}'), or 0. */
static size_t group_end(const gstr *s, size_t open)
{
	if (open >= s->n || s->p[open] != '{')
		return 0;
	int depth = 0;
	for (size_t i = open; i < s->n; i++) {
		depth += s->p[i] == '{' ? 1 : s->p[i] == '}' ? -1 : 0;
		if (depth == 0)
			return i + 1;
	}
	return 0;
}

/* \frac{A}{B} -> A/B, as pylatexenc's latex2text writes it. */
static void text_fracs(gstr *s)
{
	for (long at = gs_find(s, "\\frac", 0); at >= 0; at = gs_find(s, "\\frac", (size_t)at)) {
		size_t a = (size_t)at + 5, ae = group_end(s, a), be = ae ? group_end(s, ae) : 0;
		if (!be) {
			at += 5; /* not \frac{A}{B}: left as it is */
			continue;
		}
		/* \frac{A}{B}: drop "}" of B, "}{" between, "\frac{" */
		gs_cut(s, be - 1, 1);
		gs_cut(s, ae - 1, 2);
		gs_insert(s, ae - 1, "/", 1);
		gs_cut(s, (size_t)at, 6);
	}
}

/* What latex2text makes of the macros answers use; other macros lose their
 * backslash. */
static void latex_to_text(gstr *s)
{
	gs_replace(s, "\\tfrac", "\\frac");
	gs_replace(s, "\\dfrac", "\\frac");
	gs_replace(s, "\\frac", " \\frac");
	static const char *const wraps[] = { "\\text", "\\mathrm", "\\textbf", "\\mathbf", "\\mbox" };
	for (size_t i = 0; i < sizeof wraps / sizeof *wraps; i++)
		gs_unwrap(s, wraps[i]);
	gs_replace(s, "\\left", "");
	gs_replace(s, "\\right", "");
	text_fracs(s);
	static const char *const subs[][2] = {
		{ "\\cdot", "*" }, { "\\times", "*" }, { "\\pi", "pi" }, { "\\infty", "inf" },
		{ "\\sqrt", "sqrt" }, { "\\cup", "U" }, { "\\,", " " }, { "\\;", " " }, { "\\!", "" },
		{ "\\ ", " " }, { "\\%", "%" }, { "\\$", "$" }, { "\\", "" },
	};
	for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
		gs_replace(s, subs[i][0], subs[i][1]);
	gs_trim(s);
}

void grade_normalize(gstr *s)
{
	unwrap_text(s);
	gs_replace(s, "\\%", "%");
	gs_replace(s, "\\$", "$");
	gs_replace(s, "$", "");
	gs_replace(s, "%", "");
	gs_replace(s, " or ", " , ");
	gs_replace(s, " and ", " , ");
	gs_replace(s, "million", "*10^6");
	gs_replace(s, "billion", "*10^9");
	gs_replace(s, "trillion", "*10^12");
	for (size_t u = 0; u < sizeof SYMPY_UNITS / sizeof *SYMPY_UNITS; u++)
		cut_unit(s, SYMPY_UNITS[u]);
	for (long at = gs_find(s, "^", 0); at >= 0; at = gs_find(s, "^", (size_t)at + 1)) {
		size_t e = (size_t)at + 1;
		while (e < s->n && s->p[e] == ' ')
			e++;
		if (e + 5 <= s->n && !memcmp(s->p + e, "\\circ", 5)) {
			gs_cut(s, (size_t)at, e + 5 - (size_t)at);
			at--;
			if (at < -1)
				at = -1;
		}
	}
	if (s->n >= 2 && s->p[0] == '{' && s->p[s->n - 1] == '}')
		gs_keep(s, 1, s->n - 2);
	for (long at = gs_find(s, ",\\!", 0); at >= 0; at = gs_find(s, ",\\!", (size_t)at)) {
		size_t e = (size_t)at + 3;
		while (e < s->n && s->p[e] == ' ')
			e++;
		gs_cut(s, (size_t)at, e - (size_t)at);
	}
	double x;
	if (!s->oom && grade_py_float(s->p, s->n, &x) && near_int(x))
		set_int(s, rint(x));
	if (gs_find(s, "\\", 0) >= 0)
		latex_to_text(s);
	for (long at = gs_find(s, "-", 0); at >= 0; at = gs_find(s, "-", (size_t)at + 1)) {
		size_t e = (size_t)at + 1;
		while (e < s->n && s->p[e] == ' ')
			e++;
		gs_cut(s, (size_t)at + 1, e - (size_t)at - 1);
	}
	/* mixed numbers: "7 3/4" -> "7+3/4" */
	for (size_t i = 0; !s->oom && i + 2 < s->n; i++) {
		if (!is_digit(s->p[i]) || s->p[i + 1] != ' ')
			continue;
		size_t e = i + 1;
		while (e < s->n && s->p[e] == ' ')
			e++;
		if (e < s->n && is_digit(s->p[e])) {
			gs_cut(s, i + 1, e - i - 1);
			gs_insert(s, i + 1, "+", 1);
			i += 2;
		}
	}
	gs_replace(s, " ", "");
	gs_replace(s, "{", "");
	gs_replace(s, "}", "");
	for (size_t i = 0; !s->oom && i < s->n; i++)
		if (s->p[i] >= 'A' && s->p[i] <= 'Z')
			s->p[i] = (char)(s->p[i] - 'A' + 'a');
	if (!s->oom && grade_str_is_int(s->p, s->n)) {
		gstr t = { 0 };
		gs_set(&t, s->p, s->n);
		gs_replace(&t, ",", "");
		if (!t.oom && grade_py_float(t.p, t.n, &x))
			set_int(s, trunc(x));
		s->oom |= t.oom;
		gs_free(&t);
	}
}
