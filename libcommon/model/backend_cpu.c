/* backend_cpu.c: the CPU backend: host memory, activations in fp32, the
 * kernels/cpu twins (and the sgemm-based attention of attn_blas.h) behind
 * the op table of backend.h.  Each op is the twin itself, with the backend
 * argument dropped; where the table's op is coarser than the twins (a
 * product with an addend, a weighted cross-entropy), it is composed from
 * them here.  Its residual stream is fp32, rounded to bf16 after each write
 * when be->res is LM_BF16 (lm-train --residual bf16: the values a bf16
 * stream holds), and its gradient too when be->res_grad is. */
#include "model/backend.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/attention.h"
#include "kernels/attn_blas.h"
#include "kernels/convert.h"
#include "kernels/decode.h"
#include "kernels/embedding.h"
#include "kernels/gqa.h"
#include "kernels/headnorm.h"
#include "kernels/logit_variants.h"
#include "kernels/matmul.h"
#include "kernels/permute.h"
#include "kernels/relu2.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/entropy.h"
#include "kernels/rl_ppo_tok.h"
#include "kernels/rl_tok.h"
#include "kernels/xent.h"

enum { CPU_ALIGN = 64 };

/* The context: a scratch row of per-token loss factors for xent_bwd, and
 * head_xent's chunk of logits. */
typedef struct cpu_ctx {
	float *dloss;
	size_t cap;
	float *chunk;
	size_t chunk_cap;
} cpu_ctx;

static void *cpu_alloc(lm_backend *be, size_t bytes)
{
	size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
	void *p = aligned_alloc(CPU_ALIGN, n ? n : CPU_ALIGN);
	if (!p)
		backend_fail(be, "out of memory (%zu bytes asked for)", bytes);
	return p;
}

static void cpu_release(lm_backend *be, void *p) { free(p); }

/* Large fills and copies are split over the threads: serial ones would
 * leave all but one core idle between the parallel ops. */
enum { PAR_CHUNK = 1 << 20 };

static void cpu_zero(lm_backend *be, void *p, size_t bytes)
{
	size_t chunks = (bytes + PAR_CHUNK - 1) / PAR_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
	for (size_t c = 0; c < chunks; c++) {
		size_t off = c * PAR_CHUNK;
		memset((char *)p + off, 0, bytes - off < PAR_CHUNK ? bytes - off : PAR_CHUNK);
	}
}

static void cpu_copy(lm_backend *be, void *dst, const void *src, size_t bytes)
{
	if (dst == src)
		return;
	size_t chunks = (bytes + PAR_CHUNK - 1) / PAR_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
	for (size_t c = 0; c < chunks; c++) {
		size_t off = c * PAR_CHUNK;
		memcpy((char *)dst + off, (const char *)src + off,
		       bytes - off < PAR_CHUNK ? bytes - off : PAR_CHUNK);
	}
}

static void cpu_to_act(lm_backend *be, void *dst, const float *src, size_t n)
{
	cpu_copy(be, dst, src, n * sizeof *src);
}

static void cpu_from_act(lm_backend *be, float *dst, const void *src, size_t n)
{
	cpu_copy(be, dst, src, n * sizeof *dst);
}

static void cpu_add_act(lm_backend *be, void *dst, const float *src, size_t n)
{
	float *d = dst;
	for (size_t i = 0; i < n; i++)
		d[i] += src[i];
}

/* The CPU's ops are done when they return: a mark is the clock. */
static void *cpu_mark(lm_backend *be)
{
	struct timespec *t = malloc(sizeof *t);
	if (t)
		clock_gettime(CLOCK_MONOTONIC, t);
	return t;
}

static double cpu_mark_ms(lm_backend *be, void *from, void *to)
{
	const struct timespec *a = from, *b = to;
	return (b->tv_sec - a->tv_sec) * 1e3 + (b->tv_nsec - a->tv_nsec) / 1e6;
}

