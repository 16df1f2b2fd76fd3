/* backend_cuda.c: the CUDA backend (see backend.h): one device, one
 * stream, bf16 activations and compute weights, fp32 master weights,
 * gradients and optimizer state; its ops are the kernels/cuda launchers
 * and cuBLASLt (kernels/cuda/matmul.cu).  Every launch is checked, and the
 * first failure is kept as the backend's sticky error for sync().  In a
 * build without CUDA, backend_cuda_open says so. */
#include "model/backend.h"
#include "model/backend_cuda_dw.h"

#if LMPIPE_CUDA

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/decode.h"
#include "kernels/decode_step.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/gqa.h"
#include "kernels/head_exp.h"
#include "kernels/headnorm.h"
#include "kernels/logit_variants.h"
#include "kernels/matmul.h"
#include "kernels/muon.h"
#include "kernels/permute.h"
#include "kernels/relu2.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sample.h"
#include "kernels/swiglu.h"
#include "kernels/entropy.h"
#include "kernels/rl_ppo_tok.h"
#include "kernels/rl_tok.h"
#include "kernels/xent.h"

/* Head dimensions the attention kernels take; others up to the largest
 * are padded with zeros to the next one (same scores, same output). */
enum { ATTN_D_SMALL = 64, ATTN_D_LARGE = 128, ATTN_D_ALIGN = 8, ATTN_PADDED_BUFS = 8 };

/* Upload staging: enough slots for the uploads of a few micro-batches. */
enum { STAGE_SLOTS = 16, STAGE_BYTES = 1 << 20 };
/* head_xent's chunk: bf16 logits held at once (CUDA_HEAD_CHUNK of them,
 * 384 MiB), but no fewer
 * than HEAD_MIN_ROWS rows: each chunk adds a pass over the head's fp32
 * gradient (155 MB at gpt2s's V = 50304), and short chunks make slower
 * products (measured on gpt2s: 2668-row chunks cost 3.7 ms a step more
 * than 5336-row ones; 8192-row chunks 0.26 ms less than 4096-row ones;
 * ts: two chunks of 16384 rows 0.12 ms less than three of 10923).  Both
 * stay under torch.compile's peak memory (bench/lm-train-gpu-notes.md). */
enum { CUDA_HEAD_CHUNK = 192 << 20, HEAD_MIN_ROWS = 8192 };

typedef struct cuda_ctx {
	int device;
	cudaStream_t st;             /* the stream ops go to: the main one, or dwq's between
					dw_begin and dw_end */
	matmul_cuda *mm;             /* cuBLASLt's context on st */
	cuda_dwq *dwq;               /* the weight-gradient queue, made on first use */
	cudaStream_t main_st;        /* st and mm of the main queue while st is dwq's */
	matmul_cuda *main_mm;
	int on_dw;
	muon_cuda *muon;             /* the Muon step's cuBLAS handle, made on first use */
	double *partials;            /* SUMSQ_CUDA_PARTIALS */
	struct cudaDeviceProp prop;
	cudaEvent_t *events;         /* free marks (profiler) */
	int n_events;
	size_t live, peak;           /* bytes allocated now, and at most */
	struct allocation { void *p; size_t bytes; } *allocs;  /* what is allocated now */
	size_t n_allocs, cap_allocs;
	void *head;                  /* head_xent's chunk (head_xent_ex: fp32 logits, bf16 gradient) */
	size_t head_bytes;
	void *scratch;               /* ops' workspaces, grown on first use */
	size_t scratch_bytes;
	int recorded;                /* a graph was made: its kernels may point into head and
					scratch, so a grown one keeps the old (retired) until close */
	void **retired;
	int n_retired;
	char *stage;                 /* pinned, STAGE_SLOTS x STAGE_BYTES, then the snapshots */
	cudaEvent_t stage_done[STAGE_SLOTS];
	int next_stage;
	cudaEvent_t snap_done[LM_SNAP_SLOTS];
} cuda_ctx;

#define CTX(be) ((cuda_ctx *)(be)->impl)
#define ST(be) ((void *)CTX(be)->st)

/* After a launch or a call: a failure becomes the sticky error. */
static void check(lm_backend *be, int rc, const char *what)
{
	cudaError_t err = cudaGetLastError();
	if (rc || err != cudaSuccess)
		backend_fail(be, "CUDA %s: %s", what,
			     err != cudaSuccess ? cudaGetErrorString(err) : "the library refused the call");
}

static void *cu_alloc(lm_backend *be, size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		size_t free_b = 0, total = 0;
		cudaGetLastError();
		cudaMemGetInfo(&free_b, &total);
		backend_fail(be, "out of GPU memory: %.2f GiB asked for, %.2f GiB free of %.2f GiB",
			     bytes / 1073741824.0, free_b / 1073741824.0, total / 1073741824.0);
		return NULL;
	}
	cuda_ctx *c = CTX(be);
	if (c->n_allocs == c->cap_allocs) {
		size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 256;
		struct allocation *a = realloc(c->allocs, cap * sizeof *a);
		if (!a) {
			cudaFree(p);
			backend_fail(be, "out of memory");
			return NULL;
		}
		c->allocs = a;
		c->cap_allocs = cap;
	}
	c->allocs[c->n_allocs++] = (struct allocation){ p, bytes };
	c->live += bytes;
	if (c->live > c->peak)
		c->peak = c->live;
	return p;
}

static void cu_release(lm_backend *be, void *p)
{
	cuda_ctx *c = CTX(be);
	if (!p)
		return;
	for (size_t i = c->n_allocs; i-- > 0;)
		if (c->allocs[i].p == p) {
			c->live -= c->allocs[i].bytes;
			c->allocs[i] = c->allocs[--c->n_allocs];
			break;
		}
	cudaFree(p);
}

/* A workspace replaced by a larger one: freed, or, once a graph has been
 * recorded (which replays with the pointers it was recorded with: an
 * evaluation between training steps, or a prompt's prefill between
 * decoding steps, may need more rows than the recorded step), kept until
 * the backend closes. */
static void retire(lm_backend *be, void *p)
{
	cuda_ctx *c = CTX(be);
	if (!p)
		return;
	if (!c->recorded) {
		cu_release(be, p);
		return;
	}
	void **r = realloc(c->retired, (c->n_retired + 1) * sizeof *r);
	if (!r)
		return; /* no room to list it: left allocated to the end of the process, since
			   freeing it would leave the recording pointing at freed memory */
	c->retired = r;
	c->retired[c->n_retired++] = p;
}

static size_t cu_peak_bytes(lm_backend *be) { return CTX(be)->peak; }

static void cu_zero(lm_backend *be, void *p, size_t bytes)
{
	check(be, cudaMemsetAsync(p, 0, bytes, CTX(be)->st) != cudaSuccess, "memset");
}

static void cu_copy(lm_backend *be, void *dst, const void *src, size_t bytes)
{
	if (dst != src)
		check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, CTX(be)->st) !=
			  cudaSuccess, "copy");
}

/* Small uploads (token ids, targets, weights) go through a ring of pinned
 * staging slots, so that they queue behind the work in flight instead of
 * waiting for it, as a copy from pageable memory does; a slot is reused
 * once the event recorded after its copy has passed.  Larger ones copy
 * from the caller's memory directly. */
static void cu_upload(lm_backend *be, void *dst, const void *host, size_t bytes)
{
	cuda_ctx *c = CTX(be);
	if (bytes > STAGE_BYTES || !c->stage) {
		check(be, cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, c->st) !=
			  cudaSuccess, "upload");
		return;
	}
	int i = c->next_stage;
	c->next_stage = (i + 1) % STAGE_SLOTS;
	char *slot = c->stage + (size_t)i * STAGE_BYTES;
	if (cudaEventSynchronize(c->stage_done[i]) != cudaSuccess) {
		check(be, 1, "upload (staging)");
		return;
	}
	memcpy(slot, host, bytes);
	check(be, cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, c->st) != cudaSuccess ||
		  cudaEventRecord(c->stage_done[i], c->st) != cudaSuccess, "upload");
}

