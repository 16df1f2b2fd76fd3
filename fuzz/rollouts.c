/* rollouts.c: fuzz rl-update's rollout reader (JSON Lines from lm-sample
 * --jsonl scored by rl-reward: prompt_ids, completion_ids, reward, group,
 * logprobs) as GRPO, GRPO with the clipped loss (log-probs needed) and PPO
 * read it, then GRPO's group advantages over what was read. */
#include "fuzz.h"
#include "app/rl_update_internal.h"

enum { VOCAB = 300, CTX = 64 };

static void run(rlu_algo algo, rl_pg_type loss, const uint8_t *data, size_t size)
{
	FILE *in = fuzz_stream(data, size);
	if (!in)
		return;
	rlu_opts o = { .algo = algo, .loss = loss, .adv_eps = 1e-6 };
	seqs v = { 0 };
	lm_err e;
	size_t groups;
	if (!read_seqs(&o, &v, in, "in", VOCAB, CTX, &e) && algo == RLU_GRPO)
		grpo_advantages(&o, &v, &groups, "in", &e);
	seqs_free(&v);
	fclose(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(RLU_GRPO, RL_PG_REINFORCE_BASELINE, data, size);
	run(RLU_GRPO, RL_PG_GRPO_CLIP, data, size);
	run(RLU_PPO, RL_PG_REINFORCE_BASELINE, data, size);
	return 0;
}
