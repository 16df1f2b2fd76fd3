/* safetensors.c: fuzz a safetensors file: the header, the tensors' layout,
 * the checksums (every tensor verified) and the metadata. */
#include "fuzz.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path("x.safetensors");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	sft_file f;
	if (sft_open(&f, path, &e))
		return 0;
	for (size_t i = 0; i < f.n; i++) {
		const sft_tensor *t;
		sft_verify(&f, &f.t[i], &e);
		sft_expect(&f, f.t[i].name, f.t[i].dtype, f.t[i].ndim, f.t[i].shape, &t, &e);
	}
	sft_meta(&f, "format");
	sft_close(&f);
	return 0;
}
