/* model_decode.c: cached, ragged-batch forward pass for generation (see
 * model_decode.h).  The op sequence mirrors model_forward in model.c, so a
 * token's logits equal those of a full forward pass up to float rounding. */
#include "gen/model_decode.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gen/model_decode_internal.h"
#include "kernels/attn_decode.h"
#include "kernels/rope.h"

static int md_reset(void *ctx, uint32_t slot, lm_err *e)
{
	model_decoder *md = ctx;
	if (slot >= md->n_slots)
		return lm_seterr(e, "decoder slot %u out of range (%u slots)", slot, md->n_slots);
	md->len[slot] = 0;
	return 0;
}

static int md_fork(void *ctx, uint32_t dst, uint32_t src, lm_err *e)
{
	model_decoder *md = ctx;
	const model_config *c = &md->m->cfg;
	size_t D = (size_t)c->d_model / c->n_heads, n = md->len[src] * D * sizeof(float);
	for (int l = 0; l < c->n_layers; l++)
		for (int h = 0; h < model_kv_heads(c); h++) {
			size_t off = (size_t)h * md->n_ctx * D;
			md->m->be->copy(md->m->be, model_decoder_cache(md, md->kc, l, dst) + off, model_decoder_cache(md, md->kc, l, src) + off, n);
			md->m->be->copy(md->m->be, model_decoder_cache(md, md->vc, l, dst) + off, model_decoder_cache(md, md->vc, l, src) + off, n);
		}
	md->len[dst] = md->len[src];
	return 0;
}

/* Write the chunk's keys and values into the caches and point each token
 * at its sequence's cache.  Under GQA, md->k and md->v hold the kv heads
 * expanded to H (gqa.h): kv head j is head j G. */
static void store_kv(model_decoder *md, int l, int N)
{
	const model_config *c = &md->m->cfg;
	int H = c->n_heads, KV = model_kv_heads(c), G = H / KV;
	size_t D = (size_t)c->d_model / H;
	for (int i = 0; i < N; i++) {
		float *kb = model_decoder_cache(md, md->kc, l, md->tok_slot[i]);
		float *vb = model_decoder_cache(md, md->vc, l, md->tok_slot[i]);
		size_t p = (size_t)md->pos[i];
		for (int h = 0; h < KV; h++) {
			size_t src = ((size_t)h * G * N + i) * D, dst = ((size_t)h * md->n_ctx + p) * D;
			md->m->be->copy(md->m->be, kb + dst, md->k + src, D * sizeof(float));
			md->m->be->copy(md->m->be, vb + dst, md->v + src, D * sizeof(float));
		}
		md->kp[i] = kb;
		md->vp[i] = vb;
		md->tok_len[i] = (int)p + 1;
	}
}

/* Threads for a chunk of N tokens (see model_decode.h). */
static void set_threads(model_decoder *md, int N)
{
	double want = 1 + (double)N * md->m->n_params / md->work;
	int t = want >= md->max_threads ? md->max_threads : (int)want;
	if (t != md->threads) {
		backend_set_threads(t);
		md->threads = t;
	}
}

/* Run N stacked tokens through the model; write the logits of the tokens
 * that end their sequence's input to out[last_of[i]]. */
