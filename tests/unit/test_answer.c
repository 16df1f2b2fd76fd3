/* test_answer.c: answer normalisation, the GSM8K last number (the CS336
 * test_metrics cases); the r1-zero grader is test_grade.c. */
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "tasks/answer.h"

static void norm(const char *in, const char *want)
{
	int numeric;
	char *got = answer_normalize(in, strlen(in), &numeric);
	is_str(got, want, "normalize '%s'", in);
	free(got);
}

static void last(const char *in, const char *want)
{
	int oom;
	char *got = answer_last_number(in, strlen(in), &oom);
	if (want)
		is_str(got, want, "last number of '%s'", in);
	else
		ok(got == NULL && !oom, "no number in '%s'", in);
	free(got);
}

static int eq(const char *a, const char *b)
{
	return answer_equal(a, strlen(a), b, strlen(b));
}

int main(void)
{
	norm("72", "72");
	norm("  007 ", "7");
	norm("7.0", "7");
	norm("7.50", "7.5");
	norm("7.", "7");
	norm("$1,234", "1234");
	norm("$ 1,234.00", "1234");
	norm("+5", "5");
	norm("-0.0", "0");
	norm("-12", "-12");
	norm("0.5", "0.5");
	norm(".5", "0.5");
	norm(".", ".");
	norm("-", "-");
	norm("/2", "/2");
	norm("1/2", "0.5");
	norm("6/3", "2");
	norm("-3/4", "-0.75");
	norm("1/8", "0.125");
	norm("2/6", "1/3");
	norm("0/7", "0");
	norm("1/0", "1/0");
	norm("\\boxed{42}", "42");
	norm("\\boxed{ 1/2 }", "0.5");
	norm("  Yes  ", "yes");
	norm("72  Clips\t", "72 clips");
	norm("", "");

	ok(eq("72", " 72.0 ") == 1, "72 equals 72.0");
	ok(eq("0.5", "1/2") == 1, "0.5 equals 1/2");
	ok(eq("$18", "18") == 1, "$18 equals 18");
	ok(eq("1,000,000", "1000000") == 1, "1,000,000 equals 1000000");
	ok(eq("72", "27") == 0, "72 differs from 27");
	ok(eq("1/3", "0.333") == 0, "1/3 differs from 0.333");
	ok(eq("-5", "5") == 0, "-5 differs from 5");

	/* the CS336 test_metrics cases */
	last("Natalia sold 48/2 = 24 clips in May. Natalia sold 48+24 = 72 clips altogether in April and May.", "72");
	last("Natalia sold twenty-four clips in May. Thus, Natalia sold seventy-two clips altogether in April and May.", NULL);
	last("It costs $1,234.50.", "1234.5");
	last("The total is 3,5 apples", "5");
	last("48-24", "24");
	last("The temperature fell to -7 degrees.", "-7");
	last("x-3", "3");
	last("answer: 12,3456", "3456");
	last("1,000,000 people", "1000000");
	last("", NULL);

	return done_testing();
}
