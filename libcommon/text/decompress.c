/* decompress.c: compressed inputs through the usual decompressors (gzip -dc,
 * zstd -dc, xz -dc) run as child processes, their output read through a
 * pipe.  The codec is told by the file's first bytes, not by its name. */
#define _POSIX_C_SOURCE 200809L
#include "text/docs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAGIC_MAX = 6, EXIT_EXEC_FAILED = 127 };

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
	*c = DOCS_PLAIN;
	for (int i = 0; i < N_CODECS; i++)
		if ((size_t)n >= CODECS[i].magic_len &&
		    !memcmp(head, CODECS[i].magic, CODECS[i].magic_len))
			*c = CODECS[i].codec;
	return 0;
}

int docs_child_start(docs_child *c, docs_codec codec, const char *path, lm_err *e)
{
	const struct codec_def *d = find(codec);
	int in = open(path, O_RDONLY), p[2];
	if (in < 0)
		return lm_seterr(e, "%s:", path);
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
}
