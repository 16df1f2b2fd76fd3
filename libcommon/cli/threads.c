/* threads.c: the default thread count of the programs (see threads.h). */
#include "cli/threads.h"

#include <omp.h>

int cli_threads(long long asked)
{
	if (asked > 0)
		return asked > 1 << 20 ? 1 << 20 : (int)asked;
	int n = omp_get_max_threads();
	return n > 0 ? n : 1;
}
