/* model.h: the CS336 decoder-only transformer (a Llama without biases),
 * forward and backward by hand, written once against the op table of
 * backend.h.
 *
 *   token embedding -> L x [x += Wo attn(rope(RMSNorm(x) Wqkv));
 *                           x += Wdown swiglu(RMSNorm(x) Wgate|up)]
 *   -> RMSNorm -> LM head (its own matrix, or the embedding when tied)
 *
 * Parameters live in one flat buffer in a fixed order (model_tensors gives
 * every tensor's Hugging Face LlamaForCausalLM name, shape and offset);
 * gradients in a second buffer of the same layout.  q/k/v projections are
 * stored contiguously ([3C, C], one matmul) and so are gate/up ([2F, C]);
 * each is still its own named tensor.  RoPE pairs halves (see rope.h), as
 * Hugging Face does, so checkpoints need no permutation. */
#ifndef LMPIPE_MODEL_H
#define LMPIPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng_stream.h"
#include "model/backend.h"

typedef struct model_config {
	int vocab, ctx, d_model, n_layers, n_heads, d_ff;
	double rope_theta;
	int tie_embeddings;
} model_config;

typedef struct model_preset {
	const char *name, *about;
	model_config cfg;
} model_preset;

extern const model_preset model_presets[]; /* ends with name == NULL */
const model_preset *model_preset_find(const char *name);

/* 0 if the shape is usable, else -1 with a usage error naming the fault. */
int model_config_check(const model_config *c, lm_err *e);
size_t model_n_params(const model_config *c);

enum { MODEL_NAME_MAX = 80 };

typedef struct model_tensor {
	char name[MODEL_NAME_MAX];
	size_t offset, numel;     /* in floats, into the parameter buffer */
	int rows, cols;           /* cols == 0: a vector of rows elements */
	int decay;                /* 1: weight decay applies (matrices) */
} model_tensor;

/* The named tensors, in buffer order.  Returns the count; *out is malloc'd. */
int model_tensors(const model_config *c, model_tensor **out);

typedef struct layer_ptrs {
	float *ln1, *wqkv, *wo, *ln2, *wgu, *wdown;
} layer_ptrs;

typedef struct model {
	model_config cfg;
	const lm_backend *be;
	size_t n_params;
	float *params, *grads;          /* backend memory, n_params each */
	layer_ptrs *lp, *lg;            /* per layer, into params / grads */
	float *wte, *lnf, *head;        /* head == wte when tied */
	float *dwte, *dlnf, *dhead;
	float *rope_cs;                 /* [ctx, D/2, 2] */
	int maxB, maxT, B, T;           /* activation capacity, and last forward */
	struct model_acts *a;
} model;

/* Allocate parameters (uninitialised: call model_init_weights or
 * ckpt_load), gradients (zero) and activations for batches up to maxB x maxT
 * (maxT <= ctx).  Returns 0 or -1 with a message. */
int model_init(model *m, const model_config *c, const lm_backend *be, int maxB, int maxT,
	       lm_err *e);
void model_free(model *m);

/* CS336 initialisation: matrices N(0, 2/(in+out)) truncated at 3 sigma,
 * embedding N(0, 1) truncated at 3 (N(0, 1/d_model) when tied to the LM
 * head, so that the first logits are not huge), RMSNorm gains 1. */
int model_init_weights(model *m, lm_rng *r, lm_err *e);

/* Forward pass on ids[B*T] (host memory; ids are checked against the
 * vocabulary).  With targets (host, negative = ignore) it returns the mean
 * loss over the counted targets in *loss; logits stay available through
 * model_logits until the next forward or backward.  Returns 0 or -1. */
int model_forward(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		  double *loss, lm_err *e);
/* Backward pass after a forward with targets: ACCUMULATES into m->grads
 * the gradient of (loss_scale * sum of token losses).  Use
 * 1 / (counted targets * accumulation steps) for a mean.  Destroys the
 * logits. */
int model_backward(model *m, float loss_scale, lm_err *e);
/* Device pointer to the logits [B*T, V] of the last forward. */
const float *model_logits(const model *m);
/* Device pointer to the final hidden states [B*T, d_model] of the last
 * forward: the residual stream after the final RMSNorm, the LM head's
 * input (a value head reads it; rl_backward.h feeds its gradient back). */
const float *model_hidden(const model *m);
/* Number of targets >= 0 in the last forward. */
long long model_count(const model *m);

void model_zero_grad(model *m);

#endif
