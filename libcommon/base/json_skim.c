/* json_skim.c: checking a JSON object's text as jansson would and listing
 * its top-level members without building any value (see json_skim.h). */
#include "base/json_skim.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* Beyond these a number is left to jansson: an integer of 19 digits may
 * not fit its json_int_t, and a real of at most REAL_INT_DIGITS_SAFE
 * digits before the point and EXP_DIGITS_SAFE of exponent stays below
 * 1e300 (jansson refuses what overflows a double). */
enum { INT_DIGITS_SAFE = 18, REAL_INT_DIGITS_SAFE = 200, EXP_DIGITS_SAFE = 2 };

enum { SURROGATE_LO = 0xD800, SURROGATE_HI = 0xDFFF, UNICODE_MAX = 0x10FFFF };

typedef struct cur {
	const unsigned char *p, *end;
} cur;

/* jansson's white space */
static void ws(cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int is_digit(unsigned char u)
{
	return u >= '0' && u <= '9';
}

static int hex(unsigned char u)
{
	return is_digit(u) ? u - '0' : u >= 'a' && u <= 'f' ? u - 'a' + 10
	     : u >= 'A' && u <= 'F' ? u - 'A' + 10 : -1;
}

/* The length of the well-formed UTF-8 sequence at p (shortest form, no
 * surrogate, at most U+10FFFF, as jansson's utf8_check_full), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char u = *p;
	size_t k = u >= 0xC2 && u <= 0xDF ? 2 : u >= 0xE0 && u <= 0xEF ? 3
		 : u >= 0xF0 && u <= 0xF4 ? 4 : 0;
	if (!k || (size_t)(end - p) < k)
		return 0;
	unsigned long v = u & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
	for (size_t i = 1; i < k; i++) {
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	static const unsigned long least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (v < least[k] || v > UNICODE_MAX || (v >= SURROGATE_LO && v <= SURROGATE_HI))
		return 0;
	return k;
}

/* A string at c->p (its opening quote); *escaped when it has a backslash. */
static int string(cur *c, int *escaped)
{
	const unsigned char *p = c->p + 1, *end = c->end;
	*escaped = 0;
	while (p < end) {
		unsigned char u = *p;
		if (u == '"') {
			c->p = p + 1;
			return 1;
		}
		if (u < 0x20)
			return 0;
		if (u < 0x80 && u != '\\') {
			p++;
			continue;
		}
		if (u >= 0x80) {
			size_t k = utf8_len(p, end);
			if (!k)
				return 0;
			p += k;
			continue;
		}
		*escaped = 1;
		if (end - p < 2)
			return 0;
		unsigned char x = p[1];
		if (x == 'u') {
			if (end - p < 6)
				return 0;
			long v = 0;
			for (int i = 2; i < 6; i++) {
				int h = hex(p[i]);
				if (h < 0)
					return 0;
				v = v * 16 + h;
			}
			if (v >= SURROGATE_LO && v <= SURROGATE_HI)
				return 0;
			p += 6;
		} else if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' ||
			   x == 'r' || x == 't') {
			p += 2;
		} else {
			return 0;
		}
	}
	return 0;
}

static size_t digits(cur *c)
{
	const unsigned char *p0 = c->p;
	while (c->p < c->end && is_digit(*c->p))
		c->p++;
	return (size_t)(c->p - p0);
}

static int number(cur *c)
{
	if (c->p < c->end && *c->p == '-')
		c->p++;
	if (c->p >= c->end || !is_digit(*c->p))
		return 0;
	size_t int_digits = *c->p == '0' ? (c->p++, 1) : digits(c);
	int real = 0;
	if (c->p < c->end && *c->p == '.') {
		c->p++;
		real = 1;
		if (!digits(c))
			return 0;
	}
	if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
		c->p++;
		real = 1;
		if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
			c->p++;
		size_t k = digits(c);
		if (!k || k > EXP_DIGITS_SAFE)
			return 0;
	}
	return real ? int_digits <= REAL_INT_DIGITS_SAFE : int_digits <= INT_DIGITS_SAFE;
}

static int literal(cur *c, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n))
		return 0;
	c->p += n;
	return 1;
}

static int value(cur *c, int depth, size_t *items);

/* An object at c->p; with s, its members recorded (text at base). */
static int object(cur *c, int depth, json_skim *s, const unsigned char *base, int *oom, lm_err *e)
{
	c->p++;
	ws(c);
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		return 1;
	}
	for (;;) {
		if (c->p >= c->end || *c->p != '"')
			return 0;
		const unsigned char *k0 = c->p;
		int escaped;
		if (!string(c, &escaped) || escaped)
			return 0;
		const unsigned char *k1 = c->p - 1;
		ws(c);
		if (c->p >= c->end || *c->p != ':')
			return 0;
		c->p++;
		ws(c);
		const unsigned char *v0 = c->p;
		size_t items = 0;
		if (!value(c, depth, &items))
			return 0;
		if (s) {
			if (lm_grow((void **)&s->m, &s->cap, s->n + 1, sizeof *s->m, e)) {
				*oom = 1;
				return 0;
			}
			s->m[s->n++] = (json_member){ (size_t)(k0 + 1 - base), (size_t)(k1 - k0 - 1),
						      (size_t)(v0 - base), (size_t)(c->p - v0), items };
		}
		ws(c);
		if (c->p >= c->end)
			return 0;
		if (*c->p == '}') {
			c->p++;
			return 1;
		}
		if (*c->p != ',')
			return 0;
		c->p++;
		ws(c);
	}
}

