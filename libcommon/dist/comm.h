/* comm.h: the communicator of a data-parallel run: who this process is
 * (rank, world size, local rank, from the launcher's environment) and the
 * collectives the ranks call together, in the same order.
 *
 * Three implementations behind one table, as the backends of backend.h:
 *   - "local": a world of one, no library, no runtime (lm-train started
 *     plainly); every collective is a copy or nothing;
 *   - "mpi": OpenMPI, for buffers in host memory (the CPU backend);
 *   - "nccl": NCCL, for buffers in GPU memory (the CUDA backend), on a
 *     stream of its own that waits for the compute stream at each start
 *     and that the compute stream waits for at each wait.
 *
 * Buffers.  reduce and gather work on a range [a, b) of a flat float
 * buffer (the model's parameters or gradients) that every rank holds at
 * the same offsets, with an ownership partition part[0..world] (rank r
 * owns [part[r], part[r+1]); part[0] = 0, part[world] = the buffer's
 * size).  The sums are taken in rank order, ((x0 + x1) + x2) + ..., on
 * the CPU (mpi, local), so a run is reproducible and the sum of N ranks'
 * micro-batch gradients is the one a single process accumulates; NCCL's
 * sums are NCCL's (within bf16 tolerance, not bit-exact).
 *
 * Failure.  Every wait gives up after the communicator's timeout with a
 * message naming the ranks that did not answer (mpi: each message comes
 * from one rank, so it knows which); a communicator closed after a failure
 * aborts the whole job (MPI_Abort, ncclCommAbort), so no rank hangs. */
#ifndef LMPIPE_COMM_H
#define LMPIPE_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Who this process is, from the launcher's environment:
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (mpirun), PMIX_RANK with
 * SLURM_NTASKS or OMPI_COMM_WORLD_SIZE (srun --mpi=pmix), SLURM_PROCID/
 * NTASKS/LOCALID (srun); none of them: a world of one. */
typedef struct dist_env {
	int rank, world, local_rank;
	const char *source;   /* "mpirun", "pmix", "slurm" or "none" */
	int local_size;       /* ranks on this host (0: the launcher did not say) */
} dist_env;
int dist_env_detect(dist_env *d, lm_err *e);

/* The ranks Slurm's SLURM_STEP_TASKS_PER_NODE spec ("2(x3),1": two on each
 * of the first three nodes, then one) puts on node (SLURM_NODEID); -1 when
 * spec is malformed or has no such node (rank_threads.c). */
int dist_tasks_on_node(const char *spec, int node);

/* The CPU threads a rank takes when neither -j nor OMP_NUM_THREADS says:
 * its share of the host, min(allowed, max(1, online / local_size)), where
 * allowed is the processors its affinity mask holds and online the host's.
 * Ranks that share one mask (started unbound) split it; ranks bound to
 * masks of their own (Slurm's --cpus-per-task, a launcher's cores) keep
 * theirs; a world of one, or an unknown local size, 0: OpenMP's default. */
int dist_rank_threads(const dist_env *env, int allowed, int online);
/* The same for this process: 0 when OMP_NUM_THREADS is set (the user's
 * count, which OpenMP already takes). */
int dist_default_threads(const dist_env *env);

typedef struct lm_comm_req lm_comm_req;
typedef struct lm_comm lm_comm;

struct lm_comm {
	const char *name;
	int rank, world, local_rank;
	double timeout_s;     /* what a wait waits at most */
	void *impl;

	/* Start the sum over ranks of buf[a, b): afterwards each owner's part
	 * of [a, b) holds the sum (the rest of buf is left as it was).  buf
	 * must not change until the wait. */
	int (*reduce_start)(lm_comm *c, float *buf, size_t a, size_t b, const size_t *part,
			    lm_comm_req **r, lm_err *e);
	/* Start the gather of [a, b): mine holds this rank's owned part of
	 * [a, b) (it may be buf + that offset itself); afterwards buf[a, b)
	 * holds every owner's values on every rank (root < 0) or on root (buf
	 * may be NULL on the others).  Both return 0 with the collective in *r
	 * (NULL: nothing to wait for), or -1. */
	int (*gather_start)(lm_comm *c, float *buf, const float *mine, size_t a, size_t b,
			    const size_t *part, int root, lm_comm_req **r, lm_err *e);
	/* Let a started collective move on without waiting for it (OpenMPI
	 * moves messages only inside its calls); NULL: not needed. */
	void (*progress)(lm_comm *c, lm_comm_req *r);
	/* Wait for a started collective (what is to be waited for ends up in
	 * what: "the gradient reduction"), and free it.  NULL: nothing. */
	int (*wait)(lm_comm *c, lm_comm_req *r, const char *what, lm_err *e);
	/* Host memory, small: x[0..n) summed over ranks in rank order (every
	 * rank gets the sum), and the gather of every rank's bytes into
	 * all[world * bytes]. */
	int (*host_sum)(lm_comm *c, double *x, int n, const char *what, lm_err *e);
	int (*host_gather)(lm_comm *c, const void *mine, void *all, size_t bytes, const char *what,
			   lm_err *e);
	/* bytes of buf (the communicator's memory) from root to every rank. */
	int (*broadcast)(lm_comm *c, void *buf, size_t bytes, int root, const char *what, lm_err *e);
	/* Wait, up to the timeout, until the collectives queued so far are
	 * done (NCCL: before the host waits for the compute stream, which
	 * waits for them; the others finish at each wait).  NULL: nothing to
	 * do. */
	int (*settle)(lm_comm *c, const char *what, lm_err *e);
	/* ok 0: a failure ends the run: every rank is stopped (MPI_Abort). */
	void (*close)(lm_comm *c, int ok);
};

/* How the NCCL communicator finds its unique id: "mpi" (broadcast by
 * MPI; needs an MPI launch), "file:PATH" (rank 0 writes it, the others
 * read it: a shared filesystem), "tcp:HOST:PORT" (rank 0 listens). */
typedef struct dist_options {
	const char *nccl_init;  /* NULL: "mpi" when MPI launched the run */
	double timeout_s;       /* 0: DIST_TIMEOUT_DEFAULT */
	int device_buffers;     /* 1: the buffers are GPU memory (NCCL) */
	void *stream;           /* NCCL: the compute stream (cudaStream_t) */
} dist_options;

enum { DIST_TIMEOUT_DEFAULT = 60 };

/* The communicator for env: local for a world of one without device
 * buffers or nccl_init, else MPI (host buffers) or NCCL (device buffers).
 * Fails with a message when the build lacks what the launch needs. */
int dist_open(lm_comm **c, const dist_env *env, const dist_options *o, lm_err *e);

/* Whether this build has MPI (LMPIPE_MPI) and NCCL (LMPIPE_CUDA). */
int dist_have_mpi(void);
int dist_have_nccl(void);

/* The even partition of n floats over world ranks, each boundary a
 * multiple of align floats (part has world + 1 entries). */
void dist_partition(size_t *part, size_t n, int world, size_t align);

/* FNV-1a of bytes, for comparing configurations across ranks (start
 * with h = DIST_HASH_INIT). */
#define DIST_HASH_INIT 14695981039346656037ULL
uint64_t dist_hash(const void *p, size_t n, uint64_t h);

/* Every rank's hash of its configuration compared: a usage error naming
 * the first rank whose hash differs from rank 0's. */
int dist_check_same(lm_comm *c, uint64_t hash, const char *what, lm_err *e);

#endif
