/* tasks.c: fuzz the GSM8K task reader (lm-task): JSON Lines records of
 * "question" and "answer" in, prompts out, written as read and through a
 * seeded sample of 3 (lm-task gsm8k -s). */
#include "fuzz.h"
#include "tasks/task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *in = fuzz_stream(data, size), *out = fopen("/dev/null", "w");
	if (in && out) {
		lm_err e;
		task_gsm8k_write(in, "in", out, TASK_R1_ZERO_TEMPLATE, 1, NULL, "out", &e);
		rewind(in);
		task_pick p;
		task_pick_init(&p, 3, size);
		if (!task_pick_gsm8k(&p, in, "in", &e))
			task_pick_write(&p, out, TASK_R1_ZERO_TEMPLATE, 1, "out", &e);
		task_pick_free(&p);
	}
	if (in)
		fclose(in);
	if (out)
		fclose(out);
	return 0;
}
