/* model_decode_cpu.c: model_decode.c's chunk forward pass on the CPU backend,
 * as one OpenMP parallel region per chunk (see model_decode.h).
 *
 * Each thread keeps the same slice of every weight matrix from step to step
 * (columns of the output; at larger batches a block of rows and columns,
 * split2d), so at batch 1 the weights stay in the cores' caches and one
 * token is a few microseconds of work per op.  Threads meet
 * at decode_ops.h's spinning barrier: five per layer.  RMSNorm is computed
 * by every thread for the rows of its own product block (it is tiny),
 * which saves two more; the gate and up products and SwiGLU are one pass
 * (decode_gemm.h's gated product; with ReLU^2, the up product and the
 * squared ReLU of each thread's own block).  Under GQA the qkv rows are
 * [q: H D | k: Hkv D | v: Hkv D] and only kv heads are cached. */
#include "gen/model_decode.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/model_decode_internal.h"
#include "kernels/decode_gemm.h"
#include "kernels/decode_ops.h"

/* Thread slices of the matrices' columns: whole panels. */
enum { COL_ALIGN = DEC_PANEL };

/* A thread's block of an N x OUT product.  At batch 1 every thread takes a
 * column slice.  A slice narrower than MIN_PANELS panels starves the
 * product's register tile (one panel: 6 multiply-adds per 7 loads), so at
 * larger batches the threads form fewer column groups, halving their
 * number while each group still gets MIN_ROWS rows a thread, and the
 * threads of a group split the rows.  A row's result does not depend on
 * the block it falls in (decode_gemm.h). */
enum { MIN_PANELS = 4, MIN_ROWS = 6 };

struct block {
	int r0, r1, lo, hi;  /* rows [r0, r1), columns [lo, hi) */
};

static struct block split2d(int N, int OUT, int t, int nt)
{
	int panels = (OUT + DEC_PANEL - 1) / DEC_PANEL, cg = nt;
	while (cg > 1 && panels / cg < MIN_PANELS && N / (nt / (cg / 2)) >= MIN_ROWS)
		cg /= 2;
	int rg = nt / cg, ci = t % cg, ri = t / cg;
	struct block b = { 0, 0, 0, 0 };
	if (ri >= rg)
		return b; /* nt not a multiple of cg: this thread rests */
	int per = (N + rg - 1) / rg;
	b.r0 = ri * per < N ? ri * per : N;
	b.r1 = b.r0 + per < N ? b.r0 + per : N;
	dec_split(OUT, ci, cg, COL_ALIGN, &b.lo, &b.hi);
	return b;
}

/* out[r0..r1) (+)= inp[r0..r1) . W^T over the block's columns. */
static void gemm_block(struct block b, float *out, int ldo, const float *inp, int IN,
		       const float *packed, int accumulate)
{
	if (b.r1 > b.r0)
		dec_gemm_cols(out + (size_t)b.r0 * ldo, ldo, inp + (size_t)b.r0 * IN, b.r1 - b.r0,
			      IN, packed, b.lo, b.hi, accumulate);
}

/* Pack W [OUT][IN] at *at (when base is set; else only count) and move
 * *at past it, keeping the next matrix aligned; glu: W is [2F][IN], the
 * gate then the up projection, packed for dec_gemm_glu_cols (OUT = F). */
static const float *pack_one(float *base, size_t *at, const float *w, int IN, int OUT, int glu)
{
	const size_t align = DEC_PACK_ALIGN / sizeof(float);
	float *dst = base ? base + *at : NULL; /* (no offset from a null pointer: undefined) */
	size_t n = glu ? dec_packed_glu_floats(IN, OUT) : dec_packed_floats(IN, OUT);
	*at += (n + align - 1) / align * align;
	if (base && glu)
		dec_pack_glu(dst, w, IN, OUT);
	else if (base)
		dec_pack(dst, w, IN, OUT);
	return dst;
}

/* Two passes: the size, then the packing. */
static size_t pack_all(model_decoder *md, float *base)
{
	const model *m = md->m;
	const model_config *c = &m->cfg;
	int C = c->d_model, F = c->d_ff, relu2 = c->mlp == MODEL_MLP_RELU2;
	size_t at = 0;
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		struct packed_layer *q = &md->pl[l];
		q->qkv = pack_one(base, &at, p->wqkv, C, model_qkv_rows(c), 0);
		q->o = pack_one(base, &at, p->wo, C, C, 0);
		q->gu = pack_one(base, &at, p->wgu, C, F, !relu2);
		q->down = pack_one(base, &at, p->wdown, F, C, 0);
	}
	md->phead = pack_one(base, &at, m->head, C, c->vocab, 0);
	return at;
}