static void cpu_mark_free(lm_backend *be, void *m) { free(m); }

static void cpu_describe(lm_backend *be, char *buf, size_t n)
{
	snprintf(buf, n, "%s, kernel %s, %d OpenMP threads", openblas_get_config(),
		 openblas_get_corename(), omp_get_max_threads());
}

static int cpu_sync(lm_backend *be, lm_err *e) { return backend_take_error(be, e); }

/* Every shape; the fused attention ops are the model's composition. */
static int cpu_supports(lm_backend *be, lm_op op, int a, int b)
{
	return op != LM_OP_ATTENTION_BTHD && op != LM_OP_ATTENTION_QKV && op != LM_OP_QKV_ROPE;
}

static void cpu_close(lm_backend *be)
{
	if (!be)
		return;
	cpu_ctx *c = be->impl;
	free(c->dloss);
	free(c->chunk);
	free(c);
	free(be);
}

static void cpu_embedding_fwd(lm_backend *be, void *out, const int32_t *ids, const float *table,
			      int N, int C)
{
	embedding_fwd_cpu(out, ids, table, N, C);
	if (be->res == LM_BF16)
		round_bf16_cpu(out, (size_t)N * C);
}

static void cpu_embedding_bwd(lm_backend *be, float *dtable, const int32_t *ids, const void *dout,
			      int N, int C)
{
	embedding_bwd_cpu(dtable, ids, dout, N, C);
}

static void cpu_rmsnorm_fwd(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			    int N, int C, float eps)
{
	rmsnorm_fwd_cpu(y, rstd, x, w, N, C, eps);
}

static void cpu_rmsnorm_bwd(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			    const float *w, const float *rstd, int N, int C)
{
	rmsnorm_bwd_cpu(dx, dw, dy, x, w, rstd, N, C);
	if (be->res_grad == LM_BF16 && be->res == LM_BF16)
		round_bf16_cpu(dx, (size_t)N * C);
}

static void cpu_matmul_fwd(lm_backend *be, void *out, const void *addend, const void *inp,
			   const void *w, int N, int IN, int OUT)
{
	if (addend)
		cpu_copy(be, out, addend, (size_t)N * OUT * sizeof(float));
	matmul_fwd_cpu(out, inp, w, N, IN, OUT, addend != NULL);
	if (addend && be->res == LM_BF16)
		round_bf16_cpu(out, (size_t)N * OUT);
}

static void cpu_matmul_bwd(lm_backend *be, void *dinp, float *dw, const void *dout, const void *inp,
			   const void *w, int N, int IN, int OUT)
{
	matmul_bwd_cpu(dinp, dw, dout, inp, w, N, IN, OUT, 0);
}

static void cpu_rope_fwd(lm_backend *be, void *x, const float *cs, int B, int H, int T, int D)
{
	rope_fwd_cpu(x, cs, B, H, T, D);
}

static void cpu_rope_bwd(lm_backend *be, void *dx, const float *cs, int B, int H, int T, int D)
{
	rope_bwd_cpu(dx, cs, B, H, T, D);
}

static void cpu_qkv_split(lm_backend *be, void *q, void *k, void *v, const void *qkv,
			  int B, int T, int H, int D)
{
	qkv_split_cpu(q, k, v, qkv, B, T, H, D);
}

static void cpu_qkv_merge(lm_backend *be, void *dqkv, const void *dq, const void *dk,
			  const void *dv, int B, int T, int H, int D)
{
	qkv_merge_cpu(dqkv, dq, dk, dv, B, T, H, D);
}

static void cpu_heads_merge(lm_backend *be, void *y, const void *o, int B, int T, int H, int D)
{
	heads_merge_cpu(y, o, B, T, H, D);
}

static void cpu_heads_split(lm_backend *be, void *dO, const void *dy, int B, int T, int H, int D)
{
	heads_split_cpu(dO, dy, B, T, H, D);
}

