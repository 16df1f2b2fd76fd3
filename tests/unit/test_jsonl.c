/* test_jsonl.c: the JSON Lines reader (base/jsonl.h) and the growable
 * array (base/grow.h): line numbers, blank lines, CR LF, a missing final
 * newline, NUL bytes and over-long lines refused with the reader left at
 * the next line, lines across the pieces it reads, a pipe's lines as they
 * come, malformed JSON and non-objects; and the batched reader
 * (jsonl_next_batch): the same records in the same order with the same
 * line numbers across batches, and the first problem in line order
 * reported with the records before it (a bad line after a NUL byte's line
 * is not the one named; bad JSON before it is). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "base/grow.h"
#include "base/jsonl.h"

/* A reader over the n bytes of s. */
static FILE *over(const char *s, size_t n)
{
	FILE *fp = tmpfile();
	if (fp) {
		fwrite(s, 1, n, fp);
		rewind(fp);
	}
	return fp;
}

static void test_lines(void)
{
	static const char text[] = "{\"a\":1}\n\n  \t\r\n{\"a\":2} \t\r\n{\"a\":3}";
	FILE *fp = over(text, sizeof text - 1);
	jsonl_reader r;
	jsonl_init(&r, fp, "t.jsonl");
	lm_err e = { 0 };
	json_t *o;
	long want[] = { 1, 2, 3 };
	unsigned long line[] = { 1, 4, 5 };
	for (int i = 0; i < 3; i++) {
		int rc = jsonl_next(&r, 0, &o, &e);
		is_int(rc, JSONL_OK, "object %d read", i + 1);
		if (rc != JSONL_OK)
			break;
		is_int(json_integer_value(json_object_get(o, "a")), want[i], "object %d's value", i + 1);
		is_int(r.lineno, line[i], "object %d: its line number, blank lines counted", i + 1);
		ok(r.line[r.len] == '\0' && r.line[r.len - 1] == '}', "object %d: trailing white space removed",
		   i + 1);
		json_decref(o);
	}
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_END, "then the end (no final newline needed)");
	ok(o == NULL, "no object at the end");
	jsonl_free(&r);
	fclose(fp);
}

static void test_raw_lines(void)
{
	static const char text[] = "a b \r\n\nc\rd\n";
	FILE *fp = over(text, sizeof text - 1);
	jsonl_reader r;
	jsonl_init(&r, fp, "t.txt");
	lm_err e = { 0 };
	is_int(jsonl_read_line(&r, &e), JSONL_OK, "raw line 1");
	is_str(r.line, "a b ", "its CR LF removed, its spaces kept");
	is_int(jsonl_read_line(&r, &e), JSONL_OK, "raw line 2");
	is_int(r.len, 0, "an empty line is a line");
	is_int(jsonl_read_line(&r, &e), JSONL_OK, "raw line 3");
	is_str(r.line, "c\rd", "a CR inside a line is kept");
	is_int(jsonl_read_line(&r, &e), JSONL_END, "the end");
	jsonl_free(&r);
	fclose(fp);
}

static void test_nul(void)
{
	static const char text[] = "{\"a\":1}\n{\"a\":\"x\0y\"}\n{\"a\":2}\0\n{\"a\":3}\n";
	FILE *fp = over(text, sizeof text - 1);
	jsonl_reader r;
	jsonl_init(&r, fp, "n.jsonl");
	lm_err e = { 0 };
	json_t *o;
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "the line before");
	json_decref(o);
	is_int(jsonl_next(&r, JSON_ALLOW_NUL, &o, &e), JSONL_BAD, "a NUL byte inside a string: a bad line");
	is_str(e.msg, "n.jsonl:2: a NUL byte at column 8 (the input must be text)", "... its file, line, column");
	ok(o == NULL && !r.bad_json, "... no object, and not a JSON error");
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_BAD, "a trailing NUL byte: a bad line, not white space");
	is_str(e.msg, "n.jsonl:3: a NUL byte at column 8 (the input must be text)", "... its file, line, column");
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "the reader goes on at the next line");
	is_int(json_integer_value(json_object_get(o, "a")), 3, "... which is whole");
	is_int(r.lineno, 4, "... and numbered 4");
	json_decref(o);
	jsonl_free(&r);
	fclose(fp);
}

