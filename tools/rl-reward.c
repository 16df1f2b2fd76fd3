/* rl-reward: add reward, format_reward and answer_reward to rollouts
 * (JSON Lines from lm-sample --jsonl). */
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "tasks/reward.h"

enum { MAX_THREADS = 1024 };

static const char *const kinds[] = { "r1-zero", "exact", "last-number", NULL };
static const char *kind = "r1-zero", *cmd, *output, *answer_key = "answer",
		  *completion_key = "completion";
static int format_only, verbose;
static long long threads;
static double length_weight, timeout = REWARD_CMD_TIMEOUT;

static const opt_def opts[] = {
	{ 'r', "reward", OPT_CHOICE, &kind, "FN", "reward function", 0, 0, kinds },
	{ 'c', "cmd", OPT_STR, &cmd, "PROGRAM",
	  "score with PROGRAM instead (sh -c): rollouts in, one score per line out", 0, 0, NULL },
	{ 0, "timeout", OPT_DOUBLE, &timeout, "S",
	  "--cmd: kill a scorer still running after S seconds, 0: never", 0, 1e9, NULL },
	{ 'f', "format-only", OPT_FLAG, &format_only, NULL, "reward the format alone", 0, 0, NULL },
	{ 'l', "length-penalty", OPT_DOUBLE, &length_weight, "W",
	  "add W times the Kimi k1.5 length reward within each group", 0, 1e6, NULL },
	{ 0, "answer-key", OPT_STR, &answer_key, "KEY", "field of the reference answer", 0, 0, NULL },
	{ 0, "completion-key", OPT_STR, &completion_key, "KEY", "field of the model's text", 0, 0, NULL },
	{ 'j', "threads", OPT_INT, &threads, "N", "threads that parse and score the rollouts (default: all)",
	  1, MAX_THREADS, NULL },
	{ 'o', "output", OPT_STR, &output, "FILE", "write to FILE, whole or not at all (default stdout)", 0, 0, NULL },
	{ 'v', "verbose", OPT_FLAG, &verbose, NULL, "print a summary line on stderr", 0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"[OPTION]... [FILE]",
	"Score rollouts (JSON Lines from lm-sample --jsonl, stdin without FILE): write each line\n"
	"back with \"reward\", \"format_reward\" and \"answer_reward\" added.",
	opts, NULL
};

int main(int argc, char **argv)
{
	lm_init(argv[0]);
	char **operands;
	unsigned char seen[sizeof opts / sizeof opts[0]] = { 0 };
	int n = opt_parse_or_exit_seen(&prog, argc, argv, &operands, seen);
	const char *path = cli_one_input(operands, n);
	/* options that would do nothing */
	if (cmd && opt_given(opts, seen, "reward"))
		die(EXIT_USAGE, "-r and --cmd exclude each other: --cmd's program is the reward");
	if (cmd && opt_given(opts, seen, "format-only"))
		die(EXIT_USAGE, "--format-only is for the built-in rewards, not --cmd");
	if (!cmd && opt_given(opts, seen, "timeout"))
		die(EXIT_USAGE, "--timeout is for --cmd");
	reward_cfg c = { REWARD_R1_ZERO, cmd, format_only, length_weight, answer_key, completion_key,
			 timeout, (int)threads };
	if (cmd)
		c.kind = REWARD_CMD;
	else if (!strcmp(kind, "exact"))
		c.kind = REWARD_EXACT;
	else if (!strcmp(kind, "last-number"))
		c.kind = REWARD_LAST_NUMBER;

	lm_err e;
	FILE *in = cli_open_input(path);
	cli_output out;
	cli_output_open(&out, output);
	reward_summary s;
	if (reward_run(&c, in, io_name(path), out.fp, out.name, &s, &e))
		die_err(&e);
	io_close_read(in);
	cli_output_commit(&out);
	if (verbose)
		warnmsg("%zu rollouts in %zu groups: mean reward %.4f, format %.4f, answer %.4f",
			s.rollouts, s.groups, s.reward, s.format, s.answer);
	free(operands);
	return EXIT_OK;
}
