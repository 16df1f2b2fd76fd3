/* atomic.c: whole-or-nothing output files (see atomic.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_OPEN = 64, PID_DIGITS = 20 };
#define TMP_TAG ".tmp-"

/* Temporary names of the files not yet committed.  The signal handler reads
 * these; entries are published with a full string before the slot is set. */
static char *volatile pending[MAX_OPEN];
static void (*volatile hooks[ATOMIC_MAX_HOOKS])(void);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int add_pending(char *tmp)
{
	int slot = -1;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OPEN; i++)
		if (!pending[i]) {
			pending[i] = tmp;
			slot = i;
			break;
		}
	pthread_mutex_unlock(&lock);
	return slot;
}

static void drop_pending(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&lock);
	pending[slot] = NULL;
	pthread_mutex_unlock(&lock);
}

static char *tmp_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
	const char *base = path + dirlen;
	size_t n = strlen(path) + sizeof TMP_TAG + PID_DIGITS + sizeof "-XXXXXX" + 2;
	char *t = malloc(n);
	if (!t)
		return NULL;
	snprintf(t, n, "%.*s.%s" TMP_TAG "%ld-XXXXXX", (int)dirlen, path, base, (long)getpid());
	return t;
}

/* Is ".NAME.tmp-PID-XXXXXX" (or the older ".NAME.tmp-XXXXXX") a temporary
 * file whose writer is gone?  Its target's name goes to target. */
