/* json_skim.c: fuzz the JSON object skimmer (base/json_skim.h) against
 * jansson: each line of the input that the skimmer accepts must be an
 * object for jansson with the same members, values, decoded strings and
 * array lengths; a disagreement aborts. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_skim.h"
#include "fuzz.h"

/* Is m the last member of its key (the one jansson keeps)? */
static int last(const char *t, const json_skim *s, size_t i)
{
	for (size_t k = i + 1; k < s->n; k++)
		if (s->m[k].key_len == s->m[i].key_len && !memcmp(t + s->m[k].key, t + s->m[i].key, s->m[i].key_len))
			return 0;
	return 1;
}

static int same(const char *t, const json_skim *s, json_t *o)
{
	size_t distinct = 0;
	for (size_t i = 0; i < s->n; i++) {
		const json_member *m = &s->m[i];
		if (!last(t, s, i))
			continue;
		distinct++;
		json_t *v = json_object_getn(o, t + m->key, m->key_len);
		json_t *alone = json_loadb(t + m->val, m->val_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		int eq = v && alone && json_equal(v, alone) &&
			 (json_is_array(v) ? json_array_size(v) == m->items : m->items == 0);
		json_decref(alone);
		if (eq && json_is_string(v)) {
			char *d = NULL;
			size_t n = 0;
			lm_err e;
			if (json_skim_string(t + m->val, m->val_len, &d, &n, &e) == 0)
				eq = n == json_string_length(v) && !memcmp(d, json_string_value(v), n);
			free(d);
		}
		if (!eq)
			return 0;
	}
	return distinct == json_object_size(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	json_skim s = { 0 };
	while (p <= end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		lm_err e;
		if (json_skim_object(p, len, &s, &e) == 1) {
			json_t *o = json_loadb(p, len, JSON_ALLOW_NUL, NULL);
			if (!o || !json_is_object(o) || !same(p, &s, o))
				abort();
			json_decref(o);
		}
		p += len + 1;
	}
	json_skim_free(&s);
	return 0;
}
