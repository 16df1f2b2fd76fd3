/* files.h: the files a program names on its command line, for main: its
 * input operands (standard input when there are none, or for "-") and its
 * -o FILE (standard output without one; with one, a file that appears
 * whole or not at all, base/atomic.h).  Like the rest of the front end
 * (die.h), these print the message and exit on an error. */
#ifndef LMPIPE_FILES_H
#define LMPIPE_FILES_H

#include <stdio.h>

#include "base/atomic.h"

/* The operand of a program that reads one FILE at most: "-" without any,
 * a usage error with more than one. */
const char *cli_one_input(char **operands, int n);

/* Open an input ("-": standard input); close it with io_close_read. */
FILE *cli_open_input(const char *path);

/* Each input in turn, standard input once when there are no operands:
 *
 *   cli_inputs in = { .files = files, .n = n_files };
 *   while (cli_next_input(&in))
 *           ... in.fp, in.name ...
 *
 * Each call closes the input before; 0 after the last. */
typedef struct cli_inputs {
	char **files;
	int n;
	int next;
	const char *path;   /* the current input's operand, "-" for standard input */
	const char *name;   /* its name in messages (io_name) */
	FILE *fp;
} cli_inputs;

int cli_next_input(cli_inputs *in);

/* The -o FILE of a program: path NULL means standard output. */
typedef struct cli_output {
	FILE *fp;           /* write here */
	const char *name;   /* its name in messages: the path, or "<stdout>" */
	atomic_file af;
} cli_output;

void cli_output_open(cli_output *o, const char *path);
/* Put a file output in place (standard output is closed, and checked, at
 * exit by lm_init). */
void cli_output_commit(cli_output *o);

#endif
