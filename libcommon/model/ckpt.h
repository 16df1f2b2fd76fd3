/* ckpt.h: training checkpoints and the Hugging Face export (man 5
 * lmpipe-checkpoint).
 *
 * A checkpoint is one safetensors file: every model tensor under its
 * LlamaForCausalLM name (F32, PyTorch layout, RoPE rotate-half so no
 * permutation), the AdamW moments as two flat F32 tensors
 * "optimizer.m"/"optimizer.v" in parameter-buffer order, and __metadata__
 * strings: format=pt, lmpipe.format=checkpoint, lmpipe.version=1 or 2, the model
 * shape and variants (absent in older files: the plain model), and the training state (step, AdamW t, tokens, data position, data
 * seed, RNG), with the CRC-32C of every tensor (safetensors.h).  Files are
 * written whole or not at all.  Reading the shape checks that the file holds
 * every tensor of it, so a program may allocate the model it describes;
 * loading verifies each tensor's checksum (none: a file written before
 * checksums, read as it is). */
#ifndef LMPIPE_CKPT_H
#define LMPIPE_CKPT_H

#include <stdint.h>

#include "base/err.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/safetensors.h"

/* Version 2 adds the variants' metadata; a plain model is still written as
 * version 1 (which older programs read), a variant as 2 (which they
 * refuse rather than misread). */
enum { CKPT_VERSION_PLAIN = 1, CKPT_VERSION = 2 };

typedef struct train_state {
	long long step;      /* optimizer steps completed */
	uint64_t tokens;     /* training tokens consumed */
	uint64_t data_pos;   /* windows the shard reader has handed out */
	uint64_t data_seed;  /* seed of the shard reader */
	lm_rng rng;
	/* More __metadata__ written as given (save only): n_meta key/value
	 * pairs, meta[2i] and meta[2i+1], e.g. the run's hyper-parameters. */
	const char *const *meta;
	size_t n_meta;
} train_state;

/* Save model, optimizer (NULL: weights only) and state (NULL: none). */
int ckpt_save(const char *path, const model *m, const optim *o, const train_state *s,
	      lm_err *e);
/* The same with n_extra more tensors (host memory) stored beside the
 * model's, under names model loading ignores (the PPO value head). */
int ckpt_save_extra(const char *path, const model *m, const optim *o, const train_state *s,
		    const sft_tensor *extra, size_t n_extra, lm_err *e);
/* A __metadata__ string of a checkpoint, malloc'd into *value (NULL when
 * the key is absent). */
int ckpt_read_meta(const char *path, const char *key, char **value, lm_err *e);
/* The model shape stored in a checkpoint. */
int ckpt_read_config(const char *path, model_config *c, lm_err *e);
/* Load into a model of the same shape (checked), and optionally the
 * optimizer state and training state. */
int ckpt_load(const char *path, model *m, optim *o, train_state *s, lm_err *e);
/* The Hugging Face class that expresses a model (LlamaForCausalLM;
 * Qwen3ForCausalLM with QK-norm), or a usage error naming the variant that
 * none does (the ReLU^2 MLP, soft-capping). */
int ckpt_hf_class(const model_config *c, const char **arch, lm_err *e);
/* Write DIR/config.json and DIR/model.safetensors for
 * transformers.AutoModelForCausalLM.from_pretrained(DIR) (ckpt_hf_class
 * first: nothing is written for a model no class expresses). */
int ckpt_export_hf(const char *dir, const model *m, lm_err *e);
/* Point DIR/latest at the file name (a symlink, replaced atomically). */
int ckpt_set_latest(const char *dir, const char *name, lm_err *e);
/* The checkpoint a program is given: path itself, or, when path is a run's
 * directory (lm-train -o DIR), DIR/latest, formed in buf (n bytes; a name
 * too long for it: path itself, whose reader then says why). */
const char *ckpt_resolve(const char *path, char *buf, size_t n);

#endif
