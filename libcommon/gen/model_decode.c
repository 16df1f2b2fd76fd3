/* model_decode.c: cached, ragged-batch forward pass for generation (see
 * model_decode.h).  The op sequence mirrors model_forward in model.c, so a
 * token's logits equal those of a full forward pass up to rounding. */
#include "gen/model_decode.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gen/model_decode_internal.h"

static size_t esz(const model_decoder *md) { return lm_dtype_size(md->m->be->act); }

static int32_t *meta(const model_decoder *md, int32_t *base, int which)
{
	return base + (size_t)which * MODEL_DECODE_CHUNK;
}

static int run_pending(model_decoder *md, lm_err *e);

static int md_reset(void *ctx, uint32_t slot, lm_err *e)
{
	model_decoder *md = ctx;
	if (slot >= md->n_slots)
		return lm_seterr(e, "decoder slot %u out of range (%u slots)", slot, md->n_slots);
	md->len[slot] = 0;
	return 0;
}

/* Copy a slot's cache (and, when sampling on the device, its logits row).
 * On the device a layer's block goes in one copy; on the host only the
 * positions held, head by head. */
static int md_fork(void *ctx, uint32_t dst, uint32_t src, lm_err *e)
{
	model_decoder *md = ctx;
	const model_config *c = &md->m->cfg;
	lm_backend *be = md->m->be;
	size_t D = (size_t)c->d_model / c->n_heads, z = esz(md);
	if (run_pending(md, e) < 0)
		return -1;
	size_t block = model_decoder_cache_stride(md) * z;
	for (int l = 0; l < c->n_layers; l++) {
		char *kd = model_decoder_cache_at(md, md->kc, z, l, dst);
		char *ks = model_decoder_cache_at(md, md->kc, z, l, src);
		char *vd = model_decoder_cache_at(md, md->vc, z, l, dst);
		char *vs = model_decoder_cache_at(md, md->vc, z, l, src);
		if (be->sample) {
			be->copy(be, kd, ks, block);
			be->copy(be, vd, vs, block);
			continue;
		}
		for (int h = 0; h < model_kv_heads(c); h++) {
			size_t off = (size_t)h * md->n_ctx * D * z, n = md->len[src] * D * z;
			be->copy(be, kd + off, ks + off, n);
			be->copy(be, vd + off, vs + off, n);
		}
	}
	if (be->sample)
		be->copy(be, md->rows + (size_t)dst * c->vocab, md->rows + (size_t)src * c->vocab,
			 (size_t)c->vocab * sizeof(float));
	md->len[dst] = md->len[src];
	return 0;
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

/* out = RMSNorm(x) * g . W^T: fused where the backend has it. */
static void norm_matmul(model_decoder *md, void *out, const float *x, const float *g, const void *w,
			int N, int C, int OUT, float eps)
{
	lm_backend *be = md->m->be;
	if (be->norm_matmul_fwd) {
		be->norm_matmul_fwd(be, out, x, g, w, N, C, OUT, eps);
		return;
	}
	be->rmsnorm_fwd(be, md->xn, md->rstd, x, g, N, C, eps);
	be->matmul_fwd(be, out, NULL, md->xn, w, N, C, OUT);
}

/* A measuring aid: LMPIPE_DECODE_TWICE names ops of a step (a comma list of
 * qkv, attn, out, glu, down, head, rows) that chunk_ops queues twice.  Each
 * of them rewrites the same output from the same inputs, so the tokens do
 * not change, and the step's time less its time without the knob is what
 * the op costs inside the step (with the overlaps programmatic launch
 * gives), which a profiler that runs kernels one at a time cannot say. */
enum { TW_QKV = 1, TW_ATTN = 2, TW_OUT = 4, TW_GLU = 8, TW_DOWN = 16, TW_HEAD = 32, TW_ROWS = 64 };

static int twice(int op)
{
	static int mask = -1;
	if (mask < 0) {
		static const char *const names[] = { "qkv", "attn", "out", "glu", "down", "head", "rows" };
		const char *v = getenv("LMPIPE_DECODE_TWICE");
		mask = 0;
		for (int i = 0; v && i < 7; i++)
			if (strstr(v, names[i]))
				mask |= 1 << i;
	}
	return mask & op ? 2 : 1;
}

/* A prefill chunk made only of whole inputs from position 0, as runs of
 * inputs of one length, in the chunk's order: run r is b[r] inputs of t[r]
 * tokens.  More runs than PREFILL_RUNS: not such a chunk. */
enum { PREFILL_RUNS = 16 };
typedef struct prefill_runs {
	int n, t[PREFILL_RUNS], b[PREFILL_RUNS];
} prefill_runs;

/* Whether chunk pr (NULL, or no runs: not such a chunk) attends through
 * be->attn_qkv_fwd (model_decode.h's prefill_flash). */
static int flash_applies(model_decoder *md, const prefill_runs *pr)
{
	const model_config *c = &md->m->cfg;
	lm_backend *be = md->m->be;
	if (!pr || !pr->n || !md->prefill_flash)
		return 0;
	for (int r = 0; r < pr->n; r++)
		if (!be->supports(be, LM_OP_ATTENTION_QKV, c->d_model / c->n_heads, pr->t[r]))
			return 0;
	return 1;
}

/* The ops of a chunk of N tokens, nl of which end their sequence's input,
 * from the uploaded meta arrays (and, unless embed, the embedded tokens
 * in md->x already: the sampler's feed) to each such token's logits in its
 * slot's row of md->rows; pr: its runs of whole inputs, or NULL.  Queued
 * only: nothing here waits for the backend or touches the host, so that
 * it can be recorded. */
static void chunk_ops(model_decoder *md, int N, int nl, int embed, const prefill_runs *pr)
{
	const model *m = md->m;
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	int C = c->d_model, F = c->d_ff, H = c->n_heads, D = C / H, V = c->vocab;
	int KV = model_kv_heads(c);
	size_t z = esz(md);
	decode_shape s = { N, H, KV, D, (int)md->n_ctx };
	float scale = 1.0f / sqrtf((float)D), eps = (float)model_norm_eps(c);
	const int32_t *pos = meta(md, md->meta, META_POS), *slot = meta(md, md->meta, META_SLOT);
	/* the residual stream moves between two buffers: a product's addend
	 * is never its output (cuBLASLt's in-place split-K would overwrite it) */
	float *x = md->x, *x2 = md->x2;
	if (embed)
		be->embedding_fwd(be, x, md->ids, m->wte, N, C);
	if (nl == N && md->step && N <= DECODE_STEP_MAX_N) {
		if (be->decode_step(be, md->step) == 0)
			return;
		free(md->step); /* shapes it does not run: the ops from now on */
		md->step = NULL;
	}
	int flash = flash_applies(md, pr);
	md->flash_chunks += flash;
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		const layer_cptrs *w = &m->lc[l];
		void *kc = model_decoder_cache_at(md, md->kc, z, l, 0);
		void *vc = model_decoder_cache_at(md, md->vc, z, l, 0);
		for (int k = twice(TW_QKV); k--;)
			norm_matmul(md, md->qkv, x, p->ln1, w->wqkv, N, C, model_qkv_rows(c), eps);
		if (c->qk_norm)
			be->qkv_headnorm(be, md->qkv, p->q_norm, p->k_norm, N, H, KV, D, eps);
		/* a decoding step (one token a sequence): no token reads another's
		 * new key, so the store and the attention can be one pass */
		if (flash) {
			/* the keys and values into the cache (decode_qkv's q is
			 * not used), then per run the flash kernels on its packed
			 * rows, which they rotate in place */
			be->decode_qkv(be, md->q, kc, vc, md->qkv, m->rope_cs, pos, slot, s);
			for (int r = 0, at = 0; r < pr->n; at += pr->b[r] * pr->t[r], r++)
				be->attn_qkv_fwd(be, (char *)md->qkv + (size_t)at * model_qkv_rows(c) * z,
						 m->rope_cs, (char *)md->y + (size_t)at * C * z,
						 md->lse + (size_t)at * H, pr->b[r], pr->t[r], H, D, scale);
		} else {
			for (int k = twice(TW_ATTN); k--;)
				if (nl < N || !be->attn_decode_qkv ||
				    be->attn_decode_qkv(be, md->y, kc, vc, md->qkv, m->rope_cs, pos, slot, s,
							scale)) {
					be->decode_qkv(be, md->q, kc, vc, md->qkv, m->rope_cs, pos, slot, s);
					be->attn_decode(be, md->y, md->q, kc, vc, pos, slot, s, scale);
				}
		}
		for (int k = twice(TW_OUT); k--;)
			be->matmul_fwd(be, x2, x, md->y, w->wo, N, C, C);
		if (c->mlp == MODEL_MLP_SWIGLU && be->norm_glu_fwd &&
		    be->norm_glu_fwd(be, md->sw, x2, p->ln2, w->wgu, N, C, F, eps) == 0) {
			if (twice(TW_GLU) > 1)
				be->norm_glu_fwd(be, md->sw, x2, p->ln2, w->wgu, N, C, F, eps);
			for (int k = twice(TW_DOWN); k--;)
				be->matmul_fwd(be, x, x2, md->sw, w->wdown, N, F, C);
			continue;
		}
		norm_matmul(md, md->h, x2, p->ln2, w->wgu, N, C, model_gu_rows(c), eps);
		if (c->mlp == MODEL_MLP_RELU2) {
			be->relu2_fwd(be, md->sw, md->h, (size_t)N * F);
			be->matmul_fwd(be, x, x2, md->sw, w->wdown, N, F, C);
		} else if (be->glu_matmul_fwd) {
			be->glu_matmul_fwd(be, x, x2, md->h, w->wdown, N, F, C);
		} else {
			be->swiglu_fwd(be, md->sw, md->h, N, F);
			be->matmul_fwd(be, x, x2, md->sw, w->wdown, N, F, C);
		}
	}
	if (!nl)
		return; /* a chunk within a long prompt only fills the cache */
	/* the rows that end their sequence's input; all of them, in order,
	 * when each token does (a decoding step) */
	const float *xl = x;
	if (nl < N) {
		be->rows_gather(be, md->xl, x, meta(md, md->meta, META_LAST), nl, C);
		xl = md->xl;
	}
	for (int k = twice(TW_HEAD); k--;)
		norm_matmul(md, md->logits, xl, m->lnf, m->head_c, nl, C, V, eps);
	if (c->softcap > 0)
		be->softcap_fwd(be, md->logits, (size_t)nl * V, (float)c->softcap);
	for (int k = twice(TW_ROWS); k--;)
		be->rows_scatter(be, md->rows, md->logits, meta(md, md->meta, META_ROW), nl, V);
}

