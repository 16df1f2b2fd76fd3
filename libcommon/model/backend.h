/* backend.h: the op table the model is written against (version 5: Muon,
 * entropy, generation, the model variants' ops, and rl-update's losses).
 *
 * A backend is an instance: a context (for CUDA: the device, one stream, the
 * cuBLASLt handle and its workspace, a sticky error) and one function per op,
 * each taking the backend itself first.  backend_open("cpu" | "cuda") makes
 * one; one process may hold several (two GPUs, or a GPU and the CPU).  The
 * model (model.c) calls only through this table, so `--device` picks the
 * backend at run time and the model code is shared.
 *
 * Types.  What crosses the table is of four kinds:
 *   - "act" buffers (void *): matrix inputs and outputs and everything around
 *     attention, in the backend's activation type be->act (fp32 on the CPU,
 *     bf16 on CUDA), with the compute copy of the weights in that type too;
 *   - fp32 buffers (float *): RMSNorm gains, rstd and lse, per-token
 *     losses, master weights, gradients and optimizer state (as
 *     torch.autocast keeps them);
 *   - device scalars (lm_scalars): the loss sum, the gradient's sum of
 *     squares and the clip factor, written and read by ops so that nothing
 *     inside a training step waits for the host; the host reads them once
 *     per step (be->download after be->sync);
 *   - "res" and "res grad" buffers (void *): the residual stream and its
 *     gradient, fp32 unless the opener sets be->res and be->res_grad to
 *     LM_BF16 (below).
 * Conversions happen only where the model asks (to_act, from_act).
 *
 * Errors.  Ops return nothing: a failure (a CUDA launch error, an
 * unsupported shape) is recorded in the context, the first one kept, and
 * sync() returns it.  The memory functions fail the same way; alloc returns
 * NULL at once.  supports() says beforehand whether an op takes a shape, so
 * the model can choose a fused op or its composition, as ggml's supports_op.
 *
 * Layout conventions are those of the kernels/<op>.h of the same name. */
#ifndef LMPIPE_BACKEND_H
#define LMPIPE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "kernels/adamw.h"
#include "kernels/muon.h"
#include "kernels/rl_ppo_tok.h"
#include "kernels/rl_tok.h"
#include "kernels/decode.h"
#include "kernels/decode_step.h"
#include "kernels/sample.h"

typedef enum lm_dtype { LM_F32 = 0, LM_BF16 = 1 } lm_dtype;

static inline size_t lm_dtype_size(lm_dtype t) { return t == LM_BF16 ? 2 : 4; }

/* Snapshots (snap, snap_read): slots, and the bytes a slot holds. */
enum { LM_SNAP_SLOTS = 2, LM_SNAP_BYTES = 256 };

/* The scalars of a training step, in the backend's memory. */
typedef struct lm_scalars {
	double loss_sum;     /* sum of the counted tokens' losses since the last reset */
	double sumsq;        /* sum of squares of the gradient (optim_grad_norm) */
	float grad_scale;    /* the clip factor the AdamW step multiplies gradients by */
	float pad_;
} lm_scalars;

/* Ops that supports() answers for. */
typedef enum lm_op {
	LM_OP_ATTENTION,     /* a = head dimension, b = sequence length */
	LM_OP_ATTENTION_BTHD, /* attn_fwd_bthd and attn_bwd_bthd, a and b as above */
	LM_OP_ATTENTION_QKV, /* attn_qkv_fwd and attn_qkv_bwd, a and b as above */
	LM_OP_QKV_ROPE,      /* matmul_qkv_rope_fwd, a and b as above */
} lm_op;

/* The logit variants of the LM head (model.h's softcap and z_loss; 0: off),
 * handed to logit_bwd and head_xent_ex by value of the host. */
typedef struct lm_logit_opts {
	float softcap, z_loss;
} lm_logit_opts;

/* head_xent's chunk: fp32 logits held at once (512 MiB). */
enum { BACKEND_HEAD_CHUNK = 1 << 27 };

typedef struct lm_backend lm_backend;