int model_decode_cpu_pack(model_decoder *md)
{
	if (!(md->pl = calloc((size_t)md->m->cfg.n_layers, sizeof *md->pl)))
		return -1;
	size_t n = pack_all(md, NULL);
	if (!(md->packed = aligned_alloc(DEC_PACK_ALIGN, n * sizeof(float))))
		return -1;
	pack_all(md, md->packed);
	return 0;
}

/* QK-norm of one head vector in place (headnorm.h's arithmetic). */
static void norm_head(float *x, const float *w, int D, float eps)
{
	float ss = 0;
	for (int d = 0; d < D; d++)
		ss += x[d] * x[d];
	float s = 1.0f / sqrtf(ss / D + eps);
	for (int d = 0; d < D; d++)
		x[d] = x[d] * s * w[d];
}

/* Rotate token i's query head h in place (in qkv), after QK-norm; for a
 * key/value head h (h < Hkv), write its normed, rotated key and its value
 * into its slot's cache. */
static void rope_store(model_decoder *md, int l, int i, int h)
{
	const model_config *c = &md->m->cfg;
	const layer_ptrs *p = &md->m->lp[l];
	int C = c->d_model, D = C / c->n_heads, KV = model_kv_heads(c);
	float eps = (float)model_norm_eps(c);
	float *row = (float *)md->qkv + (size_t)i * model_qkv_rows(c);
	const float *cs = md->m->rope_cs + (size_t)md->pos[i] * D;
	if (c->qk_norm)
		norm_head(row + h * D, p->q_norm, D, eps);
	dec_rope_row(row + h * D, cs, D);
	if (h >= KV)
		return;
	size_t at = ((size_t)h * md->n_ctx + (size_t)md->pos[i]) * D;
	float *kc = model_decoder_cache(md, md->kc, l, md->tok_slot[i]) + at;
	float *vc = model_decoder_cache(md, md->vc, l, md->tok_slot[i]) + at;
	memcpy(kc, row + C + h * D, (size_t)D * sizeof *kc);
	if (c->qk_norm)
		norm_head(kc, p->k_norm, D, eps);
	dec_rope_row(kc, cs, D);
	memcpy(vc, row + C + (size_t)(KV + h) * D, (size_t)D * sizeof *vc);
}

