/* lm_train.h: the lm-train driver: model setup (fresh or resumed), the
 * training loop over shard batches with gradient accumulation, evaluation,
 * checkpoints, metrics as JSON Lines, and the export and logits modes.
 * lm-train's main only fills a train_config from its options. */
#ifndef LMPIPE_LM_TRAIN_H
#define LMPIPE_LM_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
	optim_config opt;            /* opt.cycle 0: the last step; opt.lr_min is
	                              * set from lr_min_ratio */
	double lr_min_ratio;
	uint64_t seed;
	const char *const *data;
	size_t n_data;
	const char *const *val;
	size_t n_val;
	long long eval_every, eval_batches;
	int eval_stride;             /* validation windows every N tokens (0: T) */
	long long ckpt_every;
	long long keep_last;         /* 0: keep every checkpoint */
	const char *out_dir;
	int resume;                  /* continue the run in out_dir */
	int force;                   /* start a new run in an out_dir that holds one */
	const char *log_path;
	const char *tokenizer;       /* the shards' tokenizer, recorded in the checkpoints */
	int progress;
	/* Set (to the signal's number) when the run should stop: it saves a
	 * checkpoint at the next step boundary and fails with exit 128 + n. */
	volatile sig_atomic_t *stop;
	/* Whether an option (its long name) was given on the command line: on
	 * --resume, the others come from the checkpoint.  NULL: none was. */
	int (*given)(const char *option);
	/* Prints a one-line note (what --resume took over or changed). */
	void (*note)(const char *msg);
	/* --profile: time every op of steps 2 .. 1 + profile (0: off) and hand
	 * the per-op totals, with the wall time of those steps, to
	 * on_profile at the end (the program prints them). */
	int profile;
	void (*on_profile)(void *arg, const lm_prof_row *rows, int n, int steps, double wall_ms);
	void *profile_arg;
	/* Data parallel (libcommon/dist): the ranks come from the launcher's
	 * environment (mpirun, srun); batch is per rank, so the global batch
	 * is world x batch x accum windows. */
	int gpus;                    /* --gpus N: the world must be N (0: any) */
	int zero;                    /* 0, 1 or 2: ZeRO optimizer-state sharding */
	double bucket_mb;            /* gradient bucket size; 0: the default */
	const char *nccl_init;       /* NULL: through MPI */
	double dist_timeout;         /* seconds; 0: the default */
	int world, rank;             /* set by train_run */
	/* --dump-windows FILE: the training windows of every step (a world of
	 * one only; lm_train_windows.c); NULL: none. */
	const char *dump_windows;
	/* --deterministic: the backend's run-to-run bit-identical kernels
	 * (lm_backend.deterministic). */
	int deterministic;
	/* --residual: the residual stream's values, an index into
	 * train_residual_names (0 fp32, 1 bf16; lm_backend.res), recorded in
	 * the checkpoints as a hyper-parameter of the run. */
	int residual;
	/* --residual-grad: its gradient's (lm_backend.res_grad), the same
	 * names; bf16 needs residual bf16. */
	int residual_grad;
} train_config;

/* --residual's names, NULL-terminated: "f32", "bf16". */
extern const char *const train_residual_names[];

/* Train as configured.  Returns 0, or -1 with the message (and exit code)
 * in e; a NaN or infinite loss stops the run with a message naming the
 * step and the last good checkpoint.  The checkpoint directory is made (with
 * its parents) or checked before anything else, and removed again when the
 * run fails before its first checkpoint and the directory is empty. */
int train_run(const train_config *tc, lm_err *e);

/* --gpus N started plainly: exec the MPI launcher (LMPIPE_MPIRUN, else
 * mpirun on the PATH) with -np N and the same arguments.  Returns only
 * when that fails (-1, message in e); 0 when there is nothing to do (a
 * world of one, or already launched). */
int train_launch(int gpus, char **argv, lm_err *e);

/* Load a checkpoint and write a Hugging Face directory; with tok_path, the
 * tokenizer too (checked against the identity the checkpoint recorded):
 * tokenizer.json and the files beside it, and config.json's bos/eos ids. */
int train_export_hf(const char *ckpt, const char *dir, const char *tok_path, const char *device,
		    lm_err *e);

/* Load a checkpoint, run the forward pass on the token ids of a text file
 * (one sequence per line, all of the same length, ids separated by
 * blanks) and write a safetensors file with "ids" (I32 [B, T]) and
 * "logits" (F32 [B, T, V]). */
int train_dump_logits(const char *ckpt, const char *ids_path, const char *out,
		      const char *device, lm_err *e);

/* Evaluate a checkpoint on validation shards: one JSON line on out with
 * the mean loss (nats per target token), perplexity and, with the
 * tokenizer, the bytes the targets stand for and bits per byte. */
typedef struct train_eval_opts {
	const char *ckpt;
	const char *const *val;
	size_t n_val;
	long long batches;           /* 0: every window */
	int batch;                   /* windows per forward pass; 0: a default */
	const char *tokenizer;       /* NULL: no bits per byte */
	const char *device;
	int stride;                  /* windows every stride tokens, only their
	                              * new targets scored (0: the context) */
} train_eval_opts;
int train_evaluate(const train_eval_opts *o, FILE *out, lm_err *e);

/* Print what a checkpoint holds: shape, parameters, step, tokens seen and
 * the recorded hyper-parameters, one "key value" line each. */
int train_info(const char *ckpt, FILE *out, lm_err *e);

#endif
