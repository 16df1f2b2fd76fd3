/* nccl_id.h: NCCL's unique id from rank 0 to the others without MPI
 * (--nccl-init file:PATH or tcp:HOST:PORT; nccl_id.c). */
#ifndef LMPIPE_NCCL_ID_H
#define LMPIPE_NCCL_ID_H

#include <stddef.h>

#include "base/err.h"

/* Rank 0 publishes the n bytes of id, the others receive them; waits up
 * to timeout seconds. */
int nccl_id_share(const char *spec, int rank, int world, void *id, size_t n, double timeout,
		  lm_err *e);
/* After every rank joined: rank 0 removes the file of file:PATH. */
void nccl_id_done(const char *spec, int rank);

#endif
