/* shard_set.c: fuzz a shard set's manifest (PREFIX.manifest), through the
 * reader that takes a prefix (its shards are absent: open errors). */
#include "data/shard_reader.h"
#include "data/shard_set.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *prefix = fuzz_path("s"), *path = fuzz_path("s.manifest");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	shard_set s;
	if (shard_set_read(prefix, &s, &e) == 0)
		shard_set_free(&s);
	shard_reader *r;
	sr_config cfg = { .mode = SR_RANDOM, .batch = 1, .context = 1 };
	const char *paths[] = { prefix };
	if (sr_open(&r, paths, 1, &cfg, &e) == 0)
		sr_close(r);
	return 0;
}
