/* test_json_skim.c: the JSON object skimmer (base/json_skim.h) against
 * jansson, its reference: every text the skimmer accepts, jansson must
 * accept as an object with the same members (the last of repeated keys),
 * the same values, string values decoded to the same bytes and arrays of
 * the same length, elements (json_skim_item) and compact text
 * (json_skim_dump).  Crafted cases at each edge that jansson draws (number
 * sizes, surrogates, UTF-8, control characters, depth, NUL in keys), texts
 * that must be skimmed (or the check would pass by declining everything),
 * and many random mutations of lm-sample records. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../tap.h"
#include "base/json_skim.h"

enum { MUTATIONS = 40000, MUTATE_MAX = 4, DEEP = JSON_SKIM_DEPTH + 1 };

static json_skim sk;

/* Why the skimmer's view of text differs from jansson's, or NULL. */
static const char *differs(const char *text, size_t len, int *skimmed)
{
	lm_err e;
	int got = json_skim_object(text, len, &sk, &e);
	*skimmed = got == 1;
	if (got < 0)
		return "out of memory";
	if (got == 0)
		return NULL;
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_ALLOW_NUL, &je);
	const char *why = NULL;
	if (!o || !json_is_object(o)) {
		why = "skimmed, but jansson refuses it";
		goto out;
	}
	size_t distinct = 0;
	for (size_t i = 0; i < sk.n; i++) {
		const json_member *m = &sk.m[i];
		int last = 1;
		for (size_t k = i + 1; k < sk.n; k++)
			if (sk.m[k].key_len == m->key_len && !memcmp(text + sk.m[k].key, text + m->key, m->key_len))
				last = 0;
		if (!last)
			continue;
		distinct++;
		json_t *v = json_object_getn(o, text + m->key, m->key_len);
		json_t *alone = json_loadb(text + m->val, m->val_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		if (!v || !alone || !json_equal(v, alone))
			why = "a member's value is not jansson's";
		else if (json_is_array(v) && json_array_size(v) != m->items)
			why = "an array's length is not jansson's";
		else if (!json_is_array(v) && m->items)
			why = "items counted for what is no array";
		if (!why) {
			char *mine = json_skim_dump(text + m->val, m->val_len);
			char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			if (!mine || !theirs || strcmp(mine, theirs))
				why = "written otherwise than json_dumps writes it";
			free(mine);
			free(theirs);
		}
		if (!why && json_is_array(v)) {
			size_t at = 0, el, el_len, k = 0;
			for (; !why && json_skim_item(text + m->val, m->val_len, &at, &el, &el_len); k++) {
				json_t *x = json_loadb(text + m->val + el, el_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
				if (!x || k >= json_array_size(v) || !json_equal(x, json_array_get(v, k)))
					why = "an array element is not jansson's";
				json_decref(x);
			}
			if (!why && k != json_array_size(v))
				why = "another number of array elements";
		}
		if (!why && json_is_string(v)) {
			char *s = NULL;
			size_t n = 0;
			if (json_skim_string(text + m->val, m->val_len, &s, &n, &e))
				why = "out of memory";
			else if (n != json_string_length(v) || memcmp(s, json_string_value(v), n) || s[n])
				why = "a string decodes to other bytes";
			free(s);
		}
		json_decref(alone);
		if (why)
			break;
	}
	if (!why && distinct != json_object_size(o))
		why = "another number of members";
	if (!why && json_skim_get(&sk, text, "\x01no such key"))
		why = "a key found that is not there";
out:
	json_decref(o);
	return why;
}

static void agree(const char *text, size_t len, const char *name)
{
	int skimmed;
	const char *why = differs(text, len, &skimmed);
	if (!ok(!why, "%s", name))
		diag("  %s: %.*s", why, (int)len, text);
}

static void skims(const char *text, const char *name)
{
	int skimmed;
	const char *why = differs(text, strlen(text), &skimmed);
	if (!ok(!why && skimmed, "skimmed: %s", name))
		diag("  %s", why ? why : "declined");
}

static void declines(const char *text, size_t len, const char *name)
{
	lm_err e;
	ok(json_skim_object(text, len, &sk, &e) == 0, "declined: %s", name);
}

#define DECLINES(t, name) declines(t, sizeof t - 1, name)

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

int main(void)
{
	static const char record[] =
		"{\"prompt\":\"User: 12+30?\\nAssistant: <think>\",\"answer\":\"42\","
		"\"completion\":\" 12+30=42 </think> <answer> 42 </answer>\\u0000\\\"\\\\\\/\\b\\f\\r\\t\\u00e9\\u20ac\","
		"\"completion_ids\":[1,2,3,0,9999],\"logprobs\":[-0.25,-1.5e-05,-3.0E+2,-0,0.0],"
		"\"prompt_ids\":[],\"group\":3,\"sample\":0,\"finish_reason\":\"stop\","
		"\"nested\":{\"a\":[true,false,null,{\"b\":[[]]}],\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\":1}}";
	skims(record, "an lm-sample record with every escape and nesting");
	skims(" \t{ \"a\" : 1 , \"b\":[ 1 , 2 ] }\r\n ", "white space jansson skips");
	skims("{}", "the empty object");
	skims("{\"a\":1,\"a\":\"x\",\"a\":[1,2,3]}", "repeated keys: the last counts");
	skims("{\"n\":123456789012345678,\"m\":-123456789012345678}", "18-digit integers");
	skims("{\"x\":1e99,\"y\":-0.5e-99,\"z\":123.456}", "reals within the bounds");
	skims("{\"s\":\"\\u0000\\u001f\\u00ff\\uffff\"}", "escapes of NUL, control and BMP characters");
	skims("{\"a\":[ \"x,]\\\"\" , [1,[2]] ,{\"k\":\"]\"}, -0 ,1.50e+01 ],\"z\":-0,\"e\":[ ]}",
	      "array elements holding commas, brackets and quotes; -0");
	{
		int skimmed;
		differs(record, sizeof record - 1, &skimmed);
		const json_member *m = json_skim_get(&sk, record, "completion_ids");
		ok(m && m->items == 5, "completion_ids: 5 items");
		ok(json_skim_get(&sk, record, "group") && !json_skim_get(&sk, record, "nope"),
		   "a key there is found, one not there is not");
	}

	/* where jansson refuses or may refuse, the skimmer leaves it to jansson */
	DECLINES("{\"n\":9223372036854775807}", "19-digit integer (fits, left to jansson)");
	DECLINES("{\"n\":9223372036854775808}", "an integer over json_int_t");
	DECLINES("{\"x\":1e309}", "a real that overflows");
	DECLINES("{\"x\":1e-400}", "a 3-digit exponent");
	DECLINES("{\"s\":\"\\ud83d\\ude00\"}", "a surrogate pair");
	DECLINES("{\"s\":\"\\ud83d\"}", "a lone high surrogate");
	DECLINES("{\"s\":\"\\udc00\"}", "a lone low surrogate");
	DECLINES("{\"k\\u0000\":1}", "a NUL in a key");
	DECLINES("{\"k\\n\":1}", "an escaped key");
	DECLINES("{\"o\":{\"k\\\"\":1}}", "an escaped key inside");
	DECLINES("{\"s\":\"\xc0\x80\"}", "overlong UTF-8");
	DECLINES("{\"s\":\"\xed\xa0\x80\"}", "a surrogate in UTF-8");
	DECLINES("{\"s\":\"\xf4\x90\x80\x80\"}", "beyond U+10FFFF");
	DECLINES("{\"s\":\"\xe2\x82\"}", "a truncated sequence");
	DECLINES("{\"s\":\"a\tb\"}", "a raw tab in a string");
	DECLINES("{\"s\":\"a\0b\"}", "a raw NUL in a string");
	DECLINES("{\"s\":\"\\x\"}", "an unknown escape");
	DECLINES("{\"s\":\"\\u12g4\"}", "a bad \\u escape");
	DECLINES("{\"a\":01}", "a leading zero");
	DECLINES("{\"a\":1.}", "no digit after the point");
	DECLINES("{\"a\":.5}", "no digit before the point");
	DECLINES("{\"a\":+1}", "a plus sign");
	DECLINES("{\"a\":1e}", "an empty exponent");
	DECLINES("{\"a\":-}", "a lone minus");
	DECLINES("{\"a\":tru}", "a cut literal");
	DECLINES("{\"a\":truex}", "a long literal");
	DECLINES("{\"a\":[1,]}", "a trailing comma in an array");
	DECLINES("{\"a\":1,}", "a trailing comma in an object");
	DECLINES("{\"a\" 1}", "no colon");
	DECLINES("{\"a\":1} x", "text after the object");
	DECLINES("{\"a\":1}{}", "two objects");
	DECLINES("[1,2]", "an array");
	DECLINES("\"s\"", "a string");
	DECLINES("", "nothing");
	DECLINES("{\"a\":1", "no closing brace");
	DECLINES("{\"a\":NaN}", "NaN");
	char deep[2 * DEEP + 16];
	size_t d = 0;
	d += (size_t)sprintf(deep, "{\"a\":");
	for (int i = 0; i < DEEP; i++)
		deep[d++] = '[';
	for (int i = 0; i < DEEP; i++)
		deep[d++] = ']';
	deep[d++] = '}';
	declines(deep, d, "nesting deeper than JSON_SKIM_DEPTH");

	/* random mutations of records: what is skimmed, jansson reads the same */
	static const char *const bases[] = {
		record,
		"{\"completion\":\"a\\u0000b <answer> 5 </answer>\",\"answer\":5,\"group\":{\"p\":[1,2]}}",
		"{ \"completion\" : \"The answer is 7.\",\t\"answer\":7 , \"x\":1.50, \"y\":[-1e5,2E-3,0] }",
	};
	static const char alphabet[] = "\"\\{}[],:. -+0123456789eEuDdcCfFtrnl\x80\xc3\xa9\xed\xf0\x01";
	size_t disagree = 0, skimmed_n = 0;
	char buf[sizeof record + MUTATE_MAX * 8];
	for (int t = 0; t < MUTATIONS; t++) {
		const char *b = bases[next() % (sizeof bases / sizeof *bases)];
		size_t n = strlen(b);
		memcpy(buf, b, n);
		int edits = 1 + (int)(next() % MUTATE_MAX);
		for (int k = 0; k < edits; k++) {
			size_t at = n ? next() % n : 0;
			char c = alphabet[next() % (sizeof alphabet - 1)];
			switch (next() % 3) {
			case 0:
				buf[at] = c;
				break;
			case 1: /* insert */
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = c;
				n++;
				break;
			default: /* delete */
				if (n) {
					memmove(buf + at, buf + at + 1, n - at - 1);
					n--;
				}
			}
		}
		int skimmed;
		const char *why = differs(buf, n, &skimmed);
		skimmed_n += skimmed;
		if (why && disagree++ < 5)
			diag("  %s: %.*s", why, (int)n, buf);
	}
	is_int(disagree, 0, "%d mutated records: the skimmer never accepts what jansson reads otherwise",
	       MUTATIONS);
	ok(skimmed_n > MUTATIONS / 10 && skimmed_n < MUTATIONS, "... %zu of them skimmed, the others declined",
	   skimmed_n);
	agree(record, sizeof record - 1, "the record itself");
	json_skim_free(&sk);
	return done_testing();
}
