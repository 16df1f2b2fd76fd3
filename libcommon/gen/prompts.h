/* prompts.h: reading prompts for lm-sample: from the command line, one per
 * line of a text stream, or from JSON Lines objects with a "prompt" string
 * (the object is kept so that its other fields can be passed through).
 *
 * Lines are read by base/jsonl.h's reader, in both modes.  A bad record
 * (a NUL byte or an over-long line, malformed JSON, no "prompt" string, an
 * empty prompt) is reported as PROMPT_BAD with a message naming the input and line; the
 * caller decides whether to skip it or stop. */
#ifndef LMPIPE_PROMPTS_H
#define LMPIPE_PROMPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"
#include "base/jsonl.h"

enum {
	PROMPT_END = 0,  /* no more prompts */
	PROMPT_OK = 1,   /* *rec holds a prompt */
	PROMPT_BAD = 2,  /* a bad record (message in e): skip it or stop */
};

typedef struct prompt_rec {
	char *text;        /* the prompt (NUL-terminated, may hold NULs before len) */
	size_t len;
	json_t *obj;       /* the input object (JSON Lines), else NULL; owned */
	uint64_t line;     /* 1-based line of the input, 0 for an argument */
} prompt_rec;

typedef struct prompt_reader {
	char **args;       /* prompts given as arguments (when n_args > 0) */
	int n_args, next_arg;
	FILE *fp;          /* otherwise: a stream */
	const char *name;  /* its display name */
	int jsonl;         /* lines are JSON objects */
	uint64_t line;
	jsonl_reader lines; /* the stream's lines */
} prompt_reader;

void prompt_reader_args(prompt_reader *r, char **args, int n_args);
/* fp stays the caller's. */
void prompt_reader_stream(prompt_reader *r, FILE *fp, const char *name, int jsonl);
void prompt_reader_free(prompt_reader *r);

/* Next prompt: PROMPT_OK, PROMPT_END, PROMPT_BAD (skippable) or -1 on a
 * read error.  On PROMPT_OK the caller owns rec and frees it with
 * prompt_rec_free.  Blank lines of a JSON Lines stream are ignored; in a
 * text stream an empty line is an empty prompt (PROMPT_BAD). */
int prompt_next(prompt_reader *r, prompt_rec *rec, lm_err *e);
void prompt_rec_free(prompt_rec *rec);

#endif
