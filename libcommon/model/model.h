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
 * stored contiguously ([C + 2 kv D, C], one matmul) and so are gate/up
 * ([2F, C]); each is still its own named tensor.  The variants (GQA,
 * QK-norm, ReLU^2, soft-capping, z-loss) are model_config's fields below.
 * RoPE pairs halves (see rope.h), as Hugging Face does, so checkpoints
 * need no permutation. */
#ifndef LMPIPE_MODEL_H
#define LMPIPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng_stream.h"
#include "model/backend.h"

/* The MLP of a block: SwiGLU (gate and up, HF gate_proj/up_proj) or the
 * squared ReLU (up and down only: down(relu(up x)^2)). */
typedef enum model_mlp { MODEL_MLP_SWIGLU = 0, MODEL_MLP_RELU2 = 1 } model_mlp;

/* A model's shape and variant (man 5 lmpipe-model-config).  A field after
 * tie_embeddings left 0 is its default, so a config written positionally
 * with the first eight fields is the plain model:
 *   n_kv_heads  key/value heads of grouped-query attention (0: n_heads);
 *               the q/k/v projection is [C + 2 n_kv_heads D, C]
 *   qk_norm     1: RMSNorm of each head of q and k (gains of D, Qwen3's
 *               q_norm/k_norm) before RoPE
 *   mlp         model_mlp
 *   softcap     logits = softcap tanh(logits / softcap) (0: off)
 *   z_loss      the training objective adds z_loss lse^2 per counted token
 *               (0: off); the losses reported stay the cross-entropy
 *   norm_eps    every RMSNorm's epsilon (0: 1e-5) */
typedef struct model_config {
	int vocab, ctx, d_model, n_layers, n_heads, d_ff;
	double rope_theta;
	int tie_embeddings;
	int n_kv_heads, qk_norm, mlp;
	double softcap, z_loss, norm_eps;
} model_config;

#define MODEL_NORM_EPS_DEFAULT 1e-5
/* The variant fields of the plain model, to end a positional initialiser:
 * { vocab, ctx, d, L, H, d_ff, theta, tied, MODEL_PLAIN }. */
#define MODEL_PLAIN 0, 0, MODEL_MLP_SWIGLU, 0.0, 0.0, 0.0

static inline int model_kv_heads(const model_config *c)
{
	return c->n_kv_heads ? c->n_kv_heads : c->n_heads;
}

static inline double model_norm_eps(const model_config *c)
{
	return c->norm_eps > 0 ? c->norm_eps : MODEL_NORM_EPS_DEFAULT;
}

/* Rows of the fused q/k/v projection: C + 2 n_kv_heads D. */
static inline int model_qkv_rows(const model_config *c)
{
	return c->d_model + 2 * model_kv_heads(c) * (c->d_model / c->n_heads);
}

/* Rows of the fused first MLP projection: 2 d_ff (SwiGLU) or d_ff. */
static inline int model_gu_rows(const model_config *c)
{
	return c->mlp == MODEL_MLP_RELU2 ? c->d_ff : 2 * c->d_ff;
}

/* The defaults filled in (n_kv_heads and norm_eps set), so that two
 * configs of the same model compare equal field by field. */
void model_config_resolve(model_config *c);
/* 1 if no variant is set: the Llama of CS336. */
int model_config_is_plain(const model_config *c);
/* 1 if a and b describe the same model. */
int model_config_same(const model_config *a, const model_config *b);
/* The names of the MLPs by model_mlp, NULL-terminated; a name and back
 * (-1: unknown). */
extern const char *const model_mlp_names[];
const char *model_mlp_name(int mlp);
int model_mlp_parse(const char *name);

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
	float *q_norm, *k_norm;         /* [D] each; NULL without qk_norm */
} layer_ptrs;

/* The compute copy of a layer's matrices, in the backend's act type. */
typedef struct layer_cptrs {
	void *wqkv, *wo, *wgu, *wdown;
} layer_cptrs;

