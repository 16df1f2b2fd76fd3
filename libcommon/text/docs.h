/* docs.h: documents from files as people have them (plain text, JSON Lines
 * with a text field; gzip, zstd or xz compressed), written as one stream in
 * which each document ends with the end-of-text text (man 1 doc-cat).
 *
 * A plain file can be read by byte range: the range [start, end) holds the
 * documents whose first byte lies in it, so the ranges of a cut of the file
 * hold every document exactly once, whatever the cut.  The pieces of a plan
 * (docs_plan) are such ranges, or whole files where a file cannot be cut
 * (compressed).  Library code: returns errors, never prints. */
#ifndef LMPIPE_DOCS_H
#define LMPIPE_DOCS_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

typedef enum docs_format { DOCS_TEXT, DOCS_JSONL } docs_format;

/* How documents are separated in DOCS_TEXT. */
typedef enum docs_sep {
	DOCS_SEP_EOT,   /* by the end-of-text text; copied as it is */
	DOCS_SEP_BLANK, /* by one or more empty lines */
	DOCS_SEP_LINE,  /* one document per (non-empty) line */
} docs_sep;

typedef enum docs_codec { DOCS_PLAIN, DOCS_GZIP, DOCS_ZSTD, DOCS_XZ } docs_codec;

#define DOCS_TO_END UINT64_MAX

typedef struct docs_opts {
	docs_format format;
	docs_sep sep;
	const char *field;  /* DOCS_JSONL: the member holding the text */
	const char *eot;    /* written after each document (DOCS_SEP_EOT: the separator) */
	uint64_t start, end; /* byte range of a plain file; 0 and DOCS_TO_END: all of it */
} docs_opts;

typedef struct docs_stats {
	uint64_t bytes_in;  /* bytes read (decompressed) */
	uint64_t bytes_out; /* bytes written */
	uint64_t docs;      /* documents written (DOCS_SEP_EOT: separators seen) */
} docs_stats;

/* Write the documents of path (in the range of o) to out, adding to st.
 * Errors name the file and the line (JSON Lines) or byte offset. */
int docs_copy(const docs_opts *o, const char *path, FILE *out, const char *out_name,
	      docs_stats *st, lm_err *e);

/* The bytes docs_copy writes for a plain file in end-of-text mode (o's
 * range, o's end-of-text text), in place: the file is mapped and
 * [p, p + n) is the span of the documents that start in the range (a
 * UTF-8 byte-order mark at offset 0 left out), checked as docs_copy checks
 * it: a NUL byte, or a UTF-16 or UTF-32 byte-order mark, is an error naming
 * the file and byte.  A compressed file, a pipe or a line format is a
 * usage error (docs_copy reads those).  So a program can read a piece
 * without doc-cat and a pipe in front of it, and get the same bytes. */
typedef struct docs_span {
	const unsigned char *p;
	size_t n;
	void *map;      /* the mapping (NULL for an empty file) */
	size_t map_n;
} docs_span;

int docs_span_open(const docs_opts *o, const char *path, docs_span *s, lm_err *e);
void docs_span_free(docs_span *s);

/* The codec of a file, from its first bytes (not its name). */
int docs_codec_of(const char *path, docs_codec *c, lm_err *e);
const char *docs_codec_name(docs_codec c);
/* For a program that reads FILEs as text (bpe-encode, bpe-learn): an error
 * naming path when it is a regular file whose first bytes are a gzip, zstd
 * or xz magic, so that its compressed bytes are not taken for its text
 * (prog, the program, in the advice); 0 otherwise ("-" and pipes are not
 * looked at: the way to feed such bytes on purpose). */
int docs_refuse_compressed(const char *path, const char *prog, lm_err *e);

/* One piece of a plan: a byte range of a file, or all of it. */
typedef struct docs_piece {
	const char *path;
	uint64_t start, end; /* end DOCS_TO_END: to the end (whole compressed file) */
} docs_piece;

/* Cut files into pieces of at most piece_bytes (plain files; compressed
 * files are one piece each; a file that cannot be read is one piece, whose
 * reading then fails).  *pieces is malloc'd. */
int docs_plan(const char *const *paths, int n, uint64_t piece_bytes, docs_piece **pieces,
	      size_t *n_pieces, lm_err *e);

/* bytes[i]: the bytes of the documents that start in piece v[i] (read with
 * o's format and separator): a weight, so that a pipeline may start the
 * largest pieces first.  A whole or compressed file weighs its size on disk;
 * a file that cannot be read weighs 0 (its reading fails later, in its own
 * task).  Each file is mapped once and each cut between two of its pieces
 * looked for once (a plan is on a pipeline's serial path). */
void docs_plan_bytes(const docs_opts *o, const docs_piece *v, size_t n, uint64_t *bytes);

#endif
