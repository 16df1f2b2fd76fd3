/* grade_str.c: the growable string of the math grader and the edits its
 * normalisations are made of (grade_internal.h). */
#include "tasks/grade_internal.h"

#include <stdlib.h>
#include <string.h>

static int reserve(gstr *s, size_t n)
{
	if (s->oom)
		return -1;
	if (n + 1 <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap : 16;
	while (cap < n + 1)
		cap *= 2;
	char *p = realloc(s->p, cap);
	if (!p) {
		s->oom = 1;
		return -1;
	}
	s->p = p;
	s->cap = cap;
	return 0;
}

void gs_set(gstr *s, const char *p, size_t n)
{
	if (reserve(s, n))
		return;
	memmove(s->p, p, n);
	s->p[n] = '\0';
	s->n = n;
}

void gs_free(gstr *s)
{
	free(s->p);
	memset(s, 0, sizeof *s);
}

long gs_find(const gstr *s, const char *needle, size_t from)
{
	size_t m = strlen(needle);
	if (s->oom || m == 0)
		return -1;
	for (size_t i = from; i + m <= s->n; i++)
		if (s->p[i] == needle[0] && !memcmp(s->p + i, needle, m))
			return (long)i;
	return -1;
}

void gs_replace(gstr *s, const char *from, const char *to)
{
	size_t nf = strlen(from), nt = strlen(to);
	long at = gs_find(s, from, 0);
	if (at < 0)
		return;
	gstr out = { 0 };
	size_t i = 0;
	reserve(&out, s->n);
	while (at >= 0 && !out.oom) {
		size_t k = out.n, add = (size_t)at - i + nt;
		if (reserve(&out, k + add))
			break;
		memcpy(out.p + k, s->p + i, (size_t)at - i);
		memcpy(out.p + k + (size_t)at - i, to, nt);
		out.n = k + add;
		i = (size_t)at + nf;
		at = gs_find(s, from, i);
	}
	if (!out.oom && !reserve(&out, out.n + s->n - i)) {
		memcpy(out.p + out.n, s->p + i, s->n - i);
		out.n += s->n - i;
		out.p[out.n] = '\0';
	}
	if (out.oom) {
		gs_free(&out);
		s->oom = 1;
		return;
	}
	free(s->p);
	*s = out;
}

void gs_insert(gstr *s, size_t at, const char *t, size_t n)
{
	if (at > s->n || reserve(s, s->n + n))
		return;
	memmove(s->p + at + n, s->p + at, s->n - at + 1);
	memcpy(s->p + at, t, n);
	s->n += n;
}

void gs_cut(gstr *s, size_t at, size_t n)
{
	if (s->oom || at > s->n)
		return;
	if (n > s->n - at)
		n = s->n - at;
	memmove(s->p + at, s->p + at + n, s->n - at - n + 1);
	s->n -= n;
}

void gs_keep(gstr *s, size_t at, size_t n)
{
	if (s->oom || at > s->n)
		return;
	if (n > s->n - at)
		n = s->n - at;
	memmove(s->p, s->p + at, n);
	s->p[n] = '\0';
	s->n = n;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

void gs_trim(gstr *s)
{
	size_t a = 0, b = s->n;
	if (s->oom)
		return;
	while (a < b && is_space(s->p[a]))
		a++;
	while (b > a && is_space(s->p[b - 1]))
		b--;
	gs_keep(s, a, b - a);
}

int gs_starts(const gstr *s, const char *prefix)
{
	size_t m = strlen(prefix);
	return !s->oom && s->n >= m && !memcmp(s->p, prefix, m);
}

int gs_ends(const gstr *s, const char *suffix)
{
	size_t m = strlen(suffix);
	return !s->oom && s->n >= m && !memcmp(s->p + s->n - m, suffix, m);
}

void gs_unwrap(gstr *s, const char *macro)
{
	size_t m = strlen(macro);
	long at = gs_find(s, macro, 0);
	while (at >= 0) {
		size_t open = (size_t)at + m;
		if (open >= s->n || s->p[open] != '{') {
			at = gs_find(s, macro, open);
			continue;
		}
		size_t i = open + 1;
		int depth = 1;
		for (; i < s->n && depth; i++)
			depth += s->p[i] == '{' ? 1 : s->p[i] == '}' ? -1 : 0;
		if (depth)
			return;
		gs_cut(s, i - 1, 1);
		gs_cut(s, (size_t)at, open + 1 - (size_t)at);
		at = gs_find(s, macro, (size_t)at);
	}
}