/* The Muon steps' streams joined into the backend's (kernels/muon.h). */
static void cu_muon_join(lm_backend *be)
{
	cuda_ctx *c = CTX(be);
	if (c->muon)
		check(be, muon_join_cuda(c->muon), "Muon (join)");
}

/* Every side stream joined into the main one: before the host reads
 * results, and at a graph's end. */
static void cu_join_all(lm_backend *be)
{
	cuda_ctx *c = CTX(be);
	cu_muon_join(be);
	if (c->dwq && !c->on_dw)
		check(be, cuda_dwq_join(c->dwq, c->st), "weight-gradient queue (join)");
}

/* The weight-gradient queue (backend.h dw_begin; backend_cuda_dw.h).  If it
 * cannot be had the ops stay on the main stream (and the error is kept). */
static void cu_dw_begin(lm_backend *be, int free)
{
	cuda_ctx *c = CTX(be);
	cudaStream_t st;
	matmul_cuda *mm;
	if (c->on_dw) {
		backend_fail(be, "dw_begin twice without dw_end");
		return;
	}
	if (!c->dwq && !(c->dwq = cuda_dwq_new(c->prop.multiProcessorCount, &be->deterministic))) {
		check(be, 1, "weight-gradient queue");
		return;
	}
	if (cuda_dwq_begin(c->dwq, c->st, free, &st, &mm)) {
		check(be, 1, "weight-gradient queue (fork)");
		return;
	}
	c->main_st = c->st;
	c->main_mm = c->mm;
	c->st = st;
	c->mm = mm;
	c->on_dw = 1;
}

static int cu_dw_end(lm_backend *be)
{
	cuda_ctx *c = CTX(be);
	if (!c->on_dw)
		return 0;
	c->st = c->main_st;
	c->mm = c->main_mm;
	c->on_dw = 0;
	int t = cuda_dwq_end(c->dwq);
	check(be, t < 0, "weight-gradient queue (end)");
	return t > 0 ? t : 0;
}

static void cu_dw_wait(lm_backend *be, int ticket)
{
	cuda_ctx *c = CTX(be);
	if (c->dwq && !c->on_dw && ticket > 0)
		check(be, cuda_dwq_wait(c->dwq, c->st, ticket), "weight-gradient queue (wait)");
}

static void cu_download(lm_backend *be, void *host, const void *src, size_t bytes)
{
	cu_join_all(be);
	check(be, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, CTX(be)->st) !=
		  cudaSuccess || cudaStreamSynchronize(CTX(be)->st) != cudaSuccess, "download");
}

/* Snapshots (backend.h snap): pinned slots after the staging ring, each
 * with an event recorded behind its copy. */
static char *snap_slot(cuda_ctx *c, int slot)
{
	return c->stage + (size_t)STAGE_SLOTS * STAGE_BYTES + (size_t)slot * LM_SNAP_BYTES;
}

static void cu_snap(lm_backend *be, int slot, const void *src, size_t bytes)
{
	cuda_ctx *c = CTX(be);
	if (slot < 0 || slot >= LM_SNAP_SLOTS || bytes > LM_SNAP_BYTES) {
		backend_fail(be, "snapshot slot %d of %zu bytes", slot, bytes);
		return;
	}
	cu_join_all(be);
	check(be, cudaMemcpyAsync(snap_slot(c, slot), src, bytes, cudaMemcpyDeviceToHost, c->st) !=
		  cudaSuccess || cudaEventRecord(c->snap_done[slot], c->st) != cudaSuccess, "snapshot");
}

static int cu_snap_read(lm_backend *be, int slot, void *host, size_t bytes, lm_err *e)
{
	cuda_ctx *c = CTX(be);
	if (slot < 0 || slot >= LM_SNAP_SLOTS || bytes > LM_SNAP_BYTES) {
		backend_fail(be, "snapshot slot %d of %zu bytes", slot, bytes);
	} else {
		check(be, cudaEventSynchronize(c->snap_done[slot]) != cudaSuccess, "snapshot");
		memcpy(host, snap_slot(c, slot), bytes);
	}
	return backend_take_error(be, e);
}

static void cu_to_act(lm_backend *be, void *dst, const float *src, size_t n)
{
	check(be, f32_to_bf16_cuda(dst, src, n, ST(be)), "fp32 to bf16");
}

static void cu_from_act(lm_backend *be, float *dst, const void *src, size_t n)
{
	check(be, bf16_to_f32_cuda(dst, src, n, ST(be)), "bf16 to fp32");
}

static void cu_add_act(lm_backend *be, void *dst, const float *src, size_t n)
{
	check(be, bf16_add_f32_cuda(dst, src, n, ST(be)), "add");
}

/* Marks are CUDA events recorded on the stream, kept for reuse. */
enum { EVENT_POOL = 4096 };

static void *cu_mark(lm_backend *be)
{
	cuda_ctx *c = CTX(be);
	cudaEvent_t ev;
	if (c->n_events)
		ev = c->events[--c->n_events];
	else if (cudaEventCreate(&ev) != cudaSuccess)
		return NULL;
	if (cudaEventRecord(ev, c->st) != cudaSuccess) {
		cudaEventDestroy(ev);
		return NULL;
	}
	return ev;
}

static double cu_mark_ms(lm_backend *be, void *from, void *to)
{
	float ms = 0;
	cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to);
	return ms;
}

static void cu_mark_free(lm_backend *be, void *m)
{
	cuda_ctx *c = CTX(be);
	if (!m)
		return;
	if (c->n_events < EVENT_POOL)
		c->events[c->n_events++] = (cudaEvent_t)m;
	else
		cudaEventDestroy((cudaEvent_t)m);
}

static void cu_range(lm_backend *be, const char *name)
{
	if (name)
		nvtxRangePushA(name);
	else
		nvtxRangePop();
}

static void cu_describe(lm_backend *be, char *buf, size_t n)
{
	cuda_ctx *c = CTX(be);
	int rt = 0;
	cudaRuntimeGetVersion(&rt);
	snprintf(buf, n, "%s (sm_%d%d, %d SMs, %.0f GiB), CUDA runtime %d.%d, cuBLASLt, bf16",
		 c->prop.name, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
		 c->prop.totalGlobalMem / 1073741824.0, rt / 1000, rt % 1000 / 10);
}

static int cu_sync(lm_backend *be, lm_err *e)
{
	cu_join_all(be);
	check(be, cudaStreamSynchronize(CTX(be)->st) != cudaSuccess, "stream");
	return backend_take_error(be, e);
}

static int attn_padded_dim(int D)
{
	if (D == ATTN_D_SMALL || D == ATTN_D_LARGE)
		return D;
	if (D < 1 || D > ATTN_D_LARGE || D % ATTN_D_ALIGN)
		return 0;
	return D < ATTN_D_SMALL ? ATTN_D_SMALL : ATTN_D_LARGE;
}

static int cu_supports(lm_backend *be, lm_op op, int a, int b)
{
	if (op == LM_OP_ATTENTION_QKV) /* the short kernels, or the flash ones unpadded */
		return attn_short_applies(a, b) || a == ATTN_D_SMALL || a == ATTN_D_LARGE;
	if (op == LM_OP_QKV_ROPE) /* the flash kernels' head dimension the product turns */
		return a == GEMM_ROPE_D && !attn_short_applies(a, b) && b >= 1 && b <= GEMM_ROPE_MAX_T;
	if (op == LM_OP_ATTENTION_BTHD)
		return attn_short_applies(a, b);
	return op == LM_OP_ATTENTION ? attn_padded_dim(a) != 0 || attn_short_applies(a, b) : 0;
}

