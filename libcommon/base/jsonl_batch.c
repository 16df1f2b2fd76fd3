/* jsonl_batch.c: JSON Lines records a batch at a time, the lines read in
 * order and parsed on threads (see jsonl.h). */
#include "base/jsonl.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void jsonl_batch_init(jsonl_batch *b)
{
	memset(b, 0, sizeof *b);
}

/* Release the objects of the last batch, on threads (a large batch's
 * frees take as long as a fifth of its parsing). */
static void release(jsonl_batch *b)
{
	long n = (long)b->n;
#pragma omp parallel for schedule(dynamic, 16) if (n > 16)
	for (long i = 0; i < n; i++)
		json_decref(b->obj[i]);
	b->n = 0;
}

void jsonl_batch_free(jsonl_batch *b)
{
	release(b);
	free(b->obj);
	free(b->lineno);
	free(b->text);
	free(b->off);
	free(b->len);
	free(b->err);
	memset(b, 0, sizeof *b);
}

static int grow(jsonl_batch *b, size_t need, lm_err *e)
{
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap;
	if (lm_grow((void **)&b->obj, &cap, need, sizeof *b->obj, e))
		return -1;
	void **arrays[] = { (void **)&b->lineno, (void **)&b->off, (void **)&b->len,
			    (void **)&b->err };
	size_t sizes[] = { sizeof *b->lineno, sizeof *b->off, sizeof *b->len, sizeof *b->err };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		void *p = realloc(*arrays[i], cap * sizes[i]);
		if (!p)
			return lm_seterr(e, "out of memory");
		*arrays[i] = p;
	}
	b->cap = cap;
	return 0;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The next lines that are not blank into b->text (as jsonl_next trims
 * them): what ended the reading (JSONL_OK: max lines). */
static int read_lines(jsonl_reader *r, jsonl_batch *b, size_t max, lm_err *e)
{
	size_t at = 0;
	while (b->n < max) {
		int rc = jsonl_read_line(r, e);
		if (rc != JSONL_OK)
			return rc;
		while (r->len && is_space(r->line[r->len - 1]))
			r->len--;
		if (!r->len)
			continue;
		if (grow(b, b->n + 1, e) ||
		    lm_grow((void **)&b->text, &b->text_cap, at + r->len + 1, 1, e))
			return -1;
		memcpy(b->text + at, r->line, r->len);
		b->text[at + r->len] = '\0';
		b->off[b->n] = at;
		b->len[b->n] = r->len;
		b->lineno[b->n] = r->lineno;
		b->obj[b->n++] = NULL;
		at += r->len + 1;
	}
	return JSONL_OK;
}

int jsonl_next_batch(jsonl_reader *r, size_t flags, jsonl_batch *b, size_t max, lm_err *e)
{
	release(b);
	int rc = read_lines(r, b, max ? max : 1, e);
	long n = (long)b->n;
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
	for (long i = 0; i < n; i++)
		b->obj[i] = json_loadb(b->text + b->off[i], b->len[i], flags, &b->err[i]);
	for (size_t i = 0; i < b->n; i++) {
		if (b->obj[i] && json_is_object(b->obj[i]))
			continue;
		/* the first bad line ends the batch, as it ends jsonl_next's reading */
		r->lineno = b->lineno[i];
		r->bad_json = !b->obj[i];
		if (r->bad_json) {
			r->err = b->err[i];
			lm_seterr(e, "%s:%lu: bad JSON: %s (column %d)%s", r->name, r->lineno,
				  r->err.text, r->err.column, jsonl_bad_hint(b->text + b->off[i], b->len[i]));
		} else {
			lm_seterr(e, "%s:%lu: not a JSON object", r->name, r->lineno);
		}
		for (size_t k = i; k < b->n; k++)
			json_decref(b->obj[k]);
		b->n = i;
		return JSONL_BAD;
	}
	return rc;
}