struct lm_backend {
	const char *name;
	lm_dtype act;
	void *impl;          /* the backend's own context */
	int failed;          /* the sticky error: set by backend_fail, cleared by sync */
	lm_err error;
	/* 1: every op gives the same bits run to run on the same device
	 * (lm-train --deterministic), choosing slower kernels where the fast
	 * ones sum with floating-point atomics or split reductions by
	 * scheduling; set by whoever opened the backend, before the first op
	 * and before attn_workspace (whose size depends on it).
	 * The CPU backend is deterministic either way. */
	int deterministic;
	/* The residual stream's values (lm-train --residual): LM_F32 (the
	 * default, as torch.autocast keeps it) or LM_BF16, set like
	 * deterministic before the first op.  It is what the ops marked "res"
	 * below take and give: with LM_BF16 a backend whose act is bf16 (CUDA)
	 * keeps the stream in bf16 (half its traffic), and one whose act is
	 * fp32 (the CPU) keeps it in fp32 rounded to bf16 after each write, the
	 * same values.  lm_res_size says a stream element's bytes.  The
	 * decoder's fusions (norm_matmul_fwd, glu_matmul_fwd, norm_glu_fwd,
	 * decode_step) take an fp32 stream: the decoder runs only with LM_F32. */
	lm_dtype res;
	/* The stream's gradient (lm-train --residual-grad), LM_F32 or, with res
	 * LM_BF16, LM_BF16: what embedding_bwd's dout and rmsnorm_bwd's dx
	 * ("res grad" below) hold, stored and rounded as res is (lm_res_grad_size);
	 * rmsnorm_bwd_act then takes dx_act NULL. */
	lm_dtype res_grad;

	/* One line on what computes: library, kernel, threads, GPU (for logs). */
	void (*describe)(lm_backend *be, char *buf, size_t n);
	/* Wait for the queued work; 0, or -1 with the first error since the last
	 * sync (which it clears). */
	int (*sync)(lm_backend *be, lm_err *e);
	int (*supports)(lm_backend *be, lm_op op, int a, int b);
	/* The most bytes of device memory allocated at once so far; NULL
	 * where not tracked (the CPU). */
	size_t (*peak_bytes)(lm_backend *be);
	void (*close)(lm_backend *be);
	/* The native queue the ops run on (CUDA: the cudaStream_t), for a
	 * communicator that orders its work after them; NULL where none. */
	void *(*native_stream)(lm_backend *be);
	/* The weight-gradient queue, beside the main one (NULL where a backend
	 * has none; the model then runs each weight gradient in matmul_bwd).
	 * The ops called between dw_begin and dw_end go to it, behind the work
	 * queued so far; only matmul_bwd with dinp NULL may (it shares no
	 * workspace with the main queue's ops), its products sized to leave
	 * `free` multiprocessors to the main queue.  dw_end returns to the
	 * main queue and gives that work's ticket (> 0); dw_wait(ticket) makes
	 * the main queue's later work wait for the queue's up to the ticket.
	 * Until then the caller must not overwrite what that work reads or
	 * writes.  While some of its work is not waited for, rmsnorm_bwd_act
	 * runs in `free` blocks, beside it.  sync waits for all of it. */
	void (*dw_begin)(lm_backend *be, int free);
	int (*dw_end)(lm_backend *be);
	void (*dw_wait)(lm_backend *be, int ticket);

	/* Timing for the profiler (model/profile.h): a point in the backend's
	 * work queue (a CUDA event recorded on the stream, a clock reading on
	 * the CPU), the milliseconds between two of them once both are done,
	 * and named ranges for external profilers (NVTX on CUDA; name NULL ends
	 * the innermost).  mark returns NULL when it cannot. */
	void *(*mark)(lm_backend *be);
	double (*mark_ms)(lm_backend *be, void *from, void *to);
	void (*mark_free)(lm_backend *be, void *m);
	void (*range)(lm_backend *be, const char *name);
	struct lm_profile *prof;   /* NULL: not profiling (model/profile.h) */