static void cu_close(lm_backend *be)
{
	if (!be)
		return;
	cuda_ctx *c = CTX(be);
	if (c->on_dw)
		cu_dw_end(be);
	cudaStreamSynchronize(c->st);
	cuda_dwq_free(c->dwq);
	for (int i = 0; i < c->n_events; i++)
		cudaEventDestroy(c->events[i]);
	for (int i = 0; i < STAGE_SLOTS; i++)
		if (c->stage_done[i])
			cudaEventDestroy(c->stage_done[i]);
	for (int i = 0; i < LM_SNAP_SLOTS; i++)
		if (c->snap_done[i])
			cudaEventDestroy(c->snap_done[i]);
	cudaFreeHost(c->stage);
	free(c->events);
	matmul_cuda_free(c->mm);
	muon_cuda_free(c->muon);
	cudaFree(c->partials);
	cudaFree(c->scratch);
	cudaFree(c->head);
	for (int i = 0; i < c->n_retired; i++)
		cudaFree(c->retired[i]);
	free(c->retired);
	free(c->allocs);
	cudaStreamDestroy(c->st);
	free(c);
	free(be);
}

/* The residual stream (be->res) is fp32, or bf16: the embedding's rows
 * rounded, RMSNorm reading bf16, the o and down products adding a bf16
 * addend into a bf16 output (cuBLASLt's C and D). */
static void cu_embedding_fwd(lm_backend *be, void *out, const int32_t *ids, const float *table,
			     int N, int C)
{
	check(be, be->res == LM_BF16 ? embedding_fwd_bf16_cuda(out, ids, table, N, C, ST(be))
				     : embedding_fwd_cuda(out, ids, table, N, C, ST(be)),
	      "embedding");
}


static void cu_rmsnorm_fwd(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			   int N, int C, float eps)
{
	check(be, be->res == LM_BF16 ? rmsnorm_fwd_bx_cuda(y, rstd, x, w, N, C, eps, ST(be))
				     : rmsnorm_fwd_cuda(y, rstd, x, w, N, C, eps, ST(be)),
	      "rmsnorm");
}

/* A workspace of at least bytes, grown (once, at the first step) when
 * smaller; NULL with the sticky error. */
static void *scratch(lm_backend *be, size_t bytes)
{
	cuda_ctx *c = CTX(be);
	if (bytes <= c->scratch_bytes)
		return c->scratch;
	void *p = cu_alloc(be, bytes);
	if (!p)
		return NULL;
	retire(be, c->scratch);
	c->scratch = p;
	c->scratch_bytes = bytes;
	return p;
}

/* --deterministic: without atomics (kernels/embedding.h). */
static void cu_embedding_bwd(lm_backend *be, float *dtable, const int32_t *ids, const void *dout,
			     int N, int C)
{
	int b = lm_res_grad_size(be) == 2;
	if (!be->deterministic) {
		check(be, b ? embedding_bwd_bf16_cuda(dtable, ids, dout, N, C, ST(be))
			    : embedding_bwd_cuda(dtable, ids, dout, N, C, ST(be)),
		      "embedding backward");
		return;
	}
	void *ws = scratch(be, embedding_bwd_det_cuda_workspace(N));
	if (ws)
		check(be, b ? embedding_bwd_det_bf16_cuda(dtable, ids, dout, N, C, ws, ST(be))
			    : embedding_bwd_det_cuda(dtable, ids, dout, N, C, ws, ST(be)),
		      "embedding backward");
}

/* dx in bf16 (be->res_grad) or fp32; x in bf16 (be->res) or fp32. */
static int rmsnorm_bwd_any(lm_backend *be, void *dx, void *dx_act, float *dw, const void *dy,
			   const void *x, const float *w, const float *rstd, int N, int C, void *ws,
			   unsigned blocks)
{
	if (lm_res_grad_size(be) == 2)
		return rmsnorm_bwd_bx_bdx_cuda_blocks(dx, dw, dy, x, w, rstd, N, C, ws, blocks, ST(be));
	if (be->res == LM_BF16)
		return rmsnorm_bwd_act_bx_cuda_blocks(dx, dx_act, dw, dy, x, w, rstd, N, C, ws, blocks,
						      ST(be));
	return rmsnorm_bwd_act_cuda_blocks(dx, dx_act, dw, dy, x, w, rstd, N, C, ws, blocks, ST(be));
}

static void cu_rmsnorm_bwd(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			   const float *w, const float *rstd, int N, int C)
{
	void *ws = scratch(be, rmsnorm_bwd_cuda_workspace(N, C));
	if (ws)
		check(be, rmsnorm_bwd_any(be, dx, NULL, dw, dy, x, w, rstd, N, C, ws, 0),
		      "rmsnorm backward");
}

static void cu_rmsnorm_bwd_act(lm_backend *be, void *dx, void *dx_act, float *dw, const void *dy,
			       const void *x, const float *w, const float *rstd, int N, int C)
{
	void *ws = scratch(be, rmsnorm_bwd_cuda_workspace(N, C));
	/* beside the weight-gradient queue's products: in the blocks they leave */
	unsigned blocks = (unsigned)cuda_dwq_beside(CTX(be)->dwq);
	if (ws)
		check(be, rmsnorm_bwd_any(be, dx, dx_act, dw, dy, x, w, rstd, N, C, ws, blocks),
		      "rmsnorm backward");
}

static void cu_matmul_fwd(lm_backend *be, void *out, const void *addend, const void *inp,
			  const void *w, int N, int IN, int OUT)
{
	check(be, addend && be->res == LM_BF16
			  ? matmul_fwd_add_bf16_cuda(CTX(be)->mm, out, addend, inp, w, N, IN, OUT)
			  : matmul_fwd_cuda(CTX(be)->mm, out, addend, inp, w, N, IN, OUT),
	      "matmul (cuBLASLt)");
}

/* The gate/up product with SwiGLU in its epilogue, on lmpipe's own product
 * (kernels/gemm.h) in ping-pong tiles 192 wide, for products of
 * SWIGLU_ROWS rows or more (fewer are cuBLASLt's or lmpipe's small
 * kernels' to do).  LMPIPE_GEMM_SWIGLU names the tile width (192, the
 * default; 128 or 256: cooperative tiles, for measuring); "0", fewer rows,
 * or a shape it refuses: cuBLASLt's product, then the SwiGLU pass. */
enum { SWIGLU_ROWS = 2048 };

static void cu_gate_up_swiglu_fwd(lm_backend *be, void *h, void *sw, const void *inp,
				  const void *wgu, int N, int C, int F)
{
	static int bn = -1;
	if (bn < 0) {
		const char *v = getenv("LMPIPE_GEMM_SWIGLU");
		bn = !v || !*v ? 192 : atoi(v);
		if (bn != 128 && bn != 192 && bn != 256)
			bn = 0;
	}
	if (bn && N >= SWIGLU_ROWS && !gemm_swiglu_cuda(h, sw, inp, wgu, N, F, C, bn, ST(be)))
		return;
	cudaGetLastError();
	check(be, matmul_fwd_cuda(CTX(be)->mm, h, NULL, inp, wgu, N, C, 2 * F) ||
		  swiglu_fwd_cuda(sw, h, N, F, ST(be)), "gate/up matmul and SwiGLU");
}

/* The q/k/v product with RoPE in its epilogue, on lmpipe's own product
 * (kernels/gemm.h gemm_rope_cuda: ping-pong tiles 192 wide in clusters of
 * two), for heads of 64 and products of SWIGLU_ROWS rows or more;
 * otherwise, or where it refuses, cuBLASLt's product, then q and k turned
 * in place by the table (what the attention does when given one). */
static void cu_matmul_qkv_rope_fwd(lm_backend *be, void *qkv, const void *inp, const void *wqkv,
				   const float *cs, double theta, int B, int T, int H, int D)
{
	int N = B * T, C = H * D;
	if (D == GEMM_ROPE_D && N >= SWIGLU_ROWS &&
	    !gemm_rope_cuda(qkv, inp, wqkv, N, 3 * C, C, T, 2 * C, theta, 2, ST(be)))
		return;
	cudaGetLastError();
	check(be, matmul_fwd_cuda(CTX(be)->mm, qkv, NULL, inp, wqkv, N, C, 3 * C) ||
		  qkv_rope_cuda(qkv, cs, B, T, H, D, ST(be)), "q/k/v matmul and RoPE");
}

