/* bpe_gpt2.c: GPT-2 style vocab.json + merges.txt, import and export.
 *
 * GPT-2 writes each token's bytes as a string of printable code points:
 * bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other
 * 68 bytes (controls, space, 0x7F..0xA0, 0xAD) become U+0100.. in byte
 * order.  merges.txt has one "LEFT RIGHT" a line in rank order; an optional
 * "#version" line comes first, and a line that does not split on ' ' into
 * exactly two parts is skipped (as CS336's loader does).  A vocabulary
 * entry "<|endoftext|>" becomes the special end-of-text token. */
#include "tok/bpe.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"
#include "tok/bpe_gpt2_internal.h"

void gpt2_tables(uint32_t enc[256], int dec[GPT2_ALPHABET])
{
	uint32_t next = GPT2_SHIFTED;
	for (int i = 0; i < GPT2_ALPHABET; i++)
		dec[i] = -1;
	for (int c = 0; c < 256; c++) {
		int self = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
		enc[c] = self ? (uint32_t)c : next++;
		dec[enc[c]] = c;
	}
}

int gpt2_decode(const int *dec, const uint8_t *s, size_t len, uint8_t *out, size_t *olen, lm_err *e)
{
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = bb_utf8_char(s + i, len - i, &cp);
		if (n == 0)
			return lm_seterr(e, "invalid UTF-8");
		if (cp >= GPT2_ALPHABET || dec[cp] < 0)
			return lm_seterr(e, "character U+%04X is not in GPT-2's byte alphabet", cp);
		out[o++] = (uint8_t)dec[cp];
		i += n;
	}
	*olen = o;
	return 0;
}

typedef struct vocab_entry {
	uint32_t id;
	uint8_t *bytes;
	size_t len;
} vocab_entry;

static int by_id(const void *a, const void *b)
{
	uint32_t x = ((const vocab_entry *)a)->id, y = ((const vocab_entry *)b)->id;
	return x < y ? -1 : x > y;
}

int gpt2_add_vocab(bpe_builder *b, const int *dec, const void *json_object, const char *path,
		   lm_err *e)
{
	const json_t *root = json_object;
	if (!json_is_object(root))
		return lm_seterr(e, "%s: not a JSON object of token -> id", path);
	size_t n = json_object_size(root), k = 0;
	vocab_entry *v = calloc(n ? n : 1, sizeof *v);
	int rc = -1;
	const char *key;
	json_t *val;
	if (!v)
		return lm_seterr(e, "out of memory");
	json_object_foreach((json_t *)root, key, val) {
		size_t kl = strlen(key);
		json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
		if (id < 0 || (size_t)id >= n) {
			lm_seterr(e, "%s: token \"%.40s\": id must be an integer in 0..%zu", path, key, n - 1);
			goto out;
		}
		v[k].id = (uint32_t)id;
		v[k].bytes = malloc(kl ? kl : 1);
		if (!v[k].bytes) {
			lm_seterr(e, "out of memory");
			goto out;
		}
		if (gpt2_decode(dec, (const uint8_t *)key, kl, v[k].bytes, &v[k].len, e)) {
			k++;
			lm_err_prefix(e, "%s: token \"%.40s\"", path, key);
			goto out;
		}
		k++;
	}
	qsort(v, n, sizeof *v, by_id);
	for (size_t i = 0; i < n; i++) {
		if (v[i].id != i) {
			lm_seterr(e, "%s: ids must be 0..%zu each once (id %zu is %s)", path, n - 1, i,
				  v[i].id < i ? "repeated" : "missing");
			goto out;
		}
		if (bb_add_token(b, v[i].bytes, v[i].len, e)) {
			lm_err_prefix(e, "%s", path);
			goto out;
		}
	}
	uint32_t eot = bb_find(b, (const uint8_t *)BPE_EOT_TEXT, strlen(BPE_EOT_TEXT));
	if (eot != BPE_NO_TOKEN && bb_mark_special(b, eot, e))
		goto out;
	rc = 0;
out:
	for (size_t i = 0; i < k; i++)
		free(v[i].bytes);
	free(v);
	return rc;
}

static int load_vocab(bpe_builder *b, const int *dec, const char *path, lm_err *e)
{
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root && je.line > 0)
		return lm_seterr(e, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	if (!root)
		return lm_seterr(e, "%s: %s", path, je.text);
	int rc = gpt2_add_vocab(b, dec, root, path, e);
	json_decref(root);
	return rc;
}

