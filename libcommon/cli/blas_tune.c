/* blas_tune.c: pick the fastest OpenBLAS kernel the CPU supports (see
 * blas_tune.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/blas_tune.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS core names, slowest class first: AVX-512 kernels, then AVX2. */
static const char *const avx512_cores[] = { "SkylakeX", "Cooperlake", "SapphireRapids", NULL };
static const char *const avx2_cores[] = { "Haswell", "Zen", "SkylakeX", "Cooperlake",
					  "SapphireRapids", NULL };

static int among(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (!strcasecmp(name, *list))
			return 1;
	return 0;
}

const char *blas_better_core(void)
{
#if defined(__x86_64__)
	const char *now = openblas_get_corename();
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		return among(now, avx512_cores) ? NULL : "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return among(now, avx2_cores) ? NULL : "Haswell";
#endif
	return NULL;
}

void blas_tune_reexec(char **argv)
{
	if (getenv("OPENBLAS_CORETYPE"))
		return;
	const char *core = blas_better_core();
	if (!core || setenv("OPENBLAS_CORETYPE", core, 1))
		return;
	execv("/proc/self/exe", argv);
	unsetenv("OPENBLAS_CORETYPE");
}