typedef struct model {
	model_config cfg;
	lm_backend *be;                 /* not owned */
	size_t n_params;
	float *params, *grads;          /* backend memory, n_params each (fp32);
					 * grads NULL with MODEL_NO_GRADS */
	void *wact;                     /* the compute copy of params in be->act
					 * (params itself when act is fp32) */
	layer_ptrs *lp, *lg;            /* per layer, into params / grads */
	layer_cptrs *lc;                /* per layer, into wact */
	float *wte, *lnf, *head;        /* head == wte when tied */
	float *dwte, *dlnf, *dhead;
	void *head_c;                   /* the LM head in wact */
	float *rope_cs;                 /* [ctx, D/2, 2] */
	lm_scalars *sc;                 /* device scalars of the step (backend.h) */
	lm_scalars snap[LM_SNAP_SLOTS]; /* model_queue_scalars' copies, where the backend has no snap */
	int maxB, maxT, B, T;           /* activation capacity, and last forward */
	/* Called (when set) during model_backward as soon as a part's gradients
	 * are final: layer l = L-1 .. 0 after its block, -1 after the embedding
	 * (the final norm and an untied head are final before layer L-1's call).
	 * A data-parallel layer starts its all-reduce of those gradients here. */
	void (*grad_ready)(void *arg, int layer);
	void *grad_ready_arg;
	struct model_acts *a;
} model;

/* Allocate parameters (uninitialised: call model_init_weights or
 * ckpt_load), gradients (zero) and activations for batches up to maxB x maxT
 * (maxT <= ctx).  Returns 0 or -1 with a message. */
int model_init(model *m, const model_config *c, lm_backend *be, int maxB, int maxT,
	       lm_err *e);
/* model_init with flags: MODEL_NO_GRADS leaves out the gradient buffer
 * (m->grads NULL; model_zero_grad does nothing), for a caller that points
 * the gradients into buffers of its own, part by part, before each
 * backward pass (model_grads_at; ZeRO-2 in dist/ddp.h). */
enum { MODEL_NO_GRADS = 1 };
int model_init_ex(model *m, const model_config *c, lm_backend *be, int maxB, int maxT,
		  int flags, lm_err *e);
/* The gradients of the parameters [a, b) of the flat buffer to buf
 * (buf[i - a] is parameter i's; the backward pass accumulates there): a
 * and b are boundaries of the layout's parts (0, a layer's first
 * parameter, the final norm's, n_params).  With tied embeddings the LM
 * head's gradient is the embedding's wherever that one is. */
void model_grads_at(model *m, size_t a, size_t b, float *buf);
void model_free(model *m);

/* CS336 initialisation: matrices N(0, 2/(in+out)) truncated at 3 sigma,
 * embedding N(0, 1) truncated at 3 (N(0, 1/d_model) when tied to the LM
 * head, so that the first logits are not huge), RMSNorm gains 1. */
int model_init_weights(model *m, lm_rng *r, lm_err *e);
/* After m->params changed behind the optimizer's back (a checkpoint load,
 * an upload): refresh the compute copy. */
void model_params_changed(model *m);

/* Forward pass on ids[B*T] (host memory; ids are checked against the
 * vocabulary).  With targets (host, negative = ignore) the counted tokens'
 * losses are added to the device scalar m->sc->loss_sum; with loss not
 * NULL the sum is reset first and *loss is the mean loss of this batch
 * (which waits for the device).  Logits stay available until the next
 * forward or backward.  Returns 0 or -1. */
int model_forward(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		  double *loss, lm_err *e);

/* The training forward pass: as model_forward with targets, but the LM
 * head and the cross-entropy are one op in chunks (backend.h head_xent),
 * so the [B*T, V] logits never exist, and with grad set their backward
 * pass is done here too, for the gradient of grad_scale * (sum of the
 * counted tokens' losses) (model_backward then does the rest, and its
 * scale must be the same).  The losses are added to m->sc->loss_sum; no
 * logits are available afterwards.  Returns 0 or -1. */
int model_forward_loss(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		       float grad_scale, int grad, lm_err *e);

