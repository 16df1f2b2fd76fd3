/* jsonl.h: the one reader of JSON Lines, the programs' record inputs
 * (rollouts, prompts, problems, preference pairs): one JSON object a line.
 *
 * Lines are numbered from 1, and every message names the input and the
 * line ("name:line: ...").  A line holds no NUL byte (JSON text has none;
 * "\u0000" inside a string is the way to write one) and is at most
 * max_line bytes (JSONL_LINE_MAX unless the caller lowers it), so that
 * neither a binary file nor one without newlines makes the reader read
 * past a string's end or hold unbounded memory.  Such a line is a bad
 * line (JSONL_BAD, message in e) after which the reader stands at the
 * next line: the caller may stop or skip it. */
#ifndef LMPIPE_JSONL_H
#define LMPIPE_JSONL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"

/* The longest line read by default: 64 MiB, far beyond any record the
 * programs write (a rollout of 4096 tokens with log-probs is ~100 KB). */
#define JSONL_LINE_MAX ((size_t)64 << 20)

/* Bytes of a line read at a time (a longer line takes several reads). */
enum { JSONL_PIECE = 1 << 12 };

enum {
	JSONL_END = 0,  /* no more lines */
	JSONL_OK = 1,   /* a line (an object, for jsonl_next) */
	JSONL_BAD = 2,  /* a bad line (message in e); the reader is at the next one */
};

typedef struct jsonl_reader {
	FILE *fp;               /* the caller's */
	const char *name;       /* its display name, for messages */
	size_t max_line;
	unsigned long lineno;   /* the line last read, from 1 */
	char *line;             /* it, NUL-terminated, without its newline */
	size_t len;
	size_t cap;
	int bad_json;           /* the last JSONL_BAD of jsonl_next was malformed JSON, */
	json_error_t err;       /* described here */
} jsonl_reader;

void jsonl_init(jsonl_reader *r, FILE *fp, const char *name);
void jsonl_free(jsonl_reader *r);

/* The next line as it is (its "\n", and a "\r" before it, removed) in
 * r->line, r->len: JSONL_OK, JSONL_END, JSONL_BAD (a NUL byte, a line over
 * max_line), or -1 on a read error. */
int jsonl_read_line(jsonl_reader *r, lm_err *e);

/* The next line that is not blank, trailing white space removed (r->line,
 * r->len), parsed with jansson's flags into a JSON object *obj that the
 * caller owns: JSONL_OK, JSONL_END, JSONL_BAD (a bad line as above,
 * "bad JSON: ... (column N)", "not a JSON object"), or -1 on a read
 * error. */
int jsonl_next(jsonl_reader *r, size_t flags, json_t **obj, lm_err *e);

/* What to add to a "bad JSON" message for a line of len bytes that is
 * another program's known text output (lm-sample's, without --jsonl): advice
 * beginning "; ", else "". */
const char *jsonl_bad_hint(const char *line, size_t len);

/* Many records at once: up to max lines read as jsonl_next reads them,
 * then parsed on OpenMP threads (jansson's parser is most of the time a
 * large input takes), returned in line order.  Lines per batch by
 * default: */
enum { JSONL_BATCH = 256 };

typedef struct jsonl_batch {
	size_t n;               /* objects of this batch, in line order */
	json_t **obj;           /* [n]: the batch's, released by the next call or jsonl_batch_free */
	unsigned long *lineno;  /* [n]: their line numbers */
	char *text;             /* the lines, each NUL-terminated */
	size_t *off, *len;      /* [n]: line i at text + off[i], len[i] bytes */
	json_error_t *err;      /* [n]: the parser's messages */
	size_t cap, text_cap;
} jsonl_batch;

void jsonl_batch_init(jsonl_batch *b);
void jsonl_batch_free(jsonl_batch *b);

/* The next objects, the previous batch's released: b->n objects, all the
 * records before the first problem, and what came after them: JSONL_OK
 * (max objects, more may follow), JSONL_END, JSONL_BAD (the message that
 * jsonl_next gives for the first bad line, which r->lineno, r->bad_json
 * and r->err then describe), or -1 on a read error.  After anything but
 * JSONL_OK the reader may stand beyond the bad line: stop there. */
int jsonl_next_batch(jsonl_reader *r, size_t flags, jsonl_batch *b, size_t max, lm_err *e);

#endif
