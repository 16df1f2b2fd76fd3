/* nccl_id.c: getting NCCL's unique id from rank 0 to the other ranks
 * without MPI (comm.h, --nccl-init): through a file on a shared
 * filesystem (rank 0 writes it whole, by rename; the others wait for it)
 * or over TCP (rank 0 listens on the port and sends the id to each rank
 * that connects; the others retry until rank 0 is up).  The id is opaque
 * bytes here, so this file needs neither CUDA nor NCCL. */
#define _POSIX_C_SOURCE 200809L
#include "dist/nccl_id.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/comm_internal.h"

enum { RETRY_MS = 100, MAGIC_LEN = 8 };
static const char MAGIC[MAGIC_LEN] = "lmpncid1";

static void nap(void)
{
	struct timespec ts = { 0, RETRY_MS * 1000000L };
	nanosleep(&ts, NULL);
}

static int file_put(const char *path, const void *id, size_t n, lm_err *e)
{
	if (access(path, F_OK) == 0)
		return lm_usage_err(e, "--nccl-init file:%s: the file exists (left by an earlier run?): "
				    "remove it or name another", path);
	size_t len = strlen(path) + 16;
	char *tmp = malloc(len);
	if (!tmp)
		return lm_seterr(e, "out of memory");
	snprintf(tmp, len, "%s.tmp%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "wb");
	int rc = 0;
	if (!f || fwrite(MAGIC, 1, MAGIC_LEN, f) != MAGIC_LEN || fwrite(id, 1, n, f) != n)
		rc = lm_seterr(e, "%s:", tmp);
	if (f && fclose(f) && !rc)
		rc = lm_seterr(e, "%s:", tmp);
	if (!rc && rename(tmp, path))
		rc = lm_seterr(e, "%s:", path);
	if (rc)
		remove(tmp);
	free(tmp);
	return rc;
}

static int file_get(const char *path, void *id, size_t n, double timeout, lm_err *e)
{
	double deadline = comm_now() + timeout;
	for (;;) {
		FILE *f = fopen(path, "rb");
		if (f) {
			char magic[MAGIC_LEN];
			int ok = fread(magic, 1, MAGIC_LEN, f) == MAGIC_LEN &&
				 !memcmp(magic, MAGIC, MAGIC_LEN) && fread(id, 1, n, f) == n;
			fclose(f);
			if (ok)
				return 0;
			return lm_seterr(e, "--nccl-init file:%s: not an id that rank 0 wrote", path);
		}
		if (errno != ENOENT)
			return lm_seterr(e, "%s:", path);
		if (comm_now() > deadline)
			return lm_seterr(e, "--nccl-init file:%s: rank 0 did not write it within %g s", path,
					 timeout);
		nap();
	}
}

/* "HOST:PORT" split at the last colon ([v6]:port is not needed here). */
static int split_host(const char *spec, char *host, size_t hn, const char **port, lm_err *e)
{
	const char *colon = strrchr(spec, ':');
	if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= hn)
		return lm_usage_err(e, "--nccl-init tcp:%s: give tcp:HOST:PORT", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	*port = colon + 1;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t k = write(fd, s, n);
		if (k <= 0)
			return -1;
		s += k;
		n -= (size_t)k;
	}
	return 0;
}

static int tcp_serve(const char *spec, int world, const void *id, size_t n, double timeout,
		     lm_err *e)
{
	char host[256];
	const char *port;
	if (split_host(spec, host, sizeof host, &port, e))
		return -1;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai;
	int g = getaddrinfo(NULL, port, &hints, &ai);
	if (g)
		return lm_usage_err(e, "--nccl-init tcp:%s: port: %s", spec, gai_strerror(g));
	int fd = socket(ai->ai_family, ai->ai_socktype, 0), one = 1, rc = 0;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, world))
		rc = lm_seterr(e, "--nccl-init tcp:%s: listen:", spec);
	freeaddrinfo(ai);
	double deadline = comm_now() + timeout;
	for (int served = 1; !rc && served < world; served++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - comm_now()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0) {
			rc = lm_seterr(e, "--nccl-init tcp:%s: %d of %d ranks connected within %g s",
				       spec, served, world, timeout);
			break;
		}
		int c = accept(fd, NULL, NULL);
		if (c < 0 || write_all(c, MAGIC, MAGIC_LEN) || write_all(c, id, n))
			rc = lm_seterr(e, "--nccl-init tcp:%s: sending the id:", spec);
		if (c >= 0)
			close(c);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static int tcp_fetch(const char *spec, void *id, size_t n, double timeout, lm_err *e)
{
	char host[256];
	const char *port;
	if (split_host(spec, host, sizeof host, &port, e))
		return -1;
	double deadline = comm_now() + timeout;
	for (;;) {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
		int g = getaddrinfo(host, port, &hints, &ai);
		if (g)
			return lm_usage_err(e, "--nccl-init tcp:%s: %s", spec, gai_strerror(g));
		int fd = socket(ai->ai_family, ai->ai_socktype, 0);
		int up = fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(ai);
		if (up) {
			size_t got = 0, want = MAGIC_LEN + n;
			char *all = malloc(want);
			while (all && got < want) {
				ssize_t k = read(fd, all + got, want - got);
				if (k <= 0)
					break;
				got += (size_t)k;
			}
			close(fd);
			int ok = all && got == want && !memcmp(all, MAGIC, MAGIC_LEN);
			if (ok)
				memcpy(id, all + MAGIC_LEN, n);
			free(all);
			if (ok)
				return 0;
			return lm_seterr(e, "--nccl-init tcp:%s: what answered is not lm-train's rank 0",
					 spec);
		}
		if (fd >= 0)
			close(fd);
		if (comm_now() > deadline)
			return lm_seterr(e, "--nccl-init tcp:%s: rank 0 did not answer within %g s", spec,
					 timeout);
		nap();
	}
}

int nccl_id_share(const char *spec, int rank, int world, void *id, size_t n, double timeout,
		  lm_err *e)
{
	if (!strncmp(spec, "file:", 5) && spec[5])
		return rank == 0 ? file_put(spec + 5, id, n, e) : file_get(spec + 5, id, n, timeout, e);
	if (!strncmp(spec, "tcp:", 4))
		return rank == 0 ? tcp_serve(spec + 4, world, id, n, timeout, e)
				 : tcp_fetch(spec + 4, id, n, timeout, e);
	return lm_usage_err(e, "--nccl-init %s: give mpi, file:PATH or tcp:HOST:PORT", spec);
}

void nccl_id_done(const char *spec, int rank)
{
	if (rank == 0 && !strncmp(spec, "file:", 5))
		remove(spec + 5);
}
