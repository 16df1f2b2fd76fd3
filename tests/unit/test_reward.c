/* test_reward.c: the built-in reward functions, the Kimi length reward and
 * the shortest number spelling rl-reward writes. */
#include <string.h>

#include "../tap.h"
#include "tasks/reward.h"

static reward_scores score(reward_kind k, const char *c, const char *ref)
{
	reward_scores s = { -1, -1, -1 };
	lm_err e;
	if (reward_score(k, c, strlen(c), ref, strlen(ref), &s, &e))
		diag("%s", e.msg);
	return s;
}

#define SCORES(s, r, f, a) ((s).reward == (r) && (s).format == (f) && (s).answer == (a))

int main(void)
{
	reward_scores s;
	s = score(REWARD_R1_ZERO, " 3+4=7 </think> <answer> 7 </answer>", "7");
	ok(SCORES(s, 1, 1, 1), "r1-zero: right answer in format");
	s = score(REWARD_R1_ZERO, " 3+4=7 </think> <answer> 8 </answer>", "7");
	ok(SCORES(s, 0, 1, 0), "r1-zero: wrong answer in format");
	s = score(REWARD_R1_ZERO, " 3+4=7 </think> 7", "7");
	ok(SCORES(s, 0, 0, 0), "r1-zero: no format");
	s = score(REWARD_R1_ZERO, "</think> <answer>\\boxed{1/2}</answer>", "0.5");
	ok(SCORES(s, 1, 1, 1), "r1-zero: boxed fraction equals 0.5");
	s = score(REWARD_R1_ZERO, "</think> <answer> $1,000.00 </answer>", "1000");
	ok(SCORES(s, 1, 1, 1), "r1-zero: $1,000.00 equals 1000");
	s = score(REWARD_EXACT, "\n hello \n", "hello");
	ok(SCORES(s, 1, 1, 1), "exact: surrounding whitespace ignored");
	s = score(REWARD_EXACT, "Hello", "hello");
	ok(SCORES(s, 0, 1, 0), "exact: case matters");
	s = score(REWARD_LAST_NUMBER, "so 48+24 = 72 clips", "72");
	ok(SCORES(s, 1, 1, 1), "last-number: 72");
	s = score(REWARD_LAST_NUMBER, "no digits", "72");
	ok(SCORES(s, 0, 0, 0), "last-number: no number, no format");
	lm_err e;
	is_int(reward_score(REWARD_CMD, "x", 1, "y", 1, &s, &e), -1, "the external scorer is not per line");

	near(reward_length_lambda(10, 10, 20, 1), 0.5, 0, "shortest right answer: +0.5");
	near(reward_length_lambda(20, 10, 20, 1), -0.5, 0, "longest right answer: -0.5");
	near(reward_length_lambda(15, 10, 20, 1), 0, 0, "middle: 0");
	near(reward_length_lambda(10, 10, 20, 0), 0, 0, "short wrong answer: min(0, 0.5) = 0");
	near(reward_length_lambda(20, 10, 20, 0), -0.5, 0, "long wrong answer: -0.5");
	near(reward_length_lambda(7, 7, 7, 1), 0, 0, "a group of equal lengths: 0");

	char buf[32];
	const double xs[] = { 1, 0, 0.5, -0.25, 0.1, 1.0 / 3, -1e-3, 1e300 };
	const char *want[] = { "1", "0", "0.5", "-0.25", "0.1", "0.3333333333333333", "-0.001", "1e+300" };
	for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
		reward_format_double(xs[i], buf, sizeof buf);
		const char *got = buf;
		is_str(got, want[i], "%g is written in the fewest digits that read back", xs[i]);
	}
	return done_testing();
}
