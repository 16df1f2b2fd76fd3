/* sampler.h: choosing the next token from a row of logits.
 *
 * Temperature (0 = greedy: the argmax, ties to the lowest id), then top-k,
 * then top-p (the nucleus: the smallest set of the most probable tokens whose
 * renormalised probability reaches p; tokens of equal probability are ordered
 * by id, lowest first), then one draw from the renormalised distribution.
 *
 * Every sample owns its random stream (lm_rng), derived from (seed, prompt
 * index, sample index), and a step consumes exactly one draw (a decoder
 * that samples on its device takes LM_DECODER_DRAWS: generate.h), so a
 * sample's tokens do not depend on what else is in the batch (on the
 * device, its nucleus drawn by rejection or not: kernels/sample.h).
 *
 * The log-probability reported with a token is the log-softmax of the raw
 * logits at temperature 1, whatever the sampling settings: what a
 * teacher-forced forward pass gives, and what GRPO's old log-probs need. */
#ifndef LMPIPE_SAMPLER_H
#define LMPIPE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng_stream.h"

/* Seed r with the stream of sample `sample` of prompt `prompt` under
 * `seed` (a counter-based stream, see rng_stream.h). */
void sample_rng_seed(lm_rng *r, uint64_t seed, uint64_t prompt, uint64_t sample);

typedef struct sample_params {
	double temperature; /* 0: greedy; > 0: divide the logits by it (one too
			     * small for 1 / it to be a float is greedy too:
			     * sample_greedy) */
	uint32_t top_k;     /* 0: no limit */
	double top_p;       /* (0, 1]; 1: no nucleus cut */
	uint32_t limit;     /* only ids below it may be drawn (0: all): a model
			     * vocabulary padded past the tokenizer's */
} sample_params;

/* Scratch space for one sampler (one per thread), sized for n_vocab. */
typedef struct sample_work {
	uint32_t n_vocab;
	struct sample_cand *cand;
	struct sample_cand *tmp; /* the sort's other half */
} sample_work;

int sample_work_init(sample_work *w, uint32_t n_vocab, lm_err *e);
void sample_work_free(sample_work *w);

/* Check the parameters (temperature >= 0, top_p in (0, 1]). */
int sample_params_check(const sample_params *p, lm_err *e);

/* Whether a temperature draws the argmax: 0, or so small (below about
 * 2.9e-39) that its reciprocal, by which the samplers scale the logits in
 * float, is infinite (the top logit would scale to 0 * inf = NaN).  Its
 * limit is the argmax anyway; ties go to the lowest id, as at 0. */
int sample_greedy(double temperature);

/* Choose a token from logits[0 .. n_vocab).  -inf logits are never chosen;
 * NaN, +inf or all -inf is an error.  Writes the token and, if logprob is not
 * NULL, its log-softmax at temperature 1. */
int sample_token(const float *logits, const sample_params *p, lm_rng *rng,
		 sample_work *w, uint32_t *token, double *logprob, lm_err *e);

/* log-softmax at temperature 1 of logits[token] (logits must be checked
 * finite or -inf, as sample_token does). */
double sample_logprob(const float *logits, uint32_t n_vocab, uint32_t token);

/* The candidate set sample_token draws from, for tests and inspection:
 * ids[0 .. *n) in decreasing probability, probs[] renormalised to sum 1.
 * ids and probs hold n_vocab entries.  Greedy gives the argmax alone. */
int sample_support(const float *logits, const sample_params *p, sample_work *w,
		   uint32_t *ids, double *probs, uint32_t *n, lm_err *e);

#endif
