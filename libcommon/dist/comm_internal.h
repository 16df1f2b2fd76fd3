/* comm_internal.h: what the communicator implementations share (comm.c
 * opens them): the constructors and the range arithmetic. */
#ifndef LMPIPE_COMM_INTERNAL_H
#define LMPIPE_COMM_INTERNAL_H

#include "dist/comm.h"

/* [a, b) intersected with rank r's part: *lo, *hi (empty: lo == hi). */
static inline void comm_owned(size_t a, size_t b, const size_t *part, int r, size_t *lo,
			      size_t *hi)
{
	*lo = a > part[r] ? a : part[r];
	*hi = b < part[r + 1] ? b : part[r + 1];
	if (*hi < *lo)
		*hi = *lo;
}

/* Seconds since an arbitrary origin (CLOCK_MONOTONIC). */
double comm_now(void);

lm_comm *comm_local_open(lm_err *e);
/* MPI_Init and the world communicator (NULL with a message when the
 * build has no MPI). */
lm_comm *comm_mpi_open(double timeout_s, lm_err *e);
/* NCCL over the ranks of env; host is the MPI communicator when there is
 * one (used for the unique id with "mpi" and for the host collectives),
 * NULL otherwise; it is owned by the NCCL communicator from then on. */
lm_comm *comm_nccl_open(const dist_env *env, const dist_options *o, lm_comm *host, lm_err *e);

#endif
