/* rl_update_forward.c: the micro-batches every algorithm of rl-update runs
 * through the model: up to --micro-batch sequences padded to the longest
 * of them, one forward pass, the tokens' log-probs and entropies computed
 * from the logits on the device (model_token_logp); and the reference
 * policy's per-token log-probs, a micro-batch at a time. */
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "model/ckpt.h"

int rlu_micro_batch(const rlu_opts *o, size_t n)
{
	long long mb = o->micro_batch > 0 ? o->micro_batch : RLU_MICRO_BATCH;
	if (o->algo == RLU_DPO)
		mb = mb < 2 ? 2 : mb - mb % 2;
	if ((size_t)mb > n)
		mb = (long long)(n ? n : 1);
	return (int)mb;
}

void mb_free(mbatch *b)
{
	free(b->s);
	free(b->ids);
	free(b->targets);
	free(b->logp);
	free(b->ent);
	free(b->w);
	free(b->dent);
	free(b->mask);
	free(b->old);
	free(b->ref);
	free(b->score);
	free(b->row_w);
	memset(b, 0, sizeof *b);
}

int mb_init(mbatch *b, int cap, int maxT, lm_err *e)
{
	memset(b, 0, sizeof *b);
	size_t n = (size_t)cap * maxT;
	b->cap = cap;
	b->maxT = maxT;
	b->s = calloc((size_t)cap, sizeof *b->s);
	b->ids = malloc(n * sizeof *b->ids);
	b->targets = malloc(n * sizeof *b->targets);
	b->logp = malloc(n * sizeof *b->logp);
	b->ent = malloc(n * sizeof *b->ent);
	b->w = malloc(n * sizeof *b->w);
	b->dent = malloc(n * sizeof *b->dent);
	b->mask = malloc(n);
	b->old = malloc(n * sizeof *b->old);
	b->ref = malloc(n * sizeof *b->ref);
	b->score = malloc((size_t)cap * sizeof *b->score);
	b->row_w = malloc((size_t)cap * sizeof *b->row_w);
	if (!b->s || !b->ids || !b->targets || !b->logp || !b->ent || !b->w || !b->dent ||
	    !b->mask || !b->old || !b->ref || !b->score || !b->row_w) {
		mb_free(b);
		return lm_seterr(e, "out of memory");
	}
	return 0;
}

void mb_pack(mbatch *b, seq *const *list, int n)
{
	int T = 1;
	for (int r = 0; r < n; r++)
		T = list[r]->T > T ? list[r]->T : T;
	b->B = n;
	b->T = T;
	for (int r = 0; r < n; r++) {
		seq *s = list[r];
		int32_t *ids = b->ids + (size_t)r * T, *tg = b->targets + (size_t)r * T;
		b->s[r] = s;
		memcpy(ids, s->ids, (size_t)s->T * sizeof *ids);
		memcpy(tg, s->targets, (size_t)s->T * sizeof *tg);
		/* causal attention: padding after a sequence changes nothing before it */
		for (int t = s->T; t < T; t++)
			ids[t] = 0, tg[t] = -1;
	}
}

size_t mb_take(mbatch *b, seqs *v, size_t i, size_t hi)
{
	int n = 0;
	for (; i < hi && n < b->cap; i++)
		if (v->s[i].n_resp > 0)
			b->s[n++] = &v->s[i];
	mb_pack(b, b->s, n);
	return i;
}

int mb_forward(model *m, mbatch *b, int entropy, lm_err *e)
{
	size_t N = (size_t)b->B * b->T;
	if (model_forward(m, b->ids, b->targets, b->B, b->T, NULL, e) ||
	    model_token_logp(m, b->logp, entropy ? b->ent : NULL, e))
		return -1;
	for (size_t i = 0; i < N; i++)
		b->mask[i] = b->targets[i] >= 0;
	return 0;
}

int reference_tokens(const rlu_opts *o, const model_config *cfg, lm_backend *be,
		     int maxT, seqs *v, lm_err *e)
{
	model ref = { 0 };
	mbatch b = { 0 };
	int cap = rlu_micro_batch(o, v->n);
	if (model_init(&ref, cfg, be, cap, maxT, e))
		return -1;
	int rc = mb_init(&b, cap, maxT, e);
	if (rc == 0 && (rc = ckpt_load(o->ref, &ref, NULL, NULL, e)))
		lm_err_prefix(e, "reference checkpoint");
	for (size_t i = 0; rc == 0 && i < v->n;) {
		size_t next = mb_take(&b, v, i, v->n);
		if (b.B && (rc = mb_forward(&ref, &b, 0, e)))
			break;
		for (int r = 0; rc == 0 && r < b.B; r++) {
			seq *s = b.s[r];
			if (!(s->ref_tok = malloc(((size_t)s->T + 1) * sizeof *s->ref_tok)))
				rc = lm_seterr(e, "out of memory");
			else
				memcpy(s->ref_tok, b.logp + (size_t)r * b.T, (size_t)s->T * sizeof *s->ref_tok);
		}
		i = next;
	}
	mb_free(&b);
	model_free(&ref);
	return rc;
}
