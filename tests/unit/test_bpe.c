/* test_bpe.c: tokenizer files: lmpipe format and GPT-2 import/export round
 * trips, special tokens, and strict rejection of malformed files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "tok/bpe.h"

static char dir[] = "/tmp/lmpipe-bpe.XXXXXX";

static const char *path_of(const char *name)
{
	static char p[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

static void write_file(const char *name, const char *text, size_t len)
{
	FILE *fp = fopen(path_of(name), "wb");
	fwrite(text, 1, len, fp);
	fclose(fp);
}

/* A small byte-level tokenizer file: 256 bytes, then extra tokens and
 * merges given as text lines. */
static void write_small(const char *name, const char *extra_tokens, int n_extra, const char *specials,
			int n_spec, const char *merges, int n_merges)
{
	FILE *fp = fopen(path_of(name), "wb");
	fprintf(fp, "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens %d\nspecials %d\nmerges %d\n",
		256 + n_extra, n_spec, n_merges);
	for (int i = 0; i < 256; i++)
		fprintf(fp, "t %d \"\\x%02x\"\n", i, i);
	fputs(extra_tokens, fp);
	fputs(specials, fp);
	fputs(merges, fp);
	fputs("end\n", fp);
	fclose(fp);
}

static int same(const bpe_tokenizer *a, const bpe_tokenizer *b)
{
	if (a->n_vocab != b->n_vocab || a->n_merges != b->n_merges || a->n_special != b->n_special ||
	    a->eot != b->eot || memcmp(a->byte_id, b->byte_id, sizeof a->byte_id))
		return 0;
	for (uint32_t i = 0; i < a->n_vocab; i++)
		if (bpe_token_len(a, i) != bpe_token_len(b, i) ||
		    memcmp(bpe_token_bytes(a, i), bpe_token_bytes(b, i), bpe_token_len(a, i)))
			return 0;
	return !memcmp(a->merges, b->merges, a->n_merges * sizeof *a->merges) &&
	       !memcmp(a->special, b->special, a->n_special * sizeof *a->special);
}

static void expect_error(int rc, const lm_err *e, const char *want, const char *name)
{
	if (!ok(rc == -1 && strstr(e->msg, want) != NULL, "%s rejected", name))
		diag("  rc %d, message '%s', want '%s'", rc, rc ? e->msg : "", want);
}

static void test_gpt2(const char *data)
{
	char vocab[1024], merges[1024];
	bpe_tokenizer t, u;
	lm_err e;
	snprintf(vocab, sizeof vocab, "%s/cs336-a1/fixtures/gpt2_vocab.json", data);
	snprintf(merges, sizeof merges, "%s/cs336-a1/fixtures/gpt2_merges.txt", data);
	if (!ok(bpe_load_gpt2(&t, vocab, merges, &e) == 0, "load GPT-2 fixtures")) {
		diag("%s", e.msg);
		return;
	}
	is_int(t.n_vocab, 50257, "GPT-2 vocabulary size");
	is_int(t.n_merges, 50000, "GPT-2 merges");
	is_int(t.eot, 50256, "<|endoftext|> is 50256");
	is_int(t.n_special, 1, "one special token");
	is_int(t.byte_id['!'], 0, "byte '!' is id 0");
	is_int(t.byte_id[' '], 220, "byte ' ' is id 220");
	is_int(t.merges[0].result, 256, "first merge makes id 256");
	ok(bpe_token_len(&t, 256) == 2 && !memcmp(bpe_token_bytes(&t, 256), " t", 2), "id 256 is \" t\"");

	is_int(bpe_save(&t, path_of("gpt2.tok"), &e), 0, "save as lmpipe tokenizer");
	ok(bpe_load(&u, path_of("gpt2.tok"), &e) == 0 && same(&t, &u), "lmpipe file round trip");
	bpe_free(&u);
	is_int(bpe_save_gpt2(&t, dir, &e), 0, "export GPT-2 files");
	ok(bpe_load_gpt2(&u, path_of("vocab.json"), path_of("merges.txt"), &e) == 0 && same(&t, &u),
	   "GPT-2 export round trip");
	bpe_free(&u);
	uint32_t id;
	is_int(bpe_add_special(&t, "<|endoftext|>", 13, &id, &e), 0, "add an existing special");
	is_int(id, 50256, "existing special keeps its id");
	is_int(bpe_add_special(&t, "<|endoftext|><|endoftext|>", 26, &id, &e), 0, "add a new special");
	is_int(id, 50257, "new special appended");
	expect_error(bpe_add_special(&t, "the", 3, &id, &e), &e, "already a regular token", "special = regular");
	bpe_free(&t);
}