static size_t cpu_attn_workspace(lm_backend *be, int B, int H, int T, int D)
{
	return attn_blas_workspace(T);
}

static void cpu_attn_fwd(lm_backend *be, const void *q, const void *k, const void *v, void *o,
			 float *lse, int B, int H, int T, int D, int causal, float scale, void *ws,
			 size_t ws_bytes)
{
	int rc = attn_fwd_blas(q, k, v, o, lse, B, H, T, D, causal, scale, ws, ws_bytes);
	if (rc)
		backend_fail(be, "attention: %s", attn_strerror(rc));
}

static void cpu_attn_bwd(lm_backend *be, const void *q, const void *k, const void *v,
			 const void *o, const void *dout, const float *lse, void *dq, void *dk,
			 void *dv, int B, int H, int T, int D, int causal, float scale, void *ws,
			 size_t ws_bytes)
{
	int rc = attn_bwd_blas(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, causal, scale, ws,
			       ws_bytes);
	if (rc)
		backend_fail(be, "attention backward: %s", attn_strerror(rc));
}

static void cpu_swiglu_fwd(lm_backend *be, void *out, const void *h, int N, int F)
{
	swiglu_fwd_cpu(out, h, N, F);
}

static void cpu_swiglu_bwd(lm_backend *be, void *dh, const void *dout, const void *h, int N, int F)
{
	swiglu_bwd_cpu(dh, dout, h, N, F);
}

static void cpu_xent_fwd(lm_backend *be, float *loss, float *lse, const void *logits,
			 const int32_t *targets, int N, int V, double *loss_sum)
{
	xent_fwd_cpu(loss, lse, logits, targets, N, V);
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += loss[i];
	*loss_sum += sum;
}

static void cpu_xent_bwd(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			 const int32_t *targets, const float *weights, float scale, int N, int V)
{
	cpu_ctx *c = be->impl;
	if ((size_t)N > c->cap) {
		float *p = realloc(c->dloss, (size_t)N * sizeof *p);
		if (!p) {
			backend_fail(be, "out of memory (%d loss factors)", N);
			return;
		}
		c->dloss = p;
		c->cap = (size_t)N;
	}
	for (int i = 0; i < N; i++)
		c->dloss[i] = weights ? scale * weights[i] : scale;
	xent_bwd_cpu(dlogits, logits, lse, targets, c->dloss, N, V);
}

/* n floats of the context's scratch p (capacity *cap), or NULL with the
 * sticky error. */
static float *cpu_scratch(lm_backend *be, float **p, size_t *cap, size_t n)
{
	if (n > *cap) {
		float *q = realloc(*p, n * sizeof *q);
		if (!q) {
			backend_fail(be, "out of memory (%zu bytes of scratch)", n * sizeof *q);
			return NULL;
		}
		*p = q;
		*cap = n;
	}
	return *p;
}

/* Composed from the fine ops, chunk by chunk; lo NULL: no logit variant. */
static void head_xent(lm_backend *be, const void *x, const void *w, const int32_t *targets,
		      float scale, int N, int C, int V, float *loss, float *lse, double *loss_sum,
		      void *dx, float *dw, const lm_logit_opts *lo)
{
	cpu_ctx *c = be->impl;
	int R = BACKEND_HEAD_CHUNK / V > 0 ? BACKEND_HEAD_CHUNK / V : 1;
	if (R > N)
		R = N;
	float *z = cpu_scratch(be, &c->chunk, &c->chunk_cap, (size_t)R * V);
	float *f = cpu_scratch(be, &c->dloss, &c->cap, (size_t)R);
	if (!z || !f)
		return;
	for (int i = 0; i < R; i++)
		f[i] = scale;
	const float *xf = x;
	double sum = 0;
	for (int r0 = 0; r0 < N; r0 += R) {
		int n = N - r0 < R ? N - r0 : R;
		const float *xr = xf + (size_t)r0 * C;
		matmul_fwd_cpu(z, xr, w, n, C, V, 0);
		if (lo && lo->softcap > 0)
			softcap_fwd_cpu(z, (size_t)n * V, lo->softcap);
		xent_fwd_cpu(loss + r0, lse + r0, z, targets + r0, n, V);
		for (int i = 0; i < n; i++)
			sum += loss[r0 + i];
		if (dx) {
			if (lo)
				logit_bwd_cpu(z, z, lse + r0, targets + r0, f, NULL, n, V, lo->z_loss,
					      lo->softcap);
			else
				xent_bwd_cpu(z, z, lse + r0, targets + r0, f, n, V);
			matmul_bwd_cpu((float *)dx + (size_t)r0 * C, dw, z, xr, w, n, C, V, 0);
		}
	}
	*loss_sum += sum;
}