static void cu_matmul_bwd(lm_backend *be, void *dinp, float *dw, const void *dout, const void *inp,
			  const void *w, int N, int IN, int OUT)
{
	check(be, matmul_bwd_cuda(CTX(be)->mm, dinp, dw, dout, inp, w, N, IN, OUT),
	      "matmul backward (cuBLASLt)");
}

static void cu_rope_fwd(lm_backend *be, void *x, const float *cs, int B, int H, int T, int D)
{
	check(be, rope_fwd_cuda(x, cs, B, H, T, D, ST(be)), "rope");
}

static void cu_rope_bwd(lm_backend *be, void *dx, const float *cs, int B, int H, int T, int D)
{
	check(be, rope_bwd_cuda(dx, cs, B, H, T, D, ST(be)), "rope backward");
}

static void cu_qkv_split(lm_backend *be, void *q, void *k, void *v, const void *qkv, int B, int T,
			 int H, int D)
{
	check(be, qkv_split_cuda(q, k, v, qkv, B, T, H, D, ST(be)), "qkv split");
}

static void cu_qkv_merge(lm_backend *be, void *dqkv, const void *dq, const void *dk,
			 const void *dv, int B, int T, int H, int D)
{
	check(be, qkv_merge_cuda(dqkv, dq, dk, dv, B, T, H, D, ST(be)), "qkv merge");
}

static void cu_qkv_rope_split(lm_backend *be, void *q, void *k, void *v, const void *qkv,
			      const float *cs, int B, int T, int H, int D)
{
	check(be, qkv_rope_split_cuda(q, k, v, qkv, cs, B, T, H, D, ST(be)), "qkv split with RoPE");
}

static void cu_qkv_rope_merge(lm_backend *be, void *dqkv, const void *dq, const void *dk, const void *dv,
			      const float *cs, int B, int T, int H, int D)
{
	check(be, qkv_rope_merge_cuda(dqkv, dq, dk, dv, cs, B, T, H, D, ST(be)),
	      "qkv merge with RoPE backward");
}

static void cu_heads_merge(lm_backend *be, void *y, const void *o, int B, int T, int H, int D)
{
	check(be, heads_merge_cuda(y, o, B, T, H, D, ST(be)), "heads merge");
}

static void cu_heads_split(lm_backend *be, void *dO, const void *dy, int B, int T, int H, int D)
{
	check(be, heads_split_cuda(dO, dy, B, T, H, D, ST(be)), "heads split");
}

/* The backward kernel's workspace (--deterministic: the larger one of its
 * fixed-order dq, kernels/attention.h), rounded up to 256 bytes. */
static size_t bwd_kernel_ws(lm_backend *be, int B, int H, int T, int Dp)
{
	size_t ws = be->deterministic ? attn_bwd_det_cuda_workspace(B, H, T, Dp)
				      : attn_bwd_cuda_workspace(B, H, T, Dp);
	return (ws + 255) / 256 * 256;
}

/* The backward kernel's workspace, then (for a padded head dimension) the
 * padded q, k, v, o, dout, dq, dk, dv. */
static size_t cu_attn_workspace(lm_backend *be, int B, int H, int T, int D)
{
	if (attn_short_applies(D, T))
		return 256; /* the short kernels need none; any T up to this one applies too */
	int Dp = attn_padded_dim(D);
	if (!Dp)
		return 0;
	size_t ws = bwd_kernel_ws(be, B, H, T, Dp);
	if (Dp != D)
		ws += ATTN_PADDED_BUFS * (size_t)B * H * T * Dp * sizeof(uint16_t);
	return ws;
}

static uint16_t *padded(lm_backend *be, void *ws, int B, int H, int T, int Dp, int i)
{
	return (uint16_t *)((char *)ws + bwd_kernel_ws(be, B, H, T, Dp)) + (size_t)i * B * H * T * Dp;
}

/* The flash backward, in a fixed order with --deterministic. */
static int flash_bwd(lm_backend *be, const void *q, const void *k, const void *v, const void *o,
		     const void *dout, const float *lse, void *dq, void *dk, void *dv, int B, int H,
		     int T, int D, int causal, float scale, void *ws)
{
	return (be->deterministic ? attn_bwd_det_cuda : attn_bwd_cuda)(
		q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, causal, scale, ws, ST(be));
}

static int attn_arg_error(lm_backend *be, int D, size_t ws_bytes, size_t need)
{
	if (!attn_padded_dim(D) && !attn_short_applies(D, 1)) {
		backend_fail(be, "attention: head dimension %d is not supported on CUDA "
			     "(a multiple of %d, at most %d)", D, ATTN_D_ALIGN, ATTN_D_LARGE);
		return 1;
	}
	if (ws_bytes < need) {
		backend_fail(be, "attention: workspace of %zu bytes, %zu needed", ws_bytes, need);
		return 1;
	}
	return 0;
}

static void cu_attn_fwd(lm_backend *be, const void *q, const void *k, const void *v, void *o,
			float *lse, int B, int H, int T, int D, int causal, float scale, void *ws,
			size_t ws_bytes)
{
	int rc;
	if (attn_short_applies(D, T)) {
		rc = attn_short_fwd_cuda(q, k, v, o, lse, B, H, T, D, causal, scale, 0, ST(be));
		if (rc)
			check(be, 1, attn_strerror(rc));
		return;
	}
	if (attn_arg_error(be, D, ws_bytes, cu_attn_workspace(be, B, H, T, D)))
		return;
	int Dp = attn_padded_dim(D);
	if (Dp == D) {
		rc = attn_fwd_cuda(q, k, v, o, lse, B, H, T, D, causal, scale, ST(be));
	} else {
		size_t rows = (size_t)B * H * T;
		uint16_t *pq = padded(be, ws, B, H, T, Dp, 0), *pk = padded(be, ws, B, H, T, Dp, 1);
		uint16_t *pv = padded(be, ws, B, H, T, Dp, 2), *po = padded(be, ws, B, H, T, Dp, 3);
		rc = rows_pad_cuda(pq, Dp, q, D, rows, ST(be)) || rows_pad_cuda(pk, Dp, k, D, rows, ST(be)) ||
		     rows_pad_cuda(pv, Dp, v, D, rows, ST(be)) ||
		     attn_fwd_cuda(pq, pk, pv, po, lse, B, H, T, Dp, causal, scale, ST(be)) ||
		     rows_pad_cuda(o, D, po, Dp, rows, ST(be));
	}
	if (rc)
		check(be, 1, rc < 0 && rc != -1 ? attn_strerror(rc) : "attention");
}

static void cu_attn_bwd(lm_backend *be, const void *q, const void *k, const void *v, const void *o,
			const void *dout, const float *lse, void *dq, void *dk, void *dv, int B,
			int H, int T, int D, int causal, float scale, void *ws, size_t ws_bytes)
{
	int rc;
	if (attn_short_applies(D, T)) {
		rc = attn_short_bwd_cuda(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, causal, scale,
					 0, ST(be));
		if (rc)
			check(be, 1, attn_strerror(rc));
		return;
	}
	if (attn_arg_error(be, D, ws_bytes, cu_attn_workspace(be, B, H, T, D)))
		return;
	int Dp = attn_padded_dim(D);
	if (Dp == D) {
		rc = flash_bwd(be, q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, causal, scale, ws);
	} else {
		size_t rows = (size_t)B * H * T;
		uint16_t *p[ATTN_PADDED_BUFS];
		for (int i = 0; i < ATTN_PADDED_BUFS; i++)
			p[i] = padded(be, ws, B, H, T, Dp, i);
		void *st = ST(be);
		rc = rows_pad_cuda(p[0], Dp, q, D, rows, st) || rows_pad_cuda(p[1], Dp, k, D, rows, st) ||
		     rows_pad_cuda(p[2], Dp, v, D, rows, st) || rows_pad_cuda(p[3], Dp, o, D, rows, st) ||
		     rows_pad_cuda(p[4], Dp, dout, D, rows, st) ||
		     flash_bwd(be, p[0], p[1], p[2], p[3], p[4], lse, p[5], p[6], p[7], B, H, T, Dp,
			       causal, scale, ws) ||
		     rows_pad_cuda(dq, D, p[5], Dp, rows, st) || rows_pad_cuda(dk, D, p[6], Dp, rows, st) ||
		     rows_pad_cuda(dv, D, p[7], Dp, rows, st);
	}
	if (rc)
		check(be, 1, rc < 0 && rc != -1 ? attn_strerror(rc) : "attention backward");
}

