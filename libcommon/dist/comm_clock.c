/* comm_clock.c: the clock the communicators' timeouts are measured on (a
 * file of its own, so that the implementations that call it do not call
 * back into comm.c, which opens them). */
#define _POSIX_C_SOURCE 200809L
#include "dist/comm_internal.h"

#include <time.h>

double comm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}
