/* model_decode_cpu.c: model_decode.c's chunk forward pass on the CPU backend,
 * as one OpenMP parallel region per chunk (see model_decode.h).
 *
 * Each thread keeps the same slice of every weight matrix from step to step
 * (columns of the output), so at batch 1 the weights stay in the cores'
 * caches and one token is a few microseconds of work per op.  Threads meet
 * at decode_ops.h's spinning barrier: five per layer.  RMSNorm is computed
 * by every thread for itself (it is tiny), which saves two more. */
#include "model_decode.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "decode_ops.h"
#include "rmsnorm.h"

enum { COL_ALIGN = 16 };

/* Write token i's rotated key and its value into its slot's cache, and
 * rotate its query in place (in qkv). */
static void rope_store(model_decoder *md, int l, int i, int h)
{
	const model_config *c = &md->m->cfg;
	int C = c->d_model, D = C / c->n_heads;
	float *row = md->qkv + (size_t)i * 3 * C;
	const float *cs = md->m->rope_cs + (size_t)md->pos[i] * D;
	size_t at = ((size_t)h * md->n_ctx + (size_t)md->pos[i]) * D;
	float *kc = model_decoder_cache(md, md->kc, l, md->tok_slot[i]) + at;
	float *vc = model_decoder_cache(md, md->vc, l, md->tok_slot[i]) + at;
	dec_rope_row(row + h * D, cs, D);
	memcpy(kc, row + C + h * D, (size_t)D * sizeof *kc);
	dec_rope_row(kc, cs, D);
	memcpy(vc, row + 2 * C + h * D, (size_t)D * sizeof *vc);
}

static void attend(model_decoder *md, int l, int i, int h, float scale, float *s)
{
	const model_config *c = &md->m->cfg;
	int C = c->d_model, D = C / c->n_heads;
	size_t head = (size_t)h * md->n_ctx * D;
	attn_decode_row(md->y + (size_t)i * C + h * D, md->qkv + (size_t)i * 3 * C + h * D,
			model_decoder_cache(md, md->kc, l, md->tok_slot[i]) + head,
			model_decoder_cache(md, md->vc, l, md->tok_slot[i]) + head,
			(int)md->pos[i] + 1, D, scale, s);
}

/* Thread t of nt: its share of every op of the chunk.  single: every token
 * is its sequence's only one in the chunk, so a token's attention reads
 * only what earlier chunks and its own thread wrote. */
static void chunk_thread(model_decoder *md, int N, int single, float *const *out, int t, int nt)
{
	const model *m = md->m;
	const model_config *c = &m->cfg;
	int C = c->d_model, F = c->d_ff, H = c->n_heads, D = C / H, V = c->vocab;
	float scale = 1.0f / sqrtf((float)D);
	float *xn = md->xt + (size_t)t * MODEL_DECODE_CHUNK * C;
	float *s = md->scores + (size_t)t * md->n_ctx;
	dec_barrier *b = &md->bar;
	int lo, hi;
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		for (int i = 0; i < N; i++)
			dec_rmsnorm_row(xn + (size_t)i * C, md->x + (size_t)i * C, p->ln1, C,
					RMSNORM_EPS);
		dec_split(3 * C, t, nt, COL_ALIGN, &lo, &hi);
		dec_matmul_cols(md->qkv, xn, p->wqkv, N, C, 3 * C, lo, hi, 0);
		dec_barrier_wait(b, nt);
		for (int w = t; w < N * H; w += nt)
			rope_store(md, l, w / H, w % H);
		if (!single)
			dec_barrier_wait(b, nt);
		for (int w = t; w < N * H; w += nt)
			attend(md, l, w / H, w % H, scale, s);
		dec_barrier_wait(b, nt);
		dec_split(C, t, nt, COL_ALIGN, &lo, &hi);
		dec_matmul_cols(md->x, md->y, p->wo, N, C, C, lo, hi, 1);
		dec_barrier_wait(b, nt);
		for (int i = 0; i < N; i++)
			dec_rmsnorm_row(xn + (size_t)i * C, md->x + (size_t)i * C, p->ln2, C,
					RMSNORM_EPS);
		dec_split(F, t, nt, COL_ALIGN, &lo, &hi);
		dec_matmul_cols(md->h, xn, p->wgu, N, C, 2 * F, lo, hi, 0);
		dec_matmul_cols(md->h, xn, p->wgu, N, C, 2 * F, F + lo, F + hi, 0);
		dec_swiglu_cols(md->sw, md->h, N, F, lo, hi);
		dec_barrier_wait(b, nt);
		dec_split(C, t, nt, COL_ALIGN, &lo, &hi);
		dec_matmul_cols(md->x, md->sw, p->wdown, N, F, C, lo, hi, 1);
		dec_barrier_wait(b, nt);
	}
	int nl = 0;
	for (int i = 0; i < N; i++)
		if (md->last_of[i] >= 0)
			dec_rmsnorm_row(xn + (size_t)nl++ * C, md->x + (size_t)i * C, m->lnf, C,
					RMSNORM_EPS);
	if (!nl)
		return; /* a chunk within a long prompt only fills the cache */
	dec_split(V, t, nt, COL_ALIGN, &lo, &hi);
	dec_matmul_cols(md->logits, xn, m->head, nl, C, V, lo, hi, 0);
	nl = 0;
	for (int i = 0; i < N && hi > lo; i++)
		if (md->last_of[i] >= 0)
			memcpy(out[md->last_of[i]] + lo, md->logits + (size_t)nl++ * V + lo,
			       (size_t)(hi - lo) * sizeof(float));
}

/* Threads for a chunk of N tokens: one per md->work multiply-adds, up to
 * the caller's thread count. */
static int chunk_threads(const model_decoder *md, int N)
{
	double want = 1 + (double)N * md->m->n_params / md->work;
	return want >= md->max_threads ? md->max_threads : (int)want;
}

void model_decode_cpu_chunk(model_decoder *md, int N, float *const *out)
{
	const model_config *c = &md->m->cfg;
	int single = 1;
	for (int i = 0; i < N; i++) {
		single &= md->last_of[i] >= 0;
		memcpy(md->x + (size_t)i * c->d_model, md->m->wte + (size_t)md->ids[i] * c->d_model,
		       (size_t)c->d_model * sizeof(float));
	}
	int nt = chunk_threads(md, N);
	dec_blas_single();
#pragma omp parallel num_threads(nt) if (nt > 1)
	chunk_thread(md, N, single, out, omp_get_thread_num(), omp_get_num_threads());
}
