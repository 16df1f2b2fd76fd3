/* checkpoint.c: fuzz a checkpoint (man 5 lmpipe-checkpoint): its metadata
 * and the check that it holds every tensor of the shape it claims, which
 * comes before any program allocates a model from it. */
#include "fuzz.h"
#include "model/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path("x.safetensors");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	model_config c;
	ckpt_read_config(path, &c, &e);
	return 0;
}