/* model_forward_loss in two halves, for a step recorded once and replayed
 * (a CUDA graph): model_stage checks the batch, counts its targets and
 * uploads ids and targets into the model's buffers; then
 * model_forward_loss_staged queues the rest, the same launches whatever
 * the batch. */
int model_stage(model *m, const int32_t *ids, const int32_t *targets, int B, int T, lm_err *e);
int model_forward_loss_staged(model *m, float grad_scale, int grad, lm_err *e);

/* What the loss of model_backward_ex is, per token t of the last forward:
 * scale * weights[t] * CE_t (weights NULL: all 1), plus the terms whose
 * gradients are dentropy ([B*T], d loss / d H_t of the entropy of the
 * token's softmax, as model_token_logp reads it), dlogits ([B*T, vocab],
 * d loss / d logits) and dhidden ([B*T, d_model], d loss / d
 * model_hidden).  All host memory; the pointers may be NULL.
 * Variants: the logits are the soft-capped ones, and dlogits and dentropy
 * are with respect to them (with soft-capping, one of the two at a time);
 * the z-loss's z lse_t^2 joins CE_t only without weights (a weighted,
 * RL, objective gets none).  weights_dev, dhidden_dev, dentropy_dev: the
 * same already in the backend's memory (rl-update computes them there),
 * used instead of weights, dhidden and dentropy. */
typedef struct model_grad_in {
	float scale;
	const float *weights, *dlogits, *dhidden;
	const float *dentropy;
	const float *weights_dev, *dhidden_dev, *dentropy_dev;
} model_grad_in;

/* Backward pass after a forward with targets: ACCUMULATES into m->grads
 * the gradient of the loss above.  Destroys the logits. */
int model_backward_ex(model *m, const model_grad_in *g, lm_err *e);
/* The same with scale alone: the gradient of (loss_scale * sum of token
 * losses).  Use 1 / (counted targets * accumulation steps) for a mean. */
int model_backward(model *m, float loss_scale, lm_err *e);

/* Device pointer to the logits [B*T, V] of the last forward, in be->act. */
const void *model_logits(const model *m);
/* Device pointer to the final hidden states [B*T, d_model] of the last
 * forward, in be->act: the residual stream after the final RMSNorm, the LM
 * head's input (a value head reads it). */
const void *model_hidden(const model *m);
/* The first rows x cols values of those, as fp32 in host memory (waits). */
int model_read_logits(const model *m, float *host, size_t rows, lm_err *e);
int model_read_hidden(const model *m, float *host, size_t rows, lm_err *e);
/* After model_forward with targets: each of the B*T tokens' log-prob of
 * its target (-CE; 0 where the target is negative) into logp, and (ent not
 * NULL) the entropy of its softmax into ent, computed on the device from
 * the logits (backend.h entropy_fwd).  Host memory [B*T] each; waits. */
int model_token_logp(const model *m, float *logp, float *ent, lm_err *e);
/* The same, left on the device for ops to read (be's memory, valid until
 * the next forward or backward): each token's cross-entropy [B*T] (fp32,
 * -logp, 0 where the target is negative), the targets [B*T] (int32), and
 * the entropies [B*T] (fp32, computed now by entropy_fwd; NULL with a
 * message when their buffer cannot be had). */
const float *model_token_ce(const model *m);
const int32_t *model_token_targets(const model *m);
const float *model_token_entropy(const model *m, lm_err *e);
/* Number of targets >= 0 in the last forward. */
long long model_count(const model *m);

/* The step's device scalars, in host memory (waits for the device, and
 * returns the first asynchronous error). */
int model_read_scalars(const model *m, lm_scalars *host, lm_err *e);
/* The same in two halves: a copy of the device scalars queued (into slot
 * 0 or 1) behind the work queued so far, and, later, that copy read: it
 * waits for the work before the copy only, so the next step may be queued
 * in between.  Returns the first asynchronous error, as above. */
void model_queue_scalars(model *m, int slot);
int model_take_scalars(model *m, int slot, lm_scalars *host, lm_err *e);
/* Zero the device loss sum. */
void model_loss_reset(model *m);

void model_zero_grad(model *m);

#endif
