/* shard_set.h: the manifest of a shard set (man 5 lmpipe-shard), the
 * set-level commit of shard-pack.
 *
 * shard-pack -o PREFIX writes its shards, then, last and atomically,
 * PREFIX.manifest: a text file naming every shard of the run, training and
 * validation, with its token and document counts and its header checksum
 * (the CRC-32C stored in the shard's last header bytes, which covers the
 * index checksum, which covers every frame's checksum):
 *
 *     lmpipe-shard-set 1
 *     generation 0
 *     train 2
 *     d-000000.lms 100000000 41210 1a2b3c4d
 *     d-000001.lms 5300 2 99aa00ff
 *     val 1
 *     d-val-000000.lms 20000 10 0b0c0d0e
 *     end 6f3e2a10
 *
 * Names are relative to the manifest's directory; the last line holds the
 * CRC-32C (hex) of every byte before it.  A reader takes a PREFIX only
 * through PREFIX.manifest (and PREFIX-val through the val part of
 * PREFIX.manifest), so a set whose run was killed, which has no manifest, is
 * refused.  Generation 0 names shards PREFIX-NNNNNN.lms and
 * PREFIX-val-NNNNNN.lms; shard-pack -f over a set with a manifest writes the
 * next generation G under PREFIX.gG-NNNNNN.lms and PREFIX.gG-val-NNNNNN.lms,
 * switches the manifest, then removes the old generation: a reader sees the
 * old set or the new one, never a mix. */
#ifndef LMPIPE_SHARD_SET_H
#define LMPIPE_SHARD_SET_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SHARD_SET_EXT ".manifest"
#define SHARD_SET_VAL "-val"     /* PREFIX-val: the validation part */

typedef struct shard_set_entry {
	char *name;              /* relative to the manifest's directory */
	uint64_t tokens, docs;
	uint32_t crc;            /* the shard's header checksum */
} shard_set_entry;

typedef struct shard_set {
	unsigned generation;
	shard_set_entry *e[2];   /* [0] train, [1] val */
	size_t n[2], cap[2];
} shard_set;

enum { SHARD_SET_TRAIN = 0, SHARD_SET_VALID = 1 };

/* Add a shard (name is copied; only its last path component is kept). */
int shard_set_add(shard_set *s, int part, const char *name, uint64_t tokens, uint64_t docs,
		  uint32_t crc, lm_err *e);
void shard_set_free(shard_set *s);

/* Write prefix.manifest whole or not at all. */
int shard_set_write(const char *prefix, const shard_set *s, lm_err *e);
/* Read prefix.manifest; 0, -1 with a message, or 1 when there is none. */
int shard_set_read(const char *prefix, shard_set *s, lm_err *e);

/* The manifest's path for prefix (malloc'd), and the path of a shard
 * named in it (malloc'd, beside the manifest). */
char *shard_set_path(const char *prefix);
char *shard_set_shard_path(const char *prefix, const char *name);

#endif
