/* reward_cmd.c: an external program as the reward function: the rollouts
 * go to its standard input, one score per line comes back (see reward.h).
 * Input and output flow at the same time (poll), so a scorer may answer
 * line by line or only at the end without either side blocking.  A scorer
 * that outlives the timeout (hanging, or closing its output and running on)
 * or prints more than REWARD_CMD_LINE_BYTES per rollout is killed with its
 * process group. */
#define _POSIX_C_SOURCE 200809L
#include "tasks/reward.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { READ_CHUNK = 1 << 16, SHOW_MAX = 60, WAIT_POLL_NS = 10 * 1000 * 1000 };

typedef struct obuf { char *p; size_t n, cap; } obuf;

static int obuf_read(obuf *o, int fd, int *eof)
{
	if (o->cap - o->n < READ_CHUNK) {
		size_t nc = o->cap * 2 + READ_CHUNK;
		char *np = realloc(o->p, nc + 1);
		if (!np)
			return -1;
		o->p = np, o->cap = nc;
	}
	ssize_t got = read(fd, o->p + o->n, o->cap - o->n);
	if (got < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	*eof = got == 0;
	o->n += (size_t)got;
	return 0;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Milliseconds left until deadline for poll (-1: no deadline). */
static int ms_left(double deadline)
{
	if (deadline <= 0)
		return -1;
	double left = deadline - now_s();
	return left <= 0 ? 0 : left > INT_MAX / 1000 ? INT_MAX : (int)(left * 1000) + 1;
}

/* Kill the scorer's process group (it may have children) and reap it. */
static void kill_scorer(pid_t pid)
{
	kill(-pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Wait for the scorer until deadline; 1 when it has exited (status in
 * *status), 0 when the deadline passed. */
static int wait_until(pid_t pid, double deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, deadline > 0 ? WNOHANG : 0);
		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return 1; /* no such child: nothing left to wait for */
		if (deadline > 0 && now_s() >= deadline)
			return 0;
		struct timespec nap = { 0, WAIT_POLL_NS };
		nanosleep(&nap, NULL);
	}
}

/* Feed the lines and collect at most max_bytes of output within timeout
 * seconds (0: none); returns the wait status, or -1 with a message saying
 * what the scorer did. */
static int converse(const char *cmd, const char *const *lines, const size_t *lens, size_t n,
		    double timeout, size_t max_bytes, obuf *o, lm_err *e)
{
	int to[2], from[2];
	if (pipe(to))
		return lm_seterr(e, "pipe:");
	if (pipe(from)) {
		close(to[0]), close(to[1]);
		return lm_seterr(e, "pipe:");
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(to[0]), close(to[1]), close(from[0]), close(from[1]);
		return lm_seterr(e, "fork:");
	}
	if (pid == 0) {
		/* its own process group, so that a timeout kills its children too */
		setpgid(0, 0);
		dup2(to[0], STDIN_FILENO);
		dup2(from[1], STDOUT_FILENO);
		close(to[0]), close(to[1]), close(from[0]), close(from[1]);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* as the child does: whichever runs first */
	close(to[0]);
	close(from[1]);
	fcntl(to[1], F_SETFL, fcntl(to[1], F_GETFL) | O_NONBLOCK);
	double deadline = timeout > 0 ? now_s() + timeout : 0;
	size_t line = 0, off = 0;
	int wfd = n ? to[1] : -1, eof = 0, rc = 0;
	if (wfd < 0)
		close(to[1]);
	while (!eof) {
		struct pollfd p[2] = { { from[0], POLLIN, 0 }, { wfd, POLLOUT, 0 } };
		int got = poll(p, wfd >= 0 ? 2 : 1, ms_left(deadline));
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = lm_seterr(e, "poll:");
			break;
		}
		if (got == 0) {
			rc = lm_seterr(e, "scorer '%s' did not finish within %g s (killed)", cmd, timeout);
			break;
		}
		if (wfd >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			/* each line, then its newline */
			const char *src = off < lens[line] ? lines[line] + off : "\n";
			size_t len = off < lens[line] ? lens[line] - off : 1;
			ssize_t w = write(wfd, src, len);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				/* the scorer stopped reading (EPIPE): its exit status says why */
				close(wfd);
				wfd = -1;
			} else if (w > 0 && (off += (size_t)w) == lens[line] + 1) {
				off = 0;
				if (++line == n) {
					close(wfd);
					wfd = -1;
				}
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (obuf_read(o, from[0], &eof)) {
				rc = lm_seterr(e, "reading from the scorer:");
				break;
			}
			if (o->n > max_bytes) {
				rc = lm_seterr(e, "scorer '%s' printed more than %zu bytes for %zu rollouts "
					       "(killed)", cmd, max_bytes, n);
				break;
			}
		}
	}
	if (wfd >= 0)
		close(wfd);
	close(from[0]);
	int status;
	if (rc) {
		kill_scorer(pid);
		return -1;
	}
	if (!wait_until(pid, deadline, &status)) {
		kill_scorer(pid);
		return lm_seterr(e, "scorer '%s' closed its output but did not exit within %g s "
				 "(killed)", cmd, timeout);
	}
	return status;
}

/* A short, printable excerpt of a scorer line for messages. */
static void show(const char *s, size_t n, char *buf, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n && i < SHOW_MAX && k + 2 < cap; i++)
		buf[k++] = (s[i] >= ' ' && s[i] < 127) ? s[i] : '?';
	if (n > SHOW_MAX && k + 4 < cap)
		memcpy(buf + k, "...", 3), k += 3;
	buf[k] = '\0';
}

static int get_num(json_t *o, const char *key, double *v)
{
	json_t *x = json_object_get(o, key);
	if (!x)
		return 0;
	if (!json_is_number(x))
		return -1;
	*v = json_number_value(x);
	return 1;
}

static int parse_line(const char *s, size_t n, reward_scores *out)
{
	while (n && strchr(" \t\r", s[n - 1]))
		n--;
	while (n && strchr(" \t", *s))
		s++, n--;
	if (n == 0)
		return -1;
	if (*s == '{') {
		json_t *o = json_loadb(s, n, 0, NULL);
		int ok = o && json_is_object(o) && get_num(o, "reward", &out->reward) == 1;
		out->format = out->answer = out->reward;
		ok = ok && get_num(o, "format_reward", &out->format) >= 0 &&
		     get_num(o, "answer_reward", &out->answer) >= 0;
		json_decref(o);
		return ok && isfinite(out->reward) && isfinite(out->format) && isfinite(out->answer) ? 0 : -1;
	}
	char tmp[64], *end;
	if (n >= sizeof tmp)
		return -1;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	double v = strtod(tmp, &end);
	if (*end || end == tmp || !isfinite(v))
		return -1;
	out->reward = out->format = out->answer = v;
	return 0;
}

int reward_cmd(const char *cmd, const char *const *lines, const size_t *lens, size_t n,
	       double timeout, reward_scores *out, lm_err *e)
{
	obuf o = { 0 };
	int st = converse(cmd, lines, lens, n, timeout, (n + 1) * REWARD_CMD_LINE_BYTES, &o, e);
	int rc = 0;
	if (st == -1)
		rc = -1;
	else if (WIFSIGNALED(st))
		rc = lm_seterr(e, "scorer '%s' was killed by signal %d (%s)", cmd, WTERMSIG(st),
			       strsignal(WTERMSIG(st)));
	else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		rc = lm_seterr(e, "scorer '%s' exited with status %d", cmd, WEXITSTATUS(st));
	size_t k = 0;
	for (size_t at = 0; rc == 0 && at < o.n; k++) {
		const char *s = o.p + at, *nl = memchr(s, '\n', o.n - at);
		size_t len = nl ? (size_t)(nl - s) : o.n - at;
		at += len + (nl != NULL);
		if (k >= n) {
			rc = lm_seterr(e, "scorer '%s' printed more lines than the %zu rollouts", cmd, n);
			break;
		}
		if (parse_line(s, len, &out[k])) {
			char buf[SHOW_MAX + 8];
			show(s, len, buf, sizeof buf);
			rc = lm_seterr(e, "scorer '%s', output line %zu: '%s' is neither a number nor an "
				       "object with a numeric \"reward\"", cmd, k + 1, buf);
		}
	}
	if (rc == 0 && k != n)
		rc = lm_seterr(e, "scorer '%s' printed %zu line%s for %zu rollouts", cmd, k,
			      k == 1 ? "" : "s", n);
	free(o.p);
	return rc;
}