/* Attention with o and dout as [B, T, H, D] (backend.h attn_fwd_bthd): the
 * short kernels only, which supports() answers for. */
static void cu_attn_fwd_bthd(lm_backend *be, const void *q, const void *k, const void *v, void *y,
			     float *lse, int B, int H, int T, int D, int causal, float scale)
{
	int rc = attn_short_fwd_cuda(q, k, v, y, lse, B, H, T, D, causal, scale, 1, ST(be));
	if (rc)
		check(be, 1, attn_strerror(rc));
}

static void cu_attn_bwd_bthd(lm_backend *be, const void *q, const void *k, const void *v,
			     const void *y, const void *dy, const float *lse, void *dq, void *dk,
			     void *dv, int B, int H, int T, int D, int causal, float scale)
{
	int rc = attn_short_bwd_cuda(q, k, v, y, dy, lse, dq, dk, dv, B, H, T, D, causal, scale, 1,
				     ST(be));
	if (rc)
		check(be, 1, attn_strerror(rc));
}

/* Attention on the packed qkv rows (backend.h attn_qkv_fwd): the short
 * kernels where they apply (qkv kept), else the flash ones (q and k of qkv
 * rotated in place for the backward pass, which takes the workspace). */
static void cu_attn_qkv_fwd(lm_backend *be, void *qkv, const float *cs, void *y, float *lse,
			    int B, int T, int H, int D, float scale)
{
	int rc;
	if (attn_short_applies(D, T))
		rc = attn_short_qkv_fwd_cuda(qkv, cs, y, lse, B, H, T, D, scale, ST(be));
	else
		rc = attn_qkv_fwd_cuda(qkv, cs, y, lse, B, H, T, D, scale, ST(be));
	if (rc)
		check(be, 1, attn_strerror(rc));
}

static void cu_attn_qkv_bwd(lm_backend *be, void *qkv, const float *cs, const void *y,
			    const void *dy, const float *lse, int B, int T, int H, int D, float scale,
			    void *ws, size_t ws_bytes)
{
	int rc;
	if (attn_short_applies(D, T)) {
		rc = attn_short_qkv_bwd_cuda(qkv, cs, y, dy, lse, B, H, T, D, scale, ST(be));
	} else {
		if (attn_arg_error(be, D, ws_bytes, cu_attn_workspace(be, B, H, T, D)))
			return;
		rc = attn_qkv_bwd_cuda(qkv, cs, y, dy, lse, B, H, T, D, scale, be->deterministic, ws,
				       ST(be));
	}
	if (rc)
		check(be, 1, attn_strerror(rc));
}

static void cu_swiglu_fwd(lm_backend *be, void *out, const void *h, int N, int F)
{
	check(be, swiglu_fwd_cuda(out, h, N, F, ST(be)), "swiglu");
}

static void cu_swiglu_bwd(lm_backend *be, void *dh, const void *dout, const void *h, int N, int F)
{
	check(be, swiglu_bwd_cuda(dh, dout, h, N, F, ST(be)), "swiglu backward");
}

static void cu_xent_fwd(lm_backend *be, float *loss, float *lse, const void *logits,
			const int32_t *targets, int N, int V, double *loss_sum)
{
	check(be, xent_fwd_cuda(loss, lse, logits, targets, N, V, loss_sum, ST(be)), "cross-entropy");
}

static void cu_xent_bwd(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			const int32_t *targets, const float *weights, float scale, int N, int V)
{
	check(be, xent_bwd_cuda(dlogits, logits, lse, targets, weights, scale, N, V, ST(be)),
	      "cross-entropy backward");
}

static void cu_entropy_fwd(lm_backend *be, float *ent, const void *logits, const float *lse,
			   int N, int V)
{
	check(be, entropy_fwd_cuda(ent, logits, lse, N, V, ST(be)), "entropy");
}

static void cu_entropy_bwd(lm_backend *be, float *dz, const void *logits, const float *lse,
			   const float *dent, int N, int V)
{
	check(be, entropy_bwd_cuda(dz, logits, lse, dent, N, V, ST(be)), "entropy backward");
}

static void cu_rl_tok_pg(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			 const int32_t *targets, const float *score, const double *row_w,
			 const float *old, const float *ref, const float *ent, int B, int T,
			 rl_tok_args a)
{
	check(be, rl_tok_pg_cuda(w, stats, ws, ce, targets, score, row_w, old, ref, ent, B, T, a,
				 ST(be)), "policy-gradient loss");
}

static void cu_rl_tok_dpo(lm_backend *be, float *w, double *stats, double *ws, const float *ce,
			  const int32_t *targets, const double *ref, double beta, double npairs,
			  int B, int T)
{
	check(be, rl_tok_dpo_cuda(w, stats, ws, ce, targets, ref, beta, npairs, B, T, ST(be)),
	      "DPO loss");
}

static void cu_ppo_value(lm_backend *be, float *values, const void *hidden, const float *head,
			 int N, int C)
{
	check(be, rl_ppo_value_cuda(values, hidden, head, N, C, ST(be)), "PPO value head");
}

static void cu_ppo_tok(lm_backend *be, float *w, float *dent, float *dvalue, float *dhidden,
		       float *hgrad, double *stats, double *ws, const float *ce,
		       const int32_t *targets, const void *hidden, const float *head,
		       const float *ent, const float *old, const float *adv, const float *old_v,
		       const float *ret, const double *row_scale, int B, int T, int C,
		       rl_ppo_tok_args a)
{
	check(be, rl_ppo_tok_cuda(w, dent, dvalue, dhidden, hgrad, stats, ws, ce, targets, hidden,
				  head, ent, old, adv, old_v, ret, row_scale, B, T, C, a, ST(be)),
	      "PPO loss");
}

/* Rows of each of head_xent's chunks: as many as CUDA_HEAD_CHUNK holds (at
 * least HEAD_MIN_ROWS), then evened out over the chunks N needs. */
static int head_rows(int N, int V)
{
	int R = CUDA_HEAD_CHUNK / V > HEAD_MIN_ROWS ? CUDA_HEAD_CHUNK / V : HEAD_MIN_ROWS;
	if (R >= N)
		return N;
	int k = (N + R - 1) / R;
	return (N + k - 1) / k;
}

/* The LM head's training step by kernels/head_exp.h (exp(z) stored by the
 * product's epilogue, no pass over the logits), as LMPIPE_HEAD_EXP says:
 * unset or 2, in clusters of two blocks; 1, without clusters; 0, never
 * (the logits, then the fused cross-entropy pass).  Taken when the
 * gradient is wanted and the shapes suit it (C and V multiples of 8). */
static int head_exp_mode(void)
{
	/* read at each call (once a step), so that a test may compare both */
	const char *v = getenv("LMPIPE_HEAD_EXP");
	int mode = !v || !*v ? 2 : atoi(v);
	return mode == 1 || mode == 2 ? mode : 0;
}

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

/* A chunk's buffers for head_exp: E over the logits' bytes, then the
 * partial sums, rs, the flag, and dx in fp32 (xs over its first half). */
struct head_bufs { uint16_t *z; float *part, *rs, *dxf; int *flag; uint16_t *xs; };

