/* bpe_identity.c: the tokenizer identity of checkpoints (see
 * bpe_identity.h). */
#include "tok/bpe_identity.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/le.h"

enum { CRC_HEX_LEN = 9 };

static uint32_t crc_u32(uint32_t crc, uint32_t x)
{
	uint8_t b[4];
	le_put32(b, x);
	return crc32c(crc, b, sizeof b);
}

uint32_t bpe_identity_crc(const bpe_tokenizer *t)
{
	uint32_t crc = crc_u32(0, t->n_vocab);
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		crc = crc_u32(crc, (uint32_t)bpe_token_len(t, id));
		crc = crc32c(crc, bpe_token_bytes(t, id), bpe_token_len(t, id));
	}
	crc = crc_u32(crc, t->n_merges);
	for (uint32_t i = 0; i < t->n_merges; i++) {
		crc = crc_u32(crc, t->merges[i].left);
		crc = crc_u32(crc, t->merges[i].right);
		crc = crc_u32(crc, t->merges[i].result);
	}
	crc = crc_u32(crc, t->n_special);
	for (uint32_t i = 0; i < t->n_special; i++)
		crc = crc_u32(crc, t->special[i]);
	return crc;
}

char *bpe_identity_json(const bpe_tokenizer *t, uint32_t vocab, uint32_t eot, const uint32_t *crc)
{
	json_t *j = json_object();
	if (!j)
		return NULL;
	if (t || crc) {
		char hex[CRC_HEX_LEN];
		snprintf(hex, sizeof hex, "%08x", t ? bpe_identity_crc(t) : *crc);
		json_object_set_new(j, "crc32c", json_string(hex));
	}
	if (t) {
		vocab = t->n_vocab;
		eot = t->eot;
	}
	json_object_set_new(j, "vocab", json_integer(vocab));
	json_object_set_new(j, "eot", eot == BPE_NO_TOKEN ? json_null() : json_integer(eot));
	if (t) {
		json_t *s = json_array();
		for (uint32_t i = 0; s && i < t->n_special; i++)
			json_array_append_new(s, json_stringn((const char *)bpe_token_bytes(t, t->special[i]),
							      bpe_token_len(t, t->special[i])));
		json_object_set_new(j, "specials", s);
	}
	char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	return text;
}

int bpe_identity_check(const bpe_tokenizer *t, const char *tok_name, const char *json,
		       const char *where, lm_err *e)
{
	json_error_t je;
	json_t *j = json_loads(json, 0, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return lm_seterr(e, "%s: the recorded tokenizer identity is not a JSON object", where);
	}
	int rc = 0;
	json_t *v = json_object_get(j, "vocab");
	const char *crc = json_string_value(json_object_get(j, "crc32c"));
	char hex[CRC_HEX_LEN];
	snprintf(hex, sizeof hex, "%08x", bpe_identity_crc(t));
	if (json_is_integer(v) && json_integer_value(v) != (json_int_t)t->n_vocab)
		rc = lm_seterr(e, "%s has %u tokens, the tokenizer of %s had %lld: not its tokenizer",
			       tok_name, t->n_vocab, where, (long long)json_integer_value(v));
	else if (crc && strcmp(crc, hex))
		rc = lm_seterr(e, "%s (identity %s) is not the tokenizer of %s (identity %s)",
			       tok_name, hex, where, crc);
	json_decref(j);
	return rc;
}

int bpe_identity_check_crc(uint32_t crc, const char *what, const char *json, const char *where,
			   lm_err *e)
{
	json_t *j = json_loads(json, 0, NULL);
	const char *rec = json_string_value(json_object_get(j, "crc32c"));
	char hex[CRC_HEX_LEN];
	snprintf(hex, sizeof hex, "%08x", crc);
	int rc = 0;
	if (rec && strcmp(rec, hex))
		rc = lm_seterr(e, "%s were made by another tokenizer (identity %s) than %s's "
			       "(identity %s)", what, hex, where, rec);
	json_decref(j);
	return rc;
}
