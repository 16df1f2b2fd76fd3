/* test_grade.c: the r1-zero grader (grade.h) on a table of cases: each a
 * completion (R(...) wraps an answer in the r1-zero tags), the ground
 * truth, and the format and answer rewards expected.  The expectations are
 * those of CS336's drgrpo_grader.r1_zero_reward_fn except where the last
 * column says what it gives instead (it asks sympy; we compare numbers
 * exactly, see rl-reward(1)). */
#include <string.h>

#include "../tap.h"
#include "tasks/grade.h"
#include "tasks/reward.h"

#define R(a) "2 + 3 = 5 </think> <answer>" a "</answer>"

enum { SAME = -1 };

static const struct gcase {
	const char *completion, *truth;
	int format, answer;
	int cs336; /* SAME, or the answer reward drgrpo gives where it differs */
} cases[] = {
	/* the format */
	{ R("5"), "5", 1, 1, SAME },
	{ "x </think><answer>5</answer>", "5", 0, 0, SAME },
	{ "x </think> <answer>5", "5", 0, 0, SAME },
	{ "</answer> x </think> <answer>5", "5", 1, 1, SAME },
	{ "</think> <answer>4</answer> <answer>5</answer>", "5", 1, 1, SAME },
	{ "</think> <answer>5</answer> so", "5", 1, 0, SAME },
	{ "</think> <answer> 5 </answer>\n", "5", 1, 1, SAME },
	/* LaTeX fractions, fractions against decimals */
	{ R("\\frac{1}{2}"), "1/2", 1, 1, SAME },
	{ R("\\dfrac{1}{2}"), "1/2", 1, 1, SAME },
	{ R("\\tfrac12"), "\\frac{1}{2}", 1, 1, SAME },
	{ R("\\frac{3}{4}"), "0.75", 1, 1, SAME },
	{ R("0.75"), "\\frac{3}{4}", 1, 1, SAME },
	{ R("0.5"), "\\frac{1}{2}", 1, 1, SAME },
	{ R(".5"), "1/2", 1, 1, SAME },
	{ R("3.5"), "7/2", 1, 1, SAME },
	{ R("3\\frac{1}{2}"), "7/2", 1, 1, SAME },
	{ R("7 3/4"), "31/4", 1, 1, SAME },
	{ R("-0.5"), "-\\frac{1}{2}", 1, 1, SAME },
	{ R("2/4"), "1/2", 1, 0, SAME },
	{ R("\\frac{2}{4}"), "\\frac{1}{2}", 1, 0, SAME },
	{ R("4/2"), "2", 1, 0, SAME },
	{ R("10/2"), "5", 1, 0, SAME },
	{ R("0.333"), "1/3", 1, 0, SAME },
	{ R("1/3"), "\\frac{1}{3}", 1, 1, SAME },
	/* decimals, exponents, leading zeros, signs, trailing periods */
	{ R("5.0"), "5", 1, 1, SAME },
	{ R("5.00"), "5", 1, 1, SAME },
	{ R("0.50"), "0.5", 1, 1, SAME },
	{ R("2.5"), "2.50", 1, 1, SAME },
	{ R("5.1"), "5", 1, 0, SAME },
	{ R("1e3"), "1000", 1, 1, SAME },
	{ R("007"), "7", 1, 1, SAME },
	{ R("0.5"), ".5", 1, 1, SAME },
	{ R("-5"), "-5", 1, 1, SAME },
	{ R("- 5"), "-5", 1, 1, SAME },
	{ R("-5"), "5", 1, 0, SAME },
	{ R("+5"), "5", 1, 1, SAME },
	{ R("5."), "5", 1, 1, SAME },
	{ R("2.5."), "2.5", 1, 0, SAME },
	/* thousands separators */
	{ R("1,000"), "1000", 1, 1, SAME },
	{ R("1000"), "1,000", 1, 1, SAME },
	{ R("1,000,000"), "1000000", 1, 1, SAME },
	{ R("1,000.5"), "1000.5", 1, 1, SAME },
	{ R("10,00"), "1000", 1, 0, SAME },
	/* dollars and percent */
	{ R("$18"), "18", 1, 1, SAME },
	{ R("\\$18"), "18", 1, 1, SAME },
	{ R("$1,000.00"), "1000", 1, 1, SAME },
	{ R("50\\%"), "50", 1, 1, SAME },
	{ R("50%"), "50", 1, 1, SAME },
	{ R("50"), "50\\%", 1, 1, SAME },
	/* units and surrounding text */
	{ R("5 cm"), "5", 1, 1, SAME },
	{ R("12 hours"), "12", 1, 1, SAME },
	{ R("\\text{5 apples}"), "5", 1, 1, SAME },
	{ R("5 \\text{ meters}"), "5", 1, 1, SAME },
	{ R("90^\\circ"), "90", 1, 1, SAME },
	{ R("90^{\\circ}"), "90", 1, 1, SAME },
	{ R("10 dollars"), "10", 1, 0, SAME },
	{ R("The answer is 5"), "5", 1, 0, SAME },
	{ R("x = 5"), "5", 1, 1, SAME },
	{ R("x=5"), "5", 1, 1, SAME },
	{ R("2 million"), "2000000", 1, 0, SAME },
	/* \boxed */
	{ R("\\boxed{5}"), "5", 1, 1, SAME },
	{ R("so \\boxed{\\frac{1}{2}}"), "0.5", 1, 1, SAME },
	{ R("\\boxed{4} or \\boxed{5}"), "5", 1, 1, SAME },
	{ R("\\boxed 5"), "5", 1, 0, SAME },
	{ R("\\boxed{5"), "5", 1, 0, SAME },
	{ R("5"), "\\boxed{5}", 1, 1, SAME },
	/* text and tuples */
	{ R("Yes"), "yes", 1, 1, SAME },
	{ R("\\text{yes}"), "yes", 1, 1, SAME },
	{ R("(1,2)"), "(1, 2)", 1, 1, SAME },
	{ R("(2,1)"), "(1,2)", 1, 0, SAME },
	{ R("(1, 2.0)"), "(1,2)", 1, 1, SAME },
	/* where sympy decides otherwise */
	{ R("1+x"), "x+1", 1, 0, 1 },
	{ R("0.1+0.2"), "0.3", 1, 1, 0 },
};

int main(void)
{
	size_t n = sizeof cases / sizeof cases[0];
	for (size_t i = 0; i < n; i++) {
		const struct gcase *c = &cases[i];
		int f = -1, a = -1;
		int rc = grade_r1_zero(c->completion, strlen(c->completion), c->truth, strlen(c->truth),
				       &f, &a);
		ok(rc == 0 && f == c->format && a == c->answer, "'%s' against '%s': format %d answer %d "
		   "(want %d %d)", c->completion, c->truth, f, a, c->format, c->answer);
	}
	/* rl-reward's r1-zero reward is this grader */
	reward_scores s;
	lm_err e;
	const char *c = R("\\dfrac{3}{4}");
	ok(reward_score(REWARD_R1_ZERO, c, strlen(c), "0.75", 4, &s, &e) == 0 && s.reward == 1 &&
	   s.format == 1 && s.answer == 1, "reward_score r1-zero grades \\dfrac{3}{4} as 0.75");
	is_int(grade_answer("5", 1, "\\boxed{5", 8), 0, "an unbalanced \\boxed ground truth is never matched");
	return done_testing();
}