static void cpu_head_xent(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			  float scale, int N, int C, int V, float *loss, float *lse,
			  double *loss_sum, void *dx, float *dw)
{
	head_xent(be, x, w, targets, scale, N, C, V, loss, lse, loss_sum, dx, dw, NULL);
}

static void cpu_head_xent_ex(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			     float scale, int N, int C, int V, float *loss, float *lse,
			     double *loss_sum, void *dx, float *dw, const lm_logit_opts *lo)
{
	head_xent(be, x, w, targets, scale, N, C, V, loss, lse, loss_sum, dx, dw, lo);
}

static void cpu_qkv_split_gqa(lm_backend *be, void *q, void *k, void *v, const void *qkv, int B,
			      int T, int H, int Hkv, int D)
{
	qkv_split_gqa_cpu(q, k, v, qkv, B, T, H, Hkv, D);
}

static void cpu_qkv_merge_gqa(lm_backend *be, void *dqkv, const void *dq, const void *dk,
			      const void *dv, int B, int T, int H, int Hkv, int D)
{
	qkv_merge_gqa_cpu(dqkv, dq, dk, dv, B, T, H, Hkv, D);
}

static void cpu_headnorm_fwd(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			     size_t rows, int D, float eps)
{
	headnorm_fwd_cpu(y, rstd, x, w, rows, D, eps);
}

static void cpu_headnorm_bwd(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			     const float *w, const float *rstd, size_t rows, int D)
{
	headnorm_bwd_cpu(dx, dw, dy, x, w, rstd, rows, D);
}

static void cpu_qkv_headnorm(lm_backend *be, void *qkv, const float *wq, const float *wk, int N,
			     int H, int Hkv, int D, float eps)
{
	qkv_headnorm_cpu(qkv, wq, wk, N, H, Hkv, D, eps);
}

static void cpu_relu2_fwd(lm_backend *be, void *out, const void *h, size_t n)
{
	relu2_fwd_cpu(out, h, n);
}

static void cpu_relu2_bwd(lm_backend *be, void *dh, const void *dout, const void *h, size_t n)
{
	relu2_bwd_cpu(dh, dout, h, n);
}

static void cpu_softcap_fwd(lm_backend *be, void *x, size_t n, float cap)
{
	softcap_fwd_cpu(x, n, cap);
}

static void cpu_logit_bwd(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			  const int32_t *targets, const float *weights, const float *extra,
			  float scale, int N, int V, const lm_logit_opts *lo)
{
	cpu_ctx *c = be->impl;
	float *f = cpu_scratch(be, &c->dloss, &c->cap, (size_t)N);
	if (!f)
		return;
	for (int i = 0; i < N; i++)
		f[i] = weights ? scale * weights[i] : scale;
	logit_bwd_cpu(dlogits, logits, lse, targets, f, extra, N, V, lo->z_loss, lo->softcap);
}

static void cpu_entropy_fwd(lm_backend *be, float *ent, const void *logits, const float *lse,
			    int N, int V)
{
	entropy_fwd_cpu(ent, logits, lse, N, V);
}

