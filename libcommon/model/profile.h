/* profile.h: where a backend's time goes, op by op (lm-train --profile).
 *
 * While a profile is attached to a backend (be->prof), each op the model
 * and the optimizer call is bracketed by two marks in the backend's work
 * queue (CUDA events on its stream, clock readings on the CPU) and a named
 * range for nsys and ncu users (NVTX on CUDA).  prof_rows waits for the
 * device and sums the spans per op name: calls, milliseconds, and the
 * floating-point operations and bytes the caller counted for each call,
 * from which achieved TFLOP/s and GB/s follow.  Nothing is measured while
 * be->prof is NULL, and then PROF costs one test per op. */
#ifndef LMPIPE_PROFILE_H
#define LMPIPE_PROFILE_H

#include <stdio.h>

#include "base/err.h"
#include "model/backend.h"

enum { PROF_NAME_MAX = 32 };

typedef struct lm_prof_row {
	char name[PROF_NAME_MAX];
	long long calls;
	double ms, flops, bytes;
} lm_prof_row;

typedef struct lm_profile lm_profile;

/* Attach a new profile to be (0, or -1 out of memory); detach and free it. */
int prof_attach(lm_backend *be, lm_err *e);
void prof_detach(lm_backend *be);
/* Pause or resume measuring (the steps to leave out). */
void prof_pause(lm_backend *be, int paused);

typedef struct prof_span {
	void *from;
	const char *name;
} prof_span;

prof_span prof_begin(lm_backend *be, const char *name);
void prof_end(lm_backend *be, prof_span *s, double flops, double bytes);

/* The totals so far, largest time first, at most max rows; returns the
 * number of rows, or -1 (with the backend's error). */
int prof_rows(lm_backend *be, lm_prof_row *rows, int max, lm_err *e);

/* The rows as a table on f, like torch.profiler's key_averages: a line
 * "PROG: profile of STEPS UNIT: ... ms a step, ... ms of it in ops", then
 * one row per op (calls, total ms, share of the ops' time, ms a call,
 * achieved TFLOP/s and GB/s).  Nothing when steps is 0. */
void prof_write_table(FILE *f, const char *prog, const char *unit, const lm_prof_row *rows, int n,
		      int steps, double wall_ms);

/* Run CALL as the op NAME that does FLOPS operations and moves BYTES. */
#define PROF(be, name, flops, bytes, call)                        \
	do {                                                      \
		if ((be)->prof) {                                 \
			prof_span s_ = prof_begin((be), (name));  \
			call;                                     \
			prof_end((be), &s_, (flops), (bytes));    \
		} else {                                          \
			call;                                     \
		}                                                 \
	} while (0)

#endif
