/* comm.c: the launcher's environment, opening a communicator, and what
 * every implementation shares (partition, configuration hash; comm.h). */
#define _POSIX_C_SOURCE 200809L
#include "dist/comm_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An environment variable as a number in [min, INT_MAX]: 1 found, 0 unset,
 * -1 malformed (message in e). */
static int env_int(const char *name, int min, int *out, lm_err *e)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return 0;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < min || v > INT_MAX) {
		lm_seterr(e, "environment %s='%s' is not a number >= %d", name, s, min);
		return -1;
	}
	*out = (int)v;
	return 1;
}

int dist_env_detect(dist_env *d, lm_err *e)
{
	*d = (dist_env){ 0, 1, 0, "none", 1 };
	struct { const char *rank, *size, *local, *source; } kinds[] = {
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun" },
		{ "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID", "pmix" },
		{ "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm" },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		int r = 0, w = 1, l = 0, got = env_int(kinds[i].rank, 0, &r, e);
		if (got < 0)
			return -1;
		if (!got)
			continue;
		if (env_int(kinds[i].size, 1, &w, e) < 0 || env_int(kinds[i].local, 0, &l, e) < 0)
			return -1;
		if (r >= w)
			return lm_seterr(e, "environment %s=%d is not below %s=%d", kinds[i].rank, r,
					 kinds[i].size, w);
		*d = (dist_env){ r, w, l, kinds[i].source, 0 };
		/* ranks on this host: mpirun's count, or this node's entry of
		 * the step's tasks per node under srun (unknown when absent or
		 * malformed: only the default thread count uses it) */
		int ls = 0, node = 0;
		const char *spec = getenv("SLURM_STEP_TASKS_PER_NODE");
		if (i == 0 && env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, &ls, e) > 0)
			d->local_size = ls;
		else if (i > 0 && spec && env_int("SLURM_NODEID", 0, &node, e) >= 0 &&
			 (ls = dist_tasks_on_node(spec, node)) > 0)
			d->local_size = ls;
		return 0;
	}
	return 0;
}

int dist_have_mpi(void)
{
#ifdef LMPIPE_MPI
	return 1;
#else
	return 0;
#endif
}

int dist_have_nccl(void)
{
#ifdef LMPIPE_CUDA
	return 1;
#else
	return 0;
#endif
}

int dist_open(lm_comm **c, const dist_env *env, const dist_options *o, lm_err *e)
{
	double timeout = o->timeout_s > 0 ? o->timeout_s : DIST_TIMEOUT_DEFAULT;
	int mpi_launch = strcmp(env->source, "none") && strcmp(env->source, "slurm");
	*c = NULL;
	if (!o->device_buffers && env->world == 1) {
		*c = comm_local_open(e);
	} else if (!o->device_buffers) {
		if (!mpi_launch)
			return lm_usage_err(e, "%d ranks on the CPU need MPI: start them with mpirun "
					    "or srun --mpi=pmix (%s gave rank %d of %d)", env->world,
					    env->source, env->rank, env->world);
		*c = comm_mpi_open(timeout, e);
	} else {
		lm_comm *host = NULL;
		if (mpi_launch && !(host = comm_mpi_open(timeout, e)))
			return -1;
		*c = comm_nccl_open(env, o, host, e);
	}
	if (!*c)
		return -1;
	(*c)->timeout_s = timeout;
	if ((*c)->rank != env->rank || (*c)->world != env->world) {
		lm_seterr(e, "the communicator has rank %d of %d, the environment (%s) said %d of %d",
			  (*c)->rank, (*c)->world, env->source, env->rank, env->world);
		(*c)->close(*c, 0);
		*c = NULL;
		return -1;
	}
	(*c)->local_rank = env->local_rank;
	return 0;
}

void dist_partition(size_t *part, size_t n, int world, size_t align)
{
	size_t units = (n + align - 1) / align;
	for (int r = 0; r <= world; r++) {
		size_t u = units * (size_t)r / (size_t)world;
		part[r] = u * align < n ? u * align : n;
	}
}

uint64_t dist_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

int dist_check_same(lm_comm *c, uint64_t hash, const char *what, lm_err *e)
{
	if (c->world == 1)
		return 0;
	uint64_t *all = malloc((size_t)c->world * sizeof *all);
	if (!all)
		return lm_seterr(e, "out of memory");
	int rc = c->host_gather(c, &hash, all, sizeof hash, "the configuration check", e);
	for (int r = 1; !rc && r < c->world; r++)
		if (all[r] != all[0])
			rc = lm_usage_err(e, "rank %d's %s differs from rank 0's (hash %016llx, rank 0 "
					  "%016llx): start every rank with the same options", r, what,
					  (unsigned long long)all[r], (unsigned long long)all[0]);
	free(all);
	return rc;
}
