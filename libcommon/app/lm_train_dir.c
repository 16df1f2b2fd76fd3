/* lm_train_dir.c: lm-train's checkpoint directory (see lm_train_internal.h):
 * made and checked before any training, so that a bad -o fails at once and
 * an earlier run's checkpoints are never taken over by accident; the
 * checkpoint --resume starts from; --keep-last pruning. */
#define _POSIX_C_SOURCE 200809L
#include "app/lm_train_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char STEP_PREFIX[] = "step-", STEP_SUFFIX[] = ".safetensors";
/* atomic.h's temporaries are ".NAME.tmp-XXXXXX"; ckpt_set_latest's ".latest.tmp". */
static const char TMP_MARK[] = ".tmp";

/* The step number of a file named step-N.safetensors, or -1. */
static long long step_of(const char *name)
{
	size_t np = sizeof STEP_PREFIX - 1, ns = sizeof STEP_SUFFIX - 1, n = strlen(name);
	if (n <= np + ns || strncmp(name, STEP_PREFIX, np) || strcmp(name + n - ns, STEP_SUFFIX))
		return -1;
	long long s = 0;
	for (size_t i = np; i < n - ns; i++) {
		if (name[i] < '0' || name[i] > '9' || s > (INT64_MAX - 9) / 10)
			return -1;
		s = s * 10 + (name[i] - '0');
	}
	return s;
}

static int is_stale_tmp(const char *name)
{
	return name[0] == '.' && strstr(name, TMP_MARK) != NULL;
}

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

static void strip_slashes(char *p)
{
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
}

/* mkdir -p; *created_from is the length of the prefix that already existed. */
static int make_dirs(const char *path, size_t *created_from, lm_err *e)
{
	char *p = strdup(path);
	if (!p)
		return lm_seterr(e, "out of memory");
	strip_slashes(p);
	size_t n = strlen(p);
	*created_from = 0;
	int rc = 0;
	for (size_t i = 1; i <= n && !rc; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		if (!mkdir(p, 0777)) {
			if (!*created_from)
				*created_from = i;
		} else if (errno != EEXIST) {
			rc = lm_seterr(e, "%s:", p);
		} else {
			struct stat st;
			if (stat(p, &st) || !S_ISDIR(st.st_mode))
				rc = lm_usage_err(e, "%s: not a directory (-o names the checkpoint directory)", p);
		}
		p[i] = c;
	}
	free(p);
	return rc;
}

int train_dir_prepare(train_dir *d, const char *path, int resume, int force, lm_err *e)
{
	memset(d, 0, sizeof *d);
	d->path = path;
	struct stat st;
	if (!stat(path, &st) && !S_ISDIR(st.st_mode))
		return lm_usage_err(e, "%s: not a directory (-o names the checkpoint directory)", path);
	if (make_dirs(path, &d->created_from, e))
		return -1;
	d->created = d->created_from > 0;
	DIR *dp = opendir(path);
	if (!dp)
		return lm_seterr(e, "%s:", path);
	long long newest = -1;
	int has_latest = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (is_stale_tmp(de->d_name)) {
			char *f = join(path, de->d_name);
			if (f && !unlink(f))
				d->stale_removed++;
			free(f);
		} else if (!strcmp(de->d_name, "latest")) {
			has_latest = 1;
		} else {
			long long s = step_of(de->d_name);
			if (s > newest)
				newest = s;
		}
	}
	closedir(dp);
	if ((has_latest || newest >= 0) && !resume && !force)
		return lm_usage_err(e, "%s: holds the checkpoints of a run (%s); give --resume to "
				    "continue it, or --force to start a new run there",
				    path, has_latest ? "latest" : "step-N.safetensors");
	return 0;
}

void train_dir_forget(const train_dir *d)
{
	char *p = d->created ? strdup(d->path) : NULL;
	if (p)
		strip_slashes(p);
	/* From the leaf up to the first directory made here, while empty. */
	while (p && strlen(p) >= d->created_from && !rmdir(p)) {
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
		strip_slashes(p);
	}
	free(p);
}

/* Step numbers of DIR's step files, newest first. */
static int list_steps(const char *dir, long long **steps, size_t *n, lm_err *e)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return lm_seterr(e, "%s:", dir);
	size_t cap = 0;
	*steps = NULL;
	*n = 0;
	struct dirent *de;
	int rc = 0;
	while (!rc && (de = readdir(dp))) {
		long long s = step_of(de->d_name);
		if (s < 0)
			continue;
		if (*n == cap) {
			long long *v = realloc(*steps, (cap = cap ? 2 * cap : 16) * sizeof *v);
			if (!v) {
				rc = lm_seterr(e, "out of memory");
				break;
			}
			*steps = v;
		}
		(*steps)[(*n)++] = s;
	}
	closedir(dp);
	for (size_t i = 1; i < *n; i++)
		for (size_t j = i; j > 0 && (*steps)[j - 1] < (*steps)[j]; j--) {
			long long x = (*steps)[j];
			(*steps)[j] = (*steps)[j - 1];
			(*steps)[j - 1] = x;
		}
	return rc;
}

static char *step_path(const char *dir, long long step)
{
	char name[64];
	snprintf(name, sizeof name, "%s%08lld%s", STEP_PREFIX, step, STEP_SUFFIX);
	return join(dir, name);
}

int train_dir_resume_path(const char *dir, char **path, int *fallback, lm_err *e)
{
	struct stat st;
	*fallback = 0;
	*path = join(dir, "latest");
	if (!*path)
		return lm_seterr(e, "out of memory");
	if (!stat(*path, &st))
		return 0;
	free(*path);
	*path = NULL;
	long long *steps;
	size_t n;
	if (list_steps(dir, &steps, &n, e))
		return -1;
	if (n) {
		*path = step_path(dir, steps[0]);
		*fallback = 1;
	}
	free(steps);
	if (!n)
		return lm_seterr(e, "%s: no checkpoint to resume from (no latest, no step-N.safetensors)",
				 dir);
	return *path ? 0 : lm_seterr(e, "out of memory");
}

int train_dir_prune(const char *dir, long long keep, lm_err *e)
{
	long long *steps;
	size_t n;
	if (list_steps(dir, &steps, &n, e))
		return -1;
	char *latest = join(dir, "latest"), target[256];
	ssize_t tl = latest ? readlink(latest, target, sizeof target - 1) : -1;
	target[tl > 0 ? tl : 0] = '\0';
	long long current = step_of(target);
	int rc = 0;
	for (size_t i = (size_t)keep; i < n && !rc; i++) {
		if (steps[i] == current)
			continue;
		char *p = step_path(dir, steps[i]);
		if (!p || (unlink(p) && errno != ENOENT))
			rc = p ? lm_seterr(e, "%s:", p) : lm_seterr(e, "out of memory");
		free(p);
	}
	free(latest);
	free(steps);
	return rc;
}
