/* rollout.c: one JSON object per generated sample (see rollout.h). */
#include "gen/rollout.h"

#include <stdlib.h>
#include <string.h>

/* Significant digits of the log-probabilities: more than float holds. */
enum { LOGPROB_DIGITS = 9 };

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Length of the valid UTF-8 sequence at s[0 .. n), or 0 if invalid. */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	unsigned cp = c & (0x7F >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

json_t *json_bytes(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char *out = malloc(3 * n + 1); /* each bad byte becomes 3 */
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_valid(u + i, n - i);
		if (k) {
			memcpy(out + o, s + i, k);
			o += k;
			i += k;
		} else {
			memcpy(out + o, REPLACEMENT, 3);
			o += 3;
			i++;
		}
	}
	json_t *j = json_stringn(out, o);
	free(out);
	return j;
}

static json_t *id_array(const uint32_t *ids, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_integer(ids[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

json_t *rollout_json(const json_t *input, const gen_sample *s, uint64_t group, lm_err *e)
{
	json_t *o = input ? json_deep_copy(input) : json_object();
	json_t *lp = json_array(), *forced = NULL;
	int bad = !o || !lp;
	if (!input && o)
		bad |= json_object_set_new(o, "prompt", json_bytes(s->prompt->text, s->prompt->len));
	for (size_t i = 0; !bad && i < s->n; i++) {
		bad |= json_array_append_new(lp, json_real(s->logprobs[i]));
		if (s->forced[i]) {
			if (!forced)
				forced = json_array();
			bad |= !forced || json_array_append_new(forced, json_integer((json_int_t)i));
		}
	}
	if (!bad) {
		bad |= json_object_set_new(o, "completion", json_bytes((const char *)s->text, s->len));
		bad |= json_object_set_new(o, "completion_ids", id_array(s->ids, s->n));
		bad |= json_object_set(o, "logprobs", lp);
		bad |= json_object_set_new(o, "prompt_ids", id_array(s->prompt->ids, s->prompt->n_ids));
		bad |= json_object_set_new(o, "group", json_integer((json_int_t)group));
		bad |= json_object_set_new(o, "sample", json_integer(s->index));
		bad |= json_object_set_new(o, "finish_reason", json_string(s->finish));
		if (forced)
			bad |= json_object_set(o, "forced", forced);
		else
			json_object_del(o, "forced"); /* an input field of that name */
	}
	json_decref(lp);
	json_decref(forced);
	if (bad) {
		json_decref(o);
		lm_seterr(e, "building the output object: out of memory");
		return NULL;
	}
	return o;
}

int rollout_write(FILE *fp, const json_t *obj, const char *name, lm_err *e)
{
	size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(LOGPROB_DIGITS);
	if (json_dumpf(obj, fp, flags) < 0 || fputc('\n', fp) == EOF)
		return lm_seterr(e, "%s: write error:", name);
	return 0;
}