	/* Memory.  alloc returns uninitialised memory, or NULL (the reason, with
	 * the size asked for, goes to the sticky error).  upload and download
	 * are complete when they return (the host buffer may be reused). */
	void *(*alloc)(lm_backend *be, size_t bytes);
	void (*release)(lm_backend *be, void *p);
	void (*zero)(lm_backend *be, void *p, size_t bytes);
	void (*copy)(lm_backend *be, void *dst, const void *src, size_t bytes);
	void (*upload)(lm_backend *be, void *dst, const void *host, size_t bytes);
	void (*download)(lm_backend *be, void *host, const void *src, size_t bytes);
	/* A copy of bytes (at most LM_SNAP_BYTES) at src for the host, queued
	 * behind the work queued so far into snapshot slot (0 .. LM_SNAP_SLOTS
	 * - 1); snap_read waits for that copy only (not for work queued after
	 * it), puts it at host, and returns 0 or -1 with the first error so
	 * far.  So a caller may queue more work before it reads the results of
	 * the work before.  NULL where a backend has none (download, then). */
	void (*snap)(lm_backend *be, int slot, const void *src, size_t bytes);
	int (*snap_read)(lm_backend *be, int slot, void *host, size_t bytes, lm_err *e);
	/* n fp32 values to the act type and back (a copy when act is fp32). */
	void (*to_act)(lm_backend *be, void *dst, const float *src, size_t n);
	void (*from_act)(lm_backend *be, float *dst, const void *src, size_t n);
	/* dst (act) += src (fp32), n values: extra gradients from the host. */
	void (*add_act)(lm_backend *be, void *dst, const float *src, size_t n);

