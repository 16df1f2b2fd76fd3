/* test_schedule.c: the learning-rate schedules (cosine, WSD with linear and
 * 1 - sqrt decay, constant) at their corners and in between, each group's
 * factor of its peak, and the Muon momentum warm-up. */
#include <math.h>

#include "../tap.h"
#include "model/optimizer.h"

static const double TOL = 1e-12;

static void cosine(void)
{
	near(lr_cosine(0, 1e-3, 1e-4, 10, 110), 0, TOL, "cosine: 0 at step 0");
	near(lr_cosine(5, 1e-3, 1e-4, 10, 110), 5e-4, TOL, "cosine: half the peak half-way up");
	near(lr_cosine(10, 1e-3, 1e-4, 10, 110), 1e-3, TOL, "cosine: the peak after warmup");
	near(lr_cosine(60, 1e-3, 1e-4, 10, 110), 5.5e-4, TOL, "cosine: the mean half-way down");
	near(lr_cosine(110, 1e-3, 1e-4, 10, 110), 1e-4, TOL, "cosine: the floor at the cycle");
	near(lr_cosine(500, 1e-3, 1e-4, 10, 110), 1e-4, TOL, "cosine: the floor after it");
}

static void wsd(void)
{
	/* cycle 100, decay over the last 20: stable from 10 to 80. */
	near(lr_wsd(5, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 1.0, TOL, "wsd: warmup is linear");
	near(lr_wsd(10, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 2.0, TOL, "wsd: the peak after warmup");
	near(lr_wsd(79, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 2.0, TOL, "wsd: stable until the decay");
	near(lr_wsd(80, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 2.0, TOL, "wsd: the decay starts at the peak");
	near(lr_wsd(90, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 1.1, TOL, "wsd linear: half-way is the mean");
	near(lr_wsd(95, 2.0, 0.2, 10, 100, 0.2, DECAY_SQRT), 0.2 + 1.8 * (1 - sqrt(0.75)), TOL,
	     "wsd sqrt: 1 - sqrt(x) at x = 3/4");
	near(lr_wsd(100, 2.0, 0.2, 10, 100, 0.2, DECAY_SQRT), 0.2, TOL, "wsd: the floor at the cycle");
	near(lr_wsd(120, 2.0, 0.2, 10, 100, 0.2, DECAY_LINEAR), 0.2, TOL, "wsd: the floor after it");
	near(lr_wsd(50, 2.0, 0.2, 10, 100, 0.0, DECAY_LINEAR), 2.0, TOL, "wsd: decay fraction 0 stays up");
	near(lr_wsd(10, 2.0, 0.2, 10, 100, 1.0, DECAY_LINEAR), 2.0, TOL,
	     "wsd: decay fraction 1 starts decaying after the warmup");
	near(lr_wsd(55, 2.0, 0.2, 10, 100, 1.0, DECAY_LINEAR), 1.1, TOL, "wsd: ... and is linear from there");
}

static void factors(void)
{
	optim_config c = { .lr_max = 1e-3, .lr_min = 1e-4, .warmup = 10, .cycle = 110 };
	near(optim_schedule(&c, 60), 0.55, TOL, "cosine factor: half-way down is 0.55 of the peak");
	near(optim_schedule(&c, 110), 0.1, TOL, "cosine factor: the floor is lr_min / lr_max");
	c.schedule = SCHED_WSD;
	c.decay_frac = 0.5;
	c.decay_shape = DECAY_SQRT;
	near(optim_schedule(&c, 55), 1.0, TOL, "wsd factor: 1 while stable");
	near(optim_schedule(&c, 82), 1 - 0.9 * sqrt(27.0 / 55), TOL, "wsd factor: 1 - sqrt decay");
	c.schedule = SCHED_CONSTANT;
	near(optim_schedule(&c, 5), 0.5, TOL, "constant: the warmup");
	near(optim_schedule(&c, 1000), 1.0, TOL, "constant: the peak forever");
	muon_config u = { .momentum = 0.95, .momentum_start = 0.85, .momentum_warmup = 300 };
	near(optim_muon_momentum(&u, 0), 0.85, TOL, "momentum warm-up starts at the start value");
	near(optim_muon_momentum(&u, 150), 0.90, TOL, "momentum warm-up is linear");
	near(optim_muon_momentum(&u, 300), 0.95, TOL, "momentum after the warm-up");
	u.momentum_warmup = 0;
	near(optim_muon_momentum(&u, 0), 0.95, TOL, "no warm-up: the momentum from step 0");
	is_int(optim_name_index(lr_schedule_names, "wsd"), SCHED_WSD, "names: wsd");
	is_int(optim_name_index(optim_kind_names, "sgd"), -1, "names: an unknown one is -1");
}

int main(void)
{
	cosine();
	wsd();
	factors();
	return done_testing();
}
