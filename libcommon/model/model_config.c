/* model_config.c: model shapes: the named presets, the consistency checks,
 * and the table of named tensors (Hugging Face LlamaForCausalLM names) that
 * fixes the order of the flat parameter buffer, with the variants' shapes
 * and checks. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rope.h"

const model_preset model_presets[] = {
	{ "tiny", "about 25K parameters, for tests",
	  { 64, 32, 32, 2, 4, 64, ROPE_THETA_DEFAULT, 0, MODEL_PLAIN } },
	{ "s5m", "about 5M parameters (d=256, L=4, H=8, T=256), the CPU benchmark",
	  { 4096, 256, 256, 4, 8, 688, ROPE_THETA_DEFAULT, 0, MODEL_PLAIN } },
	{ "ts", "CS336 TinyStories model (about 23M parameters)",
	  { 10000, 256, 512, 4, 16, 1344, ROPE_THETA_DEFAULT, 0, MODEL_PLAIN } },
	{ "gpt2s", "GPT-2 small shape, Llama-style (about 163M parameters)",
	  { 50304, 1024, 768, 12, 12, 2048, ROPE_THETA_DEFAULT, 0, MODEL_PLAIN } },
	{ NULL, NULL, { 0 } },
};

enum { DIM_MAX = 1 << 20 };
/* Bounds of the variants' values: beyond them a value is a typo. */
static const double SOFTCAP_MAX = 1e6, Z_LOSS_MAX = 1.0, NORM_EPS_MAX = 0.1;

