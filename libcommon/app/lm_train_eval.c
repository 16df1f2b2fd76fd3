/* lm_train_eval.c: lm-train's read-only modes on a checkpoint: evaluation
 * on validation shards (loss, perplexity and, with the tokenizer, bits per
 * byte) and inspection (shape, progress, recorded hyper-parameters), see
 * lm_train.h. */
#include "app/lm_train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/shard_reader.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/model_json.h"
#include "tok/bpe.h"
#include "tok/bpe_identity.h"

enum { EVAL_BATCH = 16 };

void train_eval_targets(const shard_reader *r, uint64_t k0, const uint32_t *win, int rows, int T,
			int stride, int32_t *ids, int32_t *tgt)
{
	int skip = stride > 0 && stride < T ? T - stride : 0;
	for (int b = 0; b < rows; b++) {
		int from = skip && !sr_window_first(r, k0 + (uint64_t)b) ? skip : 0;
		for (int j = 0; j < T; j++) {
			ids[b * T + j] = (int32_t)win[(size_t)b * (T + 1) + j];
			tgt[b * T + j] = j < from ? -1 : (int32_t)win[(size_t)b * (T + 1) + j + 1];
		}
	}
}

/* Bytes the scored targets of rows windows stand for (special tokens: none). */
static uint64_t target_bytes(const bpe_tokenizer *t, const int32_t *tgt, int rows, int T)
{
	uint64_t n = 0;
	for (int b = 0; b < rows; b++)
		for (int i = 0; i < T; i++) {
			if (tgt[(size_t)b * T + i] < 0)
				continue;
			uint32_t id = (uint32_t)tgt[(size_t)b * T + i];
			int special = 0;
			for (uint32_t k = 0; k < t->n_special && !special; k++)
				special = t->special[k] == id;
			if (id < t->n_vocab && !special)
				n += bpe_token_len(t, id);
		}
	return n;
}

typedef struct eval_run {
	model m;
	shard_reader *r;
	uint32_t *win;
	int32_t *ids, *tgt;
	bpe_tokenizer tok;
	int have_tok;
} eval_run;

static int eval_loop(eval_run *x, const train_eval_opts *o, int T, double *sum, long long *count,
		     uint64_t *bytes, lm_err *e)
{
	for (long long i = 0; !o->batches || i < o->batches; i++) {
		uint64_t k0 = sr_tell(x->r);
		int rows = sr_next(x->r, x->win, e);
		if (rows < 0)
			return -1;
		if (rows == 0)
			break;
		train_eval_targets(x->r, k0, x->win, rows, T, o->stride, x->ids, x->tgt);
		double loss;
		if (model_forward(&x->m, x->ids, x->tgt, rows, T, &loss, e))
			return -1;
		*sum += loss * (double)model_count(&x->m);
		*count += model_count(&x->m);
		if (x->have_tok)
			*bytes += target_bytes(&x->tok, x->tgt, rows, T);
	}
	return 0;
}

/* The tokenizer the shards name (when they do) must be -t's and the
 * checkpoint's. */
static int shards_tokenizer_check(const eval_run *x, const train_eval_opts *o, lm_err *e)
{
	uint32_t crc;
	if (!sr_tokenizer(x->r, &crc))
		return 0;
	if (x->have_tok && bpe_identity_crc(&x->tok) != crc)
		return lm_seterr(e, "%s (identity %08x) is not the tokenizer of the shards %s "
				 "(identity %08x)", o->tokenizer, bpe_identity_crc(&x->tok), o->val[0], crc);
	char *id = NULL, what[4200];
	snprintf(what, sizeof what, "the shards %s", o->val[0]);
	int rc = ckpt_read_meta(o->ckpt, TOKENIZER_META_KEY, &id, e) ||
		 (id && bpe_identity_check_crc(crc, what, id, o->ckpt, e)) ? -1 : 0;
	free(id);
	return rc;
}