static int stale_tmp(const char *entry, char *target, size_t cap)
{
	const char *tag = strstr(entry, TMP_TAG);
	if (entry[0] != '.' || !tag)
		return 0;
	for (const char *t; (t = strstr(tag + 1, TMP_TAG));) /* the last tag */
		tag = t;
	size_t n = (size_t)(tag - entry) - 1;
	if (n == 0 || n >= cap)
		return 0;
	memcpy(target, entry + 1, n);
	target[n] = '\0';
	const char *p = tag + sizeof TMP_TAG - 1;
	char *end;
	long pid = strtol(p, &end, 10);
	if (end == p || *end != '-')
		return 1; /* written before names held the pid */
	return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int atomic_clean_stale(const char *dir, int (*is_ours)(const char *name, void *arg), void *arg)
{
	DIR *d = opendir(dir && *dir ? dir : ".");
	if (!d)
		return 0;
	int removed = 0;
	char target[NAME_MAX + 1];
	for (struct dirent *de; (de = readdir(d));) {
		if (!stale_tmp(de->d_name, target, sizeof target) || (is_ours && !is_ours(target, arg)))
			continue;
		char *path = malloc(strlen(dir ? dir : "") + strlen(de->d_name) + 2);
		if (!path)
			break;
		sprintf(path, "%s%s%s", dir && *dir ? dir : "", dir && *dir ? "/" : "", de->d_name);
		removed += unlink(path) == 0;
		free(path);
	}
	closedir(d);
	return removed;
}

/* A destination that is there and is not a regular file, written in place
 * (atomic.h). */
static int open_direct(atomic_file *af, const char *path, lm_err *e)
{
	af->direct = 1;
	af->path = strdup(path);
	if (!af->path)
		return lm_seterr(e, "%s: out of memory", path);
	af->fp = fopen(path, "wb");
	if (!af->fp) {
		int saved = errno;
		atomic_abort(af);
		errno = saved;
		return lm_seterr(e, "%s:", path);
	}
	return 0;
}

int atomic_open(atomic_file *af, const char *path, lm_err *e)
{
	memset(af, 0, sizeof *af);
	af->slot = -1;
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return open_direct(af, path, e);
	af->path = strdup(path);
	af->tmp = tmp_name(path);
	if (!af->path || !af->tmp) {
		atomic_abort(af);
		return lm_seterr(e, "%s: out of memory", path);
	}
	/* On the list before the file exists: a signal delivered as open()
	 * returns inside mkstemp (a pending SIGTERM waits for the end of the
	 * system call) finds the name, which mkstemp writes before it creates
	 * the file.  A signal before that unlinks a name that is not there. */
	af->slot = add_pending(af->tmp);
	if (af->slot < 0) {
		atomic_abort(af);
		return lm_seterr(e, "%s: too many output files open at once", path);
	}
	int fd = mkstemp(af->tmp);
	if (fd < 0) {
		int saved = errno;
		drop_pending(af->slot);
		af->slot = -1;
		free(af->tmp);
		af->tmp = NULL;
		atomic_abort(af);
		errno = saved;
		return lm_seterr(e, "%s:", path);
	}
	mode_t mask = umask(0);
	umask(mask);
	fchmod(fd, 0666 & ~mask); /* mkstemp made it 0600 */
	af->fp = fdopen(fd, "wb");
	if (!af->fp) {
		close(fd);
		atomic_abort(af);
		return lm_seterr(e, "%s:", path);
	}
	return 0;
}

static int fsync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
	if (!dir)
		return -1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	free(dir);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

/* Flush fp (and, with sync, fsync it: a FIFO or device refuses with
 * EINVAL, which is no failure), then close it: 1 with *err the first
 * failure's errno, or 0. */
static int flush_close(FILE *fp, int sync, int *err)
{
	int bad = fflush(fp) != 0 || ferror(fp);
	if (!bad && sync && fsync(fileno(fp)) != 0 && errno != EINVAL)
		bad = 1;
	*err = errno;
	if (fclose(fp) != 0 && !bad) {
		bad = 1;
		*err = errno;
	}
	return bad;
}

int atomic_commit(atomic_file *af, lm_err *e)
{
	if (!af->fp)
		return lm_seterr(e, "%s: output file is not open", af->path ? af->path : "?");
	FILE *fp = af->fp;
	af->fp = NULL;
	int saved = 0;
	int bad = flush_close(fp, !af->direct, &saved);
	if (af->direct) {
		if (bad) {
			errno = saved;
			lm_seterr(e, "%s:", af->path);
		}
		atomic_abort(af);
		return bad ? -1 : 0;
	}
	if (!bad && rename(af->tmp, af->path) != 0) {
		bad = 1;
		saved = errno;
	}
	if (bad) {
		errno = saved;
		lm_seterr(e, "%s:", af->path);
		atomic_abort(af);
		return -1;
	}
	drop_pending(af->slot);
	fsync_dir(af->path);
	free(af->tmp);
	free(af->path);
	memset(af, 0, sizeof *af);
	af->slot = -1;
	return 0;
}

void atomic_abort(atomic_file *af)
{
	if (af->fp)
		fclose(af->fp);
	if (af->tmp && af->slot >= 0)
		unlink(af->tmp);
	drop_pending(af->slot);
	free(af->tmp);
	free(af->path);
	memset(af, 0, sizeof *af);
	af->slot = -1;
}

int atomic_hook_add(void (*fn)(void))
{
	int slot = -1;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ATOMIC_MAX_HOOKS; i++)
		if (!hooks[i]) {
			hooks[i] = fn;
			slot = i;
			break;
		}
	pthread_mutex_unlock(&lock);
	return slot;
}

void atomic_hook_remove(int slot)
{
	if (slot < 0 || slot >= ATOMIC_MAX_HOOKS)
		return;
	pthread_mutex_lock(&lock);
	hooks[slot] = NULL;
	pthread_mutex_unlock(&lock);
}

static void run_hooks(void)
{
	for (int i = 0; i < ATOMIC_MAX_HOOKS; i++) {
		void (*fn)(void) = hooks[i];
		if (fn)
			fn();
	}
}

void atomic_abort_all(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OPEN; i++)
		if (pending[i]) {
			unlink(pending[i]);
			pending[i] = NULL;
		}
	pthread_mutex_unlock(&lock);
	run_hooks();
}

void atomic_abort_all_signal_safe(void)
{
	for (int i = 0; i < MAX_OPEN; i++) {
		char *p = pending[i];
		if (p)
			unlink(p);
	}
	run_hooks();
}
