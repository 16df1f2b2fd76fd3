/* model_decode.h: the model's forward pass for generation, with a
 * key/value cache per sequence slot, behind generate.h's lm_decoder.
 *
 * It reuses the weights of a `model` (model.h) and its backend's ops
 * (embedding, RMSNorm, matmuls, RoPE, SwiGLU) on ragged batches: the new
 * tokens of all sequences in one call are stacked into one [N, C] matrix,
 * so prefills of different lengths and single decode steps share every
 * matmul.  Attention against the cache is attn_decode_cpu, called
 * directly: the op table has no cached-attention op yet, so this path is
 * CPU only.  Long inputs go through in chunks of MODEL_DECODE_CHUNK tokens.
 *
 * Cache memory: 2 * layers * slots * n_ctx * d_model floats. */
#ifndef LMPIPE_MODEL_DECODE_H
#define LMPIPE_MODEL_DECODE_H

#include <stdint.h>

#include "err.h"
#include "generate.h"
#include "model.h"

enum { MODEL_DECODE_CHUNK = 256 };

typedef struct model_decoder {
	lm_decoder dec;        /* hand &dec to generate() */
	model *m;
	uint32_t n_slots, n_ctx;
	float *kc, *vc;        /* [L][slot][H][n_ctx][D] */
	uint32_t *len;         /* positions held by each slot */
	/* one chunk's buffers */
	float *x, *xn, *rstd, *qkv, *q, *k, *v, *y, *h, *sw, *cs, *logits;
	int32_t *ids;
	int64_t *pos;
	uint32_t *tok_slot;
	int *tok_len, *last_of;
	const float **kp, **vp;
	float *cs_host;
} model_decoder;

/* Slots and cache length (<= the model's context) for m, whose weights are
 * loaded.  m must outlive md. */
int model_decoder_init(model_decoder *md, model *m, uint32_t n_slots, uint32_t n_ctx, lm_err *e);
void model_decoder_free(model_decoder *md);

#endif
