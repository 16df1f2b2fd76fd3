/* blas_tune.h: run OpenBLAS with the best kernel this CPU supports.
 *
 * OpenBLAS picks its kernels from the CPU model; a release that does not
 * know a newer CPU falls back to an older kernel (Debian 12's 0.3.21 runs
 * its AVX2 "Haswell" kernel on AVX-512 machines, half the speed of its
 * "SkylakeX" one).  The choice is made when the library loads, from the
 * environment variable OPENBLAS_CORETYPE, so the only remedy from inside a
 * program is to set it and start again. */
#ifndef LMPIPE_BLAS_TUNE_H
#define LMPIPE_BLAS_TUNE_H

/* The OpenBLAS core type to ask for, or NULL when the loaded kernel is
 * already the best one this CPU supports. */
const char *blas_better_core(void);

/* When OPENBLAS_CORETYPE is not set and blas_better_core() names a core,
 * set the variable and execute the program again with the same arguments
 * (from /proc/self/exe).  Returns only when it did nothing (or the exec
 * failed, which leaves the slower kernel in place).  Call it first thing in
 * main, before any output file is opened or thread started. */
void blas_tune_reexec(char **argv);

#endif
