/* err.h: how library code reports failure without printing or exiting.
 *
 * Library functions return 0 on success and -1 on failure, after filling an
 * lm_err with a one-line message.  Only main() prints it (see die.h). */
#ifndef LMPIPE_ERR_H
#define LMPIPE_ERR_H

#include <stdarg.h>

enum { LM_ERR_MSG_MAX = 1024 };

typedef struct lm_err {
	char msg[LM_ERR_MSG_MAX];
	int code; /* exit status main() should use: 1 runtime/data, 2 usage */
	int sys_errno; /* the errno a message ending in ':' appended, else 0 */
} lm_err;

/* Format a message into e (if e is not NULL) and return -1.  A format that
 * ends in ':' has ": strerror(errno)" appended, as in sbase's eprintf.  The
 * exit code is set to 1; use lm_usage_err for usage errors (code 2). */
int lm_seterr(lm_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int lm_usage_err(lm_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int lm_vseterr(lm_err *e, int code, const char *fmt, va_list ap);

/* Prefix an existing message: "prefix: old message".  Returns -1. */
int lm_err_prefix(lm_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
