/* model_decode.h: the model's forward pass for generation, with a
 * key/value cache per sequence slot, behind generate.h's lm_decoder.
 *
 * It reuses the weights of a `model` (model.h) on ragged batches: the new
 * tokens of all sequences in one call are stacked into one [N, C] matrix,
 * so prefills of different lengths and single decode steps share every
 * matmul.  Long inputs go through in chunks of MODEL_DECODE_CHUNK tokens.
 *
 * A chunk wakes one thread per MODEL_DECODE_WORK multiply-adds (a quarter
 * of a million: about a megabyte of float32 weights, so that each thread's
 * slice of the weights stays in its core's L2 cache from step to step), up
 * to the thread count in force when the decoder was made; a tiny model
 * runs on one thread (bench/lm-sample-notes.md).  On the CPU backend a chunk is
 * model_decode_cpu.c's single parallel region, each thread keeping its own
 * slice of the weights, meeting at spinning barriers.  Other backends run
 * the op table's ops (embedding, RMSNorm, matmuls, RoPE, SwiGLU) with
 * attn_decode_cpu for the cached attention (the table has no such op
 * yet).
 *
 * Every variant of model.h is supported: the cache holds the key/value
 * heads only (GQA), QK-norm is applied before RoPE, ReLU^2 replaces the
 * gated product, logits are soft-capped.
 *
 * Cache memory: 2 * layers * slots * n_ctx * kv_heads * head_dim floats, touched when
 * the decoder is made.  The CPU backend also keeps its own copy of the
 * matrices, packed for decode_gemm.h when the decoder is made: weights
 * changed later are not seen (make a new decoder). */
#ifndef LMPIPE_MODEL_DECODE_H
#define LMPIPE_MODEL_DECODE_H

#include <stdint.h>

#include "base/err.h"
#include "gen/generate.h"
#include "kernels/decode_ops.h"
#include "model/model.h"

enum { MODEL_DECODE_CHUNK = 256, MODEL_DECODE_WORK = 1 << 18 };

/* The phases of a CPU decoding step, as thread 0 sees them (each ends at a
 * barrier; the region's start is in the first, its end in the last), for
 * model_decoder.phase_s. */
enum {
	DECODE_PHASE_QKV,      /* RMSNorm, QKV product */
	DECODE_PHASE_ROPE,     /* RoPE, cache store */
	DECODE_PHASE_ATTN,     /* attention */
	DECODE_PHASE_OUT,      /* output projection */
	DECODE_PHASE_GATE_UP,  /* RMSNorm, gate and up products, SwiGLU */
	DECODE_PHASE_DOWN,     /* down product */
	DECODE_PHASE_HEAD,     /* final RMSNorm, output head, logits copied out */
	DECODE_PHASES
};

typedef struct model_decoder {
	lm_decoder dec;        /* hand &dec to generate() */
	model *m;
	uint32_t n_slots, n_ctx;
	float *kc, *vc;        /* [L][slot][H][n_ctx][D] */
	uint32_t *len;         /* positions held by each slot */
	/* one chunk's buffers */
	float *x, *xn, *rstd, *qkv, *q, *k, *v, *y, *h, *sw, *cs, *logits;
	float *hrstd;          /* QK-norm's rstd of the op table's path (unused after) */
	int32_t *ids;
	int64_t *pos;
	uint32_t *tok_slot;
	int *tok_len, *last_of;
	const float **kp, **vp;
	float *cs_host;
	int max_threads, threads; /* the caller's thread count; the one set now */
	double work;           /* multiply-adds per thread: MODEL_DECODE_WORK, or the
				* environment's LMPIPE_DECODE_WORK (tests lower it) */
	int op_table;          /* 1: the op table's ops on the CPU too (tests compare the two) */
	/* the CPU backend's own pass (model_decode_cpu.c) */
	float *xt;             /* [max_threads][MODEL_DECODE_CHUNK][C] normed rows */
	float *scores;         /* [max_threads][n_ctx] attention scratch */
	float *packed;         /* the weights in decode_gemm.h's panels, one block */
	struct packed_layer {
		const float *qkv, *o, *gu, *down; /* gu: gate and up (dec_pack_glu) */
	} *pl;                 /* per layer, into packed */
	const float *phead;    /* the output head, into packed */
	dec_barrier bar;
	/* diagnostics (bench/lm-sample-phases.sh): when set, the seconds of
	 * each phase of every chunk of one token per sequence are added to
	 * phase_s[DECODE_PHASES] */
	double *phase_s, phase_t;
} model_decoder;

/* Slots and cache length (<= the model's context) for m, whose weights are
 * loaded.  m must outlive md. */
int model_decoder_init(model_decoder *md, model *m, uint32_t n_slots, uint32_t n_ctx, lm_err *e);
void model_decoder_free(model_decoder *md);

#endif
