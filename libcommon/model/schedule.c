/* schedule.c: the learning-rate schedules (cosine, warmup-stable-decay,
 * constant), the Muon momentum warm-up, and the names options use for the
 * optimizer's choices (see optimizer.h). */
#include "model/optimizer.h"

#include <math.h>
#include <string.h>

const char *const optim_kind_names[] = { "adamw", "muon", NULL };
const char *const lr_schedule_names[] = { "cosine", "wsd", "constant", NULL };
const char *const decay_shape_names[] = { "linear", "sqrt", NULL };
const char *const muon_scale_names[] = { "original", "match_rms_adamw", NULL };

int optim_name_index(const char *const *names, const char *name)
{
	for (int i = 0; name && names[i]; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

double lr_cosine(long long t, double lr_max, double lr_min, long long warmup, long long cycle)
{
	if (t < warmup)
		return (double)t / warmup * lr_max;
	if (t > cycle || cycle <= warmup)
		return lr_min;
	double frac = (double)(t - warmup) / (double)(cycle - warmup);
	return lr_min + 0.5 * (1.0 + cos(M_PI * frac)) * (lr_max - lr_min);
}

double lr_wsd(long long t, double lr_max, double lr_min, long long warmup, long long cycle,
	      double decay_frac, decay_shape shape)
{
	if (t < warmup)
		return (double)t / warmup * lr_max;
	if (t >= cycle)
		return lr_min;
	long long d = llround(decay_frac * (double)cycle), s = cycle - d;
	if (s < warmup)
		s = warmup;
	if (t < s || cycle <= s)
		return lr_max;
	double x = (double)(t - s) / (double)(cycle - s);
	double f = shape == DECAY_SQRT ? 1.0 - sqrt(x) : 1.0 - x;
	return lr_min + (lr_max - lr_min) * f;
}

double optim_schedule(const optim_config *c, long long t)
{
	double floor = c->lr_max > 0 ? c->lr_min / c->lr_max : 0;
	long long cycle = c->cycle;
	switch (c->schedule) {
	case SCHED_WSD:
		return lr_wsd(t, 1.0, floor, c->warmup, cycle, c->decay_frac, (decay_shape)c->decay_shape);
	case SCHED_CONSTANT:
		return t < c->warmup ? (double)t / c->warmup : 1.0;
	default:
		return lr_cosine(t, 1.0, floor, c->warmup, cycle);
	}
}

double optim_muon_momentum(const muon_config *c, long long t)
{
	if (t >= c->momentum_warmup || c->momentum_warmup <= 0)
		return c->momentum;
	double f = (double)t / (double)c->momentum_warmup;
	return c->momentum_start + (c->momentum - c->momentum_start) * f;
}
