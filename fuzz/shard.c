/* shard.c: fuzz one shard file: the header, index and frames (shard-pack -t)
 * and the training reader over it (sequential windows, as evaluation reads). */
#include <string.h>

#include "app/shard_pack.h"
#include "data/shard_reader.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path("x.lms");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	shard_test(path, &e);
	shard_reader *r;
	sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = 4, .context = 3, .cache_frames = 2 };
	const char *paths[] = { path };
	if (sr_open(&r, paths, 1, &cfg, &e) == 0) {
		uint32_t out[4 * 4];
		for (int i = 0; i < 64 && sr_next(r, out, &e) > 0; i++)
			;
		sr_close(r);
	}
	return 0;
}
