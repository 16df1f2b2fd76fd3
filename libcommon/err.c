/* err.c: filling lm_err messages (see err.h). */
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int lm_vseterr(lm_err *e, int code, const char *fmt, va_list ap)
{
	int saved = errno;
	if (!e)
		return -1;
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	if (n > 0 && (size_t)n < sizeof e->msg && e->msg[n - 1] == ':')
		snprintf(e->msg + n, sizeof e->msg - (size_t)n, " %s", strerror(saved));
	e->code = code;
	errno = saved;
	return -1;
}

int lm_seterr(lm_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	lm_vseterr(e, 1, fmt, ap);
	va_end(ap);
	return -1;
}

int lm_usage_err(lm_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	lm_vseterr(e, 2, fmt, ap);
	va_end(ap);
	return -1;
}

int lm_err_prefix(lm_err *e, const char *fmt, ...)
{
	char prefix[LM_ERR_MSG_MAX], old[LM_ERR_MSG_MAX];
	va_list ap;
	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof old);
	snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
	return -1;
}
