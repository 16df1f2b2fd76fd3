/* generate.h: batched generation over any decoder with a per-sequence cache.
 *
 * The driver keeps up to n_slots sequences in flight, admits new prompts as
 * slots free up (continuous batching, prompts of any length side by side),
 * chooses each sequence's next token with sampler.h, and hands finished
 * samples back in input order (prompt order, then sample order), streaming
 * the text of the oldest unfinished sample as it grows.
 *
 * A sequence ends at the end-of-text token, at a stop string (matched on the
 * decoded text of the completion), after max_tokens completion tokens, or
 * when the context is full.  With a thinking budget, a sample that has
 * produced that many tokens inside a <think> section is made to continue
 * with a fixed closing text (once per sample); those tokens are part of the
 * completion, flagged as forced, with their model log-probabilities.
 *
 * The decoder is an interface so the same driver serves the CPU model, a
 * future CUDA backend, and the fake models of the tests. */
#ifndef LMPIPE_GENERATE_H
#define LMPIPE_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "gen/sampler.h"
#include "tok/bpe.h"

/* Uniform draws a sampling decoder takes per sample and token (choose()):
 * kernels/sample.h's SAMPLE_DRAWS. */
#define LM_DECODER_DRAWS 3

typedef struct lm_decoder {
	void *ctx;
	uint32_t n_vocab;
	uint32_t n_ctx;   /* positions a sequence may hold */
	uint32_t n_slots; /* sequences in flight at once */
	/* Empty slot's cache. */
	int (*reset)(void *ctx, uint32_t slot, lm_err *e);
	/* Copy slot src's cache into slot dst (optional: NULL feeds the
	 * prompt again instead). */
	int (*fork)(void *ctx, uint32_t dst, uint32_t src, lm_err *e);
	/* For i < n_seq: append the n_tok[i] tokens tok[i] to slot[i]'s cache
	 * and write the logits that follow its last token to logits[i]. */
	int (*feed)(void *ctx, uint32_t n_seq, const uint32_t *slot, const uint32_t *const *tok,
		    const uint32_t *n_tok, float *const *logits, lm_err *e);
	/* Optional: the decoder samples where its logits are (a GPU), so that
	 * only tokens cross to the host.  Then feed() need not write logits,
	 * and fork() copies the slot's logits too.  For i < n: the next token
	 * of slot[i] from the logits its last feed left, by sp, with the
	 * sample's LM_DECODER_DRAWS uniform draws u[i LM_DECODER_DRAWS + k] in
	 * [0, 1) (kernels/sample.h says how they are placed: the first always,
	 * the others as further proposals of a nucleus drawn by rejection), or
	 * forced[i] when that is >= 0; tok[i] = UINT32_MAX when
	 * no token can be chosen (non-finite logits); lp[i] the token's
	 * log-softmax at temperature 1. */
	int (*choose)(void *ctx, uint32_t n, const uint32_t *slot, const sample_params *sp,
		      const float *u, const int32_t *forced, uint32_t *tok, double *lp, lm_err *e);
	/* Optional, with choose: up to k (<= max_ahead) rounds of choose() in
	 * one call, each round's tokens but the last's fed to their slots as
	 * feed() would, so that the host waits once for them all.  Round j
	 * takes the draws u[(j n + i) LM_DECODER_DRAWS + k] and writes
	 * tok[j * n + i] and
	 * lp[j * n + i]; forced[i] is for the first round (a decoder runs one
	 * round where any is >= 0).  Returns the rounds run (1 <= it <= k; the
	 * decoder runs one where it cannot run k, as when its last feed() was
	 * not of one token for each of these slots in this order, or a cache
	 * lacks room for k - 1 more), or -1 on error.  Feeding a sequence past
	 * its end is the caller's to undo: it resets the slot. */
	int (*choose_ahead)(void *ctx, uint32_t n, uint32_t k, const uint32_t *slot,
			    const sample_params *sp, const float *u, const int32_t *forced,
			    uint32_t *tok, double *lp, lm_err *e);
	uint32_t max_ahead;
} lm_decoder;