static void test_small(void)
{
	bpe_tokenizer t, u;
	lm_err e;
	const char *tok = "t 256 \"ab\"\nt 257 \"abc\"\nt 258 \"\\\"\\\\\\n\\t\\r\\x00\xc3\xa9\\xff\"\n"
			  "t 259 \"<|endoftext|>\"\n";
	write_small("small.tok", tok, 4, "s 259\n", 1, "m \"a\" \"b\"\nm \"ab\" \"c\"\n", 2);
	if (!ok(bpe_load(&t, path_of("small.tok"), &e) == 0, "load a small tokenizer")) {
		diag("%s", e.msg);
		return;
	}
	is_int(t.eot, 259, "end-of-text found");
	is_int(t.merges[1].result, 257, "merge result by bytes");
	ok(bpe_token_len(&t, 258) == 9 && !memcmp(bpe_token_bytes(&t, 258), "\"\\\n\t\r\0\xc3\xa9\xff", 9),
	   "escapes decode exactly");
	is_int(bpe_save(&t, path_of("small2.tok"), &e), 0, "save");
	ok(bpe_load(&u, path_of("small2.tok"), &e) == 0 && same(&t, &u), "save/load round trip");
	bpe_free(&u);
	is_int(bpe_save_gpt2(&t, dir, &e), 0, "export arbitrary bytes as GPT-2 files");
	ok(bpe_load_gpt2(&u, path_of("vocab.json"), path_of("merges.txt"), &e) == 0 && same(&t, &u),
	   "GPT-2 round trip of arbitrary bytes");
	bpe_free(&u);
	uint32_t id;
	bpe_tokenizer empty = { .eot = BPE_NO_TOKEN };
	is_int(bpe_add_special(&empty, "<|x|>", 5, &id, &e), 0, "add a special to an empty tokenizer");
	is_int(id, 0, "it gets id 0");
	expect_error(bpe_add_special(&empty, "", 0, &id, &e), &e, "empty", "empty special");
	bpe_free(&empty);
	bpe_free(&t);
}

