/* bpe-decode: token ids back to the bytes they stand for
 * (man 1 bpe-decode). */
#include <stdlib.h>

#include "base/atomic.h"
#include "base/io.h"
#include "cli/die.h"
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
	atomic_file af = { 0 };
	lm_init(argv[0]);
	int n_files = opt_parse_or_exit(&prog, argc, argv, &files);
	if (bpe_open(&t, &src, &e))
		die_err(&e);
	FILE *out = stdout;
	const char *oname = "<stdout>";
	if (output) {
		if (atomic_open(&af, output, &e))
			die_err(&e);
		out = af.fp;
		oname = output;
	}
	for (int i = 0; i < (n_files ? n_files : 1); i++) {
		const char *path = n_files ? files[i] : "-";
		FILE *in = io_open_read(path, &e);
		if (!in || bpe_decode_file(&t, in, io_name(path), text, out, oname, &e))
			die_err(&e);
		io_close_read(in);
	}
	if (output && atomic_commit(&af, &e))
		die_err(&e);
	bpe_free(&t);
	free(files);
	return EXIT_OK;
}