static size_t head_exp_bytes(int R, int C, int V, struct head_bufs *b, void *base)
{
	int ntn = (V + GEMM_EXP_BN - 1) / GEMM_EXP_BN;
	uintptr_t p = (uintptr_t)base, o = 0;
	b->z = (uint16_t *)(p + o), o += up256((size_t)R * V * sizeof(uint16_t));
	b->part = (float *)(p + o), o += up256((size_t)R * ntn * sizeof(float));
	b->rs = (float *)(p + o), o += up256((size_t)R * sizeof(float));
	b->flag = (int *)(p + o), o += 256;
	b->dxf = (float *)(p + o), o += up256((size_t)R * C * sizeof(float));
	b->xs = (uint16_t *)b->dxf;
	return o;
}

static void cu_head_xent(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			 float scale, int N, int C, int V, float *loss, float *lse, double *loss_sum,
			 void *dx, float *dw)
{
	/* bf16 logits, as PyTorch's under autocast: the chunk's logits are
	 * written once, read once by the fused softmax cross-entropy, which
	 * overwrites them with their gradient for the two products; or, for
	 * the gradient, head_exp's way (head_exp_mode). */
	cuda_ctx *c = CTX(be);
	int R = head_rows(N, V);
	int cl = dx && C % 8 == 0 && V % 8 == 0 && !(((uintptr_t)x | (uintptr_t)w | (uintptr_t)dx) & 15)
			 ? head_exp_mode() : 0;
	struct head_bufs hb;
	size_t need = cl ? head_exp_bytes(R, C, V, &hb, NULL) : (size_t)R * V * sizeof(uint16_t);
	if (!c->head || c->head_bytes < need) {
		retire(be, c->head);
		c->head_bytes = 0;
		if (!(c->head = cu_alloc(be, need)))
			return;
		c->head_bytes = need;
	}
	uint16_t *z = c->head;
	void *st = ST(be);
	if (cl) {
		head_exp_bytes(R, C, V, &hb, c->head);
		int ntn = (V + GEMM_EXP_BN - 1) / GEMM_EXP_BN;
		for (int r0 = 0; r0 < N && !be->failed; r0 += R) {
			int n = N - r0 < R ? N - r0 : R;
			const uint16_t *xr = (const uint16_t *)x + (size_t)r0 * C;
			/* the fallback's three launches do nothing unless the
			 * finish found a row out of exp's range */
			int rc = gemm_exp_cuda(hb.z, hb.part, hb.flag, xr, w, n, V, C, cl, st) ||
				 head_exp_finish_cuda(hb.z, hb.rs, hb.xs, loss + r0, lse + r0, hb.flag,
						      hb.part, ntn, xr, w, targets + r0, scale, n, C,
						      V, 1, st) ||
				 gemm_tn_guarded_cuda(hb.z, xr, w, n, V, C, cl, hb.flag, st) ||
				 xent_fused_guarded_cuda(hb.z, loss + r0, lse + r0, targets + r0, scale,
							 n, V, NULL, 1, hb.flag, st) ||
				 head_exp_plain_cuda(hb.rs, hb.xs, xr, hb.flag, n, C, st) ||
				 (loss_sum && xent_sum_cuda(loss_sum, loss + r0, n, st)) ||
				 /* dW first: dx's fp32 product overwrites xs */
				 matmul_bwd_cuda(c->mm, NULL, dw, hb.z, hb.xs, w, n, C, V) ||
				 matmul_dinp_f32_cuda(c->mm, hb.dxf, hb.z, w, n, C, V) ||
				 head_exp_dx_cuda((uint16_t *)dx + (size_t)r0 * C, hb.dxf, hb.rs, n, C, st);
			check(be, rc, "LM head and cross-entropy (exp epilogue)");
		}
		return;
	}
	for (int r0 = 0; r0 < N && !be->failed; r0 += R) {
		int n = N - r0 < R ? N - r0 : R;
		const uint16_t *xr = (const uint16_t *)x + (size_t)r0 * C;
		int rc = matmul_fwd_cuda(c->mm, z, NULL, xr, w, n, C, V) ||
			 xent_fused_cuda(z, loss + r0, lse + r0, targets + r0, scale, n, V, loss_sum,
					 dx != NULL, st);
		if (!rc && dx)
			rc = matmul_bwd_cuda(c->mm, (uint16_t *)dx + (size_t)r0 * C, dw, z, xr, w, n, C, V);
		check(be, rc, "LM head and cross-entropy");
	}
}

/* The model variants' ops (backend.h). */
static void cu_qkv_split_gqa(lm_backend *be, void *q, void *k, void *v, const void *qkv, int B,
			     int T, int H, int Hkv, int D)
{
	check(be, qkv_split_gqa_cuda(q, k, v, qkv, B, T, H, Hkv, D, ST(be)), "qkv split (GQA)");
}

static void cu_qkv_merge_gqa(lm_backend *be, void *dqkv, const void *dq, const void *dk,
			     const void *dv, int B, int T, int H, int Hkv, int D)
{
	check(be, qkv_merge_gqa_cuda(dqkv, dq, dk, dv, B, T, H, Hkv, D, ST(be)), "qkv merge (GQA)");
}

static void cu_headnorm_fwd(lm_backend *be, void *y, float *rstd, const void *x, const float *w,
			    size_t rows, int D, float eps)
{
	check(be, headnorm_fwd_cuda(y, rstd, x, w, rows, D, eps, ST(be)), "QK-norm");
}

static void cu_headnorm_bwd(lm_backend *be, void *dx, float *dw, const void *dy, const void *x,
			    const float *w, const float *rstd, size_t rows, int D)
{
	void *ws = scratch(be, headnorm_bwd_cuda_workspace(rows, D));
	if (ws)
		check(be, headnorm_bwd_cuda(dx, dw, dy, x, w, rstd, rows, D, ws, ST(be)),
		      "QK-norm backward");
}

static void cu_qkv_headnorm(lm_backend *be, void *qkv, const float *wq, const float *wk, int N,
			    int H, int Hkv, int D, float eps)
{
	check(be, qkv_headnorm_cuda(qkv, wq, wk, N, H, Hkv, D, eps, ST(be)), "QK-norm (decoding)");
}

static void cu_relu2_fwd(lm_backend *be, void *out, const void *h, size_t n)
{
	check(be, relu2_fwd_cuda(out, h, n, ST(be)), "relu^2");
}

static void cu_relu2_bwd(lm_backend *be, void *dh, const void *dout, const void *h, size_t n)
{
	check(be, relu2_bwd_cuda(dh, dout, h, n, ST(be)), "relu^2 backward");
}

static void cu_softcap_fwd(lm_backend *be, void *x, size_t n, float cap)
{
	check(be, softcap_fwd_cuda(x, n, cap, ST(be)), "soft-capping");
}

static void cu_logit_bwd(lm_backend *be, void *dlogits, const void *logits, const float *lse,
			 const int32_t *targets, const float *weights, const float *extra,
			 float scale, int N, int V, const lm_logit_opts *lo)
{
	check(be, logit_bwd_cuda(dlogits, logits, lse, targets, weights, extra, scale, N, V,
				 lo->z_loss, lo->softcap, ST(be)), "cross-entropy backward (variants)");
}

/* cu_head_xent with the logit variants: the same chunks and buffer, the
 * logits capped in fp32 before the loss, logit_bwd for the gradient. */