static void cpu_entropy_bwd(lm_backend *be, float *dz, const void *logits, const float *lse,
			    const float *dent, int N, int V)
{
	entropy_bwd_cpu(dz, logits, lse, dent, N, V);
}

static void cpu_rl_tok_pg(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			  const int32_t *targets, const float *score, const double *row_w,
			  const float *old, const float *ref, const float *ent, int B, int T,
			  rl_tok_args a)
{
	rl_tok_pg_cpu(w, stats, ws, ce, targets, score, row_w, old, ref, ent, B, T, a);
}

static void cpu_rl_tok_dpo(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			   const int32_t *targets, const double *ref, double beta, double npairs,
			   int B, int T)
{
	rl_tok_dpo_cpu(w, stats, ws, ce, targets, ref, beta, npairs, B, T);
}

static void cpu_ppo_value(lm_backend *be, float *values, const void *hidden, const float *head,
			  int N, int C)
{
	rl_ppo_value_cpu(values, hidden, head, N, C);
}

static void cpu_ppo_tok(lm_backend *be, float *w, float *dent, float *dvalue, float *dhidden,
			float *hgrad, double *stats, double *ws, const float *ce,
			const int32_t *targets, const void *hidden, const float *head,
			const float *ent, const float *old, const float *adv, const float *old_v,
			const float *ret, const double *row_scale, int B, int T, int C,
			rl_ppo_tok_args a)
{
	rl_ppo_tok_cpu(w, dent, dvalue, dhidden, hgrad, stats, ws, ce, targets, hidden, head, ent,
		       old, adv, old_v, ret, row_scale, B, T, C, a);
}

static void cpu_sumsq(lm_backend *be, double *out, const float *g, size_t n)
{
	*out = sumsq_cpu(g, n);
}

static void cpu_clip_scale(lm_backend *be, float *scale, const double *sumsq, double max_norm)
{
	*scale = (float)adamw_clip_factor(sqrt(*sumsq), max_norm);
}

static void cpu_adamw_step(lm_backend *be, float *p, const float *g, float *m, float *v,
			   void *p_act, size_t n, const adamw_hparams *h, const float *grad_scale)
{
	adamw_hparams hs = *h;
	hs.grad_scale = *grad_scale;
	adamw_step_cpu(p, g, m, v, n, &hs);
	if (p_act && p_act != p)
		cpu_copy(be, p_act, p, n * sizeof *p);
}

static size_t cpu_muon_workspace(lm_backend *be, int count, int rows, int cols)
{
	return muon_workspace_cpu(count, rows, cols) * sizeof(float);
}

static void cpu_muon_step(lm_backend *be, float *p, const float *g, float *buf, void *p_act,
			  const size_t *offs, int count, int n_tr, int rows, int cols,
			  const muon_hparams *h, const float *grad_scale, void *ws)
{
	muon_step_cpu(p, g, buf, offs, count, n_tr, rows, cols, h, *grad_scale, ws);
	if (p_act && p_act != p)
		for (int i = 0; i < count; i++)
			cpu_copy(be, (float *)p_act + offs[i], p + offs[i],
				 (size_t)rows * cols * sizeof *p);
}

static void cpu_decode_qkv(lm_backend *be, void *q, void *kc, void *vc, const void *qkv,
			   const float *cs, const int32_t *pos, const int32_t *slot, decode_shape s)
{
	decode_qkv_cpu(q, kc, vc, qkv, cs, pos, slot, s);
}

static void cpu_attn_decode(lm_backend *be, void *o, const void *q, const void *kc, const void *vc,
			    const int32_t *pos, const int32_t *slot, decode_shape s, float scale)
{
	if (attn_decode_cache_cpu(o, q, kc, vc, pos, slot, s, scale) < 0)
		backend_fail(be, "attention over the cache: out of memory for its scratch");
}