	/* Ops. */
	/* The residual stream (out: res) starts from the fp32 master table. */
	void (*embedding_fwd)(lm_backend *be, void *out, const int32_t *ids, const float *table,
			      int N, int C);
	void (*embedding_bwd)(lm_backend *be, float *dtable, const int32_t *ids, const void *dout,
			      int N, int C);
	/* y (act) = RMSNorm(x (res)) * w; dx (res grad) and dw ACCUMULATE. */
	void (*rmsnorm_fwd)(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			    int N, int C, float eps);
	void (*rmsnorm_bwd)(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			    const float *w, const float *rstd, int N, int C);
	/* rmsnorm_bwd that also writes the updated dx in the act type into
	 * dx_act (the residual gradient as the next product's input).  NULL
	 * where act is fp32 or the backend has no fused version: the model
	 * converts with to_act. */
	void (*rmsnorm_bwd_act)(lm_backend *be, void *dx, void *dx_act, float *dw, const void *dy,
				const void *x, const float *w, const float *rstd, int N, int C);
	/* out = inp . W^T.  Without an addend, out is act; with one, out and
	 * the addend are res and out = addend + inp . W^T (out may be the
	 * addend): the residual branches add onto the stream in the product's
	 * epilogue, rounded once. */
	void (*matmul_fwd)(lm_backend *be, void *out, const void *addend, const void *inp,
			   const void *w, int N, int IN, int OUT);
	/* dinp (act, may be NULL) = dout . W; dW (fp32, may be NULL) += dout^T
	 * . inp. */
	void (*matmul_bwd)(lm_backend *be, void *dinp, float *dw, const void *dout, const void *inp,
			   const void *w, int N, int IN, int OUT);
	/* The gate/up product and SwiGLU in one op: h (act) [N, 2F] = inp .
	 * Wgu^T (Wgu [2F, C], gate rows then up rows; h kept for the backward)
	 * and sw (act) [N, F] = swiglu(h), what matmul_fwd then swiglu_fwd
	 * give, up to the order of the product's additions.  NULL where a
	 * backend has no fused version: the model runs those two ops. */
	void (*gate_up_swiglu_fwd)(lm_backend *be, void *h, void *sw, const void *inp,
				   const void *wgu, int N, int C, int F);
	/* The q/k/v product with RoPE in one op: qkv (act) [B, T, 3, H, D] =
	 * inp . Wqkv^T with q and k turned as rope_fwd turns them (pos = t;
	 * the angles are the table cs's, which a backend may compute itself:
	 * CUDA's product does, in fp32 before rounding), v as matmul_fwd
	 * leaves it; then attn_qkv_fwd takes cs NULL.  For the shapes
	 * supports(LM_OP_QKV_ROPE, D, T) accepts; NULL where a backend has
	 * none (the attention rotates q and k). */
	void (*matmul_qkv_rope_fwd)(lm_backend *be, void *qkv, const void *inp, const void *wqkv,
				    const float *cs, double theta, int B, int T, int H, int D);
	void (*rope_fwd)(lm_backend *be, void *x, const float *cs, int B, int H, int T, int D);
	void (*rope_bwd)(lm_backend *be, void *dx, const float *cs, int B, int H, int T, int D);
	void (*qkv_split)(lm_backend *be, void *q, void *k, void *v, const void *qkv,
			  int B, int T, int H, int D);
	void (*qkv_merge)(lm_backend *be, void *dqkv, const void *dq, const void *dk, const void *dv,
			  int B, int T, int H, int D);
	/* qkv_split then rope_fwd of q and k, in one op; and rope_bwd of dq
	 * and dk then qkv_merge.  NULL where a backend has no fused version:
	 * the model composes the fine ops, which give the same values. */
	void (*qkv_rope_split)(lm_backend *be, void *q, void *k, void *v, const void *qkv,
			       const float *cs, int B, int T, int H, int D);
	void (*qkv_rope_merge)(lm_backend *be, void *dqkv, const void *dq, const void *dk, const void *dv,
			       const float *cs, int B, int T, int H, int D);
	void (*heads_merge)(lm_backend *be, void *y, const void *o, int B, int T, int H, int D);
	void (*heads_split)(lm_backend *be, void *dO, const void *dy, int B, int T, int H, int D);
	/* Attention takes a workspace in the backend's memory, of
	 * attn_workspace(B, H, T, D) bytes, allocated once by the caller. */
	size_t (*attn_workspace)(lm_backend *be, int B, int H, int T, int D);
	void (*attn_fwd)(lm_backend *be, const void *q, const void *k, const void *v, void *o,
			 float *lse, int B, int H, int T, int D, int causal, float scale, void *ws,
			 size_t ws_bytes);
	void (*attn_bwd)(lm_backend *be, const void *q, const void *k, const void *v, const void *o,
			 const void *dout, const float *lse, void *dq, void *dk, void *dv, int B, int H,
			 int T, int D, int causal, float scale, void *ws, size_t ws_bytes);
	/* attn_fwd and attn_bwd with o, and dout, as [B, T, H, D] (what the
	 * output projection reads and its backward writes: no heads merge or
	 * split around them), no workspace; for the shapes supports(
	 * LM_OP_ATTENTION_BTHD, D, T) accepts.  NULL where a backend has none. */
	void (*attn_fwd_bthd)(lm_backend *be, const void *q, const void *k, const void *v, void *y,
			      float *lse, int B, int H, int T, int D, int causal, float scale);
	void (*attn_bwd_bthd)(lm_backend *be, const void *q, const void *k, const void *v,
			      const void *y, const void *dy, const float *lse, void *dq, void *dk,
			      void *dv, int B, int H, int T, int D, int causal, float scale);
	/* Causal attention on the q/k/v projection's packed rows qkv[B, T, 3,
	 * H, D], before RoPE (table cs), into y [B, T, H, D]: the split, RoPE
	 * and attn_fwd_bthd in one op.  The forward may leave qkv changed (the
	 * CUDA flash path rotates q and k there in place; cs NULL: they come
	 * rotated already, by matmul_qkv_rope_fwd); the backward pass
	 * takes it as the forward left it and overwrites it with its gradient
	 * (qkv_rope_merge's output) from y and dy, with ws: attn_workspace's
	 * bytes (the forward needs none).
	 * For one key/value head per query head, the shapes supports(
	 * LM_OP_ATTENTION_QKV, D, T) accepts; NULL where a backend has none. */
	void (*attn_qkv_fwd)(lm_backend *be, void *qkv, const float *cs, void *y, float *lse,
			     int B, int T, int H, int D, float scale);
	void (*attn_qkv_bwd)(lm_backend *be, void *qkv, const float *cs, const void *y,
			     const void *dy, const float *lse, int B, int T, int H, int D,
			     float scale, void *ws, size_t ws_bytes);
	void (*swiglu_fwd)(lm_backend *be, void *out, const void *h, int N, int F);
	void (*swiglu_bwd)(lm_backend *be, void *dh, const void *dout, const void *h, int N, int F);
	/* Per-token losses and lse (fp32) of act logits; the counted tokens'
	 * losses are added to *loss_sum (a device scalar) in a fixed order. */
	void (*xent_fwd)(lm_backend *be, float *loss, float *lse, const void *logits,
			 const int32_t *targets, int N, int V, double *loss_sum);
	/* dlogits (act, may alias logits) = (softmax - onehot) * scale * weight[n]
	 * (weights: device [N], NULL for all 1). */
	void (*xent_bwd)(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			 const int32_t *targets, const float *weights, float scale, int N, int V);
	/* The LM head fused with the cross-entropy, over rows in chunks that
	 * never hold more than BACKEND_HEAD_CHUNK fp32 logits (the [N, V]
	 * logits never exist): per chunk, logits = x . W^T in fp32, the
	 * per-token loss and lse, the counted losses added to *loss_sum; with
	 * dx not NULL also the gradient of scale * (sum of the losses):
	 * dx (act) = dlogits . W, dW (fp32) += dlogits^T . x. */
	void (*head_xent)(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			  float scale, int N, int C, int V, float *loss, float *lse,
			  double *loss_sum, void *dx, float *dw);
	/* The variants' ops (model.h's model_config).  Grouped-query attention's
	 * split (k and v expanded to H heads) and merge (their gradients summed
	 * back over each group): kernels/gqa.h. */
	void (*qkv_split_gqa)(lm_backend *be, void *q, void *k, void *v, const void *qkv, int B,
			      int T, int H, int Hkv, int D);
	void (*qkv_merge_gqa)(lm_backend *be, void *dqkv, const void *dq, const void *dk,
			      const void *dv, int B, int T, int H, int Hkv, int D);
	/* QK-norm, kernels/headnorm.h: act rows of D, fp32 gains and rstd; y
	 * may be x; dx is overwritten and may be dy; dw ACCUMULATES. */
	void (*headnorm_fwd)(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			     size_t rows, int D, float eps);
	void (*headnorm_bwd)(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			     const float *w, const float *rstd, size_t rows, int D);
	/* QK-norm in place on a decoding step's fused projection
	 * qkv[N][(H + 2 Hkv) D] (kernels/headnorm.h). */
	void (*qkv_headnorm)(lm_backend *be, void *qkv, const float *wq, const float *wk, int N,
			     int H, int Hkv, int D, float eps);
	/* The squared-ReLU MLP on n act values (kernels/relu2.h). */
	void (*relu2_fwd)(lm_backend *be, void *out, const void *h, size_t n);
	void (*relu2_bwd)(lm_backend *be, void *dh, const void *dout, const void *h, size_t n);
	/* Soft-capping of n act logits in place (kernels/logit_variants.h). */
	void (*softcap_fwd)(lm_backend *be, void *x, size_t n, float cap);
	/* xent_bwd with the logit variants (kernels/logit_variants.h): logits
	 * as softcap_fwd left them, lse theirs; extra (device fp32 [N, V], NULL:
	 * none) is added as a gradient with respect to those logits before the
	 * cap's derivative.  dlogits may alias logits. */
	void (*logit_bwd)(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			  const int32_t *targets, const float *weights, const float *extra,
			  float scale, int N, int V, const lm_logit_opts *lo);
	/* head_xent with the logit variants: each chunk's logits capped before
	 * the loss, the gradient with the z-loss and the cap's derivative.  The
	 * losses, lse and loss_sum are the cross-entropy's alone. */
	void (*head_xent_ex)(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			     float scale, int N, int C, int V, float *loss, float *lse,
			     double *loss_sum, void *dx, float *dw, const lm_logit_opts *lo);
	/* The entropy of softmax(logits) per row (ent, fp32 [N]) from act
	 * logits and their lse (xent_fwd's); and its gradient dz (fp32 [N, V],
	 * overwritten) = dent[n] * d H_n / d logits (dent: device [N], d loss /
	 * d H per row).  See kernels/entropy.h. */
	void (*entropy_fwd)(lm_backend *be, float *ent, const void *logits, const float *lse,
			    int N, int V);
	void (*entropy_bwd)(lm_backend *be, float *dz, const void *logits, const float *lse,
			    const float *dent, int N, int V);
	/* rl-update's losses from the per-token cross-entropy of a [B, T]
	 * micro-batch (kernels/rl_tok.h): the weights w (fp32 [B*T]) of the
	 * weighted backward pass and the statistics added to stats (device
	 * doubles, RL_ST_N); ws: rl_tok_workspace(B) bytes; every array in the
	 * backend's memory. */
	void (*rl_tok_pg)(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			  const int32_t *targets, const float *score, const double *row_w,
			  const float *old, const float *ref, const float *ent, int B, int T,
			  rl_tok_args a);
	void (*rl_tok_dpo)(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			   const int32_t *targets, const double *ref, double beta, double npairs,
			   int B, int T);
	/* rl-update's PPO loss (kernels/rl_ppo_tok.h): the value head on the
	 * final hidden states (act [N, C]), the weights w, the entropies'
	 * gradient dent, the values' gradient dvalue (fp32 [B*T] each) and the
	 * hidden states' gradient dhidden (fp32 [B*T, C]); the head's gradient
	 * hgrad [C + 1] and the statistics (RL_PPO_N doubles) accumulate; ws:
	 * rl_ppo_workspace(B, T, C) bytes.  ppo_value: the values alone. */
	void (*ppo_value)(lm_backend *be, float *values, const void *hidden, const float *head,
			  int N, int C);
	void (*ppo_tok)(lm_backend *be, float *w, float *dent, float *dvalue, float *dhidden,
			float *hgrad, double *stats, double *ws, const float *ce,
			const int32_t *targets, const void *hidden, const float *head,
			const float *ent, const float *old, const float *adv, const float *old_v,
			const float *ret, const double *row_scale, int B, int T, int C,
			rl_ppo_tok_args a);
	/* *sumsq = sum g^2 (double accumulation, a device scalar). */
	void (*sumsq)(lm_backend *be, double *sumsq, const float *g, size_t n);
	/* *scale = clip_factor(sqrt(*sumsq), max_norm) (optimizer.h). */
	void (*clip_scale)(lm_backend *be, float *scale, const double *sumsq, double max_norm);
	/* One AdamW step with gradients times *grad_scale (device scalar; h's
	 * grad_scale is ignored); p_act, when not NULL, receives the new weights
	 * in the act type (the compute copy). */
	void (*adamw_step)(lm_backend *be, float *p, const float *g, float *m, float *v,
			   void *p_act, size_t n, const adamw_hparams *h, const float *grad_scale);
	/* Optional: adamw_step on several tensors at once (kernels/adamw.h's
	 * segments: offsets in elements into p, g, m, v and p_act, h's weight
	 * decay where a segment's flag is set), the same bits as one
	 * adamw_step a segment.  NULL: the caller steps them one by one. */
	void (*adamw_multi)(lm_backend *be, float *p, const float *g, float *m, float *v,
			    void *p_act, const adamw_seg *segs, int n_segs, const adamw_hparams *h,
			    const float *grad_scale);
	/* One Muon step (kernels/muon.h) on count matrices of one shape, matrix
	 * i at offs[i] floats into p, g and buf (offs: count size_t in the
	 * backend's memory), the last n_tr of them of the transposed shape
	 * cols x rows, gradients times *grad_scale; p_act, when not NULL,
	 * is the act-type copy of p (same offsets) that receives the new
	 * weights.  ws: muon_workspace(count, rows, cols) bytes of backend
	 * memory.  fp32 on the CPU, bf16 Newton-Schulz batched on CUDA. */
	size_t (*muon_workspace)(lm_backend *be, int count, int rows, int cols);
	void (*muon_step)(lm_backend *be, float *p, const float *g, float *buf, void *p_act,
			  const size_t *offs, int count, int n_tr, int rows, int cols,
			  const muon_hparams *h, const float *grad_scale, void *ws);
	/* Optional (NULL: steps are done when muon_step returns to the op
	 * order): the Muon steps since the last join may run side by side
	 * (CUDA: a stream each), each with its own ws; ops after muon_join see
	 * their results.  sync and download join too. */
	void (*muon_join)(lm_backend *be);

