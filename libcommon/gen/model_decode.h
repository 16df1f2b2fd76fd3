/* model_decode.h: the model's forward pass for generation, with a
 * key/value cache per sequence slot, behind generate.h's lm_decoder.
 *
 * It reuses the weights of a `model` (model.h) on ragged batches: the new
 * tokens of all sequences in one call are stacked into one [N, C] matrix,
 * so prefills of different lengths and single decode steps share every
 * matmul.  Long inputs go through in chunks of MODEL_DECODE_CHUNK tokens;
 * where the flash prefill applies (prefill_flash below), an input that fits
 * in one chunk starts a new chunk rather than straddle two, so that prompts
 * of up to that many tokens make chunks of whole prompts.
 *
 * A chunk wakes one thread per MODEL_DECODE_WORK multiply-adds (a quarter
 * of a million: about a megabyte of float32 weights, so that each thread's
 * slice of the weights stays in its core's L2 cache from step to step), up
 * to the thread count in force when the decoder was made; a tiny model
 * runs on one thread (bench/lm-sample-notes.md).  On the CPU backend a chunk is
 * model_decode_cpu.c's single parallel region, each thread keeping its own
 * slice of the weights, meeting at spinning barriers.  Other backends run
 * the op table's ops (embedding, RMSNorm, matmuls, SwiGLU, and the cache
 * ops decode_qkv and attn_decode, kernels/decode.h).
 *
 * On a backend that samples (be->sample: CUDA), the logits stay in its
 * memory, one fp32 row per slot, and the decoder offers generate.h's
 * choose(): only the chosen tokens and their log-probabilities cross to the
 * host.  Where the backend records graphs (be->graph_begin), a decoding
 * step of N single tokens is recorded the second time N occurs and
 * replayed after that: one launch instead of some forty.  A step of one
 * token is one kernel where the backend has one (be->decode_step: CUDA,
 * the plain architecture), equal to the ops it replaces within rounding
 * (LMPIPE_NO_STEP_KERNEL=1: the ops).  There it also
 * offers choose_ahead(): MODEL_DECODE_AHEAD rounds of step and sampler in
 * one graph, each round's tokens fed to the next on the device (the
 * environment's LMPIPE_DECODE_AHEAD sets the rounds, 1 to 64; 1: none), so
 * that the host waits once per so many tokens, not once per token.
 *
 * Every variant of model.h is supported: the cache holds the key/value
 * heads only (GQA), QK-norm is applied before RoPE (qkv_headnorm on the
 * fused projection), ReLU^2 replaces the gated product, logits are
 * soft-capped.
 *
 * Cache memory: 2 * layers * slots * n_ctx * kv_heads * head_dim values of the
 * backend's act type (fp32 on the CPU, bf16 on CUDA), touched when the
 * decoder is made.  The CPU backend also keeps its own copy of the
 * matrices, packed for decode_gemm.h when the decoder is made: weights
 * changed later are not seen (make a new decoder). */
#ifndef LMPIPE_MODEL_DECODE_H
#define LMPIPE_MODEL_DECODE_H

#include <stdint.h>

#include "base/err.h"
#include "gen/generate.h"
#include "kernels/decode_ops.h"
#include "kernels/decode_step.h"
#include "model/model.h"

enum { MODEL_DECODE_CHUNK = 256, MODEL_DECODE_WORK = 1 << 18, MODEL_DECODE_AHEAD = 8 };

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

/* The int32 arrays of a chunk, uploaded at once: each [MODEL_DECODE_CHUNK]. */
enum { META_IDS, META_POS, META_SLOT, META_LAST, META_ROW, META_ARRAYS };

typedef struct model_decoder {
	lm_decoder dec;        /* hand &dec to generate() */
	model *m;
	uint32_t n_slots, n_ctx;
	void *kc, *vc;         /* [L][slot][H][n_ctx][D], act */
	uint32_t *len;         /* positions held by each slot */
	/* one chunk's buffers (backend memory) */
	float *x, *x2, *xl, *rstd; /* the residual stream (two: see chunk_ops), last rows */
	void *xn, *qkv, *q, *y, *h, *sw, *logits;
	float *rows;           /* [slot][V] fp32: each slot's last logits (backend memory) */
	int32_t *meta;         /* [META_ARRAYS][MODEL_DECODE_CHUNK] (backend memory),
				* then s_in when sampling on the device */
	int32_t *ids;          /* meta's token ids */
	int32_t *meta_host;    /* the host side of meta (and of s_in) */
	int64_t *pos;
	uint32_t *tok_slot;
	int *last_of;
	uint64_t *order;       /* [n_slots] a feed's inputs by length (md_feed) */
	uint32_t *order_i;
	/* device sampling (be->sample): per slot row index, forced token and
	 * each round's draws in ([2][slots], then [ahead][slots][SAMPLE_DRAWS],
	 * after meta); per round
	 * token and log-prob out ([ahead][2][slots]) */
	int32_t *s_in, *s_out;
	int32_t *s_host;       /* host: [ahead][2][slots] out */
	uint32_t ahead;        /* rounds of choose_ahead(): MODEL_DECODE_AHEAD or the
				* environment's */
	long ahead_runs;       /* choose_ahead() calls that ran more than one round */
	/* A step of single tokens on a sampling backend that records graphs
	 * waits (pend: its N; its meta filled in, not uploaded) for the
	 * choose() after it: the two are then one upload and one graph,
	 * sgraph[N] (or, for `ahead` rounds, sgraph[slots + 1 + N]), recorded
	 * the second time, for the sampler's arguments in sg_args (same
	 * index).  Any other call of the decoder first runs the step.
	 * LMPIPE_NO_FUSED_SAMPLE=1 keeps them apart. */
	int pend, no_fused;
	void **sgraph;
	unsigned char *seen_s;
	sample_args *sg_args;
	/* recorded decoding steps (be->graph_begin): graph[N] for N single
	 * tokens; seen[N] counts the steps run unrecorded */
	void **graph;
	unsigned char *seen;
	int no_graphs;         /* set by LMPIPE_NO_GRAPHS, or after a failed recording */
	/* A step of one token as one kernel (be->decode_step,
	 * kernels/decode_step.h), for the plain architecture (SwiGLU, no
	 * QK-norm, no soft-capping): its arguments, and the two words of its
	 * barrier (backend memory).  NULL where it does not apply or with
	 * LMPIPE_NO_STEP_KERNEL=1 in the environment: the ops. */
	decode_step_args *step;
	unsigned *step_sync;
	int max_threads, threads; /* the caller's thread count; the one set now */
	double work;           /* multiply-adds per thread: MODEL_DECODE_WORK, or the
				* environment's LMPIPE_DECODE_WORK (tests lower it) */
	/* A prefill chunk made only of whole prompts, each from position 0,
	 * attends through training's attention (be->attn_qkv_fwd: the flash
	 * kernels on CUDA) on the packed q/k/v rows, one call per run of
	 * prompts of one length (a feed's inputs are taken by length, so that
	 * such prompts sit together), after decode_qkv has stored the keys and
	 * values in the cache, instead of each token reading its prefix from
	 * the cache.  Set where the backend has the op, the key/value heads are
	 * the query heads and there is no QK-norm, unless
	 * LMPIPE_PREFILL_FLASH=0; supports() is asked per length. */
	int prefill_flash;
	float *lse;            /* [MODEL_DECODE_CHUNK][H]: the op's log-sum-exps (unused) */
	long flash_chunks;     /* chunks that went that way (tests) */
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
