/* comm_nccl.c: the communicator over NCCL for GPU buffers (comm.h).
 *
 * The collectives run on a stream of their own: a start records an event
 * on the compute stream, which the NCCL stream waits for, and queues the
 * NCCL calls; a wait makes the compute stream wait for the event recorded
 * after them, so neither the host nor the compute stream stops (the
 * backward pass goes on while a bucket is summed).  The ownership
 * partition is served with one ncclReduce (and ncclBroadcast) per owner
 * inside a group, since ncclReduceScatter wants equal parts.  The host
 * collectives go through MPI when it launched the run, else through NCCL
 * on a small device buffer; before each, the last queued collective is
 * polled until the timeout, and a communicator that fails is aborted
 * (ncclCommAbort), so a dead rank ends the others' run. */
#define _POSIX_C_SOURCE 200809L
#include "dist/comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LMPIPE_CUDA
#include <cuda_runtime.h>
#include <time.h>
/* nccl.h declares functions with empty parameter lists */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "dist/nccl_id.h"

enum { HOST_SCRATCH = 1 << 16, POLL_NS = 50000 };

typedef struct nccl_impl {
	ncclComm_t comm;
	cudaStream_t compute, st;
	cudaEvent_t last;         /* after the last queued collective */
	int have_last;
	lm_comm *host;            /* MPI, or NULL */
	char *scratch;            /* device, HOST_SCRATCH bytes: host collectives */
	int failed;
} nccl_impl;

struct lm_comm_req {
	cudaEvent_t done;
};

#define IMPL(c) ((nccl_impl *)(c)->impl)

static int nccl_fail(lm_comm *c, ncclResult_t r, const char *what, lm_err *e)
{
	IMPL(c)->failed = 1;
	return lm_seterr(e, "NCCL failed in %s: %s", what, ncclGetErrorString(r));
}

static int cuda_fail(lm_comm *c, cudaError_t r, const char *what, lm_err *e)
{
	IMPL(c)->failed = 1;
	return lm_seterr(e, "CUDA failed in %s: %s", what, cudaGetErrorString(r));
}

