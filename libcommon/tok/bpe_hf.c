/* bpe_hf.c: Hugging Face tokenizers' tokenizer.json for a byte-level BPE
 * (GPT-2's kind), read and written, and the files beside it that
 * transformers.AutoTokenizer reads (see bpe.h).
 *
 * Read: "model" must be {"type": "BPE", "vocab": {STRING: id}, "merges":
 * ["LEFT RIGHT", ...] or [["LEFT", "RIGHT"], ...]} with GPT-2's
 * byte-to-unicode strings and no subword prefix or suffix; the
 * pre-tokenizer must be ByteLevel with GPT-2's regex (lmpipe's "gpt2"
 * pre-tokenizer); "added_tokens" either name vocabulary entries or append
 * ids after them, and those marked special become special tokens.
 * Written: the same, with GPT-2's ByteLevel pre-tokenizer, post-processor
 * and decoder, merges as "LEFT RIGHT" strings (byte-level strings hold no
 * space, and every tokenizers version reads them). */
#include "tok/bpe.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"
#include "tok/bpe_gpt2_internal.h"

enum { UTF8_MAX_PER_BYTE = 2 }; /* GPT-2's alphabet stays below U+0800 */

static int check_pretokenizer(const json_t *root, const char *path, lm_err *e)
{
	const json_t *p = json_object_get(root, "pre_tokenizer");
	const char *type = json_string_value(json_object_get(p, "type"));
	const json_t *re = json_object_get(p, "use_regex");
	if (!type || strcmp(type, "ByteLevel") || json_is_false(re))
		return lm_seterr(e, "%s: pre_tokenizer %s: only GPT-2's (ByteLevel with its regex) is "
				 "supported", path, type ? type : "(none)");
	if (json_is_true(json_object_get(p, "add_prefix_space")))
		return lm_seterr(e, "%s: pre_tokenizer with add_prefix_space is not supported", path);
	return 0;
}

