/* docs_internal.h: what docs.c and decompress.c share: the decompressor
 * run as a child process ("the usual decompressors": gzip, zstd, xz). */
#ifndef LMPIPE_DOCS_INTERNAL_H
#define LMPIPE_DOCS_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "text/docs.h"

typedef struct docs_child {
	FILE *out;  /* the decompressed bytes */
	pid_t pid;
} docs_child;

/* Start "PROG -dc" reading path on its stdin. */
int docs_child_start(docs_child *c, docs_codec codec, const char *path, lm_err *e);
/* Close the pipe and wait for the child: a nonzero exit or a signal is an
 * error naming path (the decompressor has said why on stderr). */
int docs_child_finish(docs_child *c, docs_codec codec, const char *path, lm_err *e);
/* Stop a child whose output is no longer wanted, and wait for it. */
void docs_child_kill(docs_child *c);

#endif
