/* atomic.h: output files that appear whole or not at all.
 *
 * atomic_open() creates a hidden temporary file beside the destination
 * (".NAME.tmp-PID-XXXXXX" in the same directory, so the final rename cannot
 * cross file systems, with the writer's process id); atomic_commit()
 * flushes, fsyncs, renames it over the destination and fsyncs the
 * directory.  Until then the temporary file is on a process-wide list; die(), exit and SIGINT/SIGTERM/SIGHUP remove every
 * file still on it, so an interrupted run leaves nothing that looks valid.
 *
 * A destination that exists and is not a regular file (a character
 * device such as /dev/null or /dev/stdout, a FIFO, a socket) is written
 * in place instead: renaming over it would replace the device or the pipe
 * with a regular file, and such outputs cannot be whole-or-nothing anyway.
 *
 * Outputs that are committed one by one but whole only as a set (the
 * numbered shards of shard-pack) join the same list as a hook: a function
 * that removes what the run has committed so far, called after the
 * temporary files are removed, until the run removes the hook. */
#ifndef LMPIPE_ATOMIC_H
#define LMPIPE_ATOMIC_H

#include <stdio.h>

#include "base/err.h"

typedef struct atomic_file {
	FILE *fp;        /* write here */
	char *path;      /* final name */
	char *tmp;       /* temporary name */
	int slot;        /* index in the process-wide list */
	int direct;      /* path itself is written (not a regular file) */
} atomic_file;

int atomic_open(atomic_file *af, const char *path, lm_err *e);
/* Flush, fsync, close and rename into place.  On failure the temporary
 * file is removed and -1 returned. */
int atomic_commit(atomic_file *af, lm_err *e);
/* Close and remove the temporary file (safe on a zeroed or committed af). */
void atomic_abort(atomic_file *af);

/* Remove the temporary files in dir (NULL or "": the current directory)
 * that a killed run left: those whose writer's process is gone (or whose
 * name predates the process id), and whose final name is_ours accepts (NULL:
 * any).  Returns how many were removed.  A program calls it at start for
 * its outputs, so a kill -9 leaves no litter past the next run. */
int atomic_clean_stale(const char *dir, int (*is_ours)(const char *name, void *arg), void *arg);

/* Remove every unfinished temporary file and run every hook (called by die
 * and at exit). */
void atomic_abort_all(void);
/* The same, using only async-signal-safe calls (for signal handlers). */
void atomic_abort_all_signal_safe(void);

/* Add a hook to the abort list: fn must use async-signal-safe calls only,
 * since a signal handler may run it.  The slot for atomic_hook_remove, or
 * -1 when ATOMIC_MAX_HOOKS are in place. */
enum { ATOMIC_MAX_HOOKS = 4 };
int atomic_hook_add(void (*fn)(void));
/* Remove the hook of a slot (nothing for -1): the set is complete, or the
 * run removed its outputs itself. */
void atomic_hook_remove(int slot);

#endif
