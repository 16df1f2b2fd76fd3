/* test_atomic.c: whole-or-nothing output files, the abort list's hooks
 * (by abort_all and by a signal through lm_init's handlers), and lm_err
 * messages. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "base/atomic.h"
#include "base/io.h"
#include "cli/die.h"

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* What the hook removes: a file standing for a committed output. */
static char hook_path[256];
static int hook_runs;

static void hook(void)
{
	hook_runs++;
	unlink(hook_path);
}

static void touch(const char *p)
{
	FILE *f = fopen(p, "w");
	if (f)
		fclose(f);
}

static void test_hooks(const char *dir)
{
	snprintf(hook_path, sizeof hook_path, "%s/committed", dir);
	touch(hook_path);
	int slot = atomic_hook_add(hook);
	ok(slot >= 0, "a hook joins the abort list");
	atomic_abort_all();
	ok(hook_runs == 1 && !exists(hook_path), "abort_all runs it: the committed file is removed");
	atomic_hook_remove(slot);
	touch(hook_path);
	atomic_abort_all();
	ok(hook_runs == 1 && exists(hook_path), "a removed hook is not run: the finished set stays");
	int slots[ATOMIC_MAX_HOOKS + 1], n = 0;
	while (n <= ATOMIC_MAX_HOOKS && (slots[n] = atomic_hook_add(hook)) >= 0)
		n++;
	is_int(n, ATOMIC_MAX_HOOKS, "the list holds ATOMIC_MAX_HOOKS hooks, then refuses");
	while (n)
		atomic_hook_remove(slots[--n]);

	/* a signal: lm_init's handler runs the hook, then the signal ends the process */
	pid_t pid = fork();
	if (pid == 0) {
		lm_init("test_atomic");
		atomic_hook_add(hook);
		raise(SIGTERM);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "SIGTERM still ends the process");
	ok(!exists(hook_path), "... after the hook removed the committed file");
}

int main(void)
{
	char dir[] = "/tmp/lmpipe-atomic.XXXXXX", path[256];
	lm_err e;
	atomic_file af;
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(path, sizeof path, "%s/out.bin", dir);

	is_int(atomic_open(&af, path, &e), 0, "open");
	fputs("hello", af.fp);
	ok(!exists(path), "nothing under the final name before commit");
	ok(exists(af.tmp), "temporary file exists");
	is_int(atomic_commit(&af, &e), 0, "commit");
	ok(exists(path), "final file after commit");

	uint8_t *buf;
	size_t len;
	is_int(io_read_file(path, &buf, &len, &e), 0, "read back");
	ok(len == 5 && !memcmp(buf, "hello", 5), "contents intact");
	free(buf);

	is_int(atomic_open(&af, path, &e), 0, "open again");
	char tmp[256];
	snprintf(tmp, sizeof tmp, "%s", af.tmp);
	fputs("partial", af.fp);
	atomic_abort(&af);
	ok(!exists(tmp), "abort removes the temporary file");
	is_int(io_read_file(path, &buf, &len, &e), 0, "old file untouched");
	ok(len == 5, "old contents kept");
	free(buf);

	is_int(atomic_open(&af, path, &e), 0, "open a third time");
	snprintf(tmp, sizeof tmp, "%s", af.tmp);
	atomic_abort_all();
	ok(!exists(tmp), "abort_all removes pending files");
	atomic_abort(&af);

	is_int(atomic_open(&af, "/nonexistent-dir/x", &e), -1, "open in a missing directory fails");
	ok(strstr(e.msg, "/nonexistent-dir/x: No such file or directory") != NULL,
	   "message names the file and the reason: %s", e.msg);

	errno = ENOENT;
	lm_seterr(&e, "plain");
	is_str(e.msg, "plain", "no colon, no strerror");
	is_int(io_read_file("/nonexistent-file", &buf, &len, &e), -1, "missing input");
	is_str(e.msg, "/nonexistent-file: No such file or directory", "input error message");

	lm_seterr(&e, "bad thing");
	lm_err_prefix(&e, "%s line %d", "x.txt", 3);
	is_str(e.msg, "x.txt line 3: bad thing", "lm_err_prefix prepends");

	test_hooks(dir);

	unlink(path);
	unlink(hook_path);
	rmdir(dir);
	return done_testing();
}
