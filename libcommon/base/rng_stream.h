/* rng_stream.h: a sequential random stream over rng.h's counter-based
 * draws: draw k of seed s, k = 0, 1, 2, ...  The whole state is (seed, k),
 * saved in checkpoints so that a resumed run draws the same numbers. */
#ifndef LMPIPE_RNG_STREAM_H
#define LMPIPE_RNG_STREAM_H

#include <stdint.h>

typedef struct lm_rng {
	uint64_t seed, k;
} lm_rng;

void rng_seed(lm_rng *r, uint64_t seed);
uint64_t rng_next(lm_rng *r);
/* Uniform in [0, n), n > 0. */
uint64_t rng_below(lm_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double rng_uniform(lm_rng *r);
/* Standard normal (Box-Muller, one value per two draws). */
double rng_normal(lm_rng *r);

#endif
