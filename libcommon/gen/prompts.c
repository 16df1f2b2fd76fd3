/* prompts.c: prompts from arguments, text lines or JSON Lines (see
 * prompts.h). */
#define _POSIX_C_SOURCE 200809L
#include "gen/prompts.h"

#include <stdlib.h>
#include <string.h>

void prompt_reader_args(prompt_reader *r, char **args, int n_args)
{
	memset(r, 0, sizeof *r);
	r->args = args;
	r->n_args = n_args;
	r->name = "<arguments>";
}

void prompt_reader_stream(prompt_reader *r, FILE *fp, const char *name, int jsonl)
{
	memset(r, 0, sizeof *r);
	r->fp = fp;
	r->name = name;
	r->jsonl = jsonl;
	jsonl_init(&r->lines, fp, name);
}

void prompt_reader_free(prompt_reader *r)
{
	jsonl_free(&r->lines);
}

void prompt_rec_free(prompt_rec *rec)
{
	free(rec->text);
	json_decref(rec->obj);
	memset(rec, 0, sizeof *rec);
}

static int set_text(prompt_rec *rec, const char *s, size_t len, lm_err *e)
{
	rec->text = malloc(len + 1);
	if (!rec->text)
		return lm_seterr(e, "prompt of %zu bytes:", len);
	memcpy(rec->text, s, len);
	rec->text[len] = '\0';
	rec->len = len;
	return 0;
}

/* A result of base/jsonl.h's reader as prompt_next's, noting the line. */
static int line_result(prompt_reader *r, prompt_rec *rec, int rc)
{
	r->line = r->lines.lineno;
	if (rc != JSONL_END)
		rec->line = r->line;
	return rc == JSONL_END ? PROMPT_END : rc == JSONL_OK ? PROMPT_OK
		: rc == JSONL_BAD ? PROMPT_BAD : -1;
}

/* The "prompt" of a JSON Lines record, keeping the object. */
static int parse_json(prompt_reader *r, prompt_rec *rec, lm_err *e)
{
	json_t *obj;
	int rc = line_result(r, rec, jsonl_next(&r->lines, JSON_ALLOW_NUL, &obj, e));
	if (rc == PROMPT_BAD && r->lines.bad_json) /* lm-sample's wording since it began */
		lm_seterr(e, "%s:%llu: malformed JSON at column %d: %s", r->name,
			  (unsigned long long)r->line, r->lines.err.column, r->lines.err.text);
	if (rc != PROMPT_OK)
		return rc;
	json_t *p = json_object_get(obj, "prompt");
	const char *why = !p ? "no \"prompt\" field"
		: !json_is_string(p) ? "\"prompt\" is not a string"
		: !json_string_length(p) ? "empty prompt" : NULL;
	if (why) {
		json_decref(obj);
		lm_seterr(e, "%s:%llu: %s", r->name, (unsigned long long)r->line, why);
		return PROMPT_BAD;
	}
	if (set_text(rec, json_string_value(p), json_string_length(p), e) < 0) {
		json_decref(obj);
		return -1;
	}
	rec->obj = obj;
	return PROMPT_OK;
}

int prompt_next(prompt_reader *r, prompt_rec *rec, lm_err *e)
{
	memset(rec, 0, sizeof *rec);
	if (!r->fp) {
		if (r->next_arg >= r->n_args)
			return PROMPT_END;
		const char *a = r->args[r->next_arg++];
		if (!*a) {
			lm_seterr(e, "argument %d: empty prompt", r->next_arg);
			return PROMPT_BAD;
		}
		return set_text(rec, a, strlen(a), e) < 0 ? -1 : PROMPT_OK;
	}
	if (r->jsonl)
		return parse_json(r, rec, e);
	int rc = line_result(r, rec, jsonl_read_line(&r->lines, e));
	if (rc != PROMPT_OK)
		return rc;
	if (!r->lines.len) {
		lm_seterr(e, "%s:%llu: empty prompt", r->name, (unsigned long long)r->line);
		return PROMPT_BAD;
	}
	return set_text(rec, r->lines.line, r->lines.len, e) < 0 ? -1 : PROMPT_OK;
}
