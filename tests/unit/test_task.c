/* test_task.c: the task generator: same seed same problems, every worked
 * solution checks out, answers match the arithmetic, GSM8K conversion, the
 * built-in template equals the CS336 file. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "tasks/task.h"

/* Check "a op b = c." steps; returns the last c, or -1 when a step is wrong. */
static long long check_solution(const char *s, long long *max_operand)
{
	long long a, b, c, last = -1, prev = -1;
	char op;
	int used;
	while (sscanf(s, " %lld %c %lld = %lld.%n", &a, &op, &b, &c, &used) == 4) {
		long long want = op == '+' ? a + b : op == '-' ? a - b : op == '*' ? a * b :
				 op == '/' && b && a % b == 0 ? a / b : -1;
		if (want != c || c < 0 || (prev >= 0 && a != prev))
			return -1;
		if (b > *max_operand)
			*max_operand = b;
		prev = last = c;
		s += used;
	}
	return *s ? -1 : last;
}

static void test_arith(void)
{
	lm_err e;
	const char *opsets[] = { "+", "-", "*", "/", "+-", "+-*/" };
	int bad = 0, total = 0;
	for (int d = 1; d <= 4; d++)
		for (size_t k = 0; k < sizeof opsets / sizeof opsets[0]; k++)
			for (int steps = 1; steps <= 4; steps += 3) {
				task_arith_cfg c = { d, steps, opsets[k] };
				uint64_t rng = 7;
				long long hi = 1;
				for (int i = 0; i < d; i++)
					hi *= 10;
				for (int i = 0; i < 50; i++) {
					task_item it = { 0 };
					if (task_arith(&rng, &c, &it, &e)) {
						bad++;
						continue;
					}
					long long maxop = 0;
					long long got = check_solution(it.solution, &maxop);
					char buf[32];
					snprintf(buf, sizeof buf, "%lld", got);
					int nsteps = 0;
					for (const char *p = it.solution; (p = strchr(p, '=')); p++)
						nsteps++;
					if (got < 0 || strcmp(buf, it.answer) || maxop >= hi || nsteps != steps ||
					    !strstr(it.question, "How many")) {
						if (bad++ < 3)
							diag("bad problem: %s | %s | %s", it.question, it.solution, it.answer);
					}
					total++;
					task_item_free(&it);
				}
			}
	is_int(bad, 0, "%d generated problems: steps add up, the answer is the last result, operands have the digits", total);

	task_arith_cfg c = { 3, 2, "+-*/" };
	uint64_t r1 = 42, r2 = 42, r3 = 43;
	task_item a = { 0 }, b = { 0 }, x = { 0 };
	task_arith(&r1, &c, &a, &e);
	task_arith(&r2, &c, &b, &e);
	task_arith(&r3, &c, &x, &e);
	is_str(a.question, b.question, "the same seed gives the same problem");
	ok(strcmp(a.question, x.question) != 0, "another seed gives another problem");
	task_item_free(&a);
	task_item_free(&b);
	task_item_free(&x);

	task_arith_cfg badc[] = { { 0, 1, "+" }, { 10, 1, "+" }, { 2, 0, "+" }, { 2, 1, "" }, { 2, 1, "+x" } };
	int refused = 0;
	for (size_t k = 0; k < sizeof badc / sizeof badc[0]; k++)
		refused += task_arith_check(&badc[k], &e) == -1 && e.code == 2;
	is_int(refused, 5, "bad configurations are usage errors");
}

static void test_gsm8k(void)
{
	lm_err e;
	task_item it = { 0 };
	is_int(task_gsm8k("Q?", "She has 1,000 + 200 = <<1000+200=1200>>1,200 eggs.\n#### 1,200", &it, &e), 0,
	       "a GSM8K record converts");
	is_str(it.answer, "1200", "the answer after #### without commas");
	is_str(it.solution, "She has 1,000 + 200 = 1,200 eggs.", "the solution without calculator annotations");
	task_item_free(&it);
	is_int(task_gsm8k("Q?", "no final answer", &it, &e), -1, "an answer without #### is refused");
	is_int(task_gsm8k("Q?", "x #### ", &it, &e), -1, "an empty final answer is refused");
}

