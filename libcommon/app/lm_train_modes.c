/* lm_train_modes.c: lm-train's modes besides training: --export-hf (a
 * checkpoint to a Hugging Face directory) and --dump-logits (the model's
 * logits on given token ids, for cross-checks against transformers). */
#include "app/lm_train.h"

#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/safetensors.h"

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

int train_export_hf(const char *ckpt, const char *dir, const char *device, lm_err *e)
{
	model m;
	if (load_model(&m, ckpt, device, 1, 1, e))
		return -1;
	int rc = ckpt_export_hf(dir, &m, e);
	unload_model(&m);
	return rc;
}

/* Parse the ids file: rows of blank-separated decimal ids, equal lengths. */
static int parse_ids(const char *path, int32_t **ids, int *B, int *T, lm_err *e)
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
		if (end == p || x < 0 || x > INT32_MAX) {
			rc = lm_seterr(e, "%s:%d: not a token id", path, line);
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
	if (parse_ids(ids_path, &ids, &B, &T, e))
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
