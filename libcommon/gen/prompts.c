/* prompts.c: prompts from arguments, text lines or JSON Lines (see
 * prompts.h). */
#define _POSIX_C_SOURCE 200809L
#include "gen/prompts.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

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
}

void prompt_reader_free(prompt_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
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

static int is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

static int parse_json(prompt_reader *r, prompt_rec *rec, size_t n, lm_err *e)
{
	json_error_t je;
	json_t *obj = json_loadb(r->buf, n, JSON_ALLOW_NUL, &je);
	if (!obj) {
		lm_seterr(e, "%s:%llu: malformed JSON at column %d: %s", r->name,
			  (unsigned long long)r->line, je.column, je.text);
		return PROMPT_BAD;
	}
	json_t *p = json_object_get(obj, "prompt");
	const char *why = !json_is_object(obj) ? "not a JSON object"
		: !p ? "no \"prompt\" field"
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
	for (;;) {
		ssize_t got = getline(&r->buf, &r->cap, r->fp);
		if (got < 0)
			return ferror(r->fp) ? lm_seterr(e, "%s: read error:", r->name) : PROMPT_END;
		r->line++;
		size_t n = (size_t)got;
		if (n && r->buf[n - 1] == '\n')
			n--;
		if (n && r->buf[n - 1] == '\r')
			n--;
		rec->line = r->line;
		if (r->jsonl) {
			if (is_blank(r->buf, n))
				continue;
			return parse_json(r, rec, n, e);
		}
		if (!n) {
			lm_seterr(e, "%s:%llu: empty prompt", r->name, (unsigned long long)r->line);
			return PROMPT_BAD;
		}
		return set_text(rec, r->buf, n, e) < 0 ? -1 : PROMPT_OK;
	}
}