static int check_model(const json_t *m, const char *path, lm_err *e)
{
	const char *type = json_string_value(json_object_get(m, "type"));
	if (!json_is_object(m) || (type && strcmp(type, "BPE")))
		return lm_seterr(e, "%s: model %s: only a BPE model is supported", path,
				 type ? type : "(missing)");
	static const char *const affixes[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	for (int i = 0; i < 2; i++) {
		const char *a = json_string_value(json_object_get(m, affixes[i]));
		if (a && *a)
			return lm_seterr(e, "%s: model.%s \"%s\" is not supported", path, affixes[i], a);
	}
	return 0;
}

static int add_merges(bpe_builder *b, const int *dec, const json_t *merges, const char *path,
		      lm_err *e)
{
	if (!json_is_array(merges))
		return lm_seterr(e, "%s: model.merges is not an array", path);
	size_t i, longest = 0;
	json_t *m;
	json_array_foreach(merges, i, m) {
		size_t n = json_is_string(m) ? json_string_length(m)
			: json_string_length(json_array_get(m, 0)) + json_string_length(json_array_get(m, 1));
		if (n > longest)
			longest = n;
	}
	uint8_t *tmp = malloc(longest + 1);
	if (!tmp)
		return lm_seterr(e, "out of memory");
	int rc = 0;
	json_array_foreach(merges, i, m) {
		const char *l, *r;
		size_t ll, rl;
		if (json_is_string(m)) {
			l = json_string_value(m);
			const char *sp = strchr(l, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				rc = lm_seterr(e, "%s: model.merges[%zu]: \"%.40s\" is not \"LEFT RIGHT\"",
					       path, i, l);
				break;
			}
			ll = (size_t)(sp - l);
			r = sp + 1;
			rl = strlen(r);
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
			l = json_string_value(json_array_get(m, 0));
			ll = json_string_length(json_array_get(m, 0));
			r = json_string_value(json_array_get(m, 1));
			rl = json_string_length(json_array_get(m, 1));
		} else {
			rc = lm_seterr(e, "%s: model.merges[%zu]: neither \"LEFT RIGHT\" nor [LEFT, RIGHT]",
				       path, i);
			break;
		}
		if (gpt2_add_merge(b, dec, (const uint8_t *)l, ll, (const uint8_t *)r, rl, tmp, e)) {
			rc = lm_err_prefix(e, "%s: model.merges[%zu]", path, i);
			break;
		}
	}
	free(tmp);
	return rc;
}

static int add_added_tokens(bpe_builder *b, const json_t *added, const char *path, lm_err *e)
{
	size_t i;
	json_t *a;
	if (added && !json_is_array(added))
		return lm_seterr(e, "%s: added_tokens is not an array", path);
	json_array_foreach(added, i, a) {
		json_t *id = json_object_get(a, "id");
		const char *content = json_string_value(json_object_get(a, "content"));
		if (!json_is_integer(id) || !content || !*content)
			return lm_seterr(e, "%s: added_tokens[%zu]: needs an integer id and a content",
					 path, i);
		size_t len = json_string_length(json_object_get(a, "content"));
		json_int_t want = json_integer_value(id);
		uint32_t have = bb_find(b, (const uint8_t *)content, len);
		if (have == BPE_NO_TOKEN && want == (json_int_t)b->t->n_vocab) {
			if (bb_add_token(b, (const uint8_t *)content, len, e))
				return lm_err_prefix(e, "%s: added_tokens[%zu]", path, i);
			have = (uint32_t)want;
		}
		if (have == BPE_NO_TOKEN || (json_int_t)have != want)
			return lm_seterr(e, "%s: added_tokens[%zu]: \"%.40s\" with id %lld is neither the "
					 "vocabulary's entry nor the next id (%u)", path, i, content,
					 (long long)want, b->t->n_vocab);
		int is_special = json_is_true(json_object_get(a, "special"));
		int already = 0;
		for (uint32_t k = 0; k < b->t->n_special; k++)
			already |= b->t->special[k] == have;
		if (is_special && !already && bb_mark_special(b, have, e))
			return lm_err_prefix(e, "%s: added_tokens[%zu]", path, i);
	}
	return 0;
}

int bpe_load_hf(bpe_tokenizer *t, const char *path, lm_err *e)
{
	uint32_t enc[256];
	int dec[GPT2_ALPHABET];
	gpt2_tables(enc, dec);
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return je.line > 0 ? lm_seterr(e, "%s:%d:%d: %s", path, je.line, je.column, je.text)
				   : lm_seterr(e, "%s: %s", path, je.text);
	const json_t *m = json_object_get(root, "model");
	bpe_builder b;
	int rc = check_model(m, path, e) || check_pretokenizer(root, path, e) ? -1 : 0;
	if (!rc && bb_init(&b, t, e))
		rc = -1;
	else if (!rc) {
		if (gpt2_add_vocab(&b, dec, json_object_get(m, "vocab"), path, e) ||
		    add_merges(&b, dec, json_object_get(m, "merges"), path, e) ||
		    add_added_tokens(&b, json_object_get(root, "added_tokens"), path, e))
			rc = -1;
		else if (bb_finish(&b, e))
			rc = lm_err_prefix(e, "%s", path);
		bb_discard(&b);
		if (rc)
			bpe_free(t);
	}
	json_decref(root);
	return rc;
}

/* ---- writing ---- */

static json_t *gpt2_json(const uint32_t *enc, const uint8_t *s, size_t len)
{
	char *buf = malloc(UTF8_MAX_PER_BYTE * len + 1);
	size_t o = 0;
	if (!buf)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		uint32_t cp = enc[s[i]];
		if (cp < 0x80) {
			buf[o++] = (char)cp;
		} else {
			buf[o++] = (char)(0xC0 | cp >> 6);
			buf[o++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	json_t *j = json_stringn(buf, o);
	free(buf);
	return j;
}

static json_t *byte_level(int add_prefix_space, int trim_offsets)
{
	return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
			 add_prefix_space, "trim_offsets", trim_offsets, "use_regex", 1);
}

static json_t *special_entry(const bpe_tokenizer *t, uint32_t id, int with_id)
{
	json_t *j = json_object();
	if (with_id)
		json_object_set_new(j, "id", json_integer(id));
	json_object_set_new(j, "content", json_stringn((const char *)bpe_token_bytes(t, id),
						       bpe_token_len(t, id)));
	json_object_set_new(j, "single_word", json_false());
	json_object_set_new(j, "lstrip", json_false());
	json_object_set_new(j, "rstrip", json_false());
	json_object_set_new(j, "normalized", json_false());
	json_object_set_new(j, "special", json_true());
	return j;
}

static json_t *tokenizer_json(const bpe_tokenizer *t)
{
	uint32_t enc[256];
	int dec[GPT2_ALPHABET];
	gpt2_tables(enc, dec);
	json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
	for (uint32_t i = 0; i < t->n_vocab; i++) {
		json_t *k = gpt2_json(enc, bpe_token_bytes(t, i), bpe_token_len(t, i));
		if (k)
			json_object_setn_new(vocab, json_string_value(k), json_string_length(k),
					     json_integer(i));
		json_decref(k);
	}
	for (uint32_t i = 0; i < t->n_merges; i++) {
		const bpe_merge *m = &t->merges[i];
		json_t *l = gpt2_json(enc, bpe_token_bytes(t, m->left), bpe_token_len(t, m->left));
		json_t *r = gpt2_json(enc, bpe_token_bytes(t, m->right), bpe_token_len(t, m->right));
		if (l && r) {
			size_t n = json_string_length(l) + json_string_length(r) + 1;
			char *s = malloc(n + 1);
			if (s) {
				snprintf(s, n + 1, "%s %s", json_string_value(l), json_string_value(r));
				json_array_append_new(merges, json_stringn(s, n));
			}
			free(s);
		}
		json_decref(l);
		json_decref(r);
	}
	for (uint32_t i = 0; i < t->n_special; i++)
		json_array_append_new(added, special_entry(t, t->special[i], 1));
	json_t *model = json_pack("{s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:b, s:o, s:o}", "type", "BPE",
				  "dropout", "unk_token", "continuing_subword_prefix", "",
				  "end_of_word_suffix", "", "fuse_unk", 0, "byte_fallback", 0,
				  "ignore_merges", 0, "vocab", vocab, "merges", merges);
	return json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:o, s:o}", "version", "1.0",
			 "truncation", "padding", "added_tokens", added, "normalizer",
			 "pre_tokenizer", byte_level(0, 1), "post_processor", byte_level(1, 0),
			 "decoder", byte_level(1, 1), "model", model);
}

