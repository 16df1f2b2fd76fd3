/* model_json.h: model configs as JSON (man 5 lmpipe-model-config): lmpipe's
 * own files, the presets printed as such, and the import of a Hugging Face
 * config.json (LlamaForCausalLM, Qwen3ForCausalLM) for the shapes it
 * expresses. */
#ifndef LMPIPE_MODEL_JSON_H
#define LMPIPE_MODEL_JSON_H

#include "base/err.h"
#include "model/model.h"

/* Read a config file into *c: an lmpipe config, or a Hugging Face
 * config.json (a file with "architectures" or "model_type").  Every failure
 * is a usage error (exit 2) naming the file: a syntax error with its line
 * and column, an unknown key or variant, a value of the wrong type or out
 * of range, a Hugging Face field lmpipe cannot express (rope_scaling set,
 * attention_bias true, a hidden_act other than silu, ...); the result passes
 * model_config_check. */
int model_config_load(const char *path, model_config *c, lm_err *e);

/* *c as an lmpipe config, compact JSON, malloc'd (NULL: out of memory). */
char *model_config_json(const model_config *c);
/* A preset as one JSON line's object: {"name", "about", "parameters",
 * "config": its lmpipe config}, malloc'd. */
char *model_preset_json(const model_preset *p);

#endif
