/* reward.c: the built-in reward functions, the Kimi length reward and the
 * number spelling of the fields rl-reward adds (see reward.h). */
#include "tasks/reward_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/answer.h"
#include "tasks/grade.h"

enum { SHORTEST_DIGITS_MAX = 17 };

const char *const reward_out_keys[REWARD_OUT_KEYS] = { "reward", "format_reward", "answer_reward" };

static void trim(const char **s, size_t *n)
{
	while (*n && strchr(" \t\r\n", **s))
		(*s)++, (*n)--;
	while (*n && strchr(" \t\r\n", (*s)[*n - 1]))
		(*n)--;
}

int reward_score(reward_kind k, const char *completion, size_t n, const char *ref, size_t nref,
		 reward_scores *out, lm_err *e)
{
	out->format = out->answer = 0;
	switch (k) {
	case REWARD_R1_ZERO: {
		int format, answer;
		if (grade_r1_zero(completion, n, ref, nref, &format, &answer))
			return lm_seterr(e, "out of memory");
		out->format = format;
		out->answer = answer;
		break;
	}
	case REWARD_EXACT:
		trim(&completion, &n);
		trim(&ref, &nref);
		out->format = 1;
		out->answer = n == nref && !memcmp(completion, ref, n);
		break;
	case REWARD_LAST_NUMBER: {
		int oom;
		char *last = answer_last_number(completion, n, &oom);
		if (oom)
			return lm_seterr(e, "out of memory");
		if (last) {
			out->format = 1;
			int eq = answer_equal(last, strlen(last), ref, nref);
			free(last);
			if (eq < 0)
				return lm_seterr(e, "out of memory");
			out->answer = eq;
		}
		break;
	}
	case REWARD_CMD:
		return lm_seterr(e, "an external scorer scores whole batches (reward_cmd)");
	}
	out->reward = out->answer;
	return 0;
}

double reward_length_lambda(double len, double min_len, double max_len, int correct)
{
	double lambda = max_len > min_len ? 0.5 - (len - min_len) / (max_len - min_len) : 0.0;
	return correct ? lambda : fmin(0.0, lambda);
}

void reward_format_double(double x, char *buf, size_t n)
{
	for (int p = 1; p <= SHORTEST_DIGITS_MAX; p++) {
		snprintf(buf, n, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}
