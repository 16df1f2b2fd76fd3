/* die.h: the program-side half of error handling: "prog: message" on
 * stderr, the exit codes, and the checked close of stdout.  Only main() and
 * the command-line front end call these. */
#ifndef LMPIPE_DIE_H
#define LMPIPE_DIE_H

#include <stdnoreturn.h>

#include "base/err.h"

enum {
	EXIT_OK = 0,      /* success */
	EXIT_RUNTIME = 1, /* runtime or data error */
	EXIT_USAGE = 2,   /* bad command line */
};

extern const char *lm_progname;

/* Remember the program name (basename of argv0), install the signal
 * handlers that remove unfinished output files (see atomic.h) and register
 * the checked close of stdout at exit. */
void lm_init(const char *argv0);

/* Print "prog: message" on stderr.  A format ending in ':' appends
 * strerror(errno).  die() then removes unfinished output files and exits
 * with status. */
noreturn void die(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void warnmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* die() with the message and exit code carried by e.  Both end quietly with
 * status 0 instead when the error is EPIPE and the reader of stdout has
 * gone (a closed pipe downstream, "| head -1"). */
noreturn void die_err(const lm_err *e);

/* Flush and close stdout; a failure (full disk) is an error, not success;
 * a reader that has gone is not.  Called at exit by lm_init; call it yourself to check early. */
void lm_close_stdout(void);

#endif
