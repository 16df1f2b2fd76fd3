/* backend.h: the op table the model is written against.
 *
 * A backend supplies memory (device buffers: host memory for the CPU) and
 * one function per op, with the signatures of kernels/<op>.h.  The model
 * (model.c) calls only through this table, so `--device cpu|cuda` picks
 * the backend at run time and the model code is shared.  Tensors are fp32
 * buffers in the backend's memory; a backend may compute in lower
 * precision inside an op (the CUDA attention converts to bf16), but
 * what crosses the table is fp32.
 *
 * Only the CPU backend exists so far; backend_get("cuda") fails with a
 * message saying so (the CUDA backend is a later issue). */
#ifndef LMPIPE_BACKEND_H
#define LMPIPE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "kernels/adamw.h"

typedef struct lm_backend {
	const char *name;
	/* One line on what computes: library, kernel, threads (for logs). */
	void (*describe)(char *buf, size_t n);

	/* Memory.  alloc returns uninitialised memory, or NULL. */
	void *(*alloc)(size_t bytes);
	void (*release)(void *p);
	void (*zero)(void *p, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);     /* device to device */
	void (*upload)(void *dst, const void *host, size_t bytes);  /* host to device */
	void (*download)(void *host, const void *src, size_t bytes);/* device to host */

	/* Ops: see the kernels/<op>.h of the same name. */
	void (*embedding_fwd)(float *out, const int32_t *ids, const float *table, int N, int C);
	void (*embedding_bwd)(float *dtable, const int32_t *ids, const float *dout, int N, int C);
	void (*rmsnorm_fwd)(float *y, float *rstd, const float *x, const float *w,
			    int N, int C, float eps);
	void (*rmsnorm_bwd)(float *dx, float *dw, const float *dy, const float *x,
			    const float *w, const float *rstd, int N, int C);
	void (*matmul_fwd)(float *out, const float *inp, const float *w,
			   int N, int IN, int OUT, int accumulate);
	void (*matmul_bwd)(float *dinp, float *dw, const float *dout, const float *inp,
			   const float *w, int N, int IN, int OUT, int accumulate);
	void (*rope_fwd)(float *x, const float *cs, int B, int H, int T, int D);
	void (*rope_bwd)(float *dx, const float *cs, int B, int H, int T, int D);
	void (*qkv_split)(float *q, float *k, float *v, const float *qkv, int B, int T, int H, int D);
	void (*qkv_merge)(float *dqkv, const float *dq, const float *dk, const float *dv,
			  int B, int T, int H, int D);
	void (*heads_merge)(float *y, const float *o, int B, int T, int H, int D);
	void (*heads_split)(float *dO, const float *dy, int B, int T, int H, int D);
	/* Attention takes a workspace in the backend's memory, of
	 * attn_workspace(B, H, T, D) bytes, allocated once by the caller (the
	 * CUDA backward pass needs one; the CPU uses it for its scratch). */
	size_t (*attn_workspace)(int B, int H, int T, int D);
	int (*attn_fwd)(const float *q, const float *k, const float *v, float *o, float *lse,
			int B, int H, int T, int D, int causal, float scale, void *ws,
			size_t ws_bytes);
	int (*attn_bwd)(const float *q, const float *k, const float *v, const float *o,
			const float *dout, const float *lse, float *dq, float *dk, float *dv,
			int B, int H, int T, int D, int causal, float scale, void *ws,
			size_t ws_bytes);
	void (*swiglu_fwd)(float *out, const float *h, int N, int F);
	void (*swiglu_bwd)(float *dh, const float *dout, const float *h, int N, int F);
	void (*xent_fwd)(float *loss, float *lse, const float *logits, const int32_t *targets,
			 int N, int V);
	void (*xent_bwd)(float *dlogits, const float *logits, const float *lse,
			 const int32_t *targets, const float *dloss, int N, int V);
	void (*adamw_step)(float *p, const float *g, float *m, float *v, size_t n,
			   const adamw_hparams *h);
	double (*sumsq)(const float *g, size_t n);
} lm_backend;

/* OpenMP threads for the CPU ops (0 or less: the default, all cores); the
 * BLAS runs single-threaded inside them (kernels/cpu/blas_single.h). */
void backend_set_threads(int n);

/* The backend names --device accepts, NULL-terminated. */
extern const char *const backend_names[];

/* The backend called name, or NULL with a message (exit code 2 for an
 * unknown name, 1 for one that is not available in this build). */
const lm_backend *backend_get(const char *name, lm_err *e);

#endif