int train_evaluate(const train_eval_opts *o, FILE *out, lm_err *e)
{
	eval_run x;
	memset(&x, 0, sizeof x);
	model_config c;
	if (ckpt_read_config(o->ckpt, &c, e))
		return -1;
	lm_backend *be = NULL;
	int T = c.ctx, B = o->batch ? o->batch : EVAL_BATCH, rc = -1;
	char *step = NULL;
	double sum = 0;
	long long count = 0;
	uint64_t bytes = 0;
	sr_config rc_cfg = { .mode = SR_SEQUENTIAL, .batch = B, .context = T, .prefetch = 1,
			     .stride = o->stride };
	if (o->tokenizer) {
		char *id = NULL;
		if (bpe_load_any(&x.tok, o->tokenizer, e))
			return -1;
		x.have_tok = 1;
		if (ckpt_read_meta(o->ckpt, TOKENIZER_META_KEY, &id, e) ||
		    (id && bpe_identity_check(&x.tok, o->tokenizer, id, o->ckpt, e))) {
			free(id);
			bpe_free(&x.tok);
			return -1;
		}
		free(id);
	}
	if (!(be = backend_open(o->device, e)) || model_init(&x.m, &c, be, B, T, e))
		goto out;
	if (ckpt_load(o->ckpt, &x.m, NULL, NULL, e) || ckpt_read_meta(o->ckpt, "step", &step, e) ||
	    sr_open(&x.r, o->val, o->n_val, &rc_cfg, e))
		goto out;
	if (sr_vocab_size(x.r) > (uint32_t)c.vocab) {
		lm_seterr(e, "%s: the shards' vocabulary (%u) is larger than the model's (%d)",
			  o->val[0], sr_vocab_size(x.r), c.vocab);
		goto out;
	}
	if (x.have_tok && x.tok.n_vocab != sr_vocab_size(x.r)) {
		lm_seterr(e, "%s: %u tokens, the shards' vocabulary is %u: not their tokenizer",
			  o->tokenizer, x.tok.n_vocab, sr_vocab_size(x.r));
		goto out;
	}
	if (shards_tokenizer_check(&x, o, e))
		goto out;
	x.win = malloc((size_t)B * (T + 1) * sizeof *x.win);
	x.ids = malloc((size_t)B * T * sizeof *x.ids);
	x.tgt = malloc((size_t)B * T * sizeof *x.tgt);
	if (!x.win || !x.ids || !x.tgt) {
		lm_seterr(e, "out of memory");
		goto out;
	}
	if (eval_loop(&x, o, T, &sum, &count, &bytes, e))
		goto out;
	if (!count) {
		lm_seterr(e, "%s: no window of %d + 1 tokens to evaluate", o->val[0], T);
		goto out;
	}
	double loss = sum / (double)count;
	fprintf(out, "{\"checkpoint\":\"%s\",\"step\":%s,\"tokens\":%lld,\"loss\":%.17g,"
		"\"perplexity\":%.17g", o->ckpt, step ? step : "null", count, loss, exp(loss));
	if (o->stride && o->stride < T)
		fprintf(out, ",\"stride\":%d", o->stride);
	if (x.have_tok)
		fprintf(out, ",\"bytes\":%llu,\"bits_per_byte\":%.17g", (unsigned long long)bytes,
			bytes ? sum / log(2.0) / (double)bytes : NAN);
	fputs("}\n", out);
	rc = 0;
out:
	free(step);
	free(x.win);
	free(x.ids);
	free(x.tgt);
	if (x.r)
		sr_close(x.r);
	if (x.m.be)
		model_free(&x.m);
	if (be)
		be->close(be);
	if (x.have_tok)
		bpe_free(&x.tok);
	return rc;
}

int train_info(const char *ckpt, FILE *out, lm_err *e)
{
	model_config c;
	if (ckpt_read_config(ckpt, &c, e))
		return -1;
	static const char *const keys[] = { "step", "tokens", "adamw_t", "data_pos", "data_seed",
					    TRAIN_META_KEY, TOKENIZER_META_KEY, "lmpipe.build" };
	enum { N_KEYS = sizeof keys / sizeof keys[0] };
	char *v[N_KEYS] = { 0 };
	int rc = 0;
	for (int i = 0; i < N_KEYS && !rc; i++)
		rc = ckpt_read_meta(ckpt, keys[i], &v[i], e);
	if (!rc) {
		fprintf(out, "checkpoint    %s\n", ckpt);
		fprintf(out, "model         vocab %d, context %d, d_model %d, layers %d, heads %d, "
			"d_ff %d, rope_theta %g%s\n", c.vocab, c.ctx, c.d_model, c.n_layers,
			c.n_heads, c.d_ff, c.rope_theta, c.tie_embeddings ? ", tied embeddings" : "");
		char *cj = model_config_json(&c);
		fprintf(out, "variants      kv_heads %d, qk_norm %d, mlp %s, softcap %g, z_loss %g, "
			"norm_eps %g\n", model_kv_heads(&c), c.qk_norm, model_mlp_name(c.mlp), c.softcap,
			c.z_loss, model_norm_eps(&c));
		fprintf(out, "config        %s\n", cj ? cj : "(out of memory)");
		free(cj);
		fprintf(out, "parameters    %zu\n", model_n_params(&c));
		for (int i = 0; i < N_KEYS; i++)
			fprintf(out, "%-13s %s\n", !strcmp(keys[i], TRAIN_META_KEY) ? "hyperparams"
				: !strcmp(keys[i], TOKENIZER_META_KEY) ? "tokenizer"
				: !strcmp(keys[i], "lmpipe.build") ? "written by" : keys[i],
				v[i] ? v[i] : "(not recorded)");
	}
	for (int i = 0; i < N_KEYS; i++)
		free(v[i]);
	return rc;
}
