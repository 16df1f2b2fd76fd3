/* rl_update_tokens.c: the sequence store of rl-update
 * (rl_update_internal.h): a prompt and a response as token ids, each
 * string field of a record encoded with the tokenizer (a response with
 * end-of-text appended). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "base/grow.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

void seqs_free(seqs *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->s[i].ids);
		free(v->s[i].targets);
		free(v->s[i].group);
		free(v->s[i].old_logp);
		free(v->s[i].ref_tok);
		free(v->s[i].old_v);
		free(v->s[i].adv_tok);
		free(v->s[i].ret_tok);
	}
	free(v->s);
}

/* Append a sequence from prompt and response token ids. */
int seqs_add(seqs *v, const uint32_t *p, size_t np, const uint32_t *r, size_t nr,
	     unsigned long lineno, int ctx, const char *name, lm_err *e)
{
	size_t L = np + nr;
	if (np == 0)
		return lm_seterr(e, "%s:%lu: empty prompt", name, lineno);
	if (L > (size_t)ctx + 1)
		return lm_seterr(e, "%s:%lu: %zu tokens do not fit the model's context of %d",
				 name, lineno, L, ctx);
	if (lm_grow((void **)&v->s, &v->cap, v->n + 1, sizeof *v->s, e))
		return -1;
	seq *s = &v->s[v->n];
	memset(s, 0, sizeof *s);
	s->T = (int)L - 1;
	s->n_resp = (int)nr;
	s->lineno = lineno;
	s->ids = malloc((L ? L : 1) * sizeof *s->ids);
	s->targets = malloc((L ? L : 1) * sizeof *s->targets);
	if (!s->ids || !s->targets) {
		free(s->ids);
		free(s->targets);
		return lm_seterr(e, "out of memory");
	}
	for (size_t i = 0; i < L; i++) {
		uint32_t id = i < np ? p[i] : r[i - np];
		s->ids[i] = (int32_t)id;
		if (i > 0)
			s->targets[i - 1] = i >= np ? (int32_t)id : -1;
	}
	v->n++;
	return 0;
}

int encode_field(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
		 const char *name, unsigned long lineno, lm_err *e)
{
	json_t *s = json_object_get(o, key);
	if (!json_is_string(s))
		return lm_seterr(e, "%s:%lu: no string field '%s'", name, lineno, key);
	bpe_ids ids = { 0 };
	if (bpe_encode(v->w, (const uint8_t *)json_string_value(s), json_string_length(s), &ids, e) < 0)
		return lm_err_prefix(e, "%s:%lu", name, lineno);
	*out = ids.v;
	*n = ids.n;
	return 0;
}

/* A response encoded with end-of-text appended, so the model learns to stop. */
int encode_response_field(seqs *v, json_t *o, const char *key, uint32_t **out, size_t *n,
			  const char *name, unsigned long lineno, lm_err *e)
{
	if (encode_field(v, o, key, out, n, name, lineno, e))
		return -1;
	if (v->tok->eot == BPE_NO_TOKEN)
		return 0;
	uint32_t *grown = realloc(*out, (*n + 1) * sizeof **out);
	if (!grown)
		return lm_seterr(e, "out of memory");
	*out = grown;
	(*out)[(*n)++] = v->tok->eot;
	return 0;
}
