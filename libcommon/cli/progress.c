/* progress.c: the throttled progress line (see progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli/die.h"

static const double REDRAW_INTERVAL_S = 0.25;
static const double BYTES_PER_MB = 1e6;

double lm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_start(progress *p, int force, const char *what, const char *unit,
		    uint64_t total)
{
	p->on = force || isatty(STDERR_FILENO);
	p->t0 = lm_now();
	p->t_last = 0;
	p->total = total;
	p->what = what;
	p->unit = unit;
	p->drawn = 0;
}

static void draw(progress *p, uint64_t done, const char *extra, double now)
{
	double dt = now - p->t0;
	int bytes = p->unit && p->unit[0] == 'B' && p->unit[1] == '\0';
	double scale = bytes ? BYTES_PER_MB : 1.0;
	const char *u = bytes ? "MB" : p->unit;
	double rate = dt > 0 ? (double)done / dt : 0;
	fprintf(stderr, "\r%s: %s %.1f %s", lm_progname, p->what, (double)done / scale, u);
	if (p->total) {
		fprintf(stderr, " / %.1f (%.0f%%)", (double)p->total / scale,
			100.0 * (double)done / (double)p->total);
	}
	fprintf(stderr, ", %.1f %s/s", rate / scale, u);
	if (p->total && rate > 0 && done < p->total) {
		double eta = (double)(p->total - done) / rate;
		fprintf(stderr, ", ETA %d:%02d", (int)(eta / 60), (int)eta % 60);
	}
	if (extra)
		fprintf(stderr, ", %s", extra);
	fputs("\033[K", stderr);
	fflush(stderr);
	p->drawn = 1;
	p->t_last = now;
}

void progress_update(progress *p, uint64_t done, const char *extra)
{
	if (!p->on)
		return;
	double now = lm_now();
	if (now - p->t_last < REDRAW_INTERVAL_S)
		return;
	draw(p, done, extra, now);
}

void progress_end(progress *p, uint64_t done, const char *extra)
{
	if (!p->on || !p->drawn)
		return;
	draw(p, done, extra, lm_now());
	fputc('\n', stderr);
}