/* Poll ev (and NCCL's asynchronous error) until done or the timeout. */
static int poll_event(lm_comm *c, cudaEvent_t ev, const char *what, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	double deadline = comm_now() + c->timeout_s;
	for (;;) {
		cudaError_t q = cudaEventQuery(ev);
		if (q == cudaSuccess)
			return 0;
		if (q != cudaErrorNotReady)
			return cuda_fail(c, q, what, e);
		ncclResult_t a;
		if (ncclCommGetAsyncError(m->comm, &a) == ncclSuccess && a != ncclSuccess &&
		    a != ncclInProgress)
			return nccl_fail(c, a, what, e);
		if (comm_now() > deadline) {
			m->failed = 1;
			return lm_seterr(e, "%s did not complete within %g s: a rank died or hangs "
					 "(--dist-timeout)", what, c->timeout_s);
		}
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
}

/* The communicator is non-blocking (so that a missing rank cannot hang
 * its creation): a call may answer ncclInProgress while NCCL still
 * enqueues; then the state is polled until it settles (or the timeout). */
static ncclResult_t enqueued(lm_comm *c, ncclResult_t r)
{
	if (r != ncclInProgress)
		return r;
	double deadline = comm_now() + c->timeout_s;
	ncclResult_t a = ncclInProgress;
	while (ncclCommGetAsyncError(IMPL(c)->comm, &a) == ncclSuccess && a == ncclInProgress &&
	       comm_now() < deadline) {
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
	return a == ncclInProgress ? ncclSystemError : a;
}

/* Inside a group, a call only records the operation. */
static int queued(ncclResult_t r)
{
	return r == ncclSuccess || r == ncclInProgress;
}

/* The NCCL stream waits for what the compute stream queued so far. */
static int begin(lm_comm *c, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	cudaEvent_t ev;
	cudaError_t r = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (r == cudaSuccess && (r = cudaEventRecord(ev, m->compute)) == cudaSuccess)
		r = cudaStreamWaitEvent(m->st, ev, 0);
	cudaEventDestroy(ev);
	return r == cudaSuccess ? 0 : cuda_fail(c, r, "a collective's start", e);
}

static lm_comm_req *end(lm_comm *c, ncclResult_t nr, const char *what, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	if (nr != ncclSuccess) {
		nccl_fail(c, nr, what, e);
		return NULL;
	}
	lm_comm_req *q = malloc(sizeof *q);
	cudaError_t r = q ? cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming) : cudaErrorMemoryAllocation;
	if (r == cudaSuccess)
		r = cudaEventRecord(q->done, m->st);
	if (r == cudaSuccess && !m->have_last)
		r = cudaEventCreateWithFlags(&m->last, cudaEventDisableTiming);
	if (r == cudaSuccess && (r = cudaEventRecord(m->last, m->st)) == cudaSuccess)
		m->have_last = 1;
	if (r != cudaSuccess) {
		free(q);
		cuda_fail(c, r, what, e);
		return NULL;
	}
	return q;
}

static int nccl_reduce(lm_comm *c, float *buf, size_t a, size_t b, const size_t *part,
		       lm_comm_req **out, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	*out = NULL;
	if (c->world == 1)
		return 0; /* the sum over one rank is its own gradient, already in place */
	if (begin(c, e))
		return -1;
	ncclResult_t r = ncclGroupStart();
	for (int j = 0; queued(r) && j < c->world; j++) {
		size_t lo, hi;
		comm_owned(a, b, part, j, &lo, &hi);
		if (hi > lo)
			r = ncclReduce(buf + lo, buf + lo, hi - lo, ncclFloat, ncclSum, j, m->comm, m->st);
	}
	ncclResult_t g = enqueued(c, ncclGroupEnd());
	return (*out = end(c, !queued(r) ? r : g, "the gradient sum", e)) ? 0 : -1;
}

static int nccl_gather(lm_comm *c, float *buf, const float *mine, size_t a, size_t b,
		       const size_t *part, int root, lm_comm_req **out, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	*out = NULL;
	if (begin(c, e))
		return -1;
	ncclResult_t r = ncclGroupStart();
	for (int j = 0; queued(r) && j < c->world; j++) {
		size_t lo, hi;
		comm_owned(a, b, part, j, &lo, &hi);
		if (hi == lo)
			continue;
		if (root < 0)
			r = ncclBroadcast(j == c->rank ? mine : buf + lo, buf + lo, hi - lo, ncclFloat, j, m->comm, m->st);
		else if (j == c->rank && j != root)
			r = ncclSend(mine, hi - lo, ncclFloat, root, m->comm, m->st);
		else if (c->rank == root && j != root)
			r = ncclRecv(buf + lo, hi - lo, ncclFloat, j, m->comm, m->st);
		else if (j == c->rank && mine != buf + lo &&
			 cudaMemcpyAsync(buf + lo, mine, (hi - lo) * sizeof *buf, cudaMemcpyDeviceToDevice,
					 m->st) != cudaSuccess)
			r = ncclUnhandledCudaError;
	}
	ncclResult_t g = enqueued(c, ncclGroupEnd());
	return (*out = end(c, !queued(r) ? r : g, "the gather", e)) ? 0 : -1;
}

static int nccl_wait(lm_comm *c, lm_comm_req *q, const char *what, lm_err *e)
{
	if (!q)
		return 0;
	cudaError_t r = cudaStreamWaitEvent(IMPL(c)->compute, q->done, 0);
	cudaEventDestroy(q->done);
	free(q);
	return r == cudaSuccess ? 0 : cuda_fail(c, r, what, e);
}

/* Before a host collective: what is queued must finish in time. */
static int settle(lm_comm *c, const char *what, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	return m->have_last ? poll_event(c, m->last, what, e) : 0;
}

static int nccl_host_gather(lm_comm *c, const void *mine, void *all, size_t bytes,
			    const char *what, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	if (c->world == 1) { /* one rank's values are the gathering: no NCCL call, no wait */
		memmove(all, mine, bytes);
		return 0;
	}
	if (settle(c, what, e))
		return -1;
	if (m->host)
		return m->host->host_gather(m->host, mine, all, bytes, what, e);
	if (bytes * (size_t)(c->world + 1) > HOST_SCRATCH)
		return lm_seterr(e, "%zu bytes per rank are too many for %s", bytes, what);
	char *send = m->scratch, *recv = m->scratch + bytes;
	cudaError_t r = cudaMemcpyAsync(send, mine, bytes, cudaMemcpyHostToDevice, m->st);
	if (r != cudaSuccess)
		return cuda_fail(c, r, what, e);
	ncclResult_t nr = enqueued(c, ncclAllGather(send, recv, bytes, ncclChar, m->comm, m->st));
	if (nr != ncclSuccess)
		return nccl_fail(c, nr, what, e);
	if ((r = cudaMemcpyAsync(all, recv, bytes * c->world, cudaMemcpyDeviceToHost, m->st)) != cudaSuccess)
		return cuda_fail(c, r, what, e);
	lm_comm_req *q = end(c, ncclSuccess, what, e);
	if (!q)
		return -1;
	int rc = poll_event(c, q->done, what, e);
	cudaEventDestroy(q->done);
	free(q);
	return rc;
}

static int nccl_host_sum(lm_comm *c, double *x, int n, const char *what, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	if (c->world == 1)   /* the sum over one rank: its own values (a gather, a wait for
			      * the device and a poll each step, measured 3 % of a small step) */
		return 0;
	if (m->host)
		return settle(c, what, e) ? -1 : m->host->host_sum(m->host, x, n, what, e);
	double *all = malloc((size_t)c->world * n * sizeof *all);
	if (!all)
		return lm_seterr(e, "out of memory");
	int rc = nccl_host_gather(c, x, all, (size_t)n * sizeof *x, what, e);
	for (int k = 0; !rc && k < n; k++) {
		double acc = all[k];
		for (int i = 1; i < c->world; i++)
			acc += all[(size_t)i * n + k];
		x[k] = acc;
	}
	free(all);
	return rc;
}

static int nccl_broadcast(lm_comm *c, void *buf, size_t bytes, int root, const char *what,
			  lm_err *e)
{
	nccl_impl *m = IMPL(c);
	if (begin(c, e))
		return -1;
	lm_comm_req *q = end(c, enqueued(c, ncclBroadcast(buf, buf, bytes, ncclChar, root, m->comm, m->st)),
			     what, e);
	return q ? nccl_wait(c, q, what, e) : -1;
}

static void nccl_close(lm_comm *c, int ok)
{
	nccl_impl *m = IMPL(c);
	int bad = !ok || m->failed;
	if (m->comm) {
		if (bad)
			ncclCommAbort(m->comm);
		else
			ncclCommDestroy(m->comm);
	}
	if (m->have_last)
		cudaEventDestroy(m->last);
	if (m->scratch)
		cudaFree(m->scratch);
	if (m->st)
		cudaStreamDestroy(m->st);
	if (m->host)
		m->host->close(m->host, !bad);
	free(m);
	free(c);
}

/* The unique id from rank 0: through MPI, a file or TCP. */
static int share_id(const dist_env *env, const char *spec, lm_comm *host, ncclUniqueId *id,
		    double timeout, lm_err *e)
{
	if (env->rank == 0) {
		ncclResult_t r = ncclGetUniqueId(id);
		if (r != ncclSuccess)
			return lm_seterr(e, "ncclGetUniqueId: %s", ncclGetErrorString(r));
	}
	if (!strcmp(spec, "mpi")) {
		if (!host)
			return lm_usage_err(e, "--nccl-init mpi needs a run started by mpirun or srun "
					    "--mpi=pmix; else give file:PATH or tcp:HOST:PORT");
		return host->broadcast(host, id, sizeof *id, 0, "the NCCL id", e);
	}
	if (!strcmp(spec, "none"))
		return 0;
	return nccl_id_share(spec, env->rank, env->world, id, sizeof *id, timeout, e);
}

/* ncclCommInitRankConfig without blocking, polled until the timeout. */
static int init_comm(lm_comm *c, const dist_env *env, ncclUniqueId id, lm_err *e)
{
	nccl_impl *m = IMPL(c);
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&m->comm, env->world, id, env->rank, &cfg);
	double deadline = comm_now() + c->timeout_s;
	while (r == ncclInProgress || r == ncclSuccess) {
		ncclResult_t a;
		if (ncclCommGetAsyncError(m->comm, &a) != ncclSuccess)
			break;
		if (a == ncclSuccess)
			return 0;
		if (a != ncclInProgress) {
			r = a;
			break;
		}
		if (comm_now() > deadline) {
			m->failed = 1;
			return lm_seterr(e, "the NCCL communicator of %d ranks did not form within %g s: "
					 "a rank is missing (--dist-timeout)", env->world, c->timeout_s);
		}
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
	return nccl_fail(c, r, "ncclCommInitRank", e);
}

lm_comm *comm_nccl_open(const dist_env *env, const dist_options *o, lm_comm *host, lm_err *e)
{
	lm_comm *c = calloc(1, sizeof *c);
	nccl_impl *m = calloc(1, sizeof *m);
	if (!c || !m) {
		free(c);
		free(m);
		if (host)
			host->close(host, 0);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	*c = (lm_comm){
		.name = "nccl", .rank = env->rank, .world = env->world,
		.timeout_s = o->timeout_s > 0 ? o->timeout_s : DIST_TIMEOUT_DEFAULT, .impl = m,
		.reduce_start = nccl_reduce, .gather_start = nccl_gather, .wait = nccl_wait,
		.host_sum = nccl_host_sum, .host_gather = nccl_host_gather,
		.broadcast = nccl_broadcast, .settle = settle, .close = nccl_close,
	};
	m->host = host;
	m->compute = (cudaStream_t)o->stream;
	/* A world of one started plainly needs no id sharing. */
	const char *spec = o->nccl_init ? o->nccl_init : host || env->world > 1 ? "mpi" : "none";
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	cudaError_t cr = cudaStreamCreateWithFlags(&m->st, cudaStreamNonBlocking);
	if (cr == cudaSuccess)
		cr = cudaMalloc((void **)&m->scratch, HOST_SCRATCH);
	if (cr != cudaSuccess) {
		cuda_fail(c, cr, "the NCCL communicator's stream", e);
		nccl_close(c, 0);
		return NULL;
	}
	if (share_id(env, spec, host, &id, c->timeout_s, e) || init_comm(c, env, id, e)) {
		nccl_close(c, 0);
		return NULL;
	}
	nccl_id_done(spec, env->rank);
	return c;
}

#else

lm_comm *comm_nccl_open(const dist_env *env, const dist_options *o, lm_comm *host, lm_err *e)
{
	if (host)
		host->close(host, 1);
	lm_seterr(e, "this build has no CUDA, so no NCCL: use --device cpu (MPI)");
	return NULL;
}

#endif
