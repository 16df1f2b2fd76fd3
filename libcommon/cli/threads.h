/* threads.h: how many threads a program runs when -j is not given. */
#ifndef LMPIPE_CLI_THREADS_H
#define LMPIPE_CLI_THREADS_H

/* asked when it is above 0 (the -j given), else OpenMP's default: the CPUs
 * this process may run on (its affinity mask, as taskset(1), cgroups'
 * cpusets and Slurm's --cpus-per-task set it), or OMP_NUM_THREADS when that
 * is set, the same count for every program, and never all of a host's
 * CPUs when it was given a few of them. */
int cli_threads(long long asked);

#endif