/* task_pick: each of 5 records kept by about want / 5 of the seeds, and
 * every one of the 5! / 3! ordered pairs (want = 2) about as often. */
static void test_pick(void)
{
	static const char recs[] = "{\"question\":\"0\",\"answer\":\"#### 0\"}\n"
				   "{\"question\":\"1\",\"answer\":\"#### 1\"}\n"
				   "{\"question\":\"2\",\"answer\":\"#### 2\"}\n"
				   "{\"question\":\"3\",\"answer\":\"#### 3\"}\n"
				   "{\"question\":\"4\",\"answer\":\"#### 4\"}\n";
	enum { SEEDS = 20000 };
	long kept[5] = { 0 }, ordered[5][5] = { { 0 } };
	int bad = 0;
	lm_err e;
	for (uint64_t seed = 0; seed < SEEDS; seed++) {
		FILE *in = fmemopen((void *)recs, sizeof recs - 1, "r");
		task_pick p;
		task_pick_init(&p, 2, seed);
		if (!in || task_pick_gsm8k(&p, in, "recs", &e) || p.n != 2) {
			bad++;
		} else {
			/* the order written: task_pick_write shuffles; read it back */
			char *buf = NULL;
			size_t len = 0;
			FILE *out = open_memstream(&buf, &len);
			if (!out || task_pick_write(&p, out, "{question}", 0, "out", &e) || fclose(out))
				bad++;
			else {
				int q[2], k = 0;
				for (char *c = buf; c && (c = strstr(c, "\"prompt\":\"")) && k < 2; c++)
					q[k++] = c[10] - '0';
				if (k != 2 || q[0] == q[1] || q[0] < 0 || q[0] > 4 || q[1] < 0 || q[1] > 4)
					bad++;
				else {
					kept[q[0]]++, kept[q[1]]++;
					ordered[q[0]][q[1]]++;
				}
			}
			free(buf);
		}
		task_pick_free(&p);
		if (in)
			fclose(in);
	}
	is_int(bad, 0, "a pick of 2 of 5 records: two distinct records for every seed");
	int fair = 1;
	for (int i = 0; i < 5; i++) /* expected 8000 each, s.d. about 69 */
		fair &= kept[i] > 7600 && kept[i] < 8400;
	ok(fair, "each record kept by 2/5 of the seeds (%ld %ld %ld %ld %ld of %d)", kept[0], kept[1],
	   kept[2], kept[3], kept[4], SEEDS);
	int even = 1;
	for (int i = 0; i < 5; i++) /* 20 ordered pairs: 1000 each, s.d. about 31 */
		for (int j = 0; j < 5; j++)
			even &= i == j ? ordered[i][j] == 0 : ordered[i][j] > 850 && ordered[i][j] < 1150;
	ok(even, "each ordered pair as often (the order is drawn too)");
}

static void test_template(void)
{
	lm_err e;
	is_int(task_template_check("no marker", &e), -1, "a template without {question} is refused");
	const char *d = tap_data_dir();
	if (!d) {
		ok(1, "# SKIP needs ../shared/data for the CS336 r1_zero.prompt");
		return;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/cs336-a5/prompts/r1_zero.prompt", d);
	FILE *fp = fopen(path, "rb");
	char buf[4096];
	size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
	if (fp)
		fclose(fp);
	buf[n] = '\0';
	const char *builtin = TASK_R1_ZERO_TEMPLATE, *file = buf;
	is_str(builtin, file, "the built-in template is the CS336 r1_zero.prompt byte for byte");
}

int main(void)
{
	test_arith();
	test_gsm8k();
	test_pick();
	test_template();
	return done_testing();
}
