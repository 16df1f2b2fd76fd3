/* comm_mpi.c: the communicator over OpenMPI for host buffers (comm.h).
 *
 * Every collective is point-to-point messages, one per pair of ranks, so
 * that (1) the sums are taken in rank order whatever MPI's own algorithms
 * would do (MPI_Allreduce's order is not specified), and (2) a wait that
 * runs out of time knows which ranks' messages did not come.  A reduce
 * sends each owner its part of the range and receives every rank's copy
 * of its own part into a scratch buffer, summed at the wait; a gather
 * sends this rank's part to every rank (or the root).  Waits poll
 * (MPI_Testall) until the timeout. */
#define _POSIX_C_SOURCE 200809L
#include "dist/comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LMPIPE_MPI
#include <mpi.h>
#include <time.h>

enum { TAG_MAX = 30000, PEERS_NAMED = 8, POLL_NS = 20000 };

typedef struct mpi_impl {
	int tag;              /* of the next collective */
	int failed;
} mpi_impl;

struct lm_comm_req {
	MPI_Request *req;
	int *peer;            /* the rank each request talks to */
	int *is_recv;
	int n;
	float *sum_to;        /* reduce: the owned part, and the copies to add */
	float *copies;
	size_t count;
	int me;
};

static int next_tag(lm_comm *c)
{
	mpi_impl *m = c->impl;
	m->tag = (m->tag + 1) % TAG_MAX;
	return m->tag;
}

static lm_comm_req *req_new(int slots, lm_err *e)
{
	lm_comm_req *r = calloc(1, sizeof *r);
	if (r) {
		r->req = malloc((size_t)slots * sizeof *r->req);
		r->peer = malloc((size_t)slots * sizeof *r->peer);
		r->is_recv = malloc((size_t)slots * sizeof *r->is_recv);
	}
	if (!r || !r->req || !r->peer || !r->is_recv) {
		if (r) {
			free(r->req);
			free(r->peer);
			free(r->is_recv);
			free(r);
		}
		lm_seterr(e, "out of memory");
		return NULL;
	}
	return r;
}

static void req_free(lm_comm_req *r)
{
	if (!r)
		return;
	free(r->req);
	free(r->peer);
	free(r->is_recv);
	free(r->copies);
	free(r);
}

/* Messages are at most INT_MAX elements: the ranges here are buckets. */
static int post(lm_comm_req *r, int recv, void *p, size_t count, MPI_Datatype t, int peer,
		int tag, lm_err *e)
{
	if (count > (size_t)0x7fffffff)
		return lm_seterr(e, "a message of %zu elements is too large for MPI", count);
	int rc = recv ? MPI_Irecv(p, (int)count, t, peer, tag, MPI_COMM_WORLD, &r->req[r->n])
		      : MPI_Isend(p, (int)count, t, peer, tag, MPI_COMM_WORLD, &r->req[r->n]);
	if (rc != MPI_SUCCESS)
		return lm_seterr(e, "MPI_I%s to rank %d failed (code %d)", recv ? "recv" : "send", peer, rc);
	r->peer[r->n] = peer;
	r->is_recv[r->n] = recv;
	r->n++;
	return 0;
}

static int mpi_reduce(lm_comm *c, float *buf, size_t a, size_t b, const size_t *part,
		      lm_comm_req **out, lm_err *e)
{
	int W = c->world, me = c->rank, tag = next_tag(c);
	lm_comm_req *r = req_new(2 * W, e);
	if (!(*out = r))
		return -1;
	size_t lo, hi;
	comm_owned(a, b, part, me, &lo, &hi);
	r->count = hi - lo;
	r->me = me;
	r->sum_to = buf + lo;
	if (r->count && !(r->copies = malloc((size_t)W * r->count * sizeof *r->copies))) {
		req_free(r);
		*out = NULL;
		return lm_seterr(e, "out of memory");
	}
	for (int j = 0; j < W; j++) {
		size_t jl, jh;
		comm_owned(a, b, part, j, &jl, &jh);
		if (j == me)
			continue;
		if ((jh > jl && post(r, 0, buf + jl, jh - jl, MPI_FLOAT, j, tag, e)) ||
		    (r->count && post(r, 1, r->copies + (size_t)j * r->count, r->count, MPI_FLOAT, j,
				      tag, e))) {
			req_free(r);
			*out = NULL;
			return -1;
		}
	}
	return 0;
}

static int mpi_gather(lm_comm *c, float *buf, const float *mine, size_t a, size_t b,
		      const size_t *part, int root, lm_comm_req **out, lm_err *e)
{
	int W = c->world, me = c->rank, tag = next_tag(c);
	lm_comm_req *r = req_new(2 * W, e);
	if (!(*out = r))
		return -1;
	size_t lo, hi;
	comm_owned(a, b, part, me, &lo, &hi);
	if (hi > lo && (root < 0 || root == me) && mine != buf + lo)
		memmove(buf + lo, mine, (hi - lo) * sizeof *buf);
	for (int j = 0; j < W; j++) {
		size_t jl, jh;
		comm_owned(a, b, part, j, &jl, &jh);
		if (j == me)
			continue;
		if ((hi > lo && (root < 0 || root == j) &&
		     post(r, 0, (void *)mine, hi - lo, MPI_FLOAT, j, tag, e)) ||
		    (jh > jl && (root < 0 || root == me) &&
		     post(r, 1, buf + jl, jh - jl, MPI_FLOAT, j, tag, e))) {
			req_free(r);
			*out = NULL;
			return -1;
		}
	}
	return 0;
}