static void test_long_line(void)
{
	enum { MAX = 16, LONG = 1000 };
	char text[LONG + 32];
	memset(text, 'x', LONG);
	int n = LONG + snprintf(text + LONG, sizeof text - LONG, "\n{\"a\":1}\n");
	FILE *fp = over(text, (size_t)n);
	jsonl_reader r;
	jsonl_init(&r, fp, "l.jsonl");
	r.max_line = MAX;
	lm_err e = { 0 };
	json_t *o;
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_BAD, "a line over max_line: a bad line");
	is_str(e.msg, "l.jsonl:1: a line longer than 16 bytes", "... named");
	ok(r.cap <= 2 * (MAX + 2), "... holding no more than about max_line bytes (capacity %zu)", r.cap);
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "the next line is read");
	is_int(r.lineno, 2, "... as line 2");
	json_decref(o);
	jsonl_free(&r);
	fclose(fp);
	ok(JSONL_LINE_MAX >= ((size_t)1 << 20), "the default bound is far above any record");
}

/* Lines across the reader's pieces: a long line whole, a NUL byte pieces
 * into a line found, the line after each read from where it starts. */
static void test_pieces(void)
{
	size_t n1 = (size_t)JSONL_PIECE + 1000, n2 = 3 * (size_t)JSONL_PIECE;
	size_t total = n1 + 1 + n2 + 1 + 8;
	char *text = malloc(total);
	for (size_t i = 0; i < n1; i++)
		text[i] = (char)('a' + i % 26);
	text[n1] = '\n';
	memset(text + n1 + 1, 'x', n2);
	text[n1 + 1 + 2 * JSONL_PIECE + 5] = '\0';
	text[n1 + 1 + n2] = '\n';
	memcpy(text + n1 + 1 + n2 + 1, "{\"a\":7}\n", 8);
	FILE *fp = over(text, total);
	jsonl_reader r;
	jsonl_init(&r, fp, "c.jsonl");
	lm_err e = { 0 };
	int whole = jsonl_read_line(&r, &e) == JSONL_OK && r.len == n1;
	for (size_t i = 0; whole && i < n1; i++)
		whole = r.line[i] == (char)('a' + i % 26);
	ok(whole, "a line longer than a piece comes whole (%zu bytes)", r.len);
	is_int(jsonl_read_line(&r, &e), JSONL_BAD, "a NUL byte two pieces into a line: found");
	char buf[96];
	snprintf(buf, sizeof buf, "c.jsonl:2: a NUL byte at column %zu (the input must be text)",
		 2 * (size_t)JSONL_PIECE + 6);
	const char *want = buf;
	is_str(e.msg, want, "... at its column");
	json_t *o;
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "the next line starts where it should");
	is_int(json_integer_value(json_object_get(o, "a")), 7, "... and is whole");
	json_decref(o);
	is_int(jsonl_read_line(&r, &e), JSONL_END, "then the end");
	jsonl_free(&r);
	fclose(fp);
	free(text);
}

/* A line from a pipe is read as soon as it is written: the writer sends
 * the second line only after the reader has acknowledged the first (an
 * alarm ends the test if the reader waited for more). */
static void test_pipe(void)
{
	int data[2], ack[2];
	if (pipe(data) || pipe(ack)) {
		ok(0, "pipes");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(data[0]);
		close(ack[1]);
		if (write(data[1], "{\"a\":1}\n", 8) != 8 || read(ack[0], &c, 1) != 1 ||
		    write(data[1], "{\"a\":2}\n", 8) != 8)
			_exit(1);
		_exit(0);
	}
	close(data[1]);
	close(ack[0]);
	alarm(10);
	FILE *fp = fdopen(data[0], "r");
	jsonl_reader r;
	jsonl_init(&r, fp, "pipe");
	lm_err e = { 0 };
	json_t *o;
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "a pipe's first line, before the writer goes on");
	json_decref(o);
	ok(write(ack[1], "k", 1) == 1, "acknowledged");
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "then its second");
	json_decref(o);
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_END, "then the end");
	alarm(0);
	int st;
	waitpid(pid, &st, 0);
	jsonl_free(&r);
	fclose(fp);
	close(ack[1]);
}

static void test_bad_json(void)
{
	static const char text[] = "{\"a\":\n[1]\n{\"a\":1}\n";
	FILE *fp = over(text, sizeof text - 1);
	jsonl_reader r;
	jsonl_init(&r, fp, "b.jsonl");
	lm_err e = { 0 };
	json_t *o;
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_BAD, "malformed JSON: a bad line");
	ok(!strncmp(e.msg, "b.jsonl:1: bad JSON: ", 21) && strstr(e.msg, "(column "), "... named: %s", e.msg);
	ok(r.bad_json && r.err.column > 0, "... with jansson's description kept");
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_BAD, "an array: a bad line");
	is_str(e.msg, "b.jsonl:2: not a JSON object", "... named");
	ok(!r.bad_json, "... not malformed");
	is_int(jsonl_next(&r, 0, &o, &e), JSONL_OK, "the object after");
	json_decref(o);
	jsonl_free(&r);
	fclose(fp);
}

