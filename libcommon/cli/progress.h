/* progress.h: one self-overwriting status line on stderr for long runs.
 *
 * Shown only when stderr is a terminal or the program was given --progress;
 * redrawn at most a few times a second on a terminal, else (a log file, a
 * pipe) written as a whole line every few seconds; shows count (an integer;
 * bytes in MB), rate and, when the total is known, percentage and ETA.
 * Call from one thread. */
#ifndef LMPIPE_PROGRESS_H
#define LMPIPE_PROGRESS_H

#include <stdint.h>

typedef struct progress {
	int on;
	int tty;             /* stderr is a terminal: redraw in place */
	double t0, t_last;
	uint64_t total;      /* 0: unknown */
	const char *what;    /* "reading", "merges" ... */
	const char *unit;    /* "B" prints as MB and MB/s; anything else as is */
	int drawn;
} progress;

/* force: the program's --progress flag. */
void progress_start(progress *p, int force, const char *what, const char *unit,
		    uint64_t total);
/* Redraw if enough time passed; extra (may be NULL) is appended. */
void progress_update(progress *p, uint64_t done, const char *extra);
/* Final redraw and newline (only if something was drawn). */
void progress_end(progress *p, uint64_t done, const char *extra);

/* Seconds on a monotonic clock. */
double lm_now(void);

#endif
