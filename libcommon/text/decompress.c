/* decompress.c: compressed inputs through the usual decompressors (gzip -dc,
 * zstd -dc, xz -dc) run as child processes, their output read through a
 * pipe.  The codec is told by the file's first bytes, not by its name; a
 * stream (standard input, a pipe) whose first bytes had to be read to tell
 * it reaches the decompressor through a feeder process of ours, which
 * writes those bytes and then the rest. */
#define _POSIX_C_SOURCE 200809L
#include "text/docs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAGIC_MAX = DOCS_HEAD_BYTES, EXIT_EXEC_FAILED = 127, FEED_FAILED = 3, FEED_CHUNK = 1 << 16 };

static int wait_child(pid_t pid, int *status);

static const struct codec_def {
	docs_codec codec;
	const char *name, *prog;
	unsigned char magic[MAGIC_MAX];
	size_t magic_len;
} CODECS[] = {
	{ DOCS_GZIP, "gzip", "gzip", { 0x1f, 0x8b }, 2 },
	{ DOCS_ZSTD, "zstd", "zstd", { 0x28, 0xb5, 0x2f, 0xfd }, 4 },
	{ DOCS_XZ, "xz", "xz", { 0xfd, '7', 'z', 'X', 'Z', 0x00 }, 6 },
};
enum { N_CODECS = sizeof CODECS / sizeof CODECS[0] };

static const struct codec_def *find(docs_codec c)
{
	for (int i = 0; i < N_CODECS; i++)
		if (CODECS[i].codec == c)
			return &CODECS[i];
	return NULL;
}

const char *docs_codec_name(docs_codec c)
{
	const struct codec_def *d = find(c);
	return d ? d->name : "plain";
}

docs_codec docs_codec_in(const unsigned char *head, size_t n)
{
	for (int i = 0; i < N_CODECS; i++)
		if (n >= CODECS[i].magic_len && !memcmp(head, CODECS[i].magic, CODECS[i].magic_len))
			return CODECS[i].codec;
	return DOCS_PLAIN;
}

int docs_codec_of(const char *path, docs_codec *c, lm_err *e)
{
	unsigned char head[MAGIC_MAX];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return lm_seterr(e, "%s:", path);
	ssize_t n = read(fd, head, sizeof head);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return lm_seterr(e, "%s: read error:", path);
	}
	*c = docs_codec_in(head, (size_t)n);
	return 0;
}

int docs_refuse_compressed(const char *path, const char *prog, lm_err *e)
{
	struct stat sb;
	docs_codec c;
	if (!strcmp(path, "-") || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
		return 0; /* (a file that cannot be read: its reader says so) */
	if (docs_codec_of(path, &c, e))
		return -1;
	if (c == DOCS_PLAIN)
		return 0;
	return lm_seterr(e, "%s: %s data, not text: give %s its text (doc-cat %s | %s ..., or "
			 "decompress it first); to give it the compressed bytes themselves, pipe "
			 "them in", path, docs_codec_name(c), prog, path, prog);
}

/* "PROG -dc" reading descriptor in (closed here, whatever happens). */
static int start_fd(docs_child *c, const struct codec_def *d, int in, const char *path,
		    lm_err *e)
{
	int p[2];
	if (pipe(p) != 0) {
		close(in);
		return lm_seterr(e, "%s: pipe:", path);
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(in);
		close(p[0]);
		close(p[1]);
		return lm_seterr(e, "%s: fork:", path);
	}
	if (pid == 0) {
		dup2(in, STDIN_FILENO);
		dup2(p[1], STDOUT_FILENO);
		close(in);
		close(p[0]);
		close(p[1]);
		execlp(d->prog, d->prog, "-dc", (char *)NULL);
		_exit(EXIT_EXEC_FAILED);
	}
	close(in);
	close(p[1]);
	c->pid = pid;
	c->out = fdopen(p[0], "rb");
	if (!c->out) {
		close(p[0]);
		docs_child_kill(c);
		return lm_seterr(e, "%s: fdopen:", path);
	}
	return 0;
}

int docs_child_start(docs_child *c, docs_codec codec, const char *path, lm_err *e)
{
	int in = open(path, O_RDONLY);
	c->feeder = 0;
	if (in < 0)
		return lm_seterr(e, "%s:", path);
	return start_fd(c, find(codec), in, path, e);
}

/* The feeder's whole life, in a child process: head, then the rest of in,
 * written to out; exit 0, or FEED_FAILED when in cannot be read (a write
 * that fails means that the decompressor stopped: its status says why). */
static void feed(FILE *in, int out, const unsigned char *head, size_t n)
{
	static unsigned char buf[FEED_CHUNK];
	/* the parent's handlers (which remove its unfinished outputs) are
	 * not this process's to run */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	size_t got = n;
	const unsigned char *from = head;
	for (;;) {
		for (size_t k = 0; k < got;) {
			ssize_t w = write(out, from + k, got - k);
			if (w < 0 && errno != EINTR)
				_exit(0);
			k += w > 0 ? (size_t)w : 0;
		}
		got = fread(buf, 1, sizeof buf, in);
		from = buf;
		if (got == 0)
			_exit(ferror(in) ? FEED_FAILED : 0);
	}
}

int docs_child_start_stream(docs_child *c, docs_codec codec, FILE *in, const unsigned char *head,
			    size_t n_head, const char *path, lm_err *e)
{
	int q[2];
	c->feeder = 0;
	if (pipe(q) != 0)
		return lm_seterr(e, "%s: pipe:", path);
	pid_t f = fork();
	if (f < 0) {
		close(q[0]);
		close(q[1]);
		return lm_seterr(e, "%s: fork:", path);
	}
	if (f == 0) {
		close(q[0]);
		feed(in, q[1], head, n_head);
	}
	close(q[1]);
	c->feeder = f;
	if (start_fd(c, find(codec), q[0], path, e)) {
		int status;
		if (c->feeder) { /* (not reaped by a kill of the decompressor) */
			kill(f, SIGTERM);
			wait_child(f, &status);
			c->feeder = 0;
		}
		return -1;
	}
	return 0;
}

static int wait_child(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int docs_child_finish(docs_child *c, docs_codec codec, const char *path, lm_err *e)
{
	const struct codec_def *d = find(codec);
	int status = 0;
	fclose(c->out);
	c->out = NULL;
	if (wait_child(c->pid, &status))
		return lm_seterr(e, "%s: waiting for %s:", path, d->prog);
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_EXEC_FAILED)
		return lm_seterr(e, "%s: %s data, and no %s program to decompress it "
				 "(install %s)", path, d->name, d->prog, d->prog);
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
		return lm_seterr(e, "%s: corrupt or truncated %s data (%s -dc exited with %d)",
				 path, d->name, d->prog, WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		return lm_seterr(e, "%s: %s -dc killed by signal %d", path, d->prog,
				 WTERMSIG(status));
	/* the feeder: done, or stopped by a decompressor that had all it
	 * wanted (SIGPIPE); a read error of the stream is the stream's */
	pid_t f = c->feeder;
	c->feeder = 0;
	if (f && (wait_child(f, &status) ||
		  (WIFEXITED(status) && WEXITSTATUS(status) == FEED_FAILED)))
		return lm_seterr(e, "%s: read error", path);
	return 0;
}

void docs_child_kill(docs_child *c)
{
	int status;
	if (c->out)
		fclose(c->out);
	c->out = NULL;
	kill(c->pid, SIGTERM);
	wait_child(c->pid, &status);
	if (c->feeder) {
		kill(c->feeder, SIGTERM);
		wait_child(c->feeder, &status);
		c->feeder = 0;
	}
}