/* Where generate()'s time went (gen_config.times, when not NULL), on
 * omp_get_wtime's clock.  A turn of the driver that admits prompts (their
 * prefill and first tokens, with the tokens of the sequences already in
 * flight that turn) counts as prefill; every other turn as decoding. */
typedef struct gen_times {
	double prefill_s, decode_s;
	uint64_t prefill_turns;    /* turns that admitted prompts */
	double prefill_max_s;      /* the slowest of them */
	uint64_t decode_turns;     /* turns that admitted no prompt */
	uint64_t decode_tokens;    /* tokens chosen in them */
	double decode_max_s;       /* the slowest of them */
	/* where the turns' time went, on the host's clock: reading the
	 * prompts (io->next), the decoder's feed() (the prompts' and the
	 * steps' ops queued, or run), its choose() (the tokens chosen: on a
	 * backend that queues its work, the wait for everything queued
	 * before it), handing samples back (io->done, io->text) */
	double input_s, feed_s, choose_s, output_s;
} gen_times;

typedef struct gen_config {
	sample_params sp;
	uint64_t seed;
	uint32_t n_samples;        /* per prompt, >= 1, <= n_slots */
	uint32_t max_tokens;       /* completion tokens, >= 1 */
	const char *const *stop;   /* stop strings */
	size_t n_stop;
	uint32_t think_budget;     /* 0: no budget */
	const uint32_t *think_close; /* the tokens of the closing text */
	size_t n_think_close;
	uint32_t eot;              /* end-of-text id, or BPE_NO_TOKEN */
	int lazy;                  /* admit a prompt only when nothing is in flight */
	gen_times *times;          /* filled in when not NULL */
} gen_config;

typedef struct gen_prompt {
	const uint32_t *ids;       /* 1 <= n_ids <= n_ctx */
	size_t n_ids;
	const char *text;          /* for the thinking state at the start */
	size_t len;
	uint64_t index;            /* the prompt's ordinal: seeds its samples' streams */
	void *user;                /* the caller's record */
} gen_prompt;

typedef struct gen_sample {
	const gen_prompt *prompt;
	uint32_t index;            /* 0 .. n_samples-1 */
	uint32_t *ids;             /* completion tokens (with the end-of-text token) */
	double *logprobs;          /* log-softmax at temperature 1 of each */
	uint8_t *forced;           /* 1 where the thinking budget forced the token */
	size_t n;
	uint8_t *text;             /* decoded completion (without end-of-text) */
	size_t len;
	const char *finish;        /* "stop" or "length" once done */
	struct gen_state *st;      /* the driver's */
} gen_sample;

typedef struct gen_io {
	void *user;
	/* Next prompt: 1, 0 at the end, -1 on error.  *p stays valid until
	 * release(p) is called. */
	int (*next)(void *user, gen_prompt *p, lm_err *e);
	/* Optional: more text of the oldest unfinished sample. */
	void (*text)(void *user, const gen_sample *s, const uint8_t *bytes, size_t n);
	/* A finished sample, in input order. */
	int (*done)(void *user, const gen_sample *s, lm_err *e);
	/* Every sample of p has been handed to done. */
	void (*release)(void *user, gen_prompt *p);
} gen_io;

int gen_config_check(const gen_config *c, const lm_decoder *d, lm_err *e);

/* Run until next() reports the end and every sample is done.  When next()
 * fails, the samples already admitted are finished and handed back first,
 * then generate() fails with next()'s message. */
int generate(const lm_decoder *d, const gen_config *c, const gen_io *io,
	     const bpe_tokenizer *tok, lm_err *e);

/* The thinking state after text: 1 when its last "<think>" comes after its
 * last "</think>", 0 when the reverse, `was` when it holds neither. */
int gen_think_state(const uint8_t *text, size_t len, int was);

#endif
