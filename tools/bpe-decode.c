/* bpe-decode: token ids back to the bytes they stand for
 * (man 1 bpe-decode). */
#include <stdlib.h>

#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "cli/tok_options.h"
#include "tok/bpe_decode.h"

static bpe_source src;
static int text;
static const char *output;

static const opt_def options[] = {
	BPE_SOURCE_OPTIONS(src),
	{ 0, "text", OPT_FLAG, &text, NULL, "read decimal ids separated by white space", 0, 0, NULL },
	{ 'o', "output", OPT_STR, &output, "FILE", "write to FILE (whole or nothing), not stdout", 0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"[OPTION]... [FILE]...",
	"Decode token ids (a token stream, man 5 lmpipe-tokens, from FILEs or stdin) into bytes on stdout.",
	options,
	NULL,
};

int main(int argc, char **argv)
{
	char **files;
	lm_err e;
	bpe_tokenizer t;
	lm_init(argv[0]);
	int n_files = opt_parse_or_exit(&prog, argc, argv, &files);
	if (bpe_open(&t, &src, &e))
		die_err(&e);
	cli_output out;
	cli_output_open(&out, output);
	cli_inputs in = { .files = files, .n = n_files };
	while (cli_next_input(&in))
		if (bpe_decode_file(&t, in.fp, in.name, text, out.fp, out.name, &e))
			die_err(&e);
	cli_output_commit(&out);
	bpe_free(&t);
	free(files);
	return EXIT_OK;
}