static void cu_head_xent_ex(lm_backend *be, const void *x, const void *w, const int32_t *targets,
			    float scale, int N, int C, int V, float *loss, float *lse,
			    double *loss_sum, void *dx, float *dw, const lm_logit_opts *lo)
{
	cuda_ctx *c = CTX(be);
	int R = BACKEND_HEAD_CHUNK / V > 0 ? BACKEND_HEAD_CHUNK / V : 1;
	if (R > N)
		R = N;
	size_t zb = (size_t)R * V * sizeof(float), need = zb + (size_t)R * V * sizeof(uint16_t);
	if (!c->head || c->head_bytes < need) {
		retire(be, c->head);
		c->head_bytes = 0;
		if (!(c->head = cu_alloc(be, need)))
			return;
		c->head_bytes = need;
	}
	float *z = c->head;
	uint16_t *dz = (uint16_t *)((char *)c->head + zb);
	void *st = ST(be);
	for (int r0 = 0; r0 < N && !be->failed; r0 += R) {
		int n = N - r0 < R ? N - r0 : R;
		const uint16_t *xr = (const uint16_t *)x + (size_t)r0 * C;
		int rc = matmul_fwd_f32_cuda(c->mm, z, xr, w, n, C, V) ||
			 (lo->softcap > 0 && softcap_fwd_f32_cuda(z, (size_t)n * V, lo->softcap, st)) ||
			 xent_fwd_f32_cuda(loss + r0, lse + r0, z, targets + r0, n, V, loss_sum, st);
		if (!rc && dx)
			rc = logit_bwd_f32_cuda(dz, z, lse + r0, targets + r0, NULL, NULL, scale, n, V,
						lo->z_loss, lo->softcap, st) ||
			     matmul_bwd_cuda(c->mm, (uint16_t *)dx + (size_t)r0 * C, dw, dz, xr, w, n, C, V);
		check(be, rc, "LM head and cross-entropy (variants)");
	}
}

static void cu_sumsq(lm_backend *be, double *out, const float *g, size_t n)
{
	check(be, sumsq_cuda(out, g, n, CTX(be)->partials, ST(be)), "sum of squares");
}

static void cu_clip_scale(lm_backend *be, float *scale, const double *sumsq, double max_norm)
{
	check(be, clip_scale_cuda(scale, sumsq, max_norm, ST(be)), "clip factor");
}

static void cu_adamw_step(lm_backend *be, float *p, const float *g, float *m, float *v,
			  void *p_act, size_t n, const adamw_hparams *h, const float *grad_scale)
{
	check(be, adamw_step_cuda(p, g, m, v, p_act, n, h, grad_scale, ST(be)), "AdamW");
}

static void cu_adamw_multi(lm_backend *be, float *p, const float *g, float *m, float *v,
			   void *p_act, const adamw_seg *segs, int n_segs, const adamw_hparams *h,
			   const float *grad_scale)
{
	check(be, adamw_multi_cuda(p, g, m, v, p_act, segs, n_segs, h, grad_scale, ST(be)), "AdamW");
}

static size_t cu_muon_workspace(lm_backend *be, int count, int rows, int cols)
{
	return muon_workspace_cuda(count, rows, cols);
}

static void cu_muon_step(lm_backend *be, float *p, const float *g, float *buf, void *p_act,
			 const size_t *offs, int count, int n_tr, int rows, int cols,
			 const muon_hparams *h, const float *grad_scale, void *ws)
{
	cuda_ctx *c = CTX(be);
	if (!c->muon && !(c->muon = muon_cuda_new(c->st))) {
		backend_fail(be, "CUDA Muon: no cuBLAS handle");
		return;
	}
	check(be, muon_step_cuda(c->muon, p, g, buf, p_act, offs, count, n_tr, rows, cols, h,
			     grad_scale, ws),
	      "Muon");
}

static void cu_decode_qkv(lm_backend *be, void *q, void *kc, void *vc, const void *qkv,
			  const float *cs, const int32_t *pos, const int32_t *slot, decode_shape s)
{
	check(be, decode_qkv_cuda(q, kc, vc, qkv, cs, pos, slot, s, ST(be)), "q/k/v into the cache");
}

static void cu_attn_decode(lm_backend *be, void *o, const void *q, const void *kc, const void *vc,
			   const int32_t *pos, const int32_t *slot, decode_shape s, float scale)
{
	check(be, attn_decode_cache_cuda(o, q, kc, vc, pos, slot, s, scale, ST(be)),
	      "attention over the cache");
}

static int cu_attn_decode_qkv(lm_backend *be, void *o, void *kc, void *vc, const void *qkv,
			      const float *cs, const int32_t *pos, const int32_t *slot,
			      decode_shape s, float scale)
{
	static int off = -1;
	if (off < 0) {
		const char *v = getenv("LMPIPE_NO_QKV_ATTN");
		off = v && *v && *v != '0';
	}
	if (off || s.Hkv < 1 || s.H % s.Hkv || !(s.D == 32 || s.D == 64 || s.D == 128))
		return -1;
	int rc = attn_decode_qkv_cuda(o, kc, vc, qkv, cs, pos, slot, s, scale, ST(be));
	if (rc > 0)
		return -1; /* too much shared memory for a block: the two ops */
	check(be, rc, "q/k/v into the cache and attention over it");
	return 0;
}

static void cu_rows_gather(lm_backend *be, float *dst, const float *src, const int32_t *idx, int n,
			   int C)
{
	check(be, rows_gather_cuda(dst, src, idx, n, C, ST(be)), "row gather");
}

static void cu_rows_scatter(lm_backend *be, float *dst, const void *src, const int32_t *idx, int n,
			    int V)
{
	check(be, rows_scatter_cuda(dst, src, idx, n, V, ST(be)), "row scatter");
}

/* The few-row kernels where they apply, else the two ops through a
 * scratch buffer (grown at a step's first, unrecorded run). */
static void cu_norm_matmul_fwd(lm_backend *be, void *out, const float *x, const float *g,
			       const void *w, int N, int C, int OUT, float eps)
{
	if (N <= MATMUL_SMALL_N &&
	    !norm_matmul_small_cuda(out, x, g, w, N, C, OUT, eps, ST(be)))
		return;
	if (N <= MATMUL_ROWS_N && !norm_matmul_rows_cuda(out, x, g, w, N, C, OUT, eps, ST(be)))
		return;
	cudaGetLastError();
	uint16_t *xn = scratch(be, (size_t)N * C * (sizeof(uint16_t) + sizeof(float)));
	if (!xn)
		return;
	float *rstd = (float *)(xn + (size_t)N * C);
	check(be, rmsnorm_fwd_cuda(xn, rstd, x, g, N, C, eps, ST(be)) ||
		  matmul_fwd_cuda(CTX(be)->mm, out, NULL, xn, w, N, C, OUT), "RMSNorm and matmul");
}

static void cu_glu_matmul_fwd(lm_backend *be, float *out, const float *addend, const void *h,
			      const void *w, int N, int F, int OUT)
{
	if (N <= MATMUL_SMALL_N && !glu_matmul_small_cuda(out, addend, h, w, N, F, OUT, ST(be)))
		return;
	cudaGetLastError();
	uint16_t *sw = scratch(be, (size_t)N * F * sizeof(uint16_t));
	if (!sw)
		return;
	check(be, swiglu_fwd_cuda(sw, h, N, F, ST(be)) ||
		  matmul_fwd_cuda(CTX(be)->mm, out, addend, sw, w, N, F, OUT), "SwiGLU and matmul");
}

static int cu_norm_glu_fwd(lm_backend *be, void *sw, const float *x, const float *g, const void *wgu,
			   int N, int C, int F, float eps)
{
	if (N <= MATMUL_SMALL_N || N > MATMUL_ROWS_N)
		return -1;
	if (norm_glu_rows_cuda(sw, x, g, wgu, N, C, F, eps, ST(be))) {
		cudaGetLastError();
		return -1;
	}
	return 0;
}

static int cu_decode_step(lm_backend *be, const decode_step_args *a)
{
	if (!decode_step_applies(a))
		return -1;
	check(be, decode_step_cuda(a, ST(be)), "decoding step");
	return 0;
}

static void cu_sample(lm_backend *be, int32_t *tok, float *lp, const float *logits,
		      const int32_t *row, const float *u, const int32_t *forced,
		      const sample_feed *feed, int n, int V, sample_args a)
{
	check(be, sample_rows_cuda(tok, lp, logits, row, u, forced, feed, n, V, a, ST(be)),
	      "sampling");
}

/* Graphs: stream capture in the thread-local mode (other threads' CUDA
 * calls are not affected), instantiated at the end. */