static void cpu_rows_gather(lm_backend *be, float *dst, const float *src, const int32_t *idx, int n,
			    int C)
{
	rows_gather_cpu(dst, src, idx, n, C);
}

static void cpu_rows_scatter(lm_backend *be, float *dst, const void *src, const int32_t *idx, int n,
			     int V)
{
	rows_scatter_cpu(dst, src, idx, n, V);
}

static const lm_backend cpu_table = {
	.name = "cpu",
	.act = LM_F32,
	.describe = cpu_describe,
	.sync = cpu_sync,
	.supports = cpu_supports,
	.close = cpu_close,
	.mark = cpu_mark,
	.mark_ms = cpu_mark_ms,
	.mark_free = cpu_mark_free,
	.alloc = cpu_alloc,
	.release = cpu_release,
	.zero = cpu_zero,
	.copy = cpu_copy,
	.upload = cpu_copy,
	.download = cpu_copy,
	.to_act = cpu_to_act,
	.from_act = cpu_from_act,
	.add_act = cpu_add_act,
	.embedding_fwd = cpu_embedding_fwd,
	.embedding_bwd = cpu_embedding_bwd,
	.rmsnorm_fwd = cpu_rmsnorm_fwd,
	.rmsnorm_bwd = cpu_rmsnorm_bwd,
	.matmul_fwd = cpu_matmul_fwd,
	.matmul_bwd = cpu_matmul_bwd,
	.rope_fwd = cpu_rope_fwd,
	.rope_bwd = cpu_rope_bwd,
	.qkv_split = cpu_qkv_split,
	.qkv_merge = cpu_qkv_merge,
	.heads_merge = cpu_heads_merge,
	.heads_split = cpu_heads_split,
	.attn_workspace = cpu_attn_workspace,
	.attn_fwd = cpu_attn_fwd,
	.attn_bwd = cpu_attn_bwd,
	.swiglu_fwd = cpu_swiglu_fwd,
	.swiglu_bwd = cpu_swiglu_bwd,
	.xent_fwd = cpu_xent_fwd,
	.xent_bwd = cpu_xent_bwd,
	.head_xent = cpu_head_xent,
	.qkv_split_gqa = cpu_qkv_split_gqa,
	.qkv_merge_gqa = cpu_qkv_merge_gqa,
	.headnorm_fwd = cpu_headnorm_fwd,
	.headnorm_bwd = cpu_headnorm_bwd,
	.qkv_headnorm = cpu_qkv_headnorm,
	.relu2_fwd = cpu_relu2_fwd,
	.relu2_bwd = cpu_relu2_bwd,
	.softcap_fwd = cpu_softcap_fwd,
	.logit_bwd = cpu_logit_bwd,
	.head_xent_ex = cpu_head_xent_ex,
	.entropy_fwd = cpu_entropy_fwd,
	.entropy_bwd = cpu_entropy_bwd,
	.rl_tok_pg = cpu_rl_tok_pg,
	.rl_tok_dpo = cpu_rl_tok_dpo,
	.ppo_value = cpu_ppo_value,
	.ppo_tok = cpu_ppo_tok,
	.sumsq = cpu_sumsq,
	.clip_scale = cpu_clip_scale,
	.adamw_step = cpu_adamw_step,
	.muon_workspace = cpu_muon_workspace,
	.muon_step = cpu_muon_step,
	.decode_qkv = cpu_decode_qkv,
	.attn_decode = cpu_attn_decode,
	.rows_gather = cpu_rows_gather,
	.rows_scatter = cpu_rows_scatter,
};

lm_backend *backend_cpu_open(lm_err *e)
{
	lm_backend *be = malloc(sizeof *be);
	cpu_ctx *c = calloc(1, sizeof *c);
	if (!be || !c) {
		free(be);
		free(c);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	*be = cpu_table;
	be->impl = c;
	return be;
}

void backend_set_threads(int n)
{
	if (n > 0)
		omp_set_num_threads(n);
}
