/* progress.c: the throttled progress line (see progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli/die.h"

static const double REDRAW_INTERVAL_S = 0.25;
/* Not a terminal (--progress into a log file or a pipe): a whole line now
 * and then instead of one line redrawn in place. */
static const double LOG_LINE_INTERVAL_S = 5.0;
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
	p->tty = isatty(STDERR_FILENO);
	p->on = force || p->tty;
	p->t0 = lm_now();
	p->t_last = 0;
	p->total = total;
	p->what = what;
	p->unit = unit;
	p->drawn = 0;
}

/* Counts of things are integers; bytes are shown in MB with a decimal. */
static void print_count(double x, int bytes)
{
	if (bytes)
		fprintf(stderr, "%.1f", x / BYTES_PER_MB);
	else
		fprintf(stderr, "%.0f", x);
}

static void draw(progress *p, uint64_t done, const char *extra, double now)
{
	double dt = now - p->t0;
	int bytes = p->unit && p->unit[0] == 'B' && p->unit[1] == '\0';
	const char *u = bytes ? "MB" : p->unit;
	double rate = dt > 0 ? (double)done / dt : 0;
	fprintf(stderr, "%s%s: %s ", p->tty ? "\r" : "", lm_progname, p->what);
	print_count((double)done, bytes);
	fprintf(stderr, " %s", u);
	if (p->total) {
		fputs(" / ", stderr);
		print_count((double)p->total, bytes);
		fprintf(stderr, " (%.0f%%)", 100.0 * (double)done / (double)p->total);
	}
	fprintf(stderr, ", %.1f %s/s", bytes ? rate / BYTES_PER_MB : rate, u);
	if (p->total && rate > 0 && done < p->total) {
		double eta = (double)(p->total - done) / rate;
		fprintf(stderr, ", ETA %d:%02d", (int)(eta / 60), (int)eta % 60);
	}
	if (extra)
		fprintf(stderr, ", %s", extra);
	fputs(p->tty ? "\033[K" : "\n", stderr);
	fflush(stderr);
	p->drawn = 1;
	p->t_last = now;
}

void progress_update(progress *p, uint64_t done, const char *extra)
{
	if (!p->on)
		return;
	double now = lm_now();
	if (now - p->t_last < (p->tty ? REDRAW_INTERVAL_S : LOG_LINE_INTERVAL_S))
		return;
	draw(p, done, extra, now);
}

void progress_end(progress *p, uint64_t done, const char *extra)
{
	if (!p->on || !p->drawn)
		return;
	draw(p, done, extra, lm_now());
	if (p->tty)
		fputc('\n', stderr);
}
