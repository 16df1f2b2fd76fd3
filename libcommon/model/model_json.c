/* model_json.c: model configs as JSON files (see model_json.h): the lmpipe
 * keys (the checkpoint's metadata names), strictly checked, and the Hugging
 * Face import, which ignores the keys that do not change the model and
 * refuses those whose value lmpipe cannot run. */
#include "model/model_json.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rope.h"

typedef enum key_type { K_INT, K_REAL, K_BOOL, K_MLP } key_type;

typedef struct key_def {
	const char *key;
	key_type type;
	size_t off;        /* in model_config */
	int required;
} key_def;

#define KEY(name, type, field, req) { name, type, offsetof(model_config, field), req }
static const key_def KEYS[] = {
	KEY("vocab_size", K_INT, vocab, 1),
	KEY("context_length", K_INT, ctx, 1),
	KEY("d_model", K_INT, d_model, 1),
	KEY("num_layers", K_INT, n_layers, 1),
	KEY("num_heads", K_INT, n_heads, 1),
	KEY("num_kv_heads", K_INT, n_kv_heads, 0),
	KEY("d_ff", K_INT, d_ff, 1),
	KEY("rope_theta", K_REAL, rope_theta, 0),
	KEY("tie_embeddings", K_BOOL, tie_embeddings, 0),
	KEY("qk_norm", K_BOOL, qk_norm, 0),
	KEY("mlp", K_MLP, mlp, 0),
	KEY("logit_softcap", K_REAL, softcap, 0),
	KEY("z_loss", K_REAL, z_loss, 0),
	KEY("norm_eps", K_REAL, norm_eps, 0),
};
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0], INT_MAX_VALUE = 1 << 30 };

static void *at(model_config *c, const key_def *k) { return (char *)c + k->off; }

/* Store v under k; a usage error naming path and key when it is not of k's
 * type. */
static int set_key(model_config *c, const key_def *k, json_t *v, const char *path, lm_err *e)
{
	switch (k->type) {
	case K_INT:
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > INT_MAX_VALUE)
			return lm_usage_err(e, "%s: '%s' must be an integer in [0, %d]", path, k->key,
					    INT_MAX_VALUE);
		*(int *)at(c, k) = (int)json_integer_value(v);
		return 0;
	case K_REAL:
		if (!json_is_number(v))
			return lm_usage_err(e, "%s: '%s' must be a number", path, k->key);
		*(double *)at(c, k) = json_number_value(v);
		return 0;
	case K_BOOL:
		if (!json_is_boolean(v))
			return lm_usage_err(e, "%s: '%s' must be true or false", path, k->key);
		*(int *)at(c, k) = json_is_true(v);
		return 0;
	case K_MLP: {
		int m = json_is_string(v) ? model_mlp_parse(json_string_value(v)) : -1;
		if (m < 0)
			return lm_usage_err(e, "%s: unknown mlp variant %s%s%s (swiglu or relu2)", path,
					    json_is_string(v) ? "'" : "",
					    json_is_string(v) ? json_string_value(v) : "(not a string)",
					    json_is_string(v) ? "'" : "");
		c->mlp = m;
		return 0;
	}
	}
	return 0;
}

static int load_lmpipe(json_t *j, const char *path, model_config *c, lm_err *e)
{
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		const key_def *k = NULL;
		for (int i = 0; i < N_KEYS && !k; i++)
			k = !strcmp(KEYS[i].key, key) ? &KEYS[i] : NULL;
		if (!k)
			return lm_usage_err(e, "%s: unknown config key '%s' (see lmpipe-model-config(5))",
					    path, key);
		if (set_key(c, k, v, path, e))
			return -1;
	}
	for (int i = 0; i < N_KEYS; i++)
		if (KEYS[i].required && !json_object_get(j, KEYS[i].key))
			return lm_usage_err(e, "%s: the required key '%s' is missing", path, KEYS[i].key);
	return 0;
}

