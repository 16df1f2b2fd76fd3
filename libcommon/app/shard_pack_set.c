/* shard_pack_set.c: the files of a shard set on disk: recognising its
 * shards of any generation, removing those its manifest does not name and
 * the temporary files of killed runs, and sealing a set written before
 * manifests (shard-pack --seal; see shard_pack.h, man 5 lmpipe-shard). */
#define _POSIX_C_SOURCE 200809L
#include "app/shard_pack.h"
#include "app/shard_pack_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "data/shard.h"

enum { NAME_EXTRA = 32 };   /* room for "-000000.lms" after a prefix */

int shard_pack_is_shard_of(const char *name, const char *base)
{
	size_t n = strlen(base);
	if (strncmp(name, base, n))
		return 0;
	const char *p = name + n;
	if (p[0] == '.' && p[1] == 'g') {
		const char *q = p + 2;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q == p + 2)
			return 0;
		p = q;
	}
	if (!strncmp(p, "-val-", 5))
		p += 5;
	else if (*p == '-')
		p++;
	else
		return 0;
	const char *d = p;
	while (*p >= '0' && *p <= '9')
		p++;
	return p - d >= 6 && !strcmp(p, SHARD_EXT);
}

typedef struct set_names {
	const char *base;       /* the prefix's last component */
	const shard_set *keep;  /* NULL: none */
} set_names;

static int is_set_file(const char *name, void *arg)
{
	const set_names *sn = arg;
	size_t n = strlen(sn->base);
	return shard_pack_is_shard_of(name, sn->base) ||
	       (!strncmp(name, sn->base, n) && !strcmp(name + n, SHARD_SET_EXT));
}

static int kept(const shard_set *s, const char *name)
{
	for (int p = 0; s && p < 2; p++)
		for (size_t i = 0; i < s->n[p]; i++)
			if (!strcmp(s->e[p][i].name, name))
				return 1;
	return 0;
}

/* The prefix's directory (malloc'd; "" for the current one) and last part. */
static char *prefix_dir(const char *prefix, const char **base)
{
	const char *slash = strrchr(prefix, '/');
	*base = slash ? slash + 1 : prefix;
	return slash ? strndup(prefix, (size_t)(slash - prefix) + 1) : strdup("");
}

void shard_pack_remove_unlisted(const char *prefix, const shard_set *keep)
{
	const char *base;
	char *dir = prefix_dir(prefix, &base);
	DIR *d = dir ? opendir(*dir ? dir : ".") : NULL;
	for (struct dirent *de; d && (de = readdir(d));) {
		if (!shard_pack_is_shard_of(de->d_name, base) || kept(keep, de->d_name))
			continue;
		size_t n = strlen(dir) + strlen(de->d_name) + 1;
		char *path = malloc(n);
		if (path) {
			snprintf(path, n, "%s%s", dir, de->d_name);
			unlink(path);
			free(path);
		}
	}
	if (d)
		closedir(d);
	free(dir);
}

void shard_pack_remove_stale_tmp(const char *prefix)
{
	set_names sn = { NULL, NULL };
	char *dir = prefix_dir(prefix, &sn.base);
	if (dir)
		atomic_clean_stale(dir, is_set_file, &sn);
	free(dir);
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Verify and add base-000000.lms, base-000001.lms, ... to part of s. */
static int seal_part(const char *base, int part, shard_set *s, lm_err *e)
{
	size_t len = strlen(base) + NAME_EXTRA;
	char *name = malloc(len);
	if (!name)
		return lm_seterr(e, "out of memory");
	int rc = 0;
	for (unsigned i = 0; !rc; i++) {
		snprintf(name, len, "%s-%06u%s", base, i, SHARD_EXT);
		if (!is_file(name))
			break;
		shard_file f;
		rc = shard_test(name, e) || shard_file_open(&f, name, e) ? -1 : 0;
		if (!rc) {
			rc = shard_set_add(s, part, name, f.m.n_tokens, f.m.n_docs, f.header_crc, e);
			shard_file_close(&f);
		}
	}
	free(name);
	return rc;
}

int shard_seal(const char *prefix, lm_err *e)
{
	shard_set s = { 0 };
	int got = shard_set_read(prefix, &s, e);
	if (got <= 0) {
		shard_set_free(&s);
		return got < 0 ? -1 : lm_seterr(e, "%s%s: the set is sealed already", prefix,
						SHARD_SET_EXT);
	}
	size_t len = strlen(prefix) + sizeof SHARD_SET_VAL;
	char *val = malloc(len);
	if (!val)
		return lm_seterr(e, "out of memory");
	snprintf(val, len, "%s%s", prefix, SHARD_SET_VAL);
	int rc = seal_part(prefix, SHARD_SET_TRAIN, &s, e) || seal_part(val, SHARD_SET_VALID, &s, e);
	free(val);
	if (!rc && s.n[SHARD_SET_TRAIN] == 0)
		rc = lm_seterr(e, "%s: no %s-000000%s to seal", prefix, prefix, SHARD_EXT);
	/* a shard past a gap would be left out: refuse rather than guess */
	const char *base;
	char *dir = rc ? NULL : prefix_dir(prefix, &base);
	DIR *d = dir ? opendir(*dir ? dir : ".") : NULL;
	for (struct dirent *de; !rc && d && (de = readdir(d));)
		if (shard_pack_is_shard_of(de->d_name, base) && !kept(&s, de->d_name))
			rc = lm_seterr(e, "%s%s: not in sequence with the other shards (a gap "
				       "before it?); the set cannot be sealed, redo it with "
				       "shard-pack -f -o %s", dir, de->d_name, prefix);
	if (d)
		closedir(d);
	free(dir);
	if (!rc)
		rc = shard_set_write(prefix, &s, e);
	shard_set_free(&s);
	return rc;
}
