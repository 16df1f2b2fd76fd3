/* model_config.c: model shapes: the named presets, the consistency checks,
 * and the table of named tensors (Hugging Face LlamaForCausalLM names) that
 * fixes the order of the flat parameter buffer. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rope.h"

const model_preset model_presets[] = {
	{ "tiny", "about 25K parameters, for tests",
	  { 64, 32, 32, 2, 4, 64, ROPE_THETA_DEFAULT, 0 } },
	{ "s5m", "about 5M parameters (d=256, L=4, H=8, T=256), the CPU benchmark",
	  { 4096, 256, 256, 4, 8, 688, ROPE_THETA_DEFAULT, 0 } },
	{ "ts", "CS336 TinyStories model (about 23M parameters)",
	  { 10000, 256, 512, 4, 16, 1344, ROPE_THETA_DEFAULT, 0 } },
	{ "gpt2s", "GPT-2 small shape, Llama-style (about 163M parameters)",
	  { 50304, 1024, 768, 12, 12, 2048, ROPE_THETA_DEFAULT, 0 } },
	{ NULL, NULL, { 0 } },
};

enum { DIM_MAX = 1 << 20 };

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
	return 0;
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
	enum { PER_LAYER = 9, GLOBAL = 3 };
	int C = c->d_model, F = c->d_ff, n = 0;
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
			add(t, &n, &off, name, C, C, 1);
		}
		add(t, &n, &off, LNAME("self_attn.o_proj.weight"), C, C, 1);
		add(t, &n, &off, LNAME("post_attention_layernorm.weight"), C, 0, 0);
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
	size_t C = c->d_model, F = c->d_ff, V = c->vocab;
	size_t layer = 2 * C + 4 * C * C + 3 * C * F;
	return V * C * (c->tie_embeddings ? 1 : 2) + c->n_layers * layer + C;
}
