/* rng.h: the counter-based generator behind the reproducible choices of
 * shard-pack (validation documents) and the shard reader (random windows):
 * draw k of a stream with seed s is mix64(s + (k + 1) * GOLDEN), where mix64
 * is the SplitMix64 finaliser.  Any draw can be computed on its own, so a
 * resumed run needs only the counter k. */
#ifndef LMPIPE_RNG_H
#define LMPIPE_RNG_H

#include <stdint.h>

#define LM_RNG_GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t lm_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t lm_draw(uint64_t seed, uint64_t k)
{
	return lm_mix64(seed + (k + 1) * LM_RNG_GOLDEN);
}

/* A draw mapped to [0, n) by a 128-bit multiply (bias below n / 2^64). */
static inline uint64_t lm_draw_below(uint64_t seed, uint64_t k, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)lm_draw(seed, k) * n) >> 64);
}

/* A draw mapped to [0, 1) with 53 bits. */
static inline double lm_draw_unit(uint64_t seed, uint64_t k)
{
	return (double)(lm_draw(seed, k) >> 11) * 0x1.0p-53;
}

#endif