/* Every record of text through jsonl_next_batch, max a batch: their "a"
 * values in order into got (and lines), the count into *n; the final
 * return code. */
static int batch_all(const char *text, size_t max, long *got, unsigned long *lines, size_t *n,
		     lm_err *e)
{
	FILE *fp = over(text, strlen(text));
	jsonl_reader r;
	jsonl_batch b;
	jsonl_init(&r, fp, "b.jsonl");
	jsonl_batch_init(&b);
	int rc;
	*n = 0;
	do {
		rc = jsonl_next_batch(&r, 0, &b, max, e);
		for (size_t i = 0; i < b.n; i++, ++*n) {
			got[*n] = (long)json_integer_value(json_object_get(b.obj[i], "a"));
			lines[*n] = b.lineno[i];
		}
	} while (rc == JSONL_OK);
	jsonl_batch_free(&b);
	jsonl_free(&r);
	fclose(fp);
	return rc;
}

static void test_batch(void)
{
	enum { N = 700 };
	static char text[N * 16];
	static long got[N];
	static unsigned long lines[N];
	size_t at = 0, n;
	for (int i = 0; i < N; i++)
		at += (size_t)sprintf(text + at, i % 7 == 3 ? "\n{\"a\":%d}  \n" : "{\"a\":%d}\n", i);
	lm_err e = { 0 };
	int rc = batch_all(text, JSONL_BATCH, got, lines, &n, &e);
	int same = n == N;
	unsigned long line = 0;
	for (int i = 0; same && i < N; i++) {
		line += 1 + (i % 7 == 3);
		same = got[i] == i && lines[i] == line;
	}
	is_int(rc, JSONL_END, "batches: the end");
	ok(same, "batches of %d: %zu of %d records, in order, with their line numbers", JSONL_BATCH, n, N);
	rc = batch_all("{\"a\":1}\n{\"a\":2}\n{\"a\" 3}\n\x01\n{\"a\":5}\n", 2, got, lines, &n, &e);
	is_int(rc, JSONL_BAD, "batches: bad JSON is a bad line");
	ok(n == 2 && got[1] == 2, "... after the %zu records before it", n);
	is_str(e.msg, "b.jsonl:3: bad JSON: ':' expected near '3' (column 6)", "... named as jsonl_next names it");
	rc = batch_all("{\"a\":1}\n[2]\n{\"a\" 3}\n", 8, got, lines, &n, &e);
	is_int(rc, JSONL_BAD, "batches: an array is a bad line");
	is_str(e.msg, "b.jsonl:2: not a JSON object", "... the first bad line in order is named");
	ok(n == 1, "... after the one record before it");
	static const char nul[] = "{\"a\":1}\n{\"a\":2}\n{\"a\":\0}\n{\"a\" 4}\n";
	FILE *fp = over(nul, sizeof nul - 1);
	jsonl_reader r;
	jsonl_batch b;
	jsonl_init(&r, fp, "z.jsonl");
	jsonl_batch_init(&b);
	rc = jsonl_next_batch(&r, 0, &b, 8, &e);
	is_int(rc, JSONL_BAD, "batches: a NUL byte is a bad line");
	ok(b.n == 2 && r.lineno == 3, "... after the 2 records before it, at line %lu", r.lineno);
	is_str(e.msg, "z.jsonl:3: a NUL byte at column 6 (the input must be text)", "... named");
	jsonl_batch_free(&b);
	jsonl_free(&r);
	fclose(fp);
}

static void test_grow(void)
{
	lm_err e = { 0 };
	int *v = NULL;
	size_t cap = 0;
	is_int(lm_grow((void **)&v, &cap, 1, sizeof *v, &e), 0, "grow from empty");
	is_int(cap, GROW_FIRST_CAP, "... to the first capacity");
	int fine = 1;
	for (size_t i = 0; i < 1000; i++) {
		if (lm_grow((void **)&v, &cap, i + 1, sizeof *v, &e)) {
			fine = 0;
			break;
		}
		v[i] = (int)i;
	}
	ok(fine && cap == 1024, "1000 appends: capacity doubled to 1024 (%zu)", cap);
	ok(v[999] == 999 && v[0] == 0, "... the elements kept");
	int *before = v;
	is_int(lm_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof *v, &e), -1, "a size past size_t: refused");
	ok(v == before && cap == 1024, "... the array unchanged");
	ok(strstr(e.msg, "does not fit") != NULL, "... with a message: %s", e.msg);
	free(v);
}

int main(void)
{
	test_lines();
	test_raw_lines();
	test_nul();
	test_long_line();
	test_pieces();
	test_pipe();
	test_bad_json();
	test_batch();
	test_grow();
	return done_testing();
}
