/* rng_stream.c: sequential draws from the counter-based generator (see
 * rng_stream.h and rng.h). */
#include "base/rng_stream.h"

#include <math.h>

#include "base/rng.h"

void rng_seed(lm_rng *r, uint64_t seed)
{
	r->seed = seed;
	r->k = 0;
}

uint64_t rng_next(lm_rng *r) { return lm_draw(r->seed, r->k++); }
uint64_t rng_below(lm_rng *r, uint64_t n) { return lm_draw_below(r->seed, r->k++, n); }
double rng_uniform(lm_rng *r) { return lm_draw_unit(r->seed, r->k++); }

double rng_normal(lm_rng *r)
{
	double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
