/* jsonl.c: the JSON Lines reader (see jsonl.h). */
#include "base/jsonl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void jsonl_init(jsonl_reader *r, FILE *fp, const char *name)
{
	memset(r, 0, sizeof *r);
	r->fp = fp;
	r->name = name;
	r->max_line = JSONL_LINE_MAX;
}

void jsonl_free(jsonl_reader *r)
{
	free(r->line);
	r->line = NULL;
	r->len = r->cap = 0;
}

int jsonl_read_line(jsonl_reader *r, lm_err *e)
{
	size_t n = 0, kept = 0, nul_at = SIZE_MAX;
	int c;
	while ((c = getc_unlocked(r->fp)) != EOF && c != '\n') {
		if (c == '\0' && nul_at == SIZE_MAX)
			nul_at = n;
		n++;
		if (n > r->max_line || nul_at != SIZE_MAX)
			continue; /* a bad line: read on to its end, keep nothing more */
		if (lm_grow((void **)&r->line, &r->cap, kept + 2, 1, e))
			return -1;
		r->line[kept++] = (char)c;
	}
	if (c == EOF && ferror(r->fp))
		return lm_seterr(e, "%s: read error:", r->name);
	if (c == EOF && n == 0)
		return JSONL_END;
	r->lineno++;
	r->len = 0;
	if (nul_at != SIZE_MAX)
		return lm_seterr(e, "%s:%lu: a NUL byte at column %zu (the input must be text)",
				 r->name, r->lineno, nul_at + 1), JSONL_BAD;
	if (n > r->max_line)
		return lm_seterr(e, "%s:%lu: a line longer than %zu bytes", r->name, r->lineno,
				 r->max_line), JSONL_BAD;
	if (kept && r->line[kept - 1] == '\r')
		kept--;
	if (lm_grow((void **)&r->line, &r->cap, kept + 1, 1, e))
		return -1;
	r->line[kept] = '\0';
	r->len = kept;
	return JSONL_OK;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

int jsonl_next(jsonl_reader *r, size_t flags, json_t **obj, lm_err *e)
{
	*obj = NULL;
	r->bad_json = 0;
	for (;;) {
		int rc = jsonl_read_line(r, e);
		if (rc != JSONL_OK)
			return rc;
		while (r->len && is_space(r->line[r->len - 1]))
			r->len--;
		r->line[r->len] = '\0';
		if (r->len)
			break;
	}
	json_t *o = json_loadb(r->line, r->len, flags, &r->err);
	if (!o) {
		r->bad_json = 1;
		return lm_seterr(e, "%s:%lu: bad JSON: %s (column %d)", r->name, r->lineno,
				 r->err.text, r->err.column), JSONL_BAD;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return lm_seterr(e, "%s:%lu: not a JSON object", r->name, r->lineno), JSONL_BAD;
	}
	*obj = o;
	return JSONL_OK;
}
