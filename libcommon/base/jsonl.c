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

/* The next piece of a line, up to and with its newline, by fgets (which
 * returns as soon as a line has come, so a reader of a pipe sees each
 * line when it is written): *got bytes in piece, *newline when they end
 * the line.  fgets does not say how many bytes it stored, and a NUL byte
 * among them hides the count; the piece is filled with newlines first, so
 * the terminator fgets writes is its last NUL.  1, 0 at the end, -1 on a
 * read error. */
static int read_piece(jsonl_reader *r, char *piece, size_t *got, int *newline, lm_err *e)
{
	memset(piece, '\n', JSONL_PIECE);
	if (!fgets(piece, JSONL_PIECE, r->fp))
		return ferror(r->fp) ? lm_seterr(e, "%s: read error:", r->name) : 0;
	const char *end = memrchr(piece, '\0', JSONL_PIECE);
	*got = (size_t)(end - piece);
	*newline = *got && piece[*got - 1] == '\n';
	*got -= (size_t)*newline;
	return 1;
}

int jsonl_read_line(jsonl_reader *r, lm_err *e)
{
	char piece[JSONL_PIECE];
	size_t n = 0, kept = 0, nul_at = SIZE_MAX;
	int any = 0, newline = 0;
	while (!newline) {
		size_t seg = 0;
		int rc = read_piece(r, piece, &seg, &newline, e);
		if (rc < 0)
			return -1;
		if (rc == 0)
			break;
		any = 1;
		const char *z = nul_at == SIZE_MAX ? memchr(piece, '\0', seg) : NULL;
		if (z)
			nul_at = n + (size_t)(z - piece);
		/* a bad line is read on to its end, keeping nothing more */
		size_t keep = nul_at != SIZE_MAX || n >= r->max_line ? 0
			    : seg < r->max_line - n ? seg : r->max_line - n;
		if (keep) {
			if (lm_grow((void **)&r->line, &r->cap, kept + keep + 1, 1, e))
				return -1;
			memcpy(r->line + kept, piece, keep);
			kept += keep;
		}
		n += seg;
	}
	if (!any)
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
		return lm_seterr(e, "%s:%lu: bad JSON: %s (column %d)%s", r->name, r->lineno,
				 r->err.text, r->err.column, jsonl_bad_hint(r->line, r->len)), JSONL_BAD;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return lm_seterr(e, "%s:%lu: not a JSON object", r->name, r->lineno), JSONL_BAD;
	}
	*obj = o;
	return JSONL_OK;
}

const char *jsonl_bad_hint(const char *line, size_t len)
{
	static const char head[] = "=== prompt "; /* lm-sample's text output */
	if (len >= sizeof head - 1 && !memcmp(line, head, sizeof head - 1))
		return "; it is lm-sample's plain text: lm-sample --jsonl writes JSON Lines";
	return "";
}
