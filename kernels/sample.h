/* sample.h: choosing the next token of many sequences at once, where the
 * logits are (the GPU's memory): temperature, top-k, top-p and uniform
 * draws, the distribution of gen/sampler.h, chosen without sorting.
 *
 * Row r = row[i] of logits [*][V] (fp32) gives sequence i its token:
 *   - forced[i] >= 0: that token (the driver forcing a closing text);
 *   - temperature 0: the argmax over ids below limit, ties to the lowest id
 *     (a temperature whose reciprocal overflows a float must be passed as
 *     0: gen/model_decode.c does; the twin takes one as 0 itself);
 *   - else p_j = exp((l_j - max) / T) over ids j < limit, held as the
 *     integer mass q_j = floor(p_j 2^40) (so that every sum is exact and
 *     the same in any order: p_j < 2^-40 is never drawn), cut to the k most
 *     probable (top_k > 0), then to the nucleus: the fewest most probable
 *     tokens whose mass reaches top_p of what is left (equal probabilities
 *     taken by id, lowest first, as sampler.h orders them), and one draw
 *     u0 = u[i SAMPLE_DRAWS] in [0, 1) placed on the cumulative mass of
 *     what is left, taken in id order (sampler.h takes it in probability
 *     order: the same distribution, another token for the same draw).
 *   - or, for top_p < 1 without top_k where sample_rejects() says so, the
 *     nucleus by rejection: each draw u_k = u[i SAMPLE_DRAWS + k] in turn
 *     placed on all the mass gives x_k, kept when the mass ranked before
 *     x_k (larger p, or equal p and a lower id) is below the nucleus's
 *     target, which is x_k being in the nucleus; the first kept is the
 *     token, so the nucleus's distribution again (the first accepted of
 *     independent proposals), without finding its threshold.  When none is
 *     kept (each is with probability at least top_p), the nucleus is found
 *     as above and the last draw placed on its mass by where it fell among
 *     the rejected mass (w of R rejected: w / R of the kept mass, in
 *     doubles): given that it was rejected, w / R is uniform.  The device
 *     sampler's time is its slowest row's, so rejection is chosen when the
 *     rows expected to fall back, n (1 - top_p)^SAMPLE_DRAWS, are few.
 * The cuts are thresholds on p's float bits found by radix selection (four
 * passes of 256-bin histograms each), so nothing is sorted.  lp[i] is the
 * chosen token's log-softmax at temperature 1 over all V logits.  A row
 * holding NaN or +inf, or with every drawable logit -inf, gives
 * tok[i] = -1.
 *
 * A feed (NULL: none) passes the choice on to the next decoding step
 * without the host: ids[i] = tok[i] (0 where that is -1), pos[i] += 1, and
 * with x, x[i] = table's row ids[i] (the step's embedding), so that a
 * recorded step after the sampler takes each sequence's token at its next
 * position.
 *
 * sample_rows_cpu is the plain C twin: the same integer arithmetic, so it
 * chooses the CUDA version's token except where the two expf differ in
 * the last bit. */
#ifndef LMPIPE_SAMPLE_H
#define LMPIPE_SAMPLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sample_args {
	float temperature;  /* 0: greedy */
	int top_k;          /* 0: no cut */
	float top_p;        /* (0, 1]; 1: no cut */
	int limit;          /* ids below it may be drawn (0 or >= V: all) */
	int way;            /* how a nucleus is drawn: SAMPLE_WAY_* (tests force one) */
} sample_args;

enum { SAMPLE_WAY_AUTO = 0, SAMPLE_WAY_SELECT = 1, SAMPLE_WAY_REJECT = 2 };

typedef struct sample_feed {
	int32_t *ids, *pos;  /* [n] */
	float *x;            /* NULL, or [n][C] */
	const float *table;  /* [*][C] */
	int C;
} sample_feed;

/* p's integer mass: 2^40. */
#define SAMPLE_MASS_ONE 1099511627776.0f
/* Uniform draws a row takes: u[i SAMPLE_DRAWS + k]. */
#define SAMPLE_DRAWS 3
/* Rows expected to fall back from rejection to the selection, at most. */
#define SAMPLE_REJECT_FALLBACKS 0.125

/* Whether a call of n rows draws its nucleus by rejection: top_p < 1, no
 * top_k, and n (1 - top_p)^SAMPLE_DRAWS at most SAMPLE_REJECT_FALLBACKS
 * (a, with a.way, may force either way).  The twin and the device decide
 * by this one function, so that they choose the same token. */
static inline int sample_rejects(int n, sample_args a)
{
	if (!(a.top_p < 1) || a.top_k > 0 || a.way == SAMPLE_WAY_SELECT)
		return 0;
	if (a.way == SAMPLE_WAY_REJECT)
		return 1;
	double miss = 1.0 - (double)a.top_p, all = n;
	for (int k = 0; k < SAMPLE_DRAWS; k++)
		all *= miss;
	return all <= SAMPLE_REJECT_FALLBACKS;
}

/* u: [n][SAMPLE_DRAWS] uniform draws in [0, 1). */
void sample_rows_cpu(int32_t *tok, float *lp, const float *logits, const int32_t *row,
		     const float *u, const int32_t *forced, const sample_feed *feed,
		     int n, int V, sample_args a);

/* Device memory for every pointer; 0, or -1 if the launch failed. */
int sample_rows_cuda(int32_t *tok, float *lp, const float *logits, const int32_t *row,
		     const float *u, const int32_t *forced, const sample_feed *feed,
		     int n, int V, sample_args a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
