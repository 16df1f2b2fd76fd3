/* die.c: "prog: message" diagnostics, exit codes and the checked close of
 * stdout (see die.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/die.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"

const char *lm_progname = "lmpipe";
/* Set by die(): the error is said, so closing stdout at exit adds no second
 * message about the same failed write. */
static int dying;

/* The whole line in one write, so that processes sharing stderr (the
 * ranks of a data-parallel run under mpirun) do not interleave their
 * messages; a line longer than the buffer goes out in pieces. */
enum { MSG_MAX = 4096 };

static void vmsg(const char *fmt, va_list ap)
{
	int saved = errno;
	size_t n = strlen(fmt);
	fflush(stdout);
	char line[MSG_MAX];
	va_list aq;
	va_copy(aq, ap);
	int a = snprintf(line, sizeof line, "%s: ", lm_progname);
	int b = a >= 0 && a < MSG_MAX ? vsnprintf(line + a, sizeof line - (size_t)a, fmt, aq) : -1;
	va_end(aq);
	size_t used = b >= 0 ? (size_t)a + (size_t)b : sizeof line;
	if (used < sizeof line && n > 0 && fmt[n - 1] == ':')
		used += (size_t)snprintf(line + used, sizeof line - used, " %s", strerror(saved));
	if (used + 1 < sizeof line) {
		line[used] = '\n';
		line[used + 1] = '\0';
		fputs(line, stderr);
		return;
	}
	fprintf(stderr, "%s: ", lm_progname);
	vfprintf(stderr, fmt, ap);
	if (n > 0 && fmt[n - 1] == ':')
		fprintf(stderr, " %s", strerror(saved));
	fputc('\n', stderr);
}

void warnmsg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

/* Whether standard output is a pipe or socket whose reader has gone (as
 * after "| head -1"): then the consumer asked for no more, and stopping is
 * not an error. */
static int stdout_reader_gone(void)
{
	struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* A write that failed because the reader of stdout left: end quietly. */
static void quiet_if_reader_gone(int sys_errno)
{
	if (sys_errno == EPIPE && stdout_reader_gone()) {
		atomic_abort_all();
		_exit(EXIT_OK);
	}
}

noreturn void die(int status, const char *fmt, ...)
{
	size_t n = strlen(fmt);
	if (n > 0 && fmt[n - 1] == ':')
		quiet_if_reader_gone(errno);
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	atomic_abort_all();
	dying = 1;
	exit(status);
}

noreturn void die_err(const lm_err *e)
{
	quiet_if_reader_gone(e->sys_errno);
	die(e->code ? e->code : EXIT_RUNTIME, "%s", e->msg);
}

void lm_close_stdout(void)
{
	static int closed;
	if (closed)
		return;
	closed = 1;
	if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
		if (dying)
			return;
		quiet_if_reader_gone(EPIPE);
		fprintf(stderr, "%s: write error on standard output: %s\n",
			lm_progname, strerror(errno));
		atomic_abort_all();
		_exit(EXIT_RUNTIME);
	}
}

static void on_signal(int sig)
{
	atomic_abort_all_signal_safe();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void at_exit(void)
{
	lm_close_stdout();
	atomic_abort_all();
}

void lm_init(const char *argv0)
{
	const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
	if (argv0)
		lm_progname = slash ? slash + 1 : argv0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* A closed pipe downstream is a write error (EPIPE), not a signal; when
	 * it is stdout's, the program ends quietly with status 0, as cat does
	 * under "| head" (see die_err). */
	signal(SIGPIPE, SIG_IGN);
	atexit(at_exit);
}
