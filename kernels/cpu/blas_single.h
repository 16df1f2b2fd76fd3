/* blas_single.h: the CPU kernels call sgemm from inside their own OpenMP
 * threads, each on its own block, so OpenBLAS must not start threads of its
 * own (two thread pools spinning on the same cores slow both down).  Every
 * kernel that calls the BLAS calls blas_single() first. */
#ifndef LMPIPE_BLAS_SINGLE_H
#define LMPIPE_BLAS_SINGLE_H

#include <cblas.h>
#include <pthread.h>

static void blas_single_once(void) { openblas_set_num_threads(1); }

static inline void blas_single(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, blas_single_once);
}

#endif
