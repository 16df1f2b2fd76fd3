/* shard_pack_internal.h: the files of a shard set on disk, shared by the
 * files of shard-pack (shard_pack.c packs, shard_pack_set.c seals and
 * cleans); see man 5 lmpipe-shard. */
#ifndef LMPIPE_SHARD_PACK_INTERNAL_H
#define LMPIPE_SHARD_PACK_INTERNAL_H

#include "data/shard_set.h"

/* Is name (a directory entry) a shard of the set base: base followed by
 * "-DIGITS.lms" or "-val-DIGITS.lms", or by ".gN" and one of those? */
int shard_pack_is_shard_of(const char *name, const char *base);
/* Remove the shards of prefix that keep does not name: an older generation,
 * or the later shards of an earlier, longer run. */
void shard_pack_remove_unlisted(const char *prefix, const shard_set *keep);
/* Remove the temporary files of the set's shards and manifest that a killed
 * run left (their writer's process is gone). */
void shard_pack_remove_stale_tmp(const char *prefix);

#endif
