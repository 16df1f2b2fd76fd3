/* docs_internal.h: what docs.c and decompress.c share: the decompressor
 * run as a child process ("the usual decompressors": gzip, zstd, xz). */
#ifndef LMPIPE_DOCS_INTERNAL_H
#define LMPIPE_DOCS_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "text/docs.h"

typedef struct docs_child {
	FILE *out;    /* the decompressed bytes */
	pid_t pid;
	pid_t feeder; /* the process writing a stream's taken head and rest, or 0 */
} docs_child;

enum { DOCS_HEAD_BYTES = 6 }; /* the first bytes that tell every codec */

/* The codec whose magic starts head[0 .. n), or DOCS_PLAIN. */
docs_codec docs_codec_in(const unsigned char *head, size_t n);
/* Start "PROG -dc" reading path on its stdin. */
int docs_child_start(docs_child *c, docs_codec codec, const char *path, lm_err *e);
/* The same for the stream in, whose first n_head bytes were read from it
 * into head already (path names it in messages); in is then the feeder's,
 * not to be read again. */
int docs_child_start_stream(docs_child *c, docs_codec codec, FILE *in, const unsigned char *head,
			    size_t n_head, const char *path, lm_err *e);
/* Close the pipe and wait for the child: a nonzero exit or a signal is an
 * error naming path (the decompressor has said why on stderr). */
int docs_child_finish(docs_child *c, docs_codec codec, const char *path, lm_err *e);
/* Stop a child whose output is no longer wanted, and wait for it. */
void docs_child_kill(docs_child *c);

#endif