static void cu_graph_begin(lm_backend *be)
{
	CTX(be)->recorded = 1;
	check(be, cudaStreamBeginCapture(CTX(be)->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess,
	      "graph capture");
}

static void *cu_graph_end(lm_backend *be)
{
	cu_join_all(be);
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	cudaError_t err = cudaStreamEndCapture(CTX(be)->st, &g);
	if (err == cudaSuccess && !be->failed)
		err = cudaGraphInstantiate(&x, g, 0);
	CTX(be)->recorded = 1;
	if (g)
		cudaGraphDestroy(g);
	if (err != cudaSuccess || be->failed) {
		cudaGetLastError();
		if (!be->failed)
			backend_fail(be, "CUDA graph: %s", cudaGetErrorString(err));
		if (x)
			cudaGraphExecDestroy(x);
		return NULL;
	}
	return x;
}

static void cu_graph_run(lm_backend *be, void *g)
{
	check(be, cudaGraphLaunch((cudaGraphExec_t)g, CTX(be)->st) != cudaSuccess, "graph launch");
}

static void cu_graph_free(lm_backend *be, void *g)
{
	if (g)
		cudaGraphExecDestroy((cudaGraphExec_t)g);
}

static const lm_backend cuda_table = {
	.name = "cuda",
	.act = LM_BF16,
	.describe = cu_describe,
	.sync = cu_sync,
	.supports = cu_supports,
	.peak_bytes = cu_peak_bytes,
	.close = cu_close,
	.mark = cu_mark,
	.mark_ms = cu_mark_ms,
	.mark_free = cu_mark_free,
	.range = cu_range,
	.alloc = cu_alloc,
	.release = cu_release,
	.zero = cu_zero,
	.copy = cu_copy,
	.upload = cu_upload,
	.download = cu_download,
	.snap = cu_snap,
	.snap_read = cu_snap_read,
	.to_act = cu_to_act,
	.from_act = cu_from_act,
	.add_act = cu_add_act,
	.embedding_fwd = cu_embedding_fwd,
	.embedding_bwd = cu_embedding_bwd,
	.rmsnorm_fwd = cu_rmsnorm_fwd,
	.rmsnorm_bwd = cu_rmsnorm_bwd,
	.rmsnorm_bwd_act = cu_rmsnorm_bwd_act,
	.matmul_fwd = cu_matmul_fwd,
	.gate_up_swiglu_fwd = cu_gate_up_swiglu_fwd,
	.matmul_qkv_rope_fwd = cu_matmul_qkv_rope_fwd,
	.matmul_bwd = cu_matmul_bwd,
	.rope_fwd = cu_rope_fwd,
	.rope_bwd = cu_rope_bwd,
	.qkv_split = cu_qkv_split,
	.qkv_merge = cu_qkv_merge,
	.attn_qkv_fwd = cu_attn_qkv_fwd,
	.attn_qkv_bwd = cu_attn_qkv_bwd,
	.attn_fwd_bthd = cu_attn_fwd_bthd,
	.attn_bwd_bthd = cu_attn_bwd_bthd,
	.qkv_rope_split = cu_qkv_rope_split,
	.qkv_rope_merge = cu_qkv_rope_merge,
	.heads_merge = cu_heads_merge,
	.heads_split = cu_heads_split,
	.attn_workspace = cu_attn_workspace,
	.attn_fwd = cu_attn_fwd,
	.attn_bwd = cu_attn_bwd,
	.swiglu_fwd = cu_swiglu_fwd,
	.swiglu_bwd = cu_swiglu_bwd,
	.xent_fwd = cu_xent_fwd,
	.xent_bwd = cu_xent_bwd,
	.head_xent = cu_head_xent,
	.qkv_split_gqa = cu_qkv_split_gqa,
	.qkv_merge_gqa = cu_qkv_merge_gqa,
	.headnorm_fwd = cu_headnorm_fwd,
	.headnorm_bwd = cu_headnorm_bwd,
	.qkv_headnorm = cu_qkv_headnorm,
	.relu2_fwd = cu_relu2_fwd,
	.relu2_bwd = cu_relu2_bwd,
	.softcap_fwd = cu_softcap_fwd,
	.logit_bwd = cu_logit_bwd,
	.head_xent_ex = cu_head_xent_ex,
	.entropy_fwd = cu_entropy_fwd,
	.entropy_bwd = cu_entropy_bwd,
	.rl_tok_pg = cu_rl_tok_pg,
	.rl_tok_dpo = cu_rl_tok_dpo,
	.ppo_value = cu_ppo_value,
	.ppo_tok = cu_ppo_tok,
	.sumsq = cu_sumsq,
	.clip_scale = cu_clip_scale,
	.adamw_step = cu_adamw_step,
	.adamw_multi = cu_adamw_multi,
	.muon_workspace = cu_muon_workspace,
	.muon_step = cu_muon_step,
	.muon_join = cu_muon_join,
	.dw_begin = cu_dw_begin,
	.dw_end = cu_dw_end,
	.dw_wait = cu_dw_wait,
	.decode_qkv = cu_decode_qkv,
	.attn_decode = cu_attn_decode,
	.attn_decode_qkv = cu_attn_decode_qkv,
	.rows_gather = cu_rows_gather,
	.rows_scatter = cu_rows_scatter,
	.norm_matmul_fwd = cu_norm_matmul_fwd,
	.glu_matmul_fwd = cu_glu_matmul_fwd,
	.norm_glu_fwd = cu_norm_glu_fwd,
	.decode_step = cu_decode_step,
	.sample = cu_sample,
	.graph_begin = cu_graph_begin,
	.graph_end = cu_graph_end,
	.graph_run = cu_graph_run,
	.graph_free = cu_graph_free,
};

static int device_index;

void backend_set_device(int index)
{
	device_index = index < 0 ? 0 : index;
}

static void *cu_native_stream(lm_backend *be)
{
	return ST(be);
}

lm_backend *backend_cuda_open(lm_err *e)
{
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess || n < 1) {
		lm_seterr(e, "device 'cuda' is not available: no usable GPU (%s); use --device cpu",
			  err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device");
		cudaGetLastError();
		return NULL;
	}
	lm_backend *be = malloc(sizeof *be);
	cuda_ctx *c = calloc(1, sizeof *c);
	if (!be || !c) {
		free(be);
		free(c);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	*be = cuda_table;
	be->impl = c;
	be->native_stream = cu_native_stream;
	c->device = device_index % n;
	if (!(c->events = malloc(EVENT_POOL * sizeof *c->events)) || cudaSetDevice(c->device) != cudaSuccess ||
	    cudaGetDeviceProperties(&c->prop, c->device) != cudaSuccess ||
	    cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaMalloc((void **)&c->partials, SUMSQ_CUDA_PARTIALS * sizeof(double)) != cudaSuccess ||
	    !(c->mm = matmul_cuda_new(c->st)) ||
	    cudaMallocHost((void **)&c->stage, (size_t)STAGE_SLOTS * STAGE_BYTES +
					       LM_SNAP_SLOTS * LM_SNAP_BYTES) != cudaSuccess) {
		lm_seterr(e, "device 'cuda' is not available: %s", cudaGetErrorString(cudaGetLastError()));
		cu_close(be);
		return NULL;
	}
	matmul_cuda_follow(c->mm, &be->deterministic);
	for (int i = 0; i < STAGE_SLOTS + LM_SNAP_SLOTS; i++)
		if (cudaEventCreateWithFlags(i < STAGE_SLOTS ? &c->stage_done[i]
							     : &c->snap_done[i - STAGE_SLOTS],
					     cudaEventDisableTiming) != cudaSuccess) {
			lm_seterr(e, "device 'cuda' is not available: %s",
				  cudaGetErrorString(cudaGetLastError()));
			cu_close(be);
			return NULL;
		}
	return be;
}

#else

void backend_set_device(int index)
{
}

lm_backend *backend_cuda_open(lm_err *e)
{
	lm_seterr(e, "device 'cuda' is not available: this build has no CUDA (built with CUDA=0 or "
		  "without nvcc); "
		  "use --device cpu");
	return NULL;
}


#endif
