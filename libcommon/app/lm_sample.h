/* lm_sample.h: what lm-sample does, for its main(): load the tokenizer and
 * checkpoint, read prompts, encode them, generate, and write text or JSON
 * Lines.  Warnings about skipped records go through a callback (the
 * library does not print). */
#ifndef LMPIPE_LM_SAMPLE_H
#define LMPIPE_LM_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "cli/options.h"
#include "cli/tok_options.h"
#include "gen/generate.h"

/* Qwen3's closing text for a thinking section cut short. */
#define LMSAMPLE_THINK_CLOSE \
	"Considering the limited time by the user, I have to give the solution based on the " \
	"thinking directly now.\n</think>.\n\n"

/* What a run did, for --stats: times on a monotonic clock. */
typedef struct lmsample_stats {
	double load_s;             /* tokenizer, checkpoint, backend and decoder */
	double generate_s;         /* from the first prompt read to the last sample written */
	uint64_t prompts, samples;
	uint64_t prompt_tokens;    /* as fed (after --truncate) */
	uint64_t new_tokens;       /* completion tokens of all samples */
	gen_times gen;             /* generate_s split: prefill and decoding turns */
} lmsample_stats;

typedef struct lmsample_opts {
	const char *checkpoint;
	bpe_source tok;
	const char *device;
	char **prompts;            /* prompts given as arguments */
	int n_prompts;
	const char *input;         /* otherwise a prompt file (NULL or "-": stdin) */
	int jsonl;                 /* JSON Lines in and out */
	FILE *out;
	const char *out_name;
	sample_params sp;
	uint64_t seed;
	uint32_t n_samples, batch, max_tokens, context;  /* context 0: the model's */
	const opt_strlist *stop;
	uint32_t think_budget;
	const char *think_close;
	int truncate;              /* left-truncate long prompts instead of refusing them */
	int skip_bad;              /* skip bad records instead of stopping */
	void (*warn)(const char *msg);  /* a record skipped */
	void (*note)(const char *msg);  /* advice (may be NULL) */
	lmsample_stats *stats;     /* filled in when not NULL */
} lmsample_opts;

int lmsample_run(const lmsample_opts *o, lm_err *e);

#endif
