/* lm-task: write verifiable problems as JSON Lines {prompt, answer}:
 * generated arithmetic word problems, or GSM8K records converted. */
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "tasks/task.h"

static long long count = 1000, digits = 2, steps = 1, seed = 1;
static const char *ops = "+-", *template_path, *output;
static int with_response;
/* -n given limits gsm8k too; -s given, gsm8k writes a sample drawn by it,
 * in an order drawn by it */

static const opt_def opts[] = {
	{ 'n', "count", OPT_INT, &count, "N", "number of problems (default 1000; gsm8k: all)", 0, 1e15, NULL },
	{ 'd', "digits", OPT_INT, &digits, "D", "arith: digits of each operand", 1, TASK_MAX_DIGITS, NULL },
	{ 0, "steps", OPT_INT, &steps, "S", "arith: operations per problem", 1, TASK_MAX_STEPS, NULL },
	{ 0, "ops", OPT_STR, &ops, "OPS", "arith: operations to draw from, among + - * /", 0, 0, NULL },
	{ 's', "seed", OPT_INT, &seed, "S",
	  "random seed: of arith's problems (default 1); given to gsm8k, its records are drawn (-n of "
	  "them, or all) in a random order, else the first N are written in order", 0, 0, NULL },
	{ 't', "template", OPT_STR, &template_path, "FILE",
	  "prompt template with {question} (default: the built-in r1-zero prompt)", 0, 0, NULL },
	{ 'r', "response", OPT_FLAG, &with_response, NULL,
	  "add a worked \"response\" in r1-zero form (for SFT)", 0, 0, NULL },
	{ 'o', "output", OPT_STR, &output, "FILE", "write to FILE, whole or not at all (default stdout)", 0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"arith [OPTION]...\n       lm-task gsm8k [OPTION]... [FILE]...",
	"Write verifiable problems as JSON Lines {\"prompt\", \"answer\"}: arithmetic word problems\n"
	"generated from a seed (arith), or GSM8K records converted (gsm8k; stdin without FILE).",
	opts,
	"The prompt is the CS336 r1-zero prompt unless --template is given.\n"
};

int main(int argc, char **argv)
{
	lm_init(argv[0]);
	char **operands;
	unsigned char seen[sizeof opts / sizeof opts[0]] = { 0 };
	int n = opt_parse_or_exit_seen(&prog, argc, argv, &operands, seen);
	int given_count = opt_given(opts, seen, "count");
	uint64_t left = (uint64_t)count;
	lm_err e;
	if (n < 1)
		die(EXIT_USAGE, "missing mode: arith or gsm8k\nTry 'lm-task --help' for more information.");
	const char *mode = operands[0];
	int arith = !strcmp(mode, "arith");
	if (!arith && strcmp(mode, "gsm8k"))
		die(EXIT_USAGE, "unknown mode '%s': use arith or gsm8k", mode);
	if (arith && n > 1)
		die(EXIT_USAGE, "arith reads no files (got '%s')", operands[1]);
	static const char *const arith_only[] = { "digits", "steps", "ops", NULL };
	for (int i = 0; !arith && arith_only[i]; i++)
		if (opt_given(opts, seen, arith_only[i]))
			die(EXIT_USAGE, "--%s is for arith problems, not gsm8k", arith_only[i]);

	char *tmpl = (char *)TASK_R1_ZERO_TEMPLATE;
	if (template_path) {
		uint8_t *buf;
		size_t len;
		if (io_read_file(template_path, &buf, &len, &e))
			die_err(&e);
		tmpl = (char *)buf;
		if (task_template_check(tmpl, &e))
			die(EXIT_USAGE, "%s: %s", template_path, e.msg);
	}
	task_arith_cfg cfg = { (int)digits, (int)steps, ops };
	if (arith && task_arith_check(&cfg, &e))
		die_err(&e);

	cli_output out;
	cli_output_open(&out, output);
	if (arith) {
		if (task_arith_write(out.fp, &cfg, (uint64_t)count, (uint64_t)seed, tmpl, with_response,
				     out.name, &e))
			die_err(&e);
	} else if (opt_given(opts, seen, "seed")) {
		task_pick pick;
		task_pick_init(&pick, given_count ? (uint64_t)count : UINT64_MAX, (uint64_t)seed);
		cli_inputs in = { .files = operands + 1, .n = n - 1 };
		while (cli_next_input(&in))
			if (task_pick_gsm8k(&pick, in.fp, in.name, &e))
				die_err(&e);
		if (task_pick_write(&pick, out.fp, tmpl, with_response, out.name, &e))
			die_err(&e);
		task_pick_free(&pick);
	} else {
		cli_inputs in = { .files = operands + 1, .n = n - 1 };
		while ((!given_count || left) && cli_next_input(&in))
			if (task_gsm8k_write(in.fp, in.name, out.fp, tmpl, with_response,
					     given_count ? &left : NULL, out.name, &e))
				die_err(&e);
	}
	cli_output_commit(&out);
	if (tmpl != TASK_R1_ZERO_TEMPLATE)
		free(tmpl);
	free(operands);
	return EXIT_OK;
}
