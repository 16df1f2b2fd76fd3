/* rng.c: xoshiro256** with splitmix64 seeding (see rng.h). */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(lm_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

uint64_t rng_next(lm_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t rng_below(lm_rng *r, uint64_t n)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = rng_next(r);
	while (x >= limit);
	return x % n;
}

double rng_uniform(lm_rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

double rng_normal(lm_rng *r)
{
	double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