static int is_pyspace(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int gpt2_add_merge(bpe_builder *b, const int *dec, const uint8_t *l, size_t ll0,
		   const uint8_t *r, size_t rl0, uint8_t *tmp, lm_err *e)
{
	size_t ll, rl;
	char s1[BB_SHOW_MAX], s2[BB_SHOW_MAX];
	if (gpt2_decode(dec, l, ll0, tmp, &ll, e) || gpt2_decode(dec, r, rl0, tmp + ll, &rl, e))
		return -1;
	uint32_t left = bb_find(b, tmp, ll), right = bb_find(b, tmp + ll, rl);
	if (left == BPE_NO_TOKEN || right == BPE_NO_TOKEN)
		return lm_seterr(e, "merge \"%s\" \"%s\" uses a token that is not in the vocabulary",
				 bb_show(tmp, ll, s1), bb_show(tmp + ll, rl, s2));
	return bb_add_merge(b, left, right, e);
}

static int load_merges(bpe_builder *b, const int *dec, const char *path, lm_err *e)
{
	uint8_t *buf, *tmp;
	size_t len, lineno = 0;
	if (io_read_file(path, &buf, &len, e))
		return -1;
	if (!(tmp = malloc(len + 1))) {
		free(buf);
		return lm_seterr(e, "out of memory");
	}
	int rc = -1;
	for (size_t pos = 0; pos < len;) {
		const uint8_t *s = buf + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		pos += n + 1;
		lineno++;
		while (n > 0 && is_pyspace(s[n - 1]))
			n--;
		if (lineno == 1 && n >= 8 && !memcmp(s, "#version", 8))
			continue;
		const uint8_t *sp = memchr(s, ' ', n);
		if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1))
			continue;       /* not exactly two parts */
		size_t l0 = (size_t)(sp - s);
		if (gpt2_add_merge(b, dec, s, l0, sp + 1, n - l0 - 1, tmp, e)) {
			lm_err_prefix(e, "%s:%zu", path, lineno);
			goto out;
		}
	}
	rc = 0;
out:
	free(tmp);
	free(buf);
	return rc;
}

int bpe_load_gpt2(bpe_tokenizer *t, const char *vocab_json, const char *merges_txt, lm_err *e)
{
	uint32_t enc[256];
	int dec[GPT2_ALPHABET];
	bpe_builder b;
	gpt2_tables(enc, dec);
	if (bb_init(&b, t, e))
		return -1;
	int rc = load_vocab(&b, dec, vocab_json, e);
	if (!rc)
		rc = load_merges(&b, dec, merges_txt, e);
	if (!rc && bb_finish(&b, e))
		rc = lm_err_prefix(e, "%s", vocab_json);
	bb_discard(&b);
	if (rc)
		bpe_free(t);
	return rc;
}

/* ---- export ---- */

static void put_utf8(FILE *fp, uint32_t cp)
{
	if (cp < 0x80) {
		fputc((int)cp, fp);
	} else {                         /* the alphabet stays below U+0800 */
		fputc((int)(0xC0 | cp >> 6), fp);
		fputc((int)(0x80 | (cp & 0x3F)), fp);
	}
}

void gpt2_put(FILE *fp, const uint32_t *enc, const uint8_t *s, size_t len, int json)
{
	for (size_t i = 0; i < len; i++) {
		uint32_t cp = enc[s[i]];
		if (json && (cp == '"' || cp == '\\'))
			fputc('\\', fp);
		put_utf8(fp, cp);
	}
}

static int save_file(const bpe_tokenizer *t, const uint32_t *enc, const char *path, int json, lm_err *e)
{
	atomic_file af;
	if (atomic_open(&af, path, e))
		return -1;
	FILE *fp = af.fp;
	if (json) {
		fputc('{', fp);
		for (uint32_t i = 0; i < t->n_vocab; i++) {
			fputs(i ? ", \"" : "\"", fp);
			gpt2_put(fp, enc, bpe_token_bytes(t, i), bpe_token_len(t, i), 1);
			fprintf(fp, "\": %u", i);
		}
		fputs("}\n", fp);
	} else {
		fputs("#version: 0.2\n", fp);
		for (uint32_t i = 0; i < t->n_merges; i++) {
			const bpe_merge *m = &t->merges[i];
			gpt2_put(fp, enc, bpe_token_bytes(t, m->left), bpe_token_len(t, m->left), 0);
			fputc(' ', fp);
			gpt2_put(fp, enc, bpe_token_bytes(t, m->right), bpe_token_len(t, m->right), 0);
			fputc('\n', fp);
		}
	}
	if (ferror(fp)) {
		atomic_abort(&af);
		return lm_seterr(e, "%s: write error", path);
	}
	return atomic_commit(&af, e);
}

int bpe_save_gpt2(const bpe_tokenizer *t, const char *dir, lm_err *e)
{
	uint32_t enc[256];
	int dec[GPT2_ALPHABET];
	gpt2_tables(enc, dec);
	size_t n = strlen(dir) + sizeof "/vocab.json";
	char *vp = malloc(n), *mp = malloc(n + 1);
	if (!vp || !mp) {
		free(vp);
		free(mp);
		return lm_seterr(e, "out of memory");
	}
	snprintf(vp, n, "%s/vocab.json", dir);
	snprintf(mp, n + 1, "%s/merges.txt", dir);
	int rc = save_file(t, enc, vp, 1, e) || save_file(t, enc, mp, 0, e) ? -1 : 0;
	free(vp);
	free(mp);
	return rc;
}