static int run_chunk(model_decoder *md, int N, float *const *out, lm_err *e)
{
	if (md->xt && !md->op_table) {
		model_decode_cpu_chunk(md, N, out);
		return 0;
	}
	set_threads(md, N);
	const model *m = md->m;
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	int C = c->d_model, F = c->d_ff, H = c->n_heads, D = C / H, V = c->vocab;
	int KV = model_kv_heads(c);
	float scale = 1.0f / sqrtf((float)D), eps = (float)model_norm_eps(c);
	be->embedding_fwd(be, md->x, md->ids, m->wte, N, C);
	rope_table(md->cs_host, md->pos, N, D, c->rope_theta);
	be->upload(be, md->cs, md->cs_host, (size_t)N * D * sizeof(float));
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		be->rmsnorm_fwd(be, md->xn, md->rstd, md->x, p->ln1, N, C, eps);
		be->matmul_fwd(be, md->qkv, NULL, md->xn, p->wqkv, N, C, model_qkv_rows(c));
		if (KV == H)
			be->qkv_split(be, md->q, md->k, md->v, md->qkv, 1, N, H, D);
		else
			be->qkv_split_gqa(be, md->q, md->k, md->v, md->qkv, 1, N, H, KV, D);
		if (c->qk_norm) {
			be->headnorm_fwd(be, md->q, md->hrstd, md->q, p->q_norm, (size_t)H * N, D, eps);
			be->headnorm_fwd(be, md->k, md->hrstd, md->k, p->k_norm, (size_t)H * N, D, eps);
		}
		be->rope_fwd(be, md->q, md->cs, 1, H, N, D);
		be->rope_fwd(be, md->k, md->cs, 1, H, N, D);
		store_kv(md, l, N);
		if (attn_decode_cpu(md->y, md->q, md->kp, md->vp, md->tok_len, N, H, KV, D, md->n_ctx,
				    scale) < 0)
			return lm_seterr(e, "attention scratch:");
		be->matmul_fwd(be, md->x, md->x, md->y, p->wo, N, C, C);
		be->rmsnorm_fwd(be, md->xn, md->rstd, md->x, p->ln2, N, C, eps);
		be->matmul_fwd(be, md->h, NULL, md->xn, p->wgu, N, C, model_gu_rows(c));
		if (c->mlp == MODEL_MLP_RELU2)
			be->relu2_fwd(be, md->sw, md->h, (size_t)N * F);
		else
			be->swiglu_fwd(be, md->sw, md->h, N, F);
		be->matmul_fwd(be, md->x, md->x, md->sw, p->wdown, N, F, C);
	}
	int nl = 0;
	for (int i = 0; i < N; i++)
		if (md->last_of[i] >= 0)
			be->copy(be, md->y + (size_t)nl++ * C, md->x + (size_t)i * C, (size_t)C * sizeof(float));
	if (!nl)
		return 0;
	be->rmsnorm_fwd(be, md->xn, md->rstd, md->y, m->lnf, nl, C, eps);
	be->matmul_fwd(be, md->logits, NULL, md->xn, m->head, nl, C, V);
	if (c->softcap > 0)
		be->softcap_fwd(be, md->logits, (size_t)nl * V, (float)c->softcap);
	nl = 0;
	for (int i = 0; i < N; i++)
		if (md->last_of[i] >= 0)
			be->download(be, out[md->last_of[i]], md->logits + (size_t)nl++ * V,
				     (size_t)V * sizeof(float));
	return 0;
}

static int md_feed(void *ctx, uint32_t n_seq, const uint32_t *slot, const uint32_t *const *tok,
		   const uint32_t *n_tok, float *const *out, lm_err *e)
{
	model_decoder *md = ctx;
	uint32_t V = (uint32_t)md->m->cfg.vocab;
	for (uint32_t i = 0; i < n_seq; i++) {
		if (slot[i] >= md->n_slots || md->len[slot[i]] + (uint64_t)n_tok[i] > md->n_ctx)
			return lm_seterr(e, "slot %u: %u + %u tokens exceed the context of %u", slot[i],
					 slot[i] < md->n_slots ? md->len[slot[i]] : 0, n_tok[i], md->n_ctx);
		for (uint32_t t = 0; t < n_tok[i]; t++)
			if (tok[i][t] >= V)
				return lm_seterr(e, "token id %u is outside the model's vocabulary (%u)",
						 tok[i][t], V);
	}
	int N = 0;
	int32_t ids[MODEL_DECODE_CHUNK];
	for (uint32_t i = 0; i < n_seq; i++)
		for (uint32_t t = 0; t < n_tok[i]; t++) {
			ids[N] = (int32_t)tok[i][t];
			md->pos[N] = md->len[slot[i]] + t;
			md->tok_slot[N] = slot[i];
			md->last_of[N] = t + 1 == n_tok[i] ? (int)i : -1;
			if (++N == MODEL_DECODE_CHUNK || (i + 1 == n_seq && t + 1 == n_tok[i])) {
				md->m->be->upload(md->m->be, md->ids, ids, (size_t)N * sizeof *ids);
				if (run_chunk(md, N, out, e) < 0)
					return -1;
				N = 0;
			}
		}
	for (uint32_t i = 0; i < n_seq; i++)
		md->len[slot[i]] += n_tok[i];
	return 0;
}

void model_decoder_free(model_decoder *md)
{
	if (md->threads && md->threads != md->max_threads)
		backend_set_threads(md->max_threads);
	if (md->m) {
		float *bufs[] = { md->kc, md->vc, md->x, md->xn, md->rstd, md->qkv, md->q, md->k,
				  md->v, md->y, md->h, md->sw, md->cs, md->logits, (float *)md->ids,
				  md->hrstd };
		for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
			if (bufs[i])
				md->m->be->release(md->m->be, bufs[i]);
	}
	free(md->len);
	free(md->pos);
	free(md->tok_slot);
	free(md->tok_len);
	free(md->last_of);
	free(md->kp);
	free(md->vp);
	free(md->cs_host);
	free(md->xt);
	free(md->scores);
	free(md->packed);
	free(md->pl);
	dec_barrier_free(&md->bar);
	memset(md, 0, sizeof *md);
}

