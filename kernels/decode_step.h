/* decode_step.h: a decoding step of one token as one CUDA kernel
 * (gen/model_decode.c uses it through the op table's decode_step, and
 * composes the step from the ops of decode.h, rmsnorm.h and matmul.h
 * where it does not apply: on the CPU, for a batch of tokens, other
 * shapes).
 *
 * The token (N = 1) is the next one of the sequence in cache slot slot[0],
 * at position pos[0]; it goes through L layers of the plain architecture
 * (RMSNorm, attention with RoPE and grouped-query heads, SwiGLU; no
 * QK-norm, no soft-capping; C <= 1024) to its logits, written to row
 * row[0] of rows [*][V] (fp32).  x [C] holds the embedded token on entry
 * and the last layer's residual stream on return; x2, y and sw are
 * scratch.  Its key and value are stored into the cache, which is laid out
 * as kernels/decode.h's per layer: layer l, slot s at
 * (l * n_slots + s) * Hkv * n_ctx * D values of kc and vc.
 *
 * The arithmetic is that of the ops it replaces (bf16 products with fp32
 * sums, the q/k/v, gate/up and logit values rounded to bf16 as those ops
 * store them), the sums taken in another order: the same results within
 * rounding.  One block per multiprocessor runs every phase of the step,
 * the phases separated by barriers of the whole grid in device memory
 * (sync: two zeroed words, left zeroed), so a step is one launch instead
 * of about seven a layer (kernels/cuda/decode_step.cu says how). */
#ifndef LMPIPE_DECODE_STEP_H
#define LMPIPE_DECODE_STEP_H

#include <stdint.h>

#include "kernels/decode.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DECODE_STEP_MAX_N = 1, DECODE_STEP_MAX_LAYERS = 64 };

typedef struct decode_step_layer {
	const float *ln1, *ln2;                    /* RMSNorm gains [C] */
	const uint16_t *wqkv, *wo, *wgu, *wdown;  /* bf16: [(H + 2 Hkv) D][C], [C][C],
						     [2F][C] (gate rows, then up), [C][F] */
} decode_step_layer;

typedef struct decode_step_args {
	decode_shape s;            /* N = 1 token, H, Hkv, D (32, 64 or 128), n_ctx */
	int L, C, F, V, n_slots;   /* C = H D */
	float eps, scale;          /* RMSNorm's epsilon, the attention's 1 / sqrt(D) */
	float *x, *x2;             /* [C] */
	uint16_t *y, *sw;          /* bf16 scratch: [C], [F] */
	uint16_t *kc, *vc;         /* bf16 caches */
	const float *cs;           /* RoPE table [n_ctx][D/2][2] (rope.h) */
	const int32_t *pos, *slot, *row;  /* [1], device memory */
	const float *lnf;          /* [C] */
	const uint16_t *head;      /* bf16 [V][C] */
	float *rows;               /* [*][V] */
	unsigned *sync;            /* two words of device memory, zero */
	decode_step_layer layer[DECODE_STEP_MAX_LAYERS];
} decode_step_args;

/* 1 when decode_step_cuda runs these shapes and pointers (16-byte aligned
 * matrices, gains, rows and RoPE table) and its shared memory fits, else
 * 0. */
int decode_step_applies(const decode_step_args *a);

/* 0, or -1 if it does not apply or the launch failed (cudaGetLastError
 * tells which). */
int decode_step_cuda(const decode_step_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