static int write_json(json_t *j, const char *dir, const char *name, lm_err *e)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *path = malloc(n);
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
	int rc = -1;
	atomic_file af;
	if (!path || !text) {
		rc = lm_seterr(e, "%s: out of memory", name);
	} else {
		snprintf(path, n, "%s/%s", dir, name);
		if (!atomic_open(&af, path, e)) {
			if (io_write_all(af.fp, text, strlen(text), path, e) ||
			    io_write_all(af.fp, "\n", 1, path, e))
				atomic_abort(&af);
			else
				rc = atomic_commit(&af, e);
		}
	}
	free(text);
	free(path);
	return rc;
}

int bpe_save_hf(const bpe_tokenizer *t, const char *dir, int max_length, lm_err *e)
{
	json_t *special_map = json_object(), *decoder = json_object();
	for (uint32_t i = 0; i < t->n_special; i++) {
		char id[16];
		snprintf(id, sizeof id, "%u", t->special[i]);
		json_object_set_new(decoder, id, special_entry(t, t->special[i], 0));
	}
	json_t *cfg = json_pack("{s:b, s:b, s:o, s:b, s:i, s:s}", "add_bos_token", 0,
				"add_eos_token", 0, "added_tokens_decoder", decoder,
				"clean_up_tokenization_spaces", 0, "model_max_length", max_length,
				"tokenizer_class", "PreTrainedTokenizerFast");
	if (t->eot != BPE_NO_TOKEN) {
		static const char *const roles[] = { "bos_token", "eos_token", "unk_token" };
		for (int r = 0; r < 3; r++) {
			json_t *s = json_stringn((const char *)bpe_token_bytes(t, t->eot),
						 bpe_token_len(t, t->eot));
			json_object_set(cfg, roles[r], s);
			json_object_set_new(special_map, roles[r], s);
		}
	}
	json_t *tok = tokenizer_json(t);
	int rc = write_json(tok, dir, "tokenizer.json", e) ||
		 write_json(cfg, dir, "tokenizer_config.json", e) ||
		 write_json(special_map, dir, "special_tokens_map.json", e) ||
		 bpe_save_gpt2(t, dir, e) ? -1 : 0;
	json_decref(tok);
	json_decref(cfg);
	json_decref(special_map);
	return rc;
}
