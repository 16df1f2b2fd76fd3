/* test_docs.c: the byte ranges of text/docs.h.  For random texts in every
 * format and separator mode (documents of random lines, blank lines, runs of
 * separators, a missing final newline) and random cuts of each text into
 * consecutive ranges, the ranges' outputs put together equal the output of
 * the whole file: each document once, none cut, whatever the cut.  Also the
 * plan: pieces of at most the given size, tiling each plain file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/rng.h"
#include "tests/tap.h"
#include "text/docs.h"

enum { TEXTS = 60, CUTS = 25, MAX_DOCS = 40, MAX_CUT_POINTS = 6 };

static const char EOT[] = "<|endoftext|>";

static uint64_t rng_state;
static unsigned pick(unsigned n)
{
	rng_state++;
	return (unsigned)lm_draw_below(12345, rng_state, n);
}

/* A random text for a mode, appended to a memory stream. */
static void make_text(FILE *f, const docs_opts *o)
{
	static const char *const words[] = { "a", "bb", "<|", "end", "|>", " ", "\t", "x y", "\r" };
	unsigned docs = 1 + pick(MAX_DOCS);
	if (pick(4) == 0)
		fputs("\n", f);
	for (unsigned d = 0; d < docs; d++) {
		unsigned lines = 1 + pick(3);
		for (unsigned l = 0; l < lines; l++) {
			unsigned w = pick(5);
			if (o->format == DOCS_JSONL) {
				fputs("{\"text\":\"", f);
				for (unsigned i = 0; i < w + 1; i++)
					fputs(pick(2) ? "w" : "\\n", f);
				fputs("\"}", f);
			} else {
				for (unsigned i = 0; i < w; i++)
					fputs(words[pick(sizeof words / sizeof words[0])], f);
			}
			if (o->format == DOCS_JSONL || o->sep != DOCS_SEP_EOT || l + 1 < lines)
				fputs("\n", f);
		}
		if (o->format == DOCS_TEXT && o->sep == DOCS_SEP_EOT)
			fputs(pick(3) ? "<|endoftext|>\n" : "<|endoftext|><|endoftext|>", f);
		else if (o->sep == DOCS_SEP_BLANK)
			fputs(pick(2) ? "\n" : "\n \n\n", f);
	}
	if (pick(3) == 0) /* a last line without its newline */
		fputs(o->format == DOCS_JSONL ? "{\"text\":\"t\"}" : "tail", f);
}

/* The output of docs_copy on path over [start, end). */
static char *copy_range(docs_opts o, const char *path, uint64_t start, uint64_t end,
			size_t *n, int *ok_out)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, n);
	docs_stats st = { 0 };
	lm_err e;
	o.start = start;
	o.end = end;
	static int said;
	*ok_out = docs_copy(&o, path, f, "memory", &st, &e) == 0;
	if (!*ok_out && !said++)
		diag("%s", e.msg);
	fclose(f);
	return buf;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void check_mode(const char *name, docs_format format, docs_sep sep, const char *path)
{
	docs_opts o = { format, sep, "text", EOT, 0, DOCS_TO_END };
	int bad = 0, cut_bad = 0;
	for (int t = 0; t < TEXTS; t++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		make_text(f, &o);
		fclose(f);
		FILE *out = fopen(path, "wb");
		fwrite(text, 1, len, out);
		fclose(out);
		size_t whole_n;
		int good;
		char *whole = copy_range(o, path, 0, DOCS_TO_END, &whole_n, &good);
		bad += !good;
		for (int c = 0; c < CUTS; c++) {
			uint64_t cut[MAX_CUT_POINTS + 1];
			unsigned k = 1 + pick(MAX_CUT_POINTS);
			for (unsigned i = 0; i < k; i++)
				cut[i] = pick((unsigned)len + 2);
			qsort(cut, k, sizeof cut[0], cmp_u64);
			char *joined = NULL;
			size_t joined_n = 0;
			FILE *j = open_memstream(&joined, &joined_n);
			uint64_t from = 0;
			for (unsigned i = 0; i <= k; i++) {
				uint64_t to = i < k ? (cut[i] < len ? cut[i] : len) : DOCS_TO_END;
				if (to != DOCS_TO_END && to < from)
					to = from;
				size_t n;
				char *part = copy_range(o, path, from, to, &n, &good);
				bad += !good;
				fwrite(part, 1, n, j);
				free(part);
				if (to != DOCS_TO_END)
					from = to;
			}
			fclose(j);
			if (joined_n != whole_n || memcmp(joined, whole, whole_n))
				cut_bad++;
			free(joined);
		}
		if (format == DOCS_TEXT && sep == DOCS_SEP_EOT)
			bad += whole_n != len || memcmp(whole, text, len);
		free(whole);
		free(text);
	}
	ok(bad == 0, "%s: every range reads (and eot mode copies the bytes as they are)", name);
	ok(cut_bad == 0, "%s: %d random cuts of %d texts: the ranges hold each document once (%d differ)",
	   name, CUTS * TEXTS, TEXTS, cut_bad);
}

static void check_plan(const char *path)
{
	FILE *f = fopen(path, "wb");
	for (int i = 0; i < 1000; i++)
		fputs("0123456789", f);
	fclose(f);
	const char *paths[] = { path, path };
	docs_piece *v;
	size_t n;
	lm_err e;
	int rc = docs_plan(paths, 2, 3000, &v, &n, &e);
	ok(rc == 0 && n == 8, "plan: 10000 bytes in pieces of 3000 are 4 pieces, twice");
	int tiles = rc == 0;
	for (size_t i = 0; tiles && i < n; i++)
		tiles = v[i].start == (i % 4) * 3000 &&
			v[i].end == (i % 4 == 3 ? DOCS_TO_END : (i % 4 + 1) * 3000);
	ok(tiles, "plan: consecutive ranges, the last to the end");
	if (rc == 0)
		free(v);
	rc = docs_plan(paths, 1, 0, &v, &n, &e);
	ok(rc == 0 && n == 1 && v[0].start == 0 && v[0].end == DOCS_TO_END, "plan: size 0 keeps files whole");
	if (rc == 0)
		free(v);
}

int main(void)
{
	char path[] = "/tmp/test_docs.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	check_mode("eot", DOCS_TEXT, DOCS_SEP_EOT, path);
	check_mode("blank", DOCS_TEXT, DOCS_SEP_BLANK, path);
	check_mode("line", DOCS_TEXT, DOCS_SEP_LINE, path);
	check_mode("jsonl", DOCS_JSONL, DOCS_SEP_LINE, path);
	check_plan(path);
	unlink(path);
	return done_testing();
}