static void test_bad(void)
{
	bpe_tokenizer t;
	lm_err e;
	int rc;
	write_small("b1.tok", "t 256 \"ab\"\n", 1, "", 0, "m \"a\" \"b\"\nm \"a\" \"zz\"\n", 2);
	expect_error(bpe_load(&t, path_of("b1.tok"), &e), &e, "b1.tok:264: merge \"a\" \"zz\" uses a token",
		     "merge of an unknown token");
	write_small("b2.tok", "t 256 \"ab\"\n", 1, "", 0, "m \"a\" \"b\"\nm \"a\" \"b\"\n", 2);
	expect_error(bpe_load(&t, path_of("b2.tok"), &e), &e, "b2.tok:264: duplicate merge", "duplicate merge");
	write_small("b3.tok", "", 0, "", 0, "m \"a\" \"b\"\n", 1);
	expect_error(bpe_load(&t, path_of("b3.tok"), &e), &e, "b3.tok:262: merge \"a\" \"b\": the joined",
		     "merge result missing");
	write_small("b4.tok", "t 256 \"a\"\n", 1, "", 0, "", 0);
	expect_error(bpe_load(&t, path_of("b4.tok"), &e), &e, "b4.tok:262: token \"a\" appears twice",
		     "duplicate token");
	write_small("b5.tok", "t 256 \"\\q\"\n", 1, "", 0, "", 0);
	expect_error(bpe_load(&t, path_of("b5.tok"), &e), &e, "b5.tok:262: unknown escape", "bad escape");
	write_file("b6.tok", "lmpipe-tokenizer 2\n", 19);
	expect_error(bpe_load(&t, path_of("b6.tok"), &e), &e, "b6.tok:1: unknown tokenizer file version",
		     "unknown version");
	write_small("b7.tok", "", 0, "", 0, "", 0);
	FILE *fp = fopen(path_of("b7.tok"), "r+b");
	ftruncate(fileno(fp), 2000);
	fclose(fp);
	expect_error(bpe_load(&t, path_of("b7.tok"), &e), &e, "b7.tok:", "truncated file");
	write_small("b8.tok", "", 0, "", 0, "", 0);
	fp = fopen(path_of("b8.tok"), "r+b");
	ftruncate(fileno(fp), 68);   /* right after the header lines */
	fclose(fp);
	expect_error(bpe_load(&t, path_of("b8.tok"), &e), &e, "b8.tok:6: truncated: expected a token line",
		     "truncated file (2)");
	write_file("b9.tok", "hello\n", 6);
	expect_error(bpe_load(&t, path_of("b9.tok"), &e), &e, "b9.tok:1: not an lmpipe tokenizer",
		     "not a tokenizer");
	expect_error(bpe_load(&t, path_of("missing.tok"), &e), &e, "missing.tok", "missing file");
	write_file("v1.json", "{\"a\": 0, \"b\": ", 14);
	write_file("m1.txt", "a b\n", 4);
	expect_error(bpe_load_gpt2(&t, path_of("v1.json"), path_of("m1.txt"), &e), &e, "v1.json:1:", "bad JSON");
	write_file("v2.json", "{\"a\": 0, \"b\": 0}", 16);
	expect_error(bpe_load_gpt2(&t, path_of("v2.json"), path_of("m1.txt"), &e), &e, "v2.json: ids must be",
		     "repeated id");
	write_file("v3.json", "[1, 2]", 6);
	expect_error(bpe_load_gpt2(&t, path_of("v3.json"), path_of("m1.txt"), &e), &e, "v3.json: not a JSON",
		     "JSON not an object");
	write_file("v4.json", "{\"a\": 0, \"\xe4\xb8\xad\": 1}", 18);
	expect_error(bpe_load_gpt2(&t, path_of("v4.json"), path_of("m1.txt"), &e), &e, "U+4E2D",
		     "character outside the byte alphabet");
	write_file("v5.json", "{\"a\": 0, \"b\": 1, \"ab\": 2}", 25);
	write_file("m5.txt", "#version: 0.2\na b\n\nskipped line here\na c\n", 41);
	rc = bpe_load_gpt2(&t, path_of("v5.json"), path_of("m5.txt"), &e);
	expect_error(rc, &e, "m5.txt:5: merge \"a\" \"c\" uses a token", "GPT-2 merge of an unknown token");
	write_file("m6.txt", "a b\na  b\n", 9);
	rc = bpe_load_gpt2(&t, path_of("v5.json"), path_of("m6.txt"), &e);
	expect_error(rc, &e, "v5.json: no token for the byte 0x00", "GPT-2 vocabulary without all bytes");
}

int main(void)
{
	const char *data = tap_data_dir();
	ok(mkdtemp(dir) != NULL, "scratch directory");
	test_small();
	test_bad();
	if (data)
		test_gpt2(data);
	else
		diag("no shared data: GPT-2 fixture tests skipped");
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	system(cmd);
	return done_testing();
}
