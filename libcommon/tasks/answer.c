/* answer.c: answer extraction and exact normalised comparison (see answer.h). */
#include "tasks/answer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char BOXED[] = "\\boxed{";
enum { MAX_FRACTION_DIGITS = 18 }; /* fits in uint64_t */

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static void trim(const char **s, size_t *n)
{
	while (*n && is_space(**s))
		(*s)++, (*n)--;
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
}

/* A canonical decimal from sign, integer digits and fraction digits. */
static char *canon_decimal(int neg, const char *ip, size_t ni, const char *fp, size_t nf)
{
	while (ni > 1 && *ip == '0')
		ip++, ni--;
	if (ni == 0)
		ip = "0", ni = 1;
	while (nf && fp[nf - 1] == '0')
		nf--;
	if (ni == 1 && *ip == '0' && nf == 0)
		neg = 0;
	char *out = malloc(ni + nf + 3);
	if (!out)
		return NULL;
	size_t k = 0;
	if (neg)
		out[k++] = '-';
	memcpy(out + k, ip, ni);
	k += ni;
	if (nf) {
		out[k++] = '.';
		memcpy(out + k, fp, nf);
		k += nf;
	}
	out[k] = '\0';
	return out;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static int parse_u64(const char *s, size_t n, uint64_t *v)
{
	if (n == 0 || n > MAX_FRACTION_DIGITS)
		return -1;
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v * 10 + (uint64_t)(s[i] - '0');
	return 0;
}

/* num/den reduced; as an exact decimal when den is 2^a 5^b. */
static char *canon_fraction(int neg, const char *a, size_t na, const char *b, size_t nb, int *bad)
{
	uint64_t num, den;
	*bad = 0;
	if (parse_u64(a, na, &num) || parse_u64(b, nb, &den) || den == 0) {
		*bad = 1;
		return NULL;
	}
	uint64_t g = gcd_u64(num, den);
	if (g > 1)
		num /= g, den /= g;
	if (num == 0)
		den = 1;
	uint64_t d = den;
	unsigned twos = 0, fives = 0;
	while (d % 2 == 0)
		d /= 2, twos++;
	while (d % 5 == 0)
		d /= 5, fives++;
	char buf[64];
	if (d == 1) {
		/* num/den = num * 2^(k-twos) 5^(k-fives) / 10^k, k = max(twos, fives) */
		unsigned k = twos > fives ? twos : fives;
		unsigned __int128 scaled = num;
		for (unsigned i = twos; i < k; i++)
			scaled *= 2;
		for (unsigned i = fives; i < k; i++)
			scaled *= 5;
		char digits[48];
		size_t nd = 0;
		do {
			digits[nd++] = (char)('0' + (int)(scaled % 10));
			scaled /= 10;
		} while (scaled);
		while (nd <= k)
			digits[nd++] = '0';
		size_t ni = nd - k;
		for (size_t i = 0; i < nd; i++)
			buf[i] = digits[nd - 1 - i];
		return canon_decimal(neg, buf, ni, buf + ni, k);
	}
	snprintf(buf, sizeof buf, "%s%llu/%llu", neg && num ? "-" : "",
		 (unsigned long long)num, (unsigned long long)den);
	return strdup(buf);
}

/* Try s (already stripped of '$', ',' and whitespace) as a number. */
static char *canon_number(const char *s, size_t n)
{
	if (n && s[n - 1] == '.')
		n--;
	size_t i = 0;
	int neg = 0;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	size_t i0 = i;
	while (i < n && is_digit(s[i]))
		i++;
	size_t ni = i - i0;
	if (ni == 0 && !(i + 1 < n && s[i] == '.'))
		return NULL;
	if (i == n)
		return canon_decimal(neg, s + i0, ni, "", 0);
	if (s[i] == '.') {
		size_t f0 = ++i;
		while (i < n && is_digit(s[i]))
			i++;
		if (i != n || i == f0)
			return NULL;
		return canon_decimal(neg, s + i0, ni, s + f0, n - f0);
	}
	if (s[i] == '/' && ni) {
		size_t d0 = ++i;
		while (i < n && is_digit(s[i]))
			i++;
		if (i != n || i == d0)
			return NULL;
		int bad;
		char *r = canon_fraction(neg, s + i0, ni, s + d0, n - d0, &bad);
		return bad ? NULL : r;
	}
	return NULL;
}

char *answer_normalize(const char *s, size_t n, int *numeric)
{
	trim(&s, &n);
	size_t nb = sizeof BOXED - 1;
	if (n > nb && !memcmp(s, BOXED, nb) && s[n - 1] == '}') {
		s += nb;
		n -= nb + 1;
		trim(&s, &n);
	}
	char *buf = malloc(n + 1);
	if (!buf)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] != '$' && s[i] != ',' && !is_space(s[i]))
			buf[k++] = s[i];
	char *num = canon_number(buf, k);
	if (numeric)
		*numeric = num != NULL;
	if (num) {
		free(buf);
		return num;
	}
	/* not a number: collapse whitespace, lower ASCII letters */
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if (is_space(s[i])) {
			if (k && buf[k - 1] != ' ')
				buf[k++] = ' ';
			continue;
		}
		buf[k++] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
	}
	buf[k] = '\0';
	return buf;
}

int answer_equal(const char *a, size_t na, const char *b, size_t nb)
{
	char *x = answer_normalize(a, na, NULL), *y = answer_normalize(b, nb, NULL);
	int r = x && y ? !strcmp(x, y) : -1;
	free(x);
	free(y);
	return r;
}

char *answer_last_number(const char *text, size_t n, int *oom)
{
	size_t best = 0, best_len = 0;
	int found = 0;
	*oom = 0;
	for (size_t i = 0; i < n;) {
		if (!is_digit(text[i])) {
			i++;
			continue;
		}
		size_t start = i;
		while (i < n && is_digit(text[i]))
			i++;
		/* thousands groups: ",ddd" not followed by another digit */
		while (i + 3 < n && text[i] == ',' && is_digit(text[i + 1]) && is_digit(text[i + 2]) &&
		       is_digit(text[i + 3]) && (i + 4 >= n || !is_digit(text[i + 4])))
			i += 4;
		if (i + 1 < n && text[i] == '.' && is_digit(text[i + 1])) {
			i++;
			while (i < n && is_digit(text[i]))
				i++;
		}
		if (start > 0 && text[start - 1] == '-' &&
		    !(start > 1 && (is_alpha(text[start - 2]) || is_digit(text[start - 2]) || text[start - 2] == ')')))
			start--;
		best = start;
		best_len = i - start;
		found = 1;
	}
	if (!found)
		return NULL;
	char *r = answer_normalize(text + best, best_len, NULL);
	if (!r)
		*oom = 1;
	return r;
}
