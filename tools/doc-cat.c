/* doc-cat: documents of text, JSON Lines and compressed files as one stream,
 * each document ending in end-of-text; or the plan that cuts files into
 * pieces at document starts (man 1 doc-cat). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/doc_cat.h"
#include "cli/die.h"
#include "cli/options.h"

static const char *const formats[] = { "text", "jsonl", NULL };
static const char *const seps[] = { "eot", "blank", "line", NULL };

int main(int argc, char **argv)
{
	const char *format = "text", *sep = "eot";
	doc_cat_opts o = { .docs = { .field = "text", .eot = "<|endoftext|>" } };
	uint64_t plan = 0;
	int sizes = 0;
	const opt_def opts[] = {
		{ 'f', "format", OPT_CHOICE, &format, "FMT",
		  "text, or jsonl (JSON Lines, the text in --field)", 0, 0, formats },
		{ 's', "sep", OPT_CHOICE, &sep, "SEP",
		  "text: documents end at eot (as they are), a blank line, or each line", 0, 0, seps },
		{ 0, "field", OPT_STR, &o.docs.field, "NAME",
		  "jsonl: the member holding the text (default text)", 0, 0, NULL },
		{ 0, "eot", OPT_STR, &o.docs.eot, "TEXT",
		  "the end-of-text text (default <|endoftext|>)", 0, 0, NULL },
		{ 'r', "range", OPT_STR, &o.range, "START:END",
		  "only the documents starting in this byte range of FILE", 0, 0, NULL },
		{ 0, "plan", OPT_SIZE, &plan, "BYTES",
		  "print the pieces of at most BYTES that cut the FILEs, instead", 1, 0, NULL },
		{ 0, "sizes", OPT_FLAG, &sizes, NULL,
		  "--plan: a fourth column, the bytes of each piece's documents", 0, 0, NULL },
		{ 'o', "output", OPT_STR, &o.output, "FILE",
		  "write to FILE (whole or nothing), not stdout", 0, 0, NULL },
		{ 'v', "verbose", OPT_FLAG, &o.verbose, NULL, "print a summary on stderr",
		  0, 0, NULL },
		OPT_END,
	};
	const opt_prog prog = {
		"[OPTION]... [FILE]...",
		"Write the documents of FILEs (or stdin) as one stream, each ending in end-of-text:\n"
		"plain text or JSON Lines, gzip, zstd or xz compressed (told by their first bytes).",
		opts,
		"Plain files may be read by byte range: --range START:END holds the documents\n"
		"whose first byte is in [START, END), so the ranges of any cut hold each\n"
		"document once.  --plan prints such a cut: PATH, START, END (- for the end);\n"
		"--sizes adds the bytes of the documents each piece holds (a whole file: its\n"
		"size on disk), so that a pipeline can start the largest pieces first.\n",
	};
	lm_init(argv[0]);
	char **files;
	int n = opt_parse_or_exit(&prog, argc, argv, &files);
	lm_err e;
	o.docs.format = !strcmp(format, "jsonl") ? DOCS_JSONL : DOCS_TEXT;
	o.docs.sep = !strcmp(sep, "blank") ? DOCS_SEP_BLANK :
		     !strcmp(sep, "line") ? DOCS_SEP_LINE : DOCS_SEP_EOT;
	if (sizes && !plan)
		die(EXIT_USAGE, "--sizes goes with --plan");
	if (plan) {
		if (n == 0)
			die(EXIT_USAGE, "--plan needs FILEs");
		if (o.range || o.output)
			die(EXIT_USAGE, "--plan excludes --range and -o");
		if (doc_cat_plan((const char *const *)files, n, plan, sizes ? &o.docs : NULL, stdout, &e))
			die_err(&e);
		free(files);
		return EXIT_OK;
	}
	docs_stats st = { 0 };
	if (doc_cat(&o, (const char *const *)files, n, &st, &e))
		die_err(&e);
	if (o.verbose)
		fprintf(stderr, "%s: %d files, %llu bytes in, %llu documents, %llu bytes out\n",
			lm_progname, n ? n : 1, (unsigned long long)st.bytes_in,
			(unsigned long long)st.docs, (unsigned long long)st.bytes_out);
	free(files);
	return EXIT_OK;
}
