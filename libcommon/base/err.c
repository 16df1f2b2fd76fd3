/* err.c: filling lm_err messages (see err.h). */
#include "base/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int lm_vseterr(lm_err *e, int code, const char *fmt, va_list ap)
{
	int saved = errno;
	if (!e)
		return -1;
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	e->sys_errno = 0;
	if (n > 0 && (size_t)n < sizeof e->msg && e->msg[n - 1] == ':') {
		snprintf(e->msg + n, sizeof e->msg - (size_t)n, " %s", strerror(saved));
		e->sys_errno = saved;
	}
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
	char prefix[LM_ERR_MSG_MAX];
	va_list ap;
	if (!e)
		return -1;
	va_start(ap, fmt);
	int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	size_t plen = (size_t)n + 2; /* "prefix: " */
	size_t old = strnlen(e->msg, sizeof e->msg - 1);
	if (plen >= sizeof e->msg)
		plen = sizeof e->msg - 1;
	if (old > sizeof e->msg - 1 - plen)
		old = sizeof e->msg - 1 - plen;
	memmove(e->msg + plen, e->msg, old);
	e->msg[plen + old] = '\0';
	memcpy(e->msg, prefix, plen - 2 < (size_t)n ? plen - 2 : (size_t)n);
	if (plen >= 2) {
		e->msg[plen - 2] = ':';
		e->msg[plen - 1] = ' ';
	}
	return -1;
}
