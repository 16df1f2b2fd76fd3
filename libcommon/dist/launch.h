/* launch.h: --gpus N given to a program started plainly: the program
 * starts itself again as N ranks under the MPI launcher (lm-train,
 * rl-update). */
#ifndef LMPIPE_DIST_LAUNCH_H
#define LMPIPE_DIST_LAUNCH_H

#include "base/err.h"

/* ranks > 1 and no launcher started this process: exec
 * $LMPIPE_MPIRUN (default mpirun) -np ranks argv... (with
 * --allow-run-as-root for root), which does not return unless it fails
 * (-1).  Otherwise 0: nothing to do. */
int dist_launch(int ranks, char **argv, lm_err *e);

#endif
