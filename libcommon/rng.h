/* rng.h: the project's seeded random numbers (xoshiro256**, seeded by
 * splitmix64).  The state is four u64 words, saved in checkpoints so that a
 * resumed run draws the same numbers. */
#ifndef LMPIPE_RNG_H
#define LMPIPE_RNG_H

#include <stdint.h>

typedef struct lm_rng {
	uint64_t s[4];
} lm_rng;

void rng_seed(lm_rng *r, uint64_t seed);
uint64_t rng_next(lm_rng *r);
/* Uniform in [0, n), without modulo bias; n > 0. */
uint64_t rng_below(lm_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double rng_uniform(lm_rng *r);
/* Standard normal (Box-Muller, one value per call). */
double rng_normal(lm_rng *r);

#endif