	/* Generation over a key/value cache (gen/model_decode.c; layouts in
	 * kernels/decode.h): q, qkv, o and the caches are act; pos, slot and
	 * idx are device int32 arrays. */
	void (*decode_qkv)(lm_backend *be, void *q, void *kc, void *vc, const void *qkv,
			   const float *cs, const int32_t *pos, const int32_t *slot, decode_shape s);
	void (*attn_decode)(lm_backend *be, void *o, const void *q, const void *kc, const void *vc,
			    const int32_t *pos, const int32_t *slot, decode_shape s, float scale);
	/* Both of the above in one, for a step whose tokens are in distinct
	 * slots (decode.h's attn_decode_qkv); NULL where a backend lacks it.
	 * 0, or -1 where the shape is not one it takes (nothing done). */
	int (*attn_decode_qkv)(lm_backend *be, void *o, void *kc, void *vc, const void *qkv,
			       const float *cs, const int32_t *pos, const int32_t *slot,
			       decode_shape s, float scale);
	void (*rows_gather)(lm_backend *be, float *dst, const float *src, const int32_t *idx, int n,
			    int C);
	/* dst (fp32) rows idx[j] = src (act) row j. */
	void (*rows_scatter)(lm_backend *be, float *dst, const void *src, const int32_t *idx, int n,
			     int V);
	/* Fusions for generation's steps, NULL where the decoder composes them
	 * from the ops above: out (act) = RMSNorm(x (fp32)) * g . W^T (no rstd
	 * kept, the normalised input not rounded to act); out (fp32) = addend +
	 * swiglu(h) . W^T. */
	void (*norm_matmul_fwd)(lm_backend *be, void *out, const float *x, const float *g,
				const void *w, int N, int C, int OUT, float eps);
	void (*glu_matmul_fwd)(lm_backend *be, float *out, const float *addend, const void *h,
			       const void *w, int N, int F, int OUT);
	/* RMSNorm, the gate/up product and SwiGLU in one: sw (act) [N, F] =
	 * swiglu(RMSNorm(x) * g . Wgu^T), Wgu [2F, C] (gate rows, then up
	 * rows); 0 when queued, -1 when it does not run these shapes (nothing
	 * queued).  NULL: the decoder composes it from the ops above. */
	int (*norm_glu_fwd)(lm_backend *be, void *sw, const float *x, const float *g, const void *wgu,
			    int N, int C, int F, float eps);
	/* A decoding step of one token, from its embedded row to its logits'
	 * row, as one kernel (kernels/decode_step.h): 0 when queued (a failure
	 * is sticky), -1 when it does not run these shapes (nothing queued).
	 * NULL where the decoder composes the step from the ops above. */
	int (*decode_step)(lm_backend *be, const decode_step_args *a);
	/* The next token of n sequences where the logits are (kernels/sample.h),
	 * passed on by feed unless it is NULL; NULL where the host samples (the
	 * CPU backend: gen/sampler.h). */
	void (*sample)(lm_backend *be, int32_t *tok, float *lp, const float *logits,
		       const int32_t *row, const float *u, const int32_t *forced,
		       const sample_feed *feed, int n, int V, sample_args a);

