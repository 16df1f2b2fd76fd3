/* rewards.c: fuzz the rollout reader and scorer of rl-reward (JSON Lines
 * rollouts in, the same lines with rewards out), with the length penalty so
 * that groups are read too. */
#include "fuzz.h"
#include "tasks/reward.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const reward_kind kinds[] = { REWARD_R1_ZERO, REWARD_LAST_NUMBER };
	for (int k = 0; k < 2; k++) {
		FILE *in = fuzz_stream(data, size), *out = fopen("/dev/null", "w");
		if (in && out) {
			reward_cfg c = { kinds[k], NULL, 0, k ? 0.5 : 0, "answer", "completion", 0, 0 };
			reward_summary s;
			lm_err e;
			reward_run(&c, in, "in", out, "out", &s, &e);
		}
		if (in)
			fclose(in);
		if (out)
			fclose(out);
	}
	return 0;
}