/* Poll until every request is done or the timeout passes; then name the
 * ranks that did not answer. */
static int finish(lm_comm *c, lm_comm_req *r, const char *what, lm_err *e)
{
	double deadline = comm_now() + c->timeout_s;
	for (;;) {
		int done = 0;
		if (MPI_Testall(r->n, r->req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
			return lm_seterr(e, "MPI failed during %s", what);
		if (done)
			return 0;
		if (comm_now() > deadline)
			break;
		struct timespec ts = { 0, POLL_NS };
		nanosleep(&ts, NULL);
	}
	char names[256] = "";
	int named = 0, who[PEERS_NAMED];
	size_t len = 0;
	for (int i = 0; i < r->n && named < PEERS_NAMED; i++) {
		int flag = 0;
		MPI_Test(&r->req[i], &flag, MPI_STATUS_IGNORE);
		if (flag)
			continue;
		int dup = 0;
		for (int k = 0; k < named; k++)
			dup |= who[k] == r->peer[i];
		if (dup)
			continue;
		who[named] = r->peer[i];
		len += snprintf(names + len, len < sizeof names ? sizeof names - len : 0, "%s%d",
				named ? ", " : "", r->peer[i]);
		named++;
	}
	return lm_seterr(e, "no answer from %s%s within %g s during %s: %s died, hangs or runs "
			 "something else (--dist-timeout)", named ? (named > 1 ? "ranks " : "rank ") : "",
			 named ? names : "the other ranks", c->timeout_s, what, named > 1 ? "they" : "it");
}

static void mpi_progress(lm_comm *c, lm_comm_req *r)
{
	int done;
	if (r)
		MPI_Testall(r->n, r->req, &done, MPI_STATUSES_IGNORE);
}

static int mpi_wait(lm_comm *c, lm_comm_req *r, const char *what, lm_err *e)
{
	if (!r)
		return 0;
	int rc = finish(c, r, what, e);
	if (!rc && r->copies) {
		size_t n = r->count;
		float *out = r->sum_to;
		for (size_t k = 0; k < n; k++) {
			float acc = r->me == 0 ? out[k] : r->copies[k];
			for (int i = 1; i < c->world; i++)
				acc += i == r->me ? out[k] : r->copies[(size_t)i * n + k];
			out[k] = acc;
		}
	}
	if (rc)
		((mpi_impl *)c->impl)->failed = 1;
	req_free(r);
	return rc;
}

static int mpi_host_gather(lm_comm *c, const void *mine, void *all, size_t bytes,
			   const char *what, lm_err *e)
{
	int W = c->world, me = c->rank, tag = next_tag(c);
	lm_comm_req *r = req_new(2 * W, e);
	if (!r)
		return -1;
	memmove((char *)all + (size_t)me * bytes, mine, bytes);
	for (int j = 0; j < W; j++)
		if (j != me && (post(r, 0, (void *)mine, bytes, MPI_BYTE, j, tag, e) ||
				post(r, 1, (char *)all + (size_t)j * bytes, bytes, MPI_BYTE, j, tag, e))) {
			req_free(r);
			return -1;
		}
	return mpi_wait(c, r, what, e);
}

static int mpi_host_sum(lm_comm *c, double *x, int n, const char *what, lm_err *e)
{
	double *all = malloc((size_t)c->world * n * sizeof *all);
	if (!all)
		return lm_seterr(e, "out of memory");
	int rc = mpi_host_gather(c, x, all, (size_t)n * sizeof *x, what, e);
	for (int k = 0; !rc && k < n; k++) {
		double acc = all[k];
		for (int i = 1; i < c->world; i++)
			acc += all[(size_t)i * n + k];
		x[k] = acc;
	}
	free(all);
	return rc;
}

static int mpi_broadcast(lm_comm *c, void *buf, size_t bytes, int root, const char *what,
			 lm_err *e)
{
	int W = c->world, me = c->rank, tag = next_tag(c);
	lm_comm_req *r = req_new(W, e);
	if (!r)
		return -1;
	for (int j = 0; j < W; j++)
		if (j != me && (me == root || j == root) &&
		    post(r, me != root, buf, bytes, MPI_BYTE, j, tag, e)) {
			req_free(r);
			return -1;
		}
	return mpi_wait(c, r, what, e);
}

static void mpi_close(lm_comm *c, int ok)
{
	mpi_impl *m = c->impl;
	if ((!ok || m->failed) && c->world > 1) {
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Finalize();
	free(m);
	free(c);
}

lm_comm *comm_mpi_open(double timeout_s, lm_err *e)
{
	lm_comm *c = calloc(1, sizeof *c);
	mpi_impl *m = calloc(1, sizeof *m);
	if (!c || !m) {
		free(c);
		free(m);
		lm_seterr(e, "out of memory");
		return NULL;
	}
	int provided;
	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
		free(c);
		free(m);
		lm_seterr(e, "MPI_Init failed");
		return NULL;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	*c = (lm_comm){
		.name = "mpi", .timeout_s = timeout_s, .impl = m,
		.reduce_start = mpi_reduce, .gather_start = mpi_gather, .progress = mpi_progress,
		.wait = mpi_wait,
		.host_sum = mpi_host_sum, .host_gather = mpi_host_gather,
		.broadcast = mpi_broadcast, .close = mpi_close,
	};
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->world);
	return c;
}

#else

lm_comm *comm_mpi_open(double timeout_s, lm_err *e)
{
	lm_seterr(e, "this build has no MPI (install libopenmpi-dev and rebuild): a run of several "
		  "ranks needs it");
	return NULL;
}

#endif