int model_decoder_init(model_decoder *md, model *m, uint32_t n_slots, uint32_t n_ctx, lm_err *e)
{
	memset(md, 0, sizeof *md);
	const model_config *c = &m->cfg;
	if (n_slots < 1 || n_ctx < 1 || n_ctx > (uint32_t)c->ctx)
		return lm_usage_err(e, "decoder: %u slots of %u positions (the model's context is %d)",
				    n_slots, n_ctx, c->ctx);
	if (m->be->act != LM_F32)
		return lm_seterr(e, "device '%s': generation runs on the CPU backend only so far "
				 "(use --device cpu)", m->be->name);
	md->m = m;
	md->max_threads = omp_get_max_threads();
	const char *work = getenv("LMPIPE_DECODE_WORK");
	md->work = work && atof(work) > 0 ? atof(work) : MODEL_DECODE_WORK;
	md->n_slots = n_slots;
	md->n_ctx = n_ctx;
	lm_backend *be = m->be;
	size_t N = MODEL_DECODE_CHUNK, C = c->d_model, F = c->d_ff, D = C / c->n_heads;
	size_t rows = n_slots < N ? n_slots : N;
	size_t cache = (size_t)c->n_layers * n_slots * model_decoder_cache_stride(md) * sizeof(float);
	md->kc = be->alloc(be, cache);
	md->vc = be->alloc(be, cache);
	md->x = be->alloc(be, N * C * sizeof(float));
	md->xn = be->alloc(be, N * C * sizeof(float));
	md->rstd = be->alloc(be, N * sizeof(float));
	md->qkv = be->alloc(be, N * model_qkv_rows(c) * sizeof(float));
	md->hrstd = be->alloc(be, N * c->n_heads * sizeof(float));
	md->q = be->alloc(be, N * C * sizeof(float));
	md->k = be->alloc(be, N * C * sizeof(float));
	md->v = be->alloc(be, N * C * sizeof(float));
	md->y = be->alloc(be, N * C * sizeof(float));
	md->h = be->alloc(be, N * model_gu_rows(c) * sizeof(float));
	md->sw = be->alloc(be, N * F * sizeof(float));
	md->cs = be->alloc(be, N * D * sizeof(float));
	md->logits = be->alloc(be, rows * (size_t)c->vocab * sizeof(float));
	md->ids = be->alloc(be, N * sizeof(int32_t));
	md->len = calloc(n_slots, sizeof *md->len);
	md->pos = malloc(N * sizeof *md->pos);
	md->tok_slot = malloc(N * sizeof *md->tok_slot);
	md->tok_len = malloc(N * sizeof *md->tok_len);
	md->last_of = malloc(N * sizeof *md->last_of);
	md->kp = malloc(N * sizeof *md->kp);
	md->vp = malloc(N * sizeof *md->vp);
	md->cs_host = malloc(N * D * sizeof *md->cs_host);
	if (!md->kc || !md->vc || !md->x || !md->xn || !md->rstd || !md->qkv || !md->hrstd || !md->q || !md->k ||
	    !md->v || !md->y || !md->h || !md->sw || !md->cs || !md->logits || !md->ids || !md->len ||
	    !md->pos || !md->tok_slot || !md->tok_len || !md->last_of || !md->kp || !md->vp ||
	    !md->cs_host) {
		model_decoder_free(md);
		return lm_seterr(e, "out of memory for a key/value cache of %u x %u positions (%.1f GiB)",
				 n_slots, n_ctx, 2.0 * cache / (1 << 30));
	}
	/* Touch the cache now: page faults in the decoding loop would cost
	 * more than the steps. */
	be->zero(be, md->kc, cache);
	be->zero(be, md->vc, cache);
	if (!strcmp(be->name, "cpu")) {
		md->xt = malloc((size_t)md->max_threads * N * C * sizeof *md->xt);
		md->scores = malloc((size_t)md->max_threads * n_ctx * sizeof *md->scores);
		if (!md->xt || !md->scores || dec_barrier_init(&md->bar, md->max_threads) < 0 ||
		    model_decode_cpu_pack(md) < 0) {
			model_decoder_free(md);
			return lm_seterr(e, "out of memory for the decoder's scratch");
		}
	}
	md->dec = (lm_decoder){ md, (uint32_t)c->vocab, n_ctx, n_slots, md_reset, md_fork, md_feed };
	return 0;
}