static int array(cur *c, int depth, size_t *items)
{
	c->p++;
	ws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
		return 1;
	}
	for (;;) {
		size_t inner;
		if (!value(c, depth, &inner))
			return 0;
		(*items)++;
		ws(c);
		if (c->p >= c->end)
			return 0;
		if (*c->p == ']') {
			c->p++;
			return 1;
		}
		if (*c->p != ',')
			return 0;
		c->p++;
		ws(c);
	}
}

/* A value at c->p (no white space before it); an array's elements in *items. */
static int value(cur *c, int depth, size_t *items)
{
	*items = 0;
	if (c->p >= c->end)
		return 0;
	int escaped, oom = 0;
	switch (*c->p) {
	case '{':
		return depth < JSON_SKIM_DEPTH && object(c, depth + 1, NULL, NULL, &oom, NULL);
	case '[':
		return depth < JSON_SKIM_DEPTH && array(c, depth + 1, items);
	case '"':
		return string(c, &escaped);
	case 't':
		return literal(c, "true");
	case 'f':
		return literal(c, "false");
	case 'n':
		return literal(c, "null");
	default:
		return number(c);
	}
}

void json_skim_free(json_skim *s)
{
	free(s->m);
	s->m = NULL;
	s->n = s->cap = 0;
}

int json_skim_object(const char *text, size_t len, json_skim *s, lm_err *e)
{
	const unsigned char *base = (const unsigned char *)text;
	cur c = { base, base + len };
	int oom = 0;
	s->n = 0;
	ws(&c);
	if (c.p >= c.end || *c.p != '{')
		return 0;
	int ok = object(&c, 1, s, base, &oom, e);
	if (oom)
		return -1;
	ws(&c);
	return ok && c.p == c.end;
}

const json_member *json_skim_get(const json_skim *s, const char *text, const char *key)
{
	size_t n = strlen(key);
	for (size_t i = s->n; i-- > 0;)
		if (s->m[i].key_len == n && !memcmp(text + s->m[i].key, key, n))
			return &s->m[i];
	return NULL;
}

/* UTF-8 of a code point below U+10000 (no surrogate): its bytes. */
static size_t utf8_put(unsigned long v, char *o)
{
	if (v < 0x80) {
		o[0] = (char)v;
		return 1;
	}
	if (v < 0x800) {
		o[0] = (char)(0xC0 | (v >> 6));
		o[1] = (char)(0x80 | (v & 0x3F));
		return 2;
	}
	o[0] = (char)(0xE0 | (v >> 12));
	o[1] = (char)(0x80 | ((v >> 6) & 0x3F));
	o[2] = (char)(0x80 | (v & 0x3F));
	return 3;
}

int json_skim_string(const char *val, size_t len, char **out, size_t *n, lm_err *e)
{
	/* the decoded text is never longer than the quoted one */
	char *o = malloc(len + 1);
	if (!o)
		return lm_seterr(e, "out of memory");
	size_t k = 0;
	const char *p = val + 1, *end = val + len - 1;
	while (p < end) {
		const char *bs = memchr(p, '\\', (size_t)(end - p));
		size_t run = bs ? (size_t)(bs - p) : (size_t)(end - p);
		memcpy(o + k, p, run);
		k += run;
		p += run;
		if (!bs)
			break;
		char x = p[1];
		p += 2;
		switch (x) {
		case 'b': o[k++] = '\b'; break;
		case 'f': o[k++] = '\f'; break;
		case 'n': o[k++] = '\n'; break;
		case 'r': o[k++] = '\r'; break;
		case 't': o[k++] = '\t'; break;
		case 'u': {
			unsigned long v = 0;
			for (int i = 0; i < 4; i++)
				v = v * 16 + (unsigned long)hex((unsigned char)p[i]);
			p += 4;
			k += utf8_put(v, o + k);
			break;
		}
		default: o[k++] = x; break; /* " \ / */
		}
	}
	o[k] = '\0';
	*out = o;
	*n = k;
	return 0;
}

int json_skim_item(const char *val, size_t len, size_t *at, size_t *el, size_t *el_len)
{
	size_t i = *at ? *at : 1; /* after '[' or the last element's ',' */
	while (i < len && (val[i] == ' ' || val[i] == '\t' || val[i] == '\n' || val[i] == '\r'))
		i++;
	if (i >= len || val[i] == ']')
		return 0;
	size_t start = i, end = i;
	int depth = 0;
	for (; i < len; i++) {
		char c = val[i];
		if (c == '"') {
			for (i++; i < len && val[i] != '"'; i++)
				i += val[i] == '\\';
		} else if (c == '[' || c == '{') {
			depth++;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		} else if (depth == 0 && (c == ',' || c == ']')) {
			break;
		}
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			end = i + 1;
	}
	*el = start;
	*el_len = end - start;
	*at = i < len && val[i] == ',' ? i + 1 : len;
	return 1;
}

char *json_skim_dump(const char *val, size_t len)
{
	size_t i = len && val[0] == '-';
	int plain = i < len && (val[i] != '0' || len == 1);
	for (size_t k = i; plain && k < len; k++)
		plain = val[k] >= '0' && val[k] <= '9';
	if (plain) {
		char *s = malloc(len + 1);
		if (s) {
			memcpy(s, val, len);
			s[len] = '\0';
		}
		return s;
	}
	json_t *v = json_loadb(val, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	json_decref(v);
	return s;
}