/* An integer field of a Hugging Face config; absent: *out stays when
 * optional, else an error. */
static int hf_int(json_t *j, const char *key, int *out, int optional, const char *path, lm_err *e)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v)) {
		if (optional)
			return 0;
		return lm_usage_err(e, "%s: the Hugging Face field '%s' is missing", path, key);
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT_MAX_VALUE)
		return lm_usage_err(e, "%s: the Hugging Face field '%s' must be a positive integer",
				    path, key);
	*out = (int)json_integer_value(v);
	return 0;
}

static int hf_real(json_t *j, const char *key, double *out, const char *path, lm_err *e)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return lm_usage_err(e, "%s: the Hugging Face field '%s' must be a number", path, key);
	*out = json_number_value(v);
	return 0;
}

/* A field that must be absent, null, false or 0: a value lmpipe cannot
 * express otherwise. */
static int hf_unset(json_t *j, const char *key, const char *why, const char *path, lm_err *e)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v) || json_is_false(v) || (json_is_integer(v) && !json_integer_value(v)))
		return 0;
	return lm_usage_err(e, "%s: the Hugging Face field '%s' is set; lmpipe has no %s", path, key,
			    why);
}

static int load_hf(json_t *j, const char *path, model_config *c, lm_err *e)
{
	json_t *arch = json_object_get(j, "architectures"), *type = json_object_get(j, "model_type");
	const char *a = json_is_array(arch) && json_array_size(arch) == 1 &&
				json_is_string(json_array_get(arch, 0))
				? json_string_value(json_array_get(arch, 0)) : NULL;
	const char *t = json_is_string(type) ? json_string_value(type) : NULL;
	int qwen = (a && !strcmp(a, "Qwen3ForCausalLM")) || (t && !strcmp(t, "qwen3"));
	int llama = (a && !strcmp(a, "LlamaForCausalLM")) || (t && !strcmp(t, "llama"));
	if (arch && !a)
		return lm_usage_err(e, "%s: the Hugging Face field 'architectures' must list one class",
				    path);
	if ((a && strcmp(a, "LlamaForCausalLM") && strcmp(a, "Qwen3ForCausalLM")) ||
	    (t && strcmp(t, "llama") && strcmp(t, "qwen3")) || (qwen && llama))
		return lm_usage_err(e, "%s: the Hugging Face field '%s' is %s; lmpipe imports "
				    "LlamaForCausalLM (llama) and Qwen3ForCausalLM (qwen3)", path,
				    a && strcmp(a, "LlamaForCausalLM") && strcmp(a, "Qwen3ForCausalLM")
				    ? "architectures" : "model_type", a && strcmp(a, "LlamaForCausalLM") &&
				    strcmp(a, "Qwen3ForCausalLM") ? a : t);
	json_t *act = json_object_get(j, "hidden_act");
	if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu")))
		return lm_usage_err(e, "%s: the Hugging Face field 'hidden_act' is %s%s%s; lmpipe's "
				    "gated MLP is silu (SwiGLU)", path, json_is_string(act) ? "'" : "",
				    json_is_string(act) ? json_string_value(act) : "not a string",
				    json_is_string(act) ? "'" : "");
	json_t *rp = json_object_get(j, "rope_parameters");
	json_t *rtype = json_is_object(rp) ? json_object_get(rp, "rope_type") : NULL;
	if (rtype && !(json_is_string(rtype) && !strcmp(json_string_value(rtype), "default")))
		return lm_usage_err(e, "%s: the Hugging Face field 'rope_parameters.rope_type' is not "
				    "'default'; lmpipe has no RoPE scaling", path);
	if (hf_unset(j, "rope_scaling", "RoPE scaling", path, e) ||
	    hf_unset(j, "attention_bias", "attention biases", path, e) ||
	    hf_unset(j, "mlp_bias", "MLP biases", path, e) ||
	    hf_unset(j, "use_sliding_window", "sliding-window attention", path, e))
		return -1;
	c->rope_theta = ROPE_THETA_DEFAULT;
	c->norm_eps = 1e-6; /* LlamaConfig's and Qwen3Config's default */
	int head_dim = 0;
	if (hf_int(j, "vocab_size", &c->vocab, 0, path, e) ||
	    hf_int(j, "hidden_size", &c->d_model, 0, path, e) ||
	    hf_int(j, "num_hidden_layers", &c->n_layers, 0, path, e) ||
	    hf_int(j, "num_attention_heads", &c->n_heads, 0, path, e) ||
	    hf_int(j, "intermediate_size", &c->d_ff, 0, path, e) ||
	    hf_int(j, "max_position_embeddings", &c->ctx, 0, path, e) ||
	    hf_int(j, "num_key_value_heads", &c->n_kv_heads, 1, path, e) ||
	    hf_int(j, "head_dim", &head_dim, 1, path, e) ||
	    hf_real(j, "rope_theta", &c->rope_theta, path, e) ||
	    (json_is_object(rp) && hf_real(rp, "rope_theta", &c->rope_theta, path, e)) ||
	    hf_real(j, "rms_norm_eps", &c->norm_eps, path, e))
		return -1;
	if (head_dim && head_dim * c->n_heads != c->d_model)
		return lm_usage_err(e, "%s: the Hugging Face field 'head_dim' is %d, not hidden_size / "
				    "num_attention_heads (%d); lmpipe's heads split d_model", path,
				    head_dim, c->d_model / c->n_heads);
	json_t *tie = json_object_get(j, "tie_word_embeddings");
	if (tie && !json_is_boolean(tie))
		return lm_usage_err(e, "%s: the Hugging Face field 'tie_word_embeddings' must be true "
				    "or false", path);
	c->tie_embeddings = tie && json_is_true(tie);
	c->qk_norm = qwen;
	return 0;
}

