/* backend.c: what every backend shares: opening one by name, and the
 * sticky error that ops record and sync() returns (see backend.h). */
#include "model/backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const backend_names[] = { "cpu", "cuda", NULL };

lm_backend *backend_open(const char *name, lm_err *e)
{
	if (!strcmp(name, "cpu"))
		return backend_cpu_open(e);
	if (!strcmp(name, "cuda"))
		return backend_cuda_open(e);
	lm_usage_err(e, "unknown device '%s' (cpu or cuda)", name);
	return NULL;
}

void backend_fail(lm_backend *be, const char *fmt, ...)
{
	if (be->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	lm_vseterr(&be->error, 1, fmt, ap);
	va_end(ap);
	be->failed = 1;
}

int backend_take_error(lm_backend *be, lm_err *e)
{
	if (!be->failed)
		return 0;
	be->failed = 0;
	if (e)
		*e = be->error;
	return -1;
}