const model_preset *model_preset_find(const char *name)
{
	for (const model_preset *p = model_presets; p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

int model_config_check(const model_config *c, lm_err *e)
{
	const struct { const char *what; int v; } dims[] = {
		{ "vocabulary size", c->vocab }, { "context length", c->ctx },
		{ "d_model", c->d_model }, { "number of layers", c->n_layers },
		{ "number of heads", c->n_heads }, { "d_ff", c->d_ff },
	};
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
		if (dims[i].v < 1 || dims[i].v > DIM_MAX)
			return lm_usage_err(e, "%s %d is out of range [1, %d]",
					    dims[i].what, dims[i].v, DIM_MAX);
	if (c->d_model % c->n_heads)
		return lm_usage_err(e, "d_model %d is not divisible by the number of heads %d",
				    c->d_model, c->n_heads);
	if ((c->d_model / c->n_heads) % 2)
		return lm_usage_err(e, "head dimension %d (d_model / heads) is odd; RoPE needs it even",
				    c->d_model / c->n_heads);
	if (!(c->rope_theta > 1.0))
		return lm_usage_err(e, "RoPE theta %g must be greater than 1", c->rope_theta);
	int kv = model_kv_heads(c);
	if (kv < 1 || kv > c->n_heads || c->n_heads % kv)
		return lm_usage_err(e, "the number of heads %d is not divisible by n_kv_heads %d",
				    c->n_heads, kv);
	if (c->qk_norm != 0 && c->qk_norm != 1)
		return lm_usage_err(e, "qk_norm %d is neither 0 nor 1", c->qk_norm);
	if (!model_mlp_name(c->mlp))
		return lm_usage_err(e, "unknown mlp variant %d", c->mlp);
	if (!(c->softcap >= 0 && c->softcap <= SOFTCAP_MAX))
		return lm_usage_err(e, "logit_softcap %g is out of range [0, %g] (0: off)", c->softcap,
				    SOFTCAP_MAX);
	if (!(c->z_loss >= 0 && c->z_loss <= Z_LOSS_MAX))
		return lm_usage_err(e, "z_loss %g is out of range [0, %g] (0: off)", c->z_loss,
				    Z_LOSS_MAX);
	if (!(c->norm_eps >= 0 && c->norm_eps <= NORM_EPS_MAX))
		return lm_usage_err(e, "norm_eps %g is out of range (0, %g]", c->norm_eps, NORM_EPS_MAX);
	return 0;
}

void model_config_resolve(model_config *c)
{
	c->n_kv_heads = model_kv_heads(c);
	c->norm_eps = model_norm_eps(c);
	c->tie_embeddings = c->tie_embeddings != 0;
}

int model_config_is_plain(const model_config *c)
{
	return model_kv_heads(c) == c->n_heads && !c->qk_norm && c->mlp == MODEL_MLP_SWIGLU &&
	       c->softcap == 0 && c->z_loss == 0 && model_norm_eps(c) == MODEL_NORM_EPS_DEFAULT;
}

int model_config_same(const model_config *a0, const model_config *b0)
{
	model_config a = *a0, b = *b0;
	model_config_resolve(&a);
	model_config_resolve(&b);
	return a.vocab == b.vocab && a.ctx == b.ctx && a.d_model == b.d_model &&
	       a.n_layers == b.n_layers && a.n_heads == b.n_heads && a.d_ff == b.d_ff &&
	       a.rope_theta == b.rope_theta && a.tie_embeddings == b.tie_embeddings &&
	       a.n_kv_heads == b.n_kv_heads && a.qk_norm == b.qk_norm && a.mlp == b.mlp &&
	       a.softcap == b.softcap && a.z_loss == b.z_loss && a.norm_eps == b.norm_eps;
}

const char *const model_mlp_names[] = { [MODEL_MLP_SWIGLU] = "swiglu", [MODEL_MLP_RELU2] = "relu2",
					 NULL };
enum { N_MLP = sizeof model_mlp_names / sizeof model_mlp_names[0] - 1 };

const char *model_mlp_name(int mlp)
{
	return mlp >= 0 && mlp < N_MLP ? model_mlp_names[mlp] : NULL;
}

int model_mlp_parse(const char *name)
{
	for (int i = 0; i < N_MLP; i++)
		if (!strcmp(name, model_mlp_names[i]))
			return i;
	return -1;
}

static void add(model_tensor *t, int *n, size_t *off, const char *name, int rows, int cols,
		int decay)
{
	model_tensor *x = &t[(*n)++];
	snprintf(x->name, sizeof x->name, "%s", name);
	x->offset = *off;
	x->rows = rows;
	x->cols = cols;
	x->numel = (size_t)rows * (cols ? cols : 1);
	x->decay = decay;
	*off += x->numel;
}

int model_tensors(const model_config *c, model_tensor **out)
{
	enum { PER_LAYER = 11, GLOBAL = 3 };
	int C = c->d_model, F = c->d_ff, n = 0;
	int D = C / c->n_heads, KV = model_kv_heads(c) * D;
	size_t off = 0;
	char name[MODEL_NAME_MAX];
	model_tensor *t = calloc((size_t)c->n_layers * PER_LAYER + GLOBAL, sizeof *t);
	if (!t)
		return -1;
	add(t, &n, &off, "model.embed_tokens.weight", c->vocab, C, 1);
	for (int l = 0; l < c->n_layers; l++) {
		static const char *const qkv[] = { "q_proj", "k_proj", "v_proj" };
#define LNAME(fmt) (snprintf(name, sizeof name, "model.layers.%d." fmt, l), name)
		add(t, &n, &off, LNAME("input_layernorm.weight"), C, 0, 0);
		for (int i = 0; i < 3; i++) {
			snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, qkv[i]);
			add(t, &n, &off, name, i ? KV : C, C, 1);
		}
		if (c->qk_norm) {
			add(t, &n, &off, LNAME("self_attn.q_norm.weight"), D, 0, 0);
			add(t, &n, &off, LNAME("self_attn.k_norm.weight"), D, 0, 0);
		}
		add(t, &n, &off, LNAME("self_attn.o_proj.weight"), C, C, 1);
		add(t, &n, &off, LNAME("post_attention_layernorm.weight"), C, 0, 0);
		if (c->mlp != MODEL_MLP_RELU2)
			add(t, &n, &off, LNAME("mlp.gate_proj.weight"), F, C, 1);
		add(t, &n, &off, LNAME("mlp.up_proj.weight"), F, C, 1);
		add(t, &n, &off, LNAME("mlp.down_proj.weight"), C, F, 1);
#undef LNAME
	}
	add(t, &n, &off, "model.norm.weight", C, 0, 0);
	if (!c->tie_embeddings)
		add(t, &n, &off, "lm_head.weight", c->vocab, C, 1);
	*out = t;
	return n;
}

size_t model_n_params(const model_config *c)
{
	size_t C = c->d_model, F = c->d_ff, V = c->vocab, D = C / c->n_heads;
	size_t layer = 2 * C + (size_t)model_qkv_rows(c) * C + C * C +
		       ((size_t)model_gu_rows(c) + F) * C + (c->qk_norm ? 2 * D : 0);
	return V * C * (c->tie_embeddings ? 1 : 2) + c->n_layers * layer + C;
}