int model_config_load(const char *path, model_config *c, lm_err *e)
{
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		if (je.line < 1) /* not read at all: a runtime error, as any unreadable input */
			return lm_seterr(e, "%s: %s", path, je.text);
		return lm_usage_err(e, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	}
	memset(c, 0, sizeof *c);
	c->rope_theta = ROPE_THETA_DEFAULT;
	int rc;
	if (!json_is_object(j))
		rc = lm_usage_err(e, "%s: a model config is a JSON object", path);
	else if (json_object_get(j, "architectures") || json_object_get(j, "model_type"))
		rc = load_hf(j, path, c, e);
	else
		rc = load_lmpipe(j, path, c, e);
	json_decref(j);
	if (!rc && model_config_check(c, e))
		rc = lm_err_prefix(e, "%s", path);
	return rc;
}

static json_t *config_object(const model_config *c0)
{
	model_config c = *c0;
	model_config_resolve(&c);
	json_t *j = json_object();
	for (int i = 0; j && i < N_KEYS; i++) {
		const key_def *k = &KEYS[i];
		void *p = at(&c, k);
		json_t *v = k->type == K_INT ? json_integer(*(int *)p)
			  : k->type == K_REAL ? json_real(*(double *)p)
			  : k->type == K_BOOL ? json_boolean(*(int *)p)
			  : json_string(model_mlp_name(c.mlp));
		json_object_set_new(j, k->key, v);
	}
	return j;
}

/* 15 digits: the decimal a person wrote comes back as written (1e-05, not
 * 1.0000000000000001e-05). */
static char *dump(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) : NULL;
	json_decref(j);
	return s;
}

char *model_config_json(const model_config *c)
{
	return dump(config_object(c));
}

char *model_preset_json(const model_preset *p)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:o}", "name", p->name, "about", p->about,
			      "parameters", (json_int_t)model_n_params(&p->cfg), "config",
			      config_object(&p->cfg));
	return dump(j);
}
