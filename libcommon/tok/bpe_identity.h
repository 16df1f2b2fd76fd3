/* bpe_identity.h: a tokenizer's identity, recorded where its ids are used
 * (checkpoints) and checked where a tokenizer meets them again, so that a
 * model is never driven by another tokenizer's ids: a JSON object
 * {"crc32c":"89abcdef","vocab":N,"eot":ID or null,"specials":["..."]}.
 * The CRC-32C covers every id's bytes, the merges in order and the special
 * ids, so the same tokenizer read from an lmpipe file or imported from
 * GPT-2 files has the same identity.  bpe-encode writes the CRC into the
 * token stream, shard-pack into the shards (version 2), lm-train into the
 * checkpoint. */
#ifndef LMPIPE_BPE_IDENTITY_H
#define LMPIPE_BPE_IDENTITY_H

#include <stdint.h>

#include "base/err.h"
#include "tok/bpe.h"

/* The key files record it under (a checkpoint's __metadata__). */
#define BPE_IDENTITY_KEY "lmpipe.tokenizer"

uint32_t bpe_identity_crc(const bpe_tokenizer *t);
/* The identity as JSON text (malloc'd), or NULL when out of memory.  With
 * t NULL, what the ids tell: vocab and eot (BPE_NO_TOKEN: none), and the
 * CRC when the shards recorded it (crc not NULL). */
char *bpe_identity_json(const bpe_tokenizer *t, uint32_t vocab, uint32_t eot, const uint32_t *crc);
/* Check an identity CRC (what: who has it, "the shards d") against a
 * recorded identity (json), when it recorded one. */
int bpe_identity_check_crc(uint32_t crc, const char *what, const char *json, const char *where,
			   lm_err *e);
/* Check t against a recorded identity (json): its vocabulary size and,
 * when recorded, its CRC (the end-of-text id of shards written by other
 * tools need not be a special token of the tokenizer, so eot is kept for
 * the record only); where names the record in the message ("ck/latest"). */
int bpe_identity_check(const bpe_tokenizer *t, const char *tok_name, const char *json,
		       const char *where, lm_err *e);

#endif
