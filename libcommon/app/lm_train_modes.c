/* lm_train_modes.c: lm-train's modes besides training: --export-hf (a
 * checkpoint to a Hugging Face directory, with its tokenizer when given)
 * and --dump-logits (the model's
 * logits on given token ids, for cross-checks against transformers). */
#include "app/lm_train.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/safetensors.h"
#include "tok/bpe.h"
#include "tok/bpe_identity.h"

static void unload_model(model *m)
{
	lm_backend *be = m->be;
	model_free(m);
	if (be)
		be->close(be);
}

static int load_model(model *m, const char *ckpt, const char *device, int B, int T, lm_err *e)
{
	model_config c;
	if (ckpt_read_config(ckpt, &c, e))
		return -1;
	if (T > c.ctx)
		return lm_seterr(e, "sequences of %d tokens exceed the model's context %d", T, c.ctx);
	lm_backend *be = backend_open(device, e);
	if (!be)
		return -1;
	if (model_init(m, &c, be, B, T ? T : 1, e)) {
		be->close(be);
		return -1;
	}
	if (ckpt_load(ckpt, m, NULL, NULL, e)) {
		unload_model(m);
		return -1;
	}
	return 0;
}

/* config.json gets the tokenizer's special ids, which generate() stops at. */
static int add_token_ids(const char *dir, const bpe_tokenizer *t, lm_err *e)
{
	size_t n = strlen(dir) + sizeof "/config.json";
	char *path = malloc(n);
	if (!path)
		return lm_seterr(e, "out of memory");
	snprintf(path, n, "%s/config.json", dir);
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	int rc = -1;
	if (!j) {
		lm_seterr(e, "%s: %s", path, je.text);
	} else {
		json_t *id = t->eot == BPE_NO_TOKEN ? json_null() : json_integer(t->eot);
		json_object_set(j, "bos_token_id", id);
		json_object_set_new(j, "eos_token_id", id);
		char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		atomic_file af;
		if (!text) {
			lm_seterr(e, "out of memory");
		} else if (!atomic_open(&af, path, e)) {
			if (io_write_all(af.fp, text, strlen(text), path, e) ||
			    io_write_all(af.fp, "\n", 1, path, e))
				atomic_abort(&af);
			else
				rc = atomic_commit(&af, e);
		}
		free(text);
		json_decref(j);
	}
	free(path);
	return rc;
}

int train_export_hf(const char *ckpt, const char *dir, const char *tok_path, const char *device,
		    lm_err *e)
{
	model m;
	bpe_tokenizer t;
	char *id = NULL;
	if (tok_path) {
		if (bpe_load_any(&t, tok_path, e))
			return -1;
		if (ckpt_read_meta(ckpt, BPE_IDENTITY_KEY, &id, e) ||
		    (id && bpe_identity_check(&t, tok_path, id, ckpt, e))) {
			free(id);
			bpe_free(&t);
			return -1;
		}
		free(id);
	}
	int rc = load_model(&m, ckpt, device, 1, 1, e);
	if (!rc) {
		rc = ckpt_export_hf(dir, &m, e);
		if (!rc && tok_path)
			rc = bpe_save_hf(&t, dir, m.cfg.ctx, e) || add_token_ids(dir, &t, e) ? -1 : 0;
		unload_model(&m);
	}
	if (tok_path)
		bpe_free(&t);
	return rc;
}

/* Parse the ids file: rows of blank-separated decimal ids, equal lengths,
 * each id below vocab, at most ctx per row; errors name the line and the
 * id's place in it. */
static int parse_ids(const char *path, int vocab, int ctx, int32_t **ids, int *B, int *T,
		     lm_err *e)
{
	uint8_t *buf;
	size_t len;
	if (io_read_file(path, &buf, &len, e))
		return -1;
	size_t cap = 1024, n = 0;
	int32_t *v = malloc(cap * sizeof *v);
	int rows = 0, cols = -1, line = 1, cur = 0;
	char *p = (char *)buf;
	int rc = v ? 0 : lm_seterr(e, "out of memory");
	while (!rc && *p) {
		if (*p == ' ' || *p == '\t' || *p == '\r') {
			p++;
			continue;
		}
		if (*p == '\n') {
			if (cur && cols >= 0 && cur != cols)
				rc = lm_seterr(e, "%s:%d: %d ids, the first line has %d", path, line, cur, cols);
			if (cur) {
				cols = cur;
				rows++;
			}
			cur = 0;
			line++;
			p++;
			continue;
		}
		char *end;
		long x = strtol(p, &end, 10);
		int wlen = (int)strcspn(p, " \t\r\n");
		if (end == p || (*end && !strchr(" \t\r\n", *end)) || x < 0 || x > INT32_MAX) {
			rc = lm_seterr(e, "%s:%d: id %d: '%.*s' is not a token id", path, line, cur + 1,
				       wlen, p);
			break;
		}
		if (x >= vocab) {
			rc = lm_seterr(e, "%s:%d: id %d: %ld is outside the model's vocabulary (%d)",
				       path, line, cur + 1, x, vocab);
			break;
		}
		if (cur == ctx) {
			rc = lm_seterr(e, "%s:%d: more than the model's context of %d ids", path, line, ctx);
			break;
		}
		if (n == cap) {
			int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
			if (!nv) {
				rc = lm_seterr(e, "out of memory");
				break;
			}
			v = nv;
		}
		v[n++] = (int32_t)x;
		cur++;
		p = end;
	}
	if (!rc && cur) {
		if (cols >= 0 && cur != cols)
			rc = lm_seterr(e, "%s:%d: %d ids, the first line has %d", path, line, cur, cols);
		cols = cur;
		rows++;
	}
	if (!rc && !rows)
		rc = lm_seterr(e, "%s: no token ids", path);
	free(buf);
	if (rc) {
		free(v);
		return -1;
	}
	*ids = v;
	*B = rows;
	*T = cols;
	return 0;
}

int train_dump_logits(const char *ckpt, const char *ids_path, const char *out,
		      const char *device, lm_err *e)
{
	int32_t *ids;
	int B, T;
	model m;
	model_config c;
	if (ckpt_read_config(ckpt, &c, e) || parse_ids(ids_path, c.vocab, c.ctx, &ids, &B, &T, e))
		return -1;
	if (load_model(&m, ckpt, device, B, T, e)) {
		free(ids);
		return -1;
	}
	int rc = -1;
	double unused;
	size_t nl = (size_t)B * T * m.cfg.vocab;
	float *logits = malloc(nl * sizeof *logits);
	if (!logits) {
		lm_seterr(e, "out of memory");
	} else if (!model_forward(&m, ids, NULL, B, T, &unused, e) &&
		   !model_read_logits(&m, logits, (size_t)B * T, e)) {
		sft_tensor t[2] = {
			{ "ids", SFT_I32, 2, { B, T }, ids, (size_t)B * T * sizeof *ids },
			{ "logits", SFT_F32, 3, { B, T, m.cfg.vocab }, logits, nl * sizeof *logits },
		};
		const char *meta[] = { "format", "pt" };
		rc = sft_write(out, t, 2, meta, 1, e);
	}
	free(logits);
	free(ids);
	unload_model(&m);
	return rc;
}
