/* test_prompts.c: prompts from arguments, text lines and JSON Lines (bad
 * records named by line), and the JSON Lines output object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "gen/prompts.h"
#include "gen/rollout.h"

static FILE *mem(const char *s)
{
	return fmemopen((void *)s, strlen(s), "r");
}

static void test_text(void)
{
	FILE *fp = mem("first prompt\r\nsecond\n\nthird");
	prompt_reader r;
	prompt_rec p;
	lm_err e;
	prompt_reader_stream(&r, fp, "in.txt", 0);
	is_int(prompt_next(&r, &p, &e), PROMPT_OK, "text: a line is a prompt");
	is_str(p.text, "first prompt", "text: CR LF stripped");
	prompt_rec_free(&p);
	prompt_next(&r, &p, &e);
	is_int(p.line, 2, "text: line numbers count");
	prompt_rec_free(&p);
	is_int(prompt_next(&r, &p, &e), PROMPT_BAD, "text: an empty line is a bad record");
	is_str(e.msg, "in.txt:3: empty prompt", "text: the message names file and line");
	is_int(prompt_next(&r, &p, &e), PROMPT_OK, "text: reading goes on after a bad record");
	is_str(p.text, "third", "text: a last line without newline");
	prompt_rec_free(&p);
	is_int(prompt_next(&r, &p, &e), PROMPT_END, "text: end");
	prompt_reader_free(&r);
	fclose(fp);
}

static void test_jsonl(void)
{
	FILE *fp = mem("{\"prompt\": \"2+2=\", \"answer\": \"4\"}\n"
		       "\n"
		       "{\"prompt\": \"x\"\n"
		       "{\"answer\": 1}\n"
		       "{\"prompt\": 7}\n"
		       "{\"prompt\": \"\"}\n"
		       "[1, 2]\n"
		       "{\"prompt\": \"a\"} trailing\n"
		       "{\"prompt\": \"last\"}\n");
	prompt_reader r;
	prompt_rec p;
	lm_err e;
	prompt_reader_stream(&r, fp, "p.jsonl", 1);
	is_int(prompt_next(&r, &p, &e), PROMPT_OK, "jsonl: an object with a prompt");
	is_str(p.text, "2+2=", "jsonl: the prompt field");
	ok(p.obj && json_is_string(json_object_get(p.obj, "answer")), "jsonl: other fields kept");
	prompt_rec_free(&p);
	static const char *const want[] = {
		"p.jsonl:3: malformed JSON at column",
		"p.jsonl:4: no \"prompt\" field",
		"p.jsonl:5: \"prompt\" is not a string",
		"p.jsonl:6: empty prompt",
		"p.jsonl:7: not a JSON object",
		"p.jsonl:8: malformed JSON",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = prompt_next(&r, &p, &e);
		ok(rc == PROMPT_BAD && !strncmp(e.msg, want[i], strlen(want[i])),
		   "jsonl: bad record reported as '%s' (%s)", want[i], e.msg);
	}
	is_int(prompt_next(&r, &p, &e), PROMPT_OK, "jsonl: reading goes on after bad records");
	is_int(p.line, 9, "jsonl: blank lines are skipped but counted");
	prompt_rec_free(&p);
	is_int(prompt_next(&r, &p, &e), PROMPT_END, "jsonl: end");
	prompt_reader_free(&r);
	fclose(fp);
}

static void test_args(void)
{
	char *args[] = { "hello", "" };
	prompt_reader r;
	prompt_rec p;
	lm_err e;
	prompt_reader_args(&r, args, 2);
	is_int(prompt_next(&r, &p, &e), PROMPT_OK, "args: a prompt");
	prompt_rec_free(&p);
	ok(prompt_next(&r, &p, &e) == PROMPT_BAD && !strcmp(e.msg, "argument 2: empty prompt"),
	   "args: an empty argument is named (%s)", e.msg);
	is_int(prompt_next(&r, &p, &e), PROMPT_END, "args: end");
}

static void test_output(void)
{
	json_t *j = json_bytes("ok \xC3\xA9 \xFF bad \xE2\x82", 14);
	is_str(json_string_value(j), "ok \xC3\xA9 \xEF\xBF\xBD bad \xEF\xBF\xBD\xEF\xBF\xBD",
	       "invalid UTF-8 becomes U+FFFD, valid kept");
	json_decref(j);
	uint32_t pids[2] = { 5, 6 }, ids[3] = { 7, 8, 9 };
	double lp[3] = { -0.5, -1.25, -3.0 };
	uint8_t forced[3] = { 0, 1, 0 };
	gen_prompt gp = { pids, 2, "hi", 2, 3, NULL };
	gen_sample s = { &gp, 1, ids, lp, forced, 3, (uint8_t *)"abc", 3, "length", NULL };
	json_t *in = json_pack("{s:s, s:s, s:i}", "prompt", "hi", "answer", "4", "group", 99);
	lm_err e;
	json_t *o = rollout_json(in, &s, 3, &e);
	char *txt = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	is_str(txt, "{\"prompt\":\"hi\",\"answer\":\"4\",\"group\":3,\"completion\":\"abc\","
	       "\"completion_ids\":[7,8,9],\"logprobs\":[-0.5,-1.25,-3.0],\"prompt_ids\":[5,6],"
	       "\"sample\":1,\"finish_reason\":\"length\",\"forced\":[1]}",
	       "the output object: input fields, then the sample's");
	free(txt);
	json_decref(o);
	json_decref(in);
	forced[1] = 0;
	o = rollout_json(NULL, &s, 3, &e);
	ok(json_is_string(json_object_get(o, "prompt")) && !json_object_get(o, "forced"),
	   "a text prompt becomes the prompt field; no forced field when none was");
	json_decref(o);
}

int main(void)
{
	test_text();
	test_jsonl();
	test_args();
	test_output();
	return done_testing();
}