static void attend(model_decoder *md, int l, int i, int h, float scale, float *s)
{
	const model_config *c = &md->m->cfg;
	int C = c->d_model, D = C / c->n_heads, G = c->n_heads / model_kv_heads(c);
	size_t head = (size_t)(h / G) * md->n_ctx * D;
	attn_decode_row((float *)md->y + (size_t)i * C + h * D,
			(float *)md->qkv + (size_t)i * model_qkv_rows(c) + h * D,
			model_decoder_cache(md, md->kc, l, md->tok_slot[i]) + head,
			model_decoder_cache(md, md->vc, l, md->tok_slot[i]) + head,
			(int)md->pos[i] + 1, D, scale, s);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Thread 0, when phases are timed: the time since the last mark to phase. */
static void mark(model_decoder *md, int t, int phase)
{
	if (t || !md->phase_t)
		return;
	double now = now_s();
	md->phase_s[phase] += now - md->phase_t;
	md->phase_t = now;
}

/* Rows [r0, r1) of the normed input, each thread its own: a thread's
 * product reads only the rows of its block. */
static void norm_rows(float *xn, const float *x, const float *w, struct block b, int C, float eps)
{
	for (int i = b.r0; i < b.r1; i++)
		dec_rmsnorm_row(xn + (size_t)i * C, x + (size_t)i * C, w, C, eps);
}

/* The squared ReLU over a thread's block of the up product, in place. */
static void relu2_block(float *h, int ld, struct block b)
{
	for (int i = b.r0; i < b.r1; i++)
		for (int j = b.lo; j < b.hi; j++) {
			float r = h[(size_t)i * ld + j] > 0 ? h[(size_t)i * ld + j] : 0.0f;
			h[(size_t)i * ld + j] = r * r;
		}
}

/* Soft-capping of rows [0, n) x columns [lo, hi) of the logits, V apart. */
static void cap_block(float *z, int n, int V, int lo, int hi, float cap)
{
	for (int i = 0; i < n; i++)
		for (int j = lo; j < hi; j++)
			z[(size_t)i * V + j] = cap * tanhf(z[(size_t)i * V + j] / cap);
}

/* Thread t of nt: its share of every op of the chunk.  single: every token
 * is its sequence's only one in the chunk, so a token's attention reads
 * only what earlier chunks and its own thread wrote.  logits: where the
 * head writes its nl rows (V apart). */
static void chunk_thread(model_decoder *md, int N, int single, float *const *out, float *logits,
			 int t, int nt)
{
	const model *m = md->m;
	const model_config *c = &m->cfg;
	int C = c->d_model, F = c->d_ff, H = c->n_heads, D = C / H, V = c->vocab;
	int QKV = model_qkv_rows(c), relu2 = c->mlp == MODEL_MLP_RELU2;
	/* under GQA a head's attention reads the kv head another thread stored */
	int shared_kv = model_kv_heads(c) != H;
	float scale = 1.0f / sqrtf((float)D), eps = (float)model_norm_eps(c);
	float *xn = md->xt + (size_t)t * MODEL_DECODE_CHUNK * C;
	float *s = md->scores + (size_t)t * md->n_ctx;
	dec_barrier *b = &md->bar;
	struct block qkv = split2d(N, QKV, t, nt), sq = split2d(N, C, t, nt);
	struct block gu = split2d(N, F, t, nt);
	int lo, hi;
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		const struct packed_layer *q = &md->pl[l];
		norm_rows(xn, md->x, p->ln1, qkv, C, eps);
		gemm_block(qkv, (float *)md->qkv, QKV, xn, C, q->qkv, 0);
		dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_QKV);
		for (int w = t; w < N * H; w += nt)
			rope_store(md, l, w / H, w % H);
		if (!single || shared_kv)
			dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_ROPE);
		for (int w = t; w < N * H; w += nt)
			attend(md, l, w / H, w % H, scale, s);
		dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_ATTN);
		gemm_block(sq, md->x, C, ((float *)md->y), C, q->o, 1);
		dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_OUT);
		norm_rows(xn, md->x, p->ln2, gu, C, eps);
		if (gu.r1 > gu.r0 && relu2) {
			gemm_block(gu, (float *)md->sw, F, xn, C, q->gu, 0);
			relu2_block((float *)md->sw, F, gu);
		} else if (gu.r1 > gu.r0) {
			dec_gemm_glu_cols((float *)md->sw + (size_t)gu.r0 * F, F, xn + (size_t)gu.r0 * C,
					  gu.r1 - gu.r0, C, q->gu, gu.lo, gu.hi);
		}
		dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_GATE_UP);
		gemm_block(sq, md->x, C, ((float *)md->sw), F, q->down, 1);
		dec_barrier_wait(b, t, nt);
		mark(md, t, DECODE_PHASE_DOWN);
	}
	int nl = 0;
	for (int i = 0; i < N; i++)
		if (md->last_of[i] >= 0)
			dec_rmsnorm_row(xn + (size_t)nl++ * C, md->x + (size_t)i * C, m->lnf, C, eps);
	if (!nl)
		return; /* a chunk within a long prompt only fills the cache */
	dec_split(V, t, nt, COL_ALIGN, &lo, &hi);
	dec_gemm_cols(logits, V, xn, nl, C, md->phead, lo, hi, 0);
	if (c->softcap > 0)
		cap_block(logits, nl, V, lo, hi, (float)c->softcap);
	if (logits != (float *)md->logits)
		return;
	nl = 0;
	for (int i = 0; i < N && hi > lo; i++)
		if (md->last_of[i] >= 0)
			memcpy(out[md->last_of[i]] + lo, ((float *)md->logits) + (size_t)nl++ * V + lo,
			       (size_t)(hi - lo) * sizeof(float));
}

/* The caller's rows for the chunk's logits when they lie V apart in
 * order (every sequence of a decoding step, slots in order): the head
 * writes there itself.  Else the decoder's own buffer, copied out. */
static float *logits_to(const model_decoder *md, int N, float *const *out)
{
	size_t V = (size_t)md->m->cfg.vocab;
	float *first = NULL;
	int nl = 0;
	for (int i = 0; i < N; i++) {
		if (md->last_of[i] < 0)
			continue;
		if (!first)
			first = out[md->last_of[i]];
		else if (out[md->last_of[i]] != first + nl * V)
			return ((float *)md->logits);
		nl++;
	}
	return first ? first : ((float *)md->logits);
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
	float *logits = logits_to(md, N, out);
	md->phase_t = md->phase_s && single ? now_s() : 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
	chunk_thread(md, N, single, out, logits, omp_get_thread_num(), omp_get_num_threads());
	mark(md, 0, DECODE_PHASE_HEAD);
}
