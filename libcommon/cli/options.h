/* options.h: declarative command-line options.
 *
 * Each program declares its options once, in a table; the parser, the range
 * checks and the --help text all come from that table (in the manner of git's
 * parse-options).  Options may appear anywhere among the operands; "--" ends
 * them.  Long options take "--name=value" or "--name value"; short ones
 * "-xVALUE" or "-x VALUE"; flags combine ("-vq"). */
#ifndef LMPIPE_OPTIONS_H
#define LMPIPE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

typedef enum opt_type {
	OPT_FLAG,    /* int: set to 1 */
	OPT_INT,     /* long long, strict decimal, range [min, max] */
	OPT_SIZE,    /* uint64_t, decimal with optional k M G (x1000) or Ki Mi Gi (x1024) */
	OPT_DOUBLE,  /* double, range [min, max] */
	OPT_STR,     /* const char *: the argument itself */
	OPT_STRLIST, /* opt_strlist: each occurrence appends (repeatable) */
	OPT_CHOICE,  /* const char *: one of the NULL-terminated choices */
} opt_type;

typedef struct opt_strlist {
	const char **v;
	size_t n;
} opt_strlist;

typedef struct opt_def {
	char shortname;          /* 0: none */
	const char *longname;    /* NULL: none */
	opt_type type;
	void *target;
	const char *argname;     /* shown in --help: "N", "FILE" ... */
	const char *help;        /* one line */
	double min, max;         /* OPT_INT, OPT_SIZE, OPT_DOUBLE: checked when min < max */
	const char *const *choices; /* OPT_CHOICE */
} opt_def;

/* Terminates an option table. */
#define OPT_END { 0, NULL, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL }

typedef struct opt_prog {
	const char *usage;   /* after the program name: "[OPTION]... [FILE]..." */
	const char *summary; /* one or two lines on what the program does */
	const opt_def *opts; /* ends with OPT_END; -h/--help is implicit */
	const char *epilog;  /* optional text after the option list */
} opt_prog;

enum { OPT_OK = 0, OPT_HELP = 1, OPT_VERSION = 2 };

/* Parse argv.  Operands are collected, in order, into *operands (a
 * NULL-terminated array owned by the caller, freed with free()) and their
 * count into *n_operands.  Returns OPT_OK, OPT_HELP when -h/--help was
 * given, or -1 with a usage error (code 2) in e. */
int opt_parse(const opt_prog *p, int argc, char **argv,
	      char ***operands, int *n_operands, lm_err *e);

/* The same, also setting seen[i] to 1 for each option opts[i] given (to
 * tell "given" from "left at its default"); seen has one entry per option. */
int opt_parse_seen(const opt_prog *p, int argc, char **argv,
		   char ***operands, int *n_operands, unsigned char *seen, lm_err *e);

/* Write the --help text generated from the table. */
void opt_help(const opt_prog *p, FILE *fp);

/* Parse helpers with the same strict rules, for programs that read numbers
 * from files or operands.  Return 0 or -1 with a message naming what. */
int opt_parse_int(const char *s, long long min, long long max, long long *out,
		  const char *what, lm_err *e);
int opt_parse_size(const char *s, uint64_t *out, const char *what, lm_err *e);
int opt_parse_double(const char *s, double *out, const char *what, lm_err *e);
/* A --range operand "START:END" of sizes (END empty: *end = to_end); a
 * usage error names it. */
int opt_parse_range(const char *s, uint64_t *start, uint64_t *end, uint64_t to_end, lm_err *e);

/* Program front end: parse, print --help to stdout and exit 0, or print
 * "prog: message" plus a hint and exit 2.  Returns the operand count. */
int opt_parse_or_exit(const opt_prog *p, int argc, char **argv, char ***operands);
/* Whether the option of opts named longname was given (seen as
 * opt_parse_seen fills it); 0 for a name the table lacks. */
int opt_given(const opt_def *opts, const unsigned char *seen, const char *longname);

/* The same with opt_parse_seen's seen. */
int opt_parse_or_exit_seen(const opt_prog *p, int argc, char **argv, char ***operands,
			   unsigned char *seen);

#endif