	/* Recorded work (CUDA graphs), NULL where there is none: graph_begin
	 * records instead of running what is queued until graph_end, which
	 * returns the recording (NULL when it failed: the sticky error says
	 * why); graph_run replays it on the data then in the same buffers.
	 * Nothing recorded may allocate, upload, download or sync: run the
	 * sequence once unrecorded first, so that workspaces have grown. */
	void (*graph_begin)(lm_backend *be);
	void *(*graph_end)(lm_backend *be);
	void (*graph_run)(lm_backend *be, void *g);
	void (*graph_free)(lm_backend *be, void *g);
};

/* OpenMP threads for the CPU ops (0 or less: the default, all cores); the
 * BLAS runs single-threaded inside them (kernels/cpu/blas_single.h). */
void backend_set_threads(int n);

/* The GPU that later backend_open("cuda") calls use: index modulo the
 * visible devices (a data-parallel rank's local rank; default 0). */
void backend_set_device(int index);

/* The backend names --device accepts, NULL-terminated. */
extern const char *const backend_names[];

/* A new backend instance called name, or NULL with a message (exit code 2
 * for an unknown name, 1 for one that is not available: not built, no GPU,
 * no driver).  Release it with be->close(be). */
lm_backend *backend_open(const char *name, lm_err *e);

/* The constructors behind backend_open. */
lm_backend *backend_cpu_open(lm_err *e);
lm_backend *backend_cuda_open(lm_err *e);

/* The bytes of a residual stream element (be->res): 2 where it is bf16
 * and act is bf16, else 4. */
static inline size_t lm_res_size(const lm_backend *be)
{
	return be->res == LM_BF16 && be->act == LM_BF16 ? 2 : 4;
}

/* The bytes of an element of the stream's gradient (be->res_grad). */
static inline size_t lm_res_grad_size(const lm_backend *be)
{
	return be->res_grad == LM_BF16 && lm_res_size(be) == 2 ? 2 : 4;
}

/* Record an error in a backend's sticky slot (the first one is kept). */
void backend_fail(lm_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The sticky error, cleared: 0, or -1 with it in e.  For sync(). */
int backend_take_error(lm_backend *be, lm_err *e);

#endif
