/* test_opt.c: the option parser: forms, ranges, strict numbers, help text. */
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "cli/options.h"

static long long n_int;
static uint64_t n_size;
static double x;
static int flag_a, flag_b;
static const char *name, *mode;
static opt_strlist specials;
static const char *const modes[] = { "fast", "slow", NULL };

static const opt_def opts[] = {
	{ 'n', "number", OPT_INT, &n_int, "N", "an integer", 1, 100, NULL },
	{ 's', "size", OPT_SIZE, &n_size, "N", "a size", 0, 0, NULL },
	{ 0, "ratio", OPT_DOUBLE, &x, "F", "a fraction", 0, 1, NULL },
	{ 'a', "all", OPT_FLAG, &flag_a, NULL, "flag a", 0, 0, NULL },
	{ 'b', NULL, OPT_FLAG, &flag_b, NULL, "flag b", 0, 0, NULL },
	{ 'o', "output", OPT_STR, &name, "FILE", "output", 0, 0, NULL },
	{ 0, "special", OPT_STRLIST, &specials, "TOKEN", "repeatable", 0, 0, NULL },
	{ 0, "mode", OPT_CHOICE, &mode, "M", "a choice", 0, 0, modes },
	OPT_END
};
static const opt_prog prog = { "[OPTION]... FILE...", "Test program.", opts, NULL };

static void reset(void)
{
	n_int = 0; n_size = 0; x = 0; flag_a = flag_b = 0; name = mode = NULL;
	free(specials.v);
	specials.v = NULL;
	specials.n = 0;
}

static int parse(lm_err *e, char ***ops, int *n, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, n);
	argv[argc++] = "prog";
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	reset();
	return opt_parse(&prog, argc, argv, ops, n, e);
}

int main(void)
{
	lm_err e;
	char **ops = NULL;
	int n = 0;

	is_int(parse(&e, &ops, &n, "-n", "5", "in1", "--size=4Ki", "-ab", "--", "-x", NULL), OPT_OK, "mixed forms parse");
	is_int(n_int, 5, "-n 5");
	is_int(n_size, 4096, "--size=4Ki");
	ok(flag_a && flag_b, "-ab sets both flags");
	is_int(n, 2, "two operands");
	is_str(ops[0], "in1", "first operand");
	is_str(ops[1], "-x", "operand after --");
	free(ops);

	is_int(parse(&e, &ops, &n, "-n7", "--output", "f", "--spec", "<|a|>", "--special=b", NULL), OPT_OK, "attached and prefixed");
	is_int(n_int, 7, "-n7");
	is_str(name, "f", "--output f");
	is_int(specials.n, 2, "repeatable option collected twice");
	free(ops);

	is_int(parse(&e, &ops, &n, "-n", "101", NULL), -1, "out of range refused");
	is_int(e.code, 2, "usage error code");
	ok(strstr(e.msg, "out of range") != NULL, "message says out of range: %s", e.msg);
	is_int(parse(&e, &ops, &n, "-n", "5x", NULL), -1, "trailing garbage refused");
	is_int(parse(&e, &ops, &n, "-n", "", NULL), -1, "empty number refused");
	is_int(parse(&e, &ops, &n, "--ratio", "nan", NULL), -1, "NaN refused");
	is_int(parse(&e, &ops, &n, "--ratio", "1.5", NULL), -1, "double out of range");
	is_int(parse(&e, &ops, &n, "--size", "-1", NULL), -1, "negative size refused");
	is_int(parse(&e, &ops, &n, "--size", "3Q", NULL), -1, "unknown suffix refused");
	is_int(parse(&e, &ops, &n, "--size", "99999999999999999999", NULL), -1, "overflowing size refused");
	is_int(parse(&e, &ops, &n, "--mode", "medium", NULL), -1, "unknown choice refused");
	is_int(parse(&e, &ops, &n, "--mode", "slow", NULL), OPT_OK, "known choice accepted");
	free(ops);
	is_str(mode, "slow", "choice stored");
	is_int(parse(&e, &ops, &n, "--bogus", NULL), -1, "unknown long option");
	ok(strstr(e.msg, "--bogus") != NULL, "message names it: %s", e.msg);
	is_int(parse(&e, &ops, &n, "-z", NULL), -1, "unknown short option");
	is_int(parse(&e, &ops, &n, "--all=1", NULL), -1, "flag with argument refused");
	is_int(parse(&e, &ops, &n, "-o", NULL), -1, "missing argument refused");
	is_int(parse(&e, &ops, &n, "--help", NULL), OPT_HELP, "--help recognised");
	free(ops);
	is_int(parse(&e, &ops, &n, "-h", NULL), OPT_HELP, "-h recognised");
	free(ops);

	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	n_int = 42;
	opt_help(&prog, fp);
	fclose(fp);
	ok(strstr(buf, "-n, --number N") != NULL, "help lists -n, --number N");
	ok(strstr(buf, "(default 42)") != NULL, "help shows the default");
	ok(strstr(buf, "(fast, slow)") != NULL, "help lists choices");
	ok(strstr(buf, "--help") != NULL, "help lists --help");
	free(buf);
	reset();
	return done_testing();
}
