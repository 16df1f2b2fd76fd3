/* rank_threads.c: how many CPU threads a rank of a launched world takes
 * by default, its share of the host (see comm.h).  OpenMP's own default
 * is the processors of the process's affinity mask: ranks started unbound
 * (mpirun --bind-to none, --gpus N) would each take the whole host, and N
 * of them oversubscribe it N times. */
#include "dist/comm.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

int dist_tasks_on_node(const char *spec, int node)
{
	const char *s = spec;
	if (!s || !*s || node < 0)
		return -1;
	for (;;) {
		char *end;
		long n = strtol(s, &end, 10), rep = 1;
		if (end == s || n < 0 || n > INT_MAX)
			return -1;
		s = end;
		if (s[0] == '(' && s[1] == 'x') {
			rep = strtol(s + 2, &end, 10);
			if (end == s + 2 || rep < 1 || *end != ')')
				return -1;
			s = end + 1;
		} else if (*s && *s != ',') {
			return -1;
		}
		if (node < rep)
			return (int)n;
		node -= (int)(rep < INT_MAX ? rep : INT_MAX);
		if (*s != ',')
			return -1;
		s++;
	}
}

int dist_rank_threads(const dist_env *env, int allowed, int online)
{
	if (env->world <= 1 || env->local_size <= 1 || allowed < 1 || online < 1)
		return 0;
	int share = online / env->local_size;
	if (share < 1)
		share = 1;
	return allowed < share ? allowed : share;
}

int dist_default_threads(const dist_env *env)
{
	const char *omp = getenv("OMP_NUM_THREADS");
	if (omp && *omp)
		return 0;
	cpu_set_t set;
	int allowed = sched_getaffinity(0, sizeof set, &set) ? 0 : CPU_COUNT(&set);
	return dist_rank_threads(env, allowed, (int)sysconf(_SC_NPROCESSORS_ONLN));
}
