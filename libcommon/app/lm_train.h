/* lm_train.h: the lm-train driver: model setup (fresh or resumed), the
 * training loop over shard batches with gradient accumulation, evaluation,
 * checkpoints, metrics as JSON Lines, and the export and logits modes.
 * lm-train's main only fills a train_config from its options. */
#ifndef LMPIPE_LM_TRAIN_H
#define LMPIPE_LM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/profile.h"

typedef struct train_config {
	const char *device;
	int threads;                 /* 0: the default */
	model_config model;
	int model_given;             /* 1: the shape was asked for explicitly */
	int batch, context, accum;
	long long steps;             /* total optimizer steps (0: from tokens) */
	uint64_t tokens;             /* token budget, when steps is 0 */
	optim_config opt;            /* opt.cycle 0: the last step */
	uint64_t seed;
	const char *const *data;
	size_t n_data;
	const char *const *val;
	size_t n_val;
	long long eval_every, eval_batches;
	long long ckpt_every;
	const char *out_dir;
	int resume;
	const char *log_path;
	int progress;
	/* --profile: time every op of steps 2 .. 1 + profile (0: off) and hand
	 * the per-op totals, with the wall time of those steps, to
	 * on_profile at the end (the program prints them). */
	int profile;
	void (*on_profile)(void *arg, const lm_prof_row *rows, int n, int steps, double wall_ms);
	void *profile_arg;
} train_config;

/* Train as configured.  Returns 0, or -1 with the message (and exit code)
 * in e; a NaN or infinite loss stops the run with a message naming the
 * step and the last good checkpoint. */
int train_run(const train_config *tc, lm_err *e);

/* Load a checkpoint and write a Hugging Face directory. */
int train_export_hf(const char *ckpt, const char *dir, const char *device, lm_err *e);

/* Load a checkpoint, run the forward pass on the token ids of a text file
 * (one sequence per line, all of the same length, ids separated by
 * blanks) and write a safetensors file with "ids" (I32 [B, T]) and
 * "logits" (F32 [B, T, V]). */
int train_dump_logits(const char *ckpt, const char *ids_path, const char *out,
		      const char *device, lm_err *e);

#endif
