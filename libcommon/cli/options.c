/* options.c: the table-driven option parser and --help generator (see options.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/version.h"
#include "cli/die.h"

enum { HELP_COLUMN = 28 };

int opt_parse_int(const char *s, long long min, long long max, long long *out,
		  const char *what, lm_err *e)
{
	char *end;
	errno = 0;
	if (!s || !*s)
		return lm_usage_err(e, "%s: empty number", what);
	long long v = strtoll(s, &end, 10);
	if (*end || errno == ERANGE || s[0] == ' ')
		return lm_usage_err(e, "%s: '%s' is not an integer", what, s);
	if (min < max && (v < min || v > max))
		return lm_usage_err(e, "%s: %lld is out of range [%lld, %lld]",
				    what, v, min, max);
	*out = v;
	return 0;
}

int opt_parse_size(const char *s, uint64_t *out, const char *what, lm_err *e)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return lm_usage_err(e, "%s: '%s' is not a size", what, s ? s : "");
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno == ERANGE)
		return lm_usage_err(e, "%s: '%s' is not a size", what, s);
	uint64_t mul = 1;
	if (*end) {
		int bin = end[1] == 'i';
		uint64_t base = bin ? 1024 : 1000;
		switch (*end) {
		case 'k': case 'K': mul = base; break;
		case 'M': mul = base * base; break;
		case 'G': mul = base * base * base; break;
		default: return lm_usage_err(e, "%s: '%s' has an unknown suffix", what, s);
		}
		if (end[1 + bin] != '\0')
			return lm_usage_err(e, "%s: '%s' has an unknown suffix", what, s);
	}
	if (v > UINT64_MAX / mul)
		return lm_usage_err(e, "%s: '%s' is too large", what, s);
	*out = (uint64_t)v * mul;
	return 0;
}

int opt_parse_range(const char *s, uint64_t *start, uint64_t *end, uint64_t to_end, lm_err *e)
{
	const char *colon = strchr(s, ':');
	char first[64];
	size_t n = colon ? (size_t)(colon - s) : 0;
	if (!colon || n == 0 || n >= sizeof first)
		return lm_usage_err(e, "--range %s: expected START:END", s);
	memcpy(first, s, n);
	first[n] = 0;
	if (opt_parse_size(first, start, "--range start", e))
		return -1;
	*end = to_end;
	if (colon[1] && opt_parse_size(colon + 1, end, "--range end", e))
		return -1;
	if (*end < *start)
		return lm_usage_err(e, "--range %s: the end is before the start", s);
	return 0;
}

int opt_parse_double(const char *s, double *out, const char *what, lm_err *e)
{
	char *end;
	errno = 0;
	if (!s || !*s || s[0] == ' ')
		return lm_usage_err(e, "%s: empty number", what);
	double v = strtod(s, &end);
	if (*end || errno == ERANGE || !isfinite(v))
		return lm_usage_err(e, "%s: '%s' is not a finite number", what, s);
	*out = v;
	return 0;
}

static void opt_label(const opt_def *o, char *buf, size_t n)
{
	if (o->shortname && o->longname)
		snprintf(buf, n, "-%c, --%s", o->shortname, o->longname);
	else if (o->shortname)
		snprintf(buf, n, "-%c", o->shortname);
	else
		snprintf(buf, n, "--%s", o->longname);
}

static int set_value(const opt_def *o, const char *arg, lm_err *e)
{
	char what[96];
	opt_label(o, what, sizeof what);
	switch (o->type) {
	case OPT_FLAG:
		*(int *)o->target = 1;
		return 0;
	case OPT_INT: {
		long long v;
		long long lo = o->min < o->max ? (long long)o->min : 0;
		long long hi = o->min < o->max ? (long long)o->max : 0;
		if (opt_parse_int(arg, lo, hi, &v, what, e))
			return -1;
		*(long long *)o->target = v;
		return 0;
	}
	case OPT_SIZE: {
		uint64_t v;
		if (opt_parse_size(arg, &v, what, e))
			return -1;
		if (o->min < o->max && ((double)v < o->min || (double)v > o->max))
			return lm_usage_err(e, "%s: %s is out of range [%.0f, %.0f]",
					    what, arg, o->min, o->max);
		*(uint64_t *)o->target = v;
		return 0;
	}
	case OPT_DOUBLE: {
		double v;
		if (opt_parse_double(arg, &v, what, e))
			return -1;
		if (o->min < o->max && (v < o->min || v > o->max))
			return lm_usage_err(e, "%s: %s is out of range [%g, %g]",
					    what, arg, o->min, o->max);
		*(double *)o->target = v;
		return 0;
	}
	case OPT_STR:
		*(const char **)o->target = arg;
		return 0;
	case OPT_STRLIST: {
		opt_strlist *l = o->target;
		const char **v = realloc(l->v, (l->n + 1) * sizeof *v);
		if (!v)
			return lm_seterr(e, "out of memory");
		v[l->n++] = arg;
		l->v = v;
		return 0;
	}
	case OPT_CHOICE:
		for (const char *const *c = o->choices; c && *c; c++)
			if (!strcmp(*c, arg)) {
				*(const char **)o->target = *c;
				return 0;
			}
		{
			char list[256] = "";
			size_t n = 0;
			for (const char *const *c = o->choices; c && *c && n < sizeof list; c++)
				n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *c);
			return lm_usage_err(e, "%s: unknown value '%s' (one of: %s)", what, arg, list);
		}
	}
	return lm_usage_err(e, "%s: bad option table", what);
}

static const opt_def *find_long(const opt_def *opts, const char *name, size_t len,
				lm_err *e)
{
	const opt_def *hit = NULL;
	int n_prefix = 0;
	for (const opt_def *o = opts; o->shortname || o->longname; o++) {
		if (!o->longname || strncmp(o->longname, name, len))
			continue;
		if (strlen(o->longname) == len)
			return o;
		hit = o;
		n_prefix++;
	}
	if (n_prefix == 1)
		return hit;
	if (n_prefix > 1)
		lm_usage_err(e, "option '--%.*s' is ambiguous", (int)len, name);
	else
		lm_usage_err(e, "unknown option '--%.*s'", (int)len, name);
	return NULL;
}

static const opt_def *find_short(const opt_def *opts, char c)
{
	for (const opt_def *o = opts; o->shortname || o->longname; o++)
		if (o->shortname == c)
			return o;
	return NULL;
}

static void mark_seen(const opt_prog *p, const opt_def *o, unsigned char *seen)
{
	if (seen)
		seen[o - p->opts] = 1;
}

int opt_parse(const opt_prog *p, int argc, char **argv,
	      char ***operands, int *n_operands, lm_err *e)
{
	return opt_parse_seen(p, argc, argv, operands, n_operands, NULL, e);
}

int opt_parse_seen(const opt_prog *p, int argc, char **argv,
		   char ***operands, int *n_operands, unsigned char *seen, lm_err *e)
{
	char **ops = calloc((size_t)argc + 1, sizeof *ops);
	int n = 0, help = 0;
	if (!ops)
		return lm_seterr(e, "out of memory");
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (!strcmp(a, "--")) {
			while (++i < argc)
				ops[n++] = argv[i];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			ops[n++] = a;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			if (len == 4 && !strncmp(name, "help", 4)) {
				help = 1;
				continue;
			}
			if (len == 7 && !strncmp(name, "version", 7) && !eq) {
				help = help ? help : 2;
				continue;
			}
			const opt_def *o = find_long(p->opts, name, len, e);
			if (!o)
				goto fail;
			const char *arg = NULL;
			if (o->type == OPT_FLAG) {
				if (eq) {
					lm_usage_err(e, "option '--%s' takes no argument", o->longname);
					goto fail;
				}
			} else if (eq) {
				arg = eq + 1;
			} else if (i + 1 < argc) {
				arg = argv[++i];
			} else {
				lm_usage_err(e, "option '--%s' needs an argument", o->longname);
				goto fail;
			}
			if (set_value(o, arg, e))
				goto fail;
			mark_seen(p, o, seen);
			continue;
		}
		for (const char *c = a + 1; *c; c++) {
			if (*c == 'h' && !find_short(p->opts, 'h')) {
				help = 1;
				continue;
			}
			const opt_def *o = find_short(p->opts, *c);
			if (!o) {
				lm_usage_err(e, "unknown option '-%c'", *c);
				goto fail;
			}
			if (o->type == OPT_FLAG) {
				set_value(o, NULL, e);
				mark_seen(p, o, seen);
				continue;
			}
			const char *arg = c[1] ? c + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!arg) {
				lm_usage_err(e, "option '-%c' needs an argument", *c);
				goto fail;
			}
			if (set_value(o, arg, e))
				goto fail;
			mark_seen(p, o, seen);
			break;
		}
	}
	ops[n] = NULL;
	*operands = ops;
	*n_operands = n;
	return help == 1 ? OPT_HELP : help == 2 ? OPT_VERSION : OPT_OK;
fail:
	free(ops);
	return -1;
}

static void print_default(const opt_def *o, FILE *fp)
{
	switch (o->type) {
	case OPT_INT:
		if (*(long long *)o->target)
			fprintf(fp, " (default %lld)", *(long long *)o->target);
		break;
	case OPT_SIZE:
		if (*(uint64_t *)o->target)
			fprintf(fp, " (default %llu)",
				(unsigned long long)*(uint64_t *)o->target);
		break;
	case OPT_DOUBLE:
		if (*(double *)o->target != 0)
			fprintf(fp, " (default %g)", *(double *)o->target);
		break;
	case OPT_STR:
	case OPT_CHOICE:
		if (*(const char **)o->target)
			fprintf(fp, " (default %s)", *(const char **)o->target);
		break;
	case OPT_FLAG:
	case OPT_STRLIST:
		break;
	}
}

void opt_help(const opt_prog *p, FILE *fp)
{
	fprintf(fp, "Usage: %s %s\n%s\n\nOptions:\n", lm_progname, p->usage, p->summary);
	for (const opt_def *o = p->opts; o->shortname || o->longname; o++) {
		char label[128];
		int w;
		if (o->shortname && o->longname)
			w = snprintf(label, sizeof label, "  -%c, --%s", o->shortname, o->longname);
		else if (o->shortname)
			w = snprintf(label, sizeof label, "  -%c", o->shortname);
		else
			w = snprintf(label, sizeof label, "      --%s", o->longname);
		if (o->type != OPT_FLAG && w > 0 && (size_t)w < sizeof label)
			snprintf(label + w, sizeof label - (size_t)w, " %s",
				 o->argname ? o->argname : "ARG");
		w = fprintf(fp, "%s", label);
		if (w >= HELP_COLUMN - 1)
			fprintf(fp, "\n%*s", HELP_COLUMN, "");
		else
			fprintf(fp, "%*s", HELP_COLUMN - w, "");
		fputs(o->help ? o->help : "", fp);
		if (o->type == OPT_CHOICE && o->choices) {
			fputs(" (", fp);
			for (const char *const *c = o->choices; *c; c++)
				fprintf(fp, "%s%s", c == o->choices ? "" : ", ", *c);
			fputs(")", fp);
		}
		/* A help text that states its own default keeps it. */
		if (!o->help || !strstr(o->help, "default"))
			print_default(o, fp);
		fputc('\n', fp);
	}
	fprintf(fp, "  -h, --help%*sshow this help and exit\n", HELP_COLUMN - 12, "");
	fprintf(fp, "      --version%*sprint the version (the git commit it was built from) and exit\n",
		HELP_COLUMN - 15, "");
	if (p->epilog) {
		size_t n = strlen(p->epilog);
		fprintf(fp, "\n%s%s", p->epilog, n && p->epilog[n - 1] == '\n' ? "" : "\n");
	}
}

int opt_given(const opt_def *opts, const unsigned char *seen, const char *longname)
{
	for (const opt_def *o = opts; o->shortname || o->longname; o++)
		if (o->longname && !strcmp(o->longname, longname))
			return seen[o - opts];
	return 0;
}

int opt_parse_or_exit(const opt_prog *p, int argc, char **argv, char ***operands)
{
	return opt_parse_or_exit_seen(p, argc, argv, operands, NULL);
}

int opt_parse_or_exit_seen(const opt_prog *p, int argc, char **argv, char ***operands,
			   unsigned char *seen)
{
	lm_err e;
	int n = 0;
	int rc = opt_parse_seen(p, argc, argv, operands, &n, seen, &e);
	if (rc == OPT_HELP) {
		opt_help(p, stdout);
		exit(EXIT_OK);
	}
	if (rc == OPT_VERSION) {
		printf("%s (lmpipe) %s\n", lm_progname, lmpipe_build());
		exit(EXIT_OK);
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n",
			lm_progname, e.msg, lm_progname);
		exit(e.code ? e.code : EXIT_USAGE);
	}
	return n;
}
