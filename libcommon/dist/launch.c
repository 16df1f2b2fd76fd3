/* launch.c: a program's --gpus N started plainly, as N ranks under the
 * MPI launcher (see launch.h). */
#define _POSIX_C_SOURCE 200809L
#include "dist/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist/comm.h"

enum { ARGV_EXTRA = 8, NUM_LEN = 24 };

int dist_launch(int ranks, char **argv, lm_err *e)
{
	dist_env env;
	if (ranks <= 1 || dist_env_detect(&env, e) || env.world > 1)
		return 0;
	const char *launcher = getenv("LMPIPE_MPIRUN");
	if (!launcher || !*launcher)
		launcher = "mpirun";
	int argc = 0;
	while (argv[argc])
		argc++;
	char **v = calloc((size_t)argc + ARGV_EXTRA, sizeof *v);
	char np[NUM_LEN];
	if (!v)
		return lm_seterr(e, "out of memory");
	snprintf(np, sizeof np, "%d", ranks);
	int k = 0;
	v[k++] = (char *)launcher;
	if (geteuid() == 0)
		v[k++] = "--allow-run-as-root";
	v[k++] = "-np";
	v[k++] = np;
	for (int i = 0; i < argc; i++)
		v[k++] = argv[i];
	v[k] = NULL;
	/* OpenMPI binds each of two ranks to one core (and more to a package),
	 * which would leave a rank's threads one core; unbound, each rank
	 * takes its share of the host (dist_default_threads).  An MCA
	 * variable, not an option, so that another launcher is not given one
	 * it does not know; one the user set is kept. */
	setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 0);
	execvp(launcher, v);
	lm_seterr(e, "--gpus %d: cannot start %s (set LMPIPE_MPIRUN, or start the ranks with mpirun "
		  "-np %d or srun):", ranks, launcher, ranks);
	free(v);
	return -1;
}