/* A decoding step of N single tokens: replayed from its recording once
 * one exists, recorded at its second occurrence (the first has grown the
 * backend's workspaces), else run as ops. */
static int step_ops(model_decoder *md, int N, lm_err *e)
{
	lm_backend *be = md->m->be;
	if (!md->graph || md->no_graphs || md->seen[N] < 1) {
		if (md->seen)
			md->seen[N] = 1;
		chunk_ops(md, N, N, 1, NULL);
		return 0;
	}
	if (!md->graph[N]) {
		be->graph_begin(be);
		chunk_ops(md, N, N, 1, NULL);
		if (!(md->graph[N] = be->graph_end(be))) {
			md->no_graphs = 1;
			return be->sync(be, e);
		}
	}
	be->graph_run(be, md->graph[N]);
	return 0;
}

/* Run N stacked tokens through the model (pr: the runs of whole inputs
 * they are, or NULL); the logits of the tokens that end their sequence's
 * input go to their slot's row, and (when the host samples) to
 * out[last_of[i]]. */
static int run_chunk(model_decoder *md, int N, const prefill_runs *pr, int single,
		     float *const *out, lm_err *e)
{
	if (md->xt && !md->op_table) {
		memcpy(md->ids, meta(md, md->meta_host, META_IDS), (size_t)N * sizeof *md->ids);
		model_decode_cpu_chunk(md, N, out);
		return 0;
	}
	set_threads(md, N);
	lm_backend *be = md->m->be;
	size_t V = (size_t)md->m->cfg.vocab;
	int32_t *h = md->meta_host, nl = 0;
	for (int i = 0; i < N; i++) {
		meta(md, h, META_POS)[i] = (int32_t)md->pos[i];
		meta(md, h, META_SLOT)[i] = (int32_t)md->tok_slot[i];
		if (md->last_of[i] >= 0) {
			meta(md, h, META_LAST)[nl] = i;
			meta(md, h, META_ROW)[nl++] = (int32_t)md->tok_slot[i];
		}
	}
	if (single && nl == N && md->sgraph && !md->no_graphs && !md->no_fused) {
		md->pend = N; /* uploaded and run with the choose() after it */
		return 0;
	}
	be->upload(be, md->meta, h, (size_t)META_ARRAYS * MODEL_DECODE_CHUNK * sizeof *h);
	if (single && nl == N) {
		if (step_ops(md, N, e) < 0)
			return -1;
	} else {
		chunk_ops(md, N, nl, 1, pr);
	}
	if (be->sample)
		return 0;
	for (int i = 0; i < N; i++)
		if (md->last_of[i] >= 0)
			be->download(be, out[md->last_of[i]], md->rows + md->tok_slot[i] * V,
				     V * sizeof(float));
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int md_feed(void *ctx, uint32_t n_seq, const uint32_t *slot, const uint32_t *const *tok,
		   const uint32_t *n_tok, float *const *out, lm_err *e)
{
	model_decoder *md = ctx;
	uint32_t V = (uint32_t)md->m->cfg.vocab;
	int single = 1;
	if (run_pending(md, e) < 0)
		return -1;
	for (uint32_t i = 0; i < n_seq; i++) {
		if (slot[i] >= md->n_slots || md->len[slot[i]] + (uint64_t)n_tok[i] > md->n_ctx)
			return lm_seterr(e, "slot %u: %u + %u tokens exceed the context of %u", slot[i],
					 slot[i] < md->n_slots ? md->len[slot[i]] : 0, n_tok[i], md->n_ctx);
		for (uint32_t t = 0; t < n_tok[i]; t++)
			if (tok[i][t] >= V)
				return lm_seterr(e, "token id %u is outside the model's vocabulary (%u)",
						 tok[i][t], V);
		single &= n_tok[i] == 1;
	}
	/* Where the flash prefill may apply: the inputs by length (a
	 * prefill's inputs of one length then sit together, in runs it takes
	 * at once); a decoding step's single tokens keep their order, which
	 * its recording assumes. */
	const uint32_t *order = NULL;
	if (md->prefill_flash && !single && n_seq <= md->n_slots) {
		for (uint32_t i = 0; i < n_seq; i++)
			md->order[i] = (uint64_t)n_tok[i] << 32 | i;
		qsort(md->order, n_seq, sizeof *md->order, cmp_u64);
		for (uint32_t i = 0; i < n_seq; i++)
			md->order_i[i] = (uint32_t)md->order[i];
		order = md->order_i;
	}
	/* chunks of up to MODEL_DECODE_CHUNK tokens, with their runs while
	 * they hold only whole inputs from position 0 (pr.n = 0 once not) */
	int N = 0, whole = 1;
	prefill_runs pr = { 0 };
	single = single && n_seq <= MODEL_DECODE_CHUNK;
	int32_t *ids = meta(md, md->meta_host, META_IDS);
	for (uint32_t k = 0; k < n_seq; k++) {
		uint32_t i = order ? order[k] : k, n = n_tok[i];
		if (md->prefill_flash && N > 0 && n <= MODEL_DECODE_CHUNK &&
		    N + n > MODEL_DECODE_CHUNK) {
			if (run_chunk(md, N, whole ? &pr : NULL, single, out, e) < 0)
				return -1; /* this input fits in the next chunk whole */
			N = 0;
		}
		for (uint32_t t = 0; t < n; t++) {
			if (N == 0) {
				whole = t == 0;
				pr.n = 0;
			}
			if (t == 0 && whole) {
				if (md->len[slot[i]])
					whole = 0;
				else if (pr.n && pr.t[pr.n - 1] == (int)n)
					pr.b[pr.n - 1]++;
				else if (pr.n < PREFILL_RUNS)
					pr.t[pr.n] = (int)n, pr.b[pr.n++] = 1;
				else
					whole = 0;
			}
			ids[N] = (int32_t)tok[i][t];
			md->pos[N] = md->len[slot[i]] + t;
			md->tok_slot[N] = slot[i];
			md->last_of[N] = t + 1 == n ? (int)i : -1;
			if (++N == MODEL_DECODE_CHUNK || (k + 1 == n_seq && t + 1 == n)) {
				if (run_chunk(md, N, whole && t + 1 == n ? &pr : NULL, single, out, e) < 0)
					return -1;
				N = 0;
			}
		}
	}
	for (uint32_t i = 0; i < n_seq; i++)
		md->len[slot[i]] += n_tok[i];
	return md->m->be->sample ? 0 : md->m->be->sync(md->m->be, e);
}

_Static_assert(LM_DECODER_DRAWS == SAMPLE_DRAWS, "generate.h's draws are the sampler's");

/* The held step (md->pend), alone: its meta up, then its ops. */
static int run_pending(model_decoder *md, lm_err *e)
{
	if (!md->pend)
		return 0;
	int N = md->pend;
	md->pend = 0;
	lm_backend *be = md->m->be;
	be->upload(be, md->meta, md->meta_host, (size_t)META_ARRAYS * MODEL_DECODE_CHUNK * sizeof(int32_t));
	return step_ops(md, N, e);
}

/* The sampler over n rows for round j of a choose: that round's draws in,
 * its tokens and log-probs out, and, with feed, the tokens fed on to the
 * next step: its ids, positions and embedded rows. */
static void sample_op(model_decoder *md, uint32_t n, sample_args a, uint32_t j, int feed)
{
	lm_backend *be = md->m->be;
	uint32_t S = md->n_slots;
	int32_t *out = md->s_out + 2 * (size_t)S * j;
	sample_feed f = { meta(md, md->meta, META_IDS), meta(md, md->meta, META_POS), md->x,
			  md->m->wte, md->m->cfg.d_model };
	be->sample(be, out, (float *)(out + S), md->rows, md->s_in,
		   (const float *)(md->s_in + (2 + (size_t)j * SAMPLE_DRAWS) * S), md->s_in + S,
		   feed ? &f : NULL,
		   (int)n, md->m->cfg.vocab, a);
}

/* The held step, then k rounds of the sampler over its n = N rows, each
 * but the last fed on to another step: one graph. */
static void rounds_ops(model_decoder *md, uint32_t n, sample_args a, uint32_t k)
{
	int N = (int)n;
	for (uint32_t j = 0; j < k; j++) {
		chunk_ops(md, N, N, j == 0, NULL);
		sample_op(md, n, a, j, j + 1 < k);
	}
}

/* The held step of N tokens and k rounds over n = N rows (k = 1: the
 * sampler alone; else md->ahead), after one upload of their inputs:
 * replayed from sgraph once recorded for these arguments, recorded the
 * second time, else run as ops. */
static int fused_step(model_decoder *md, uint32_t n, sample_args a, uint32_t k, lm_err *e)
{
	lm_backend *be = md->m->be;
	int N = md->pend;
	size_t g = (size_t)(k > 1) * (md->n_slots + 1) + (size_t)N;
	md->pend = 0;
	be->upload(be, md->meta, md->meta_host,
		   ((size_t)META_ARRAYS * MODEL_DECODE_CHUNK + (2 + (size_t)k * SAMPLE_DRAWS) * md->n_slots) *
			   sizeof(int32_t));
	if (md->seen_s[g] < 1) {
		md->seen_s[g] = 1;
		rounds_ops(md, n, a, k);
		return 0;
	}
	if (md->sgraph[g] && memcmp(&md->sg_args[g], &a, sizeof a)) {
		be->graph_free(be, md->sgraph[g]);
		md->sgraph[g] = NULL;
	}
	if (!md->sgraph[g]) {
		be->graph_begin(be);
		rounds_ops(md, n, a, k);
		if (!(md->sgraph[g] = be->graph_end(be))) {
			md->no_graphs = 1;
			return be->sync(be, e);
		}
		md->sg_args[g] = a;
	}
	be->graph_run(be, md->sgraph[g]);
	return 0;
}

/* generate.h's choose_ahead() (choose() is its one round): the slots'
 * rows, forced tokens and k rounds of draws up, the sampler's tokens and
 * log-probs down; with the held step when there is one for these slots,
 * and then more rounds than one when k asks for them and every slot has
 * room for the k - 1 more tokens. */
static int md_choose_ahead(void *ctx, uint32_t n, uint32_t k, const uint32_t *slot,
			   const sample_params *sp, const float *u, const int32_t *forced,
			   uint32_t *tok, double *lp, lm_err *e)
{
	model_decoder *md = ctx;
	lm_backend *be = md->m->be;
	uint32_t S = md->n_slots;
	int32_t *in = md->meta_host + (size_t)META_ARRAYS * MODEL_DECODE_CHUNK, *h = md->s_host;
	sample_args a = { (float)sp->temperature, (int)sp->top_k, (float)sp->top_p, (int)sp->limit,
			  SAMPLE_WAY_AUTO };
	/* the device sampler scales by 1 / temperature in float: one that
	 * overflows is greedy (sample_greedy), and so is one that overflows
	 * only once rounded to a float */
	if (sample_greedy(sp->temperature) || isinf(1.0f / a.temperature))
		a.temperature = 0;
	int fuse = md->pend > 0 && (uint32_t)md->pend == n && !md->no_fused && !md->no_graphs;
	/* more rounds: the held step's tokens are these slots' in this order,
	 * nothing forced, and room in every cache */
	if (k > md->ahead || !fuse)
		k = 1;
	for (uint32_t i = 0; i < n && k > 1; i++)
		if (md->tok_slot[i] != slot[i] || forced[i] >= 0 ||
		    md->len[slot[i]] + (uint64_t)k - 1 > md->n_ctx)
			k = 1;
	if (k > 1 && k != md->ahead)
		k = 1; /* one recording of many rounds per batch size */
	if (!fuse && run_pending(md, e) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		in[i] = (int32_t)slot[i];
		in[S + i] = forced[i];
		for (uint32_t j = 0; j < k; j++)
			memcpy(&in[(2 + (size_t)j * SAMPLE_DRAWS) * S + (size_t)i * SAMPLE_DRAWS],
			       &u[((size_t)j * n + i) * SAMPLE_DRAWS], SAMPLE_DRAWS * sizeof *u);
	}
	if (fuse) {
		if (fused_step(md, n, a, k, e) < 0)
			return -1;
	} else {
		be->upload(be, md->s_in, in, (2 + SAMPLE_DRAWS) * (size_t)S * sizeof *in);
		sample_op(md, n, a, 0, 0);
	}
	be->download(be, h, md->s_out, 2 * (size_t)k * S * sizeof *h);
	if (be->sync(be, e) < 0)
		return -1;
	for (uint32_t j = 0; j < k; j++)
		for (uint32_t i = 0; i < n; i++) {
			const int32_t *o = h + 2 * (size_t)S * j;
			float l;
			memcpy(&l, &o[S + i], sizeof l);
			tok[(size_t)j * n + i] = o[i] < 0 ? UINT32_MAX : (uint32_t)o[i];
			lp[(size_t)j * n + i] = l;
		}
	for (uint32_t i = 0; i < n; i++)
		md->len[slot[i]] += k - 1;
	md->ahead_runs += k > 1;
	return (int)k;
}

static int md_choose(void *ctx, uint32_t n, const uint32_t *slot, const sample_params *sp,
		     const float *u, const int32_t *forced, uint32_t *tok, double *lp, lm_err *e)
{
	return md_choose_ahead(ctx, n, 1, slot, sp, u, forced, tok, lp, e) < 0 ? -1 : 0;
}

/* The arguments of be->decode_step (md->step), when the model's
 * architecture is one it runs; 0, or -1 out of memory. */
static int step_init(model_decoder *md)
{
	const model *m = md->m;
	const model_config *c = &m->cfg;
	lm_backend *be = m->be;
	const char *off = getenv("LMPIPE_NO_STEP_KERNEL");
	if (!be->decode_step || (off && *off && strcmp(off, "0")) || c->mlp != MODEL_MLP_SWIGLU ||
	    c->qk_norm || c->softcap > 0 || c->n_layers > DECODE_STEP_MAX_LAYERS)
		return 0;
	decode_step_args *a = calloc(1, sizeof *a);
	md->step_sync = be->alloc(be, 2 * sizeof *md->step_sync);
	if (!a || !md->step_sync) {
		free(a);
		return -1;
	}
	be->zero(be, md->step_sync, 2 * sizeof *md->step_sync);
	int H = c->n_heads, D = c->d_model / H;
	a->s = (decode_shape){ 1, H, model_kv_heads(c), D, (int)md->n_ctx };
	a->L = c->n_layers;
	a->C = c->d_model;
	a->F = c->d_ff;
	a->V = c->vocab;
	a->n_slots = (int)md->n_slots;
	a->eps = (float)model_norm_eps(c);
	a->scale = 1.0f / sqrtf((float)D);
	a->x = md->x;
	a->x2 = md->x2;
	a->y = md->y;
	a->sw = md->sw;
	a->kc = md->kc;
	a->vc = md->vc;
	a->cs = m->rope_cs;
	a->pos = meta(md, md->meta, META_POS);
	a->slot = meta(md, md->meta, META_SLOT);
	a->row = meta(md, md->meta, META_ROW);
	a->lnf = m->lnf;
	a->head = m->head_c;
	a->rows = md->rows;
	a->sync = md->step_sync;
	for (int l = 0; l < c->n_layers; l++)
		a->layer[l] = (decode_step_layer){ m->lp[l].ln1, m->lp[l].ln2, m->lc[l].wqkv, m->lc[l].wo,
						   m->lc[l].wgu, m->lc[l].wdown };
	md->step = a;
	return 0;
}

void model_decoder_free(model_decoder *md)
{
	if (md->threads && md->threads != md->max_threads)
		backend_set_threads(md->max_threads);
	if (md->m) {
		lm_backend *be = md->m->be;
		for (uint32_t i = 0; md->graph && i <= md->n_slots; i++)
			if (md->graph[i])
				be->graph_free(be, md->graph[i]);
		for (uint32_t i = 0; md->sgraph && i < 2 * (md->n_slots + 1); i++)
			if (md->sgraph[i])
				be->graph_free(be, md->sgraph[i]);
		void *bufs[] = { md->kc, md->vc, md->x, md->x2, md->xl, md->rstd, md->xn, md->qkv, md->q,
				 md->y, md->h, md->sw, md->logits, md->rows, md->meta, md->s_out,
				 md->step_sync, md->lse };
		for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
			if (bufs[i])
				be->release(be, bufs[i]);
	}
	free(md->step);
	free(md->graph);
	free(md->seen);
	free(md->sgraph);
	free(md->seen_s);
	free(md->sg_args);
	free(md->meta_host);
	free(md->s_host);
	free(md->len);
	free(md->pos);
	free(md->tok_slot);
	free(md->last_of);
	free(md->order);
	free(md->order_i);
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
	if (m->be->res != LM_F32) /* its fusions take an fp32 stream (backend.h) */
		return lm_seterr(e, "decoder: the residual stream must be fp32 (the backend's is bf16)");
	md->m = m;
	md->max_threads = omp_get_max_threads();
	const char *work = getenv("LMPIPE_DECODE_WORK");
	md->work = work && atof(work) > 0 ? atof(work) : MODEL_DECODE_WORK;
	md->n_slots = n_slots;
	md->n_ctx = n_ctx;
	lm_backend *be = m->be;
	size_t N = MODEL_DECODE_CHUNK, C = c->d_model, F = c->d_ff, V = c->vocab, z = esz(md);
	size_t cache = (size_t)c->n_layers * n_slots * model_decoder_cache_stride(md) * z;
	md->kc = be->alloc(be, cache);
	md->vc = be->alloc(be, cache);
	md->x = be->alloc(be, N * C * sizeof(float));
	md->x2 = be->alloc(be, N * C * sizeof(float));
	md->xl = be->alloc(be, N * C * sizeof(float));
	md->rstd = be->alloc(be, N * sizeof(float));
	md->xn = be->alloc(be, N * C * z);
	md->qkv = be->alloc(be, N * model_qkv_rows(c) * z);
	md->q = be->alloc(be, N * C * z);
	md->y = be->alloc(be, N * C * z);
	md->h = be->alloc(be, N * model_gu_rows(c) * z);
	md->sw = be->alloc(be, N * F * z);
	md->logits = be->alloc(be, N * V * z);
	md->rows = be->alloc(be, (size_t)n_slots * V * sizeof(float));
	const char *pf = getenv("LMPIPE_PREFILL_FLASH"); /* "0": the cache ops, to compare */
	md->prefill_flash = !(pf && !strcmp(pf, "0")) && be->attn_qkv_fwd && !c->qk_norm &&
			    model_kv_heads(c) == c->n_heads;
	if (md->prefill_flash)
		md->lse = be->alloc(be, N * c->n_heads * sizeof(float));
	if (be->sample) {
		const char *ah = getenv("LMPIPE_DECODE_AHEAD");
		md->ahead = ah && atoi(ah) >= 1 && atoi(ah) <= 64 ? (uint32_t)atoi(ah) : MODEL_DECODE_AHEAD;
	}
	size_t n_meta = META_ARRAYS * N +
			(be->sample ? (2 + (size_t)md->ahead * SAMPLE_DRAWS) * n_slots : 0);
	md->meta = be->alloc(be, n_meta * sizeof(int32_t));
	md->meta_host = calloc(n_meta, sizeof *md->meta_host);
	md->len = calloc(n_slots, sizeof *md->len);
	md->pos = malloc(N * sizeof *md->pos);
	md->tok_slot = malloc(N * sizeof *md->tok_slot);
	md->last_of = malloc(N * sizeof *md->last_of);
	md->order = malloc(n_slots * sizeof *md->order);
	md->order_i = malloc(n_slots * sizeof *md->order_i);
	int fail = !md->kc || !md->vc || !md->x || !md->x2 || !md->xl || !md->rstd || !md->xn || !md->qkv ||
		   !md->q || !md->y || !md->h || !md->sw || !md->logits || !md->rows || !md->meta ||
		   !md->meta_host || !md->len || !md->pos || !md->tok_slot || !md->last_of ||
		   !md->order || !md->order_i ||
		   (md->prefill_flash && !md->lse);
	if (!fail && be->sample) {
		md->s_in = md->meta + META_ARRAYS * N;
		md->s_out = be->alloc(be, 2 * (size_t)md->ahead * n_slots * sizeof(int32_t));
		md->s_host = malloc(2 * (size_t)md->ahead * n_slots * sizeof(int32_t));
		fail = !md->s_out || !md->s_host;
	}
	if (!fail && be->graph_begin && !getenv("LMPIPE_NO_GRAPHS")) {
		md->graph = calloc((size_t)n_slots + 1, sizeof *md->graph);
		md->seen = calloc((size_t)n_slots + 1, 1);
		fail = !md->graph || !md->seen;
		if (!fail && be->sample) {
			md->no_fused = getenv("LMPIPE_NO_FUSED_SAMPLE") != NULL;
			md->sgraph = calloc(2 * ((size_t)n_slots + 1), sizeof *md->sgraph);
			md->seen_s = calloc(2 * ((size_t)n_slots + 1), 1);
			md->sg_args = calloc(2 * ((size_t)n_slots + 1), sizeof *md->sg_args);
			fail = !md->sgraph || !md->seen_s || !md->sg_args;
		}
	}
	if (!fail)
		fail = step_init(md) < 0;
	if (fail) {
		lm_err be_e;
		const char *why = be->sync(be, &be_e) < 0 ? be_e.msg : "out of memory";
		lm_seterr(e, "%s: no room for a key/value cache of %u x %u positions (%.2f GiB)", why,
			  n_slots, n_ctx, 2.0 * cache / (1 << 30));
		model_decoder_free(md);
		return -1;
	}
	md->ids = md->meta;
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
	md->dec = (lm_decoder){ md, (uint32_t)c->vocab, n_ctx, n_slots, md_reset, md_fork, md_feed,
				be->sample ? md_choose : NULL, NULL, 0 };
	if (be->sample && md->sgraph && !md->no_fused && md->ahead > 1) {
		md->dec.choose_ahead = md_choose_ahead;
		md->dec.max_ahead = md->ahead;
	}
	return be->sync(be, e);
}
