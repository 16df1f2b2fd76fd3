/* shard_set.c: writing and reading the manifest of a shard set (see
 * shard_set.h). */
#define _POSIX_C_SOURCE 200809L
#include "data/shard_set.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/crc32c.h"
#include "base/io.h"

static const char MAGIC[] = "lmpipe-shard-set 1";
static const char *const PART_NAME[2] = { "train", "val" };
enum { LINE_MAX_LEN = 8192, CRC_HEX = 8 };

char *shard_set_path(const char *prefix)
{
	size_t n = strlen(prefix) + sizeof SHARD_SET_EXT;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s", prefix, SHARD_SET_EXT);
	return p;
}

char *shard_set_shard_path(const char *prefix, const char *name)
{
	const char *slash = strrchr(prefix, '/');
	int dirlen = slash ? (int)(slash - prefix + 1) : 0;
	size_t n = (size_t)dirlen + strlen(name) + 1;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%.*s%s", dirlen, prefix, name);
	return p;
}

int shard_set_add(shard_set *s, int part, const char *name, uint64_t tokens, uint64_t docs,
		  uint32_t crc, lm_err *e)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	if (!*base || strpbrk(base, "\n\r"))
		return lm_seterr(e, "%s: not a name a manifest can hold", name);
	if (s->n[part] == s->cap[part]) {
		size_t c = s->cap[part] ? s->cap[part] * 2 : 16;
		shard_set_entry *p = realloc(s->e[part], c * sizeof *p);
		if (!p)
			return lm_seterr(e, "out of memory");
		s->e[part] = p;
		s->cap[part] = c;
	}
	shard_set_entry *x = &s->e[part][s->n[part]];
	if (!(x->name = strdup(base)))
		return lm_seterr(e, "out of memory");
	x->tokens = tokens;
	x->docs = docs;
	x->crc = crc;
	s->n[part]++;
	return 0;
}

void shard_set_free(shard_set *s)
{
	for (int p = 0; p < 2; p++) {
		for (size_t i = 0; i < s->n[p]; i++)
			free(s->e[p][i].name);
		free(s->e[p]);
	}
	memset(s, 0, sizeof *s);
}

int shard_set_write(const char *prefix, const shard_set *s, lm_err *e)
{
	char *path = shard_set_path(prefix), *text = NULL;
	size_t len = 0;
	FILE *m = path ? open_memstream(&text, &len) : NULL;
	if (!m) {
		free(path);
		return lm_seterr(e, "%s: out of memory", prefix);
	}
	fprintf(m, "%s\ngeneration %u\n", MAGIC, s->generation);
	for (int p = 0; p < 2; p++) {
		fprintf(m, "%s %zu\n", PART_NAME[p], s->n[p]);
		for (size_t i = 0; i < s->n[p]; i++) {
			const shard_set_entry *x = &s->e[p][i];
			fprintf(m, "%s %" PRIu64 " %" PRIu64 " %08" PRIx32 "\n", x->name, x->tokens,
				x->docs, x->crc);
		}
	}
	int bad = fclose(m) != 0;
	atomic_file af;
	int rc = -1;
	if (bad)
		lm_seterr(e, "%s: out of memory", path);
	else if (!atomic_open(&af, path, e)) {
		fprintf(af.fp, "%send %08" PRIx32 "\n", text, crc32c(0, text, len));
		rc = atomic_commit(&af, e);
	}
	free(text);
	free(path);
	return rc;
}

/* The next line of buf from *at (without its newline), NUL-terminated in
 * place; NULL at the end. */
static char *next_line(char *buf, size_t len, size_t *at)
{
	if (*at >= len)
		return NULL;
	char *s = buf + *at, *nl = memchr(s, '\n', len - *at);
	if (!nl)
		return NULL; /* every line ends in a newline: a cut line is an error */
	*nl = '\0';
	*at = (size_t)(nl - buf) + 1;
	return s;
}

/* "NAME TOKENS DOCS CRC": the name may hold spaces, the numbers do not. */
static int parse_entry(char *line, shard_set *s, int part, lm_err *e)
{
	char *f[3];
	for (int k = 2; k >= 0; k--) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			return -1;
		f[k] = sp + 1;
		*sp = '\0';
	}
	char *end;
	errno = 0;
	uint64_t tokens = strtoull(f[0], &end, 10);
	if (*end || !*f[0] || errno || *f[0] == '-')
		return -1;
	uint64_t docs = strtoull(f[1], &end, 10);
	if (*end || !*f[1] || errno || *f[1] == '-')
		return -1;
	unsigned long crc = strtoul(f[2], &end, 16);
	if (*end || strlen(f[2]) != CRC_HEX || crc > UINT32_MAX || !*line || strchr(line, '/'))
		return -1;
	return shard_set_add(s, part, line, tokens, docs, (uint32_t)crc, e) ? -2 : 0;
}

static int parse(char *buf, size_t len, const char *path, shard_set *s, lm_err *e)
{
	/* the checksum covers the bytes before the last line, before next_line
	 * cuts the lines in place */
	size_t last = len > 1 ? len - 1 : 0;
	while (last > 0 && buf[last - 1] != '\n')
		last--;
	uint32_t body_crc = crc32c(0, buf, last);
	size_t at = 0, lineno = 1;
	char *l = next_line(buf, len, &at);
	if (!l || strcmp(l, MAGIC))
		return lm_seterr(e, "%s: not a shard-set manifest (want '%s' on line 1)", path, MAGIC);
	char word[16];
	l = next_line(buf, len, &at), lineno++;
	if (!l || sscanf(l, "generation %u%1s", &s->generation, word) != 1)
		return lm_seterr(e, "%s:%zu: want 'generation N'", path, lineno);
	for (int p = 0; p < 2; p++) {
		unsigned long long n;
		char tail;
		l = next_line(buf, len, &at), lineno++;
		if (!l || sscanf(l, "%15s %llu%c", word, &n, &tail) != 2 || strcmp(word, PART_NAME[p]))
			return lm_seterr(e, "%s:%zu: want '%s N'", path, lineno, PART_NAME[p]);
		for (unsigned long long i = 0; i < n; i++) {
			l = next_line(buf, len, &at), lineno++;
			int rc = l ? parse_entry(l, s, p, e) : -1;
			if (rc == -2)
				return -1;
			if (rc)
				return lm_seterr(e, "%s:%zu: want 'NAME TOKENS DOCUMENTS CRC'", path,
						 lineno);
		}
	}
	size_t body = at;
	unsigned long crc;
	l = next_line(buf, len, &at), lineno++;
	if (!l || sscanf(l, "end %8lx%c", &crc, word) != 1 || strlen(l) != 4 + CRC_HEX)
		return lm_seterr(e, "%s:%zu: want 'end CRC' (truncated?)", path, lineno);
	if (at != len || body != last)
		return lm_seterr(e, "%s: data after the end line", path);
	if (body_crc != crc)
		return lm_seterr(e, "%s: checksum mismatch (corrupt manifest)", path);
	return 0;
}

int shard_set_read(const char *prefix, shard_set *s, lm_err *e)
{
	memset(s, 0, sizeof *s);
	char *path = shard_set_path(prefix);
	if (!path)
		return lm_seterr(e, "%s: out of memory", prefix);
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		int rc = errno == ENOENT ? 1 : lm_seterr(e, "%s:", path);
		free(path);
		return rc;
	}
	fclose(fp);
	uint8_t *buf;
	size_t len;
	int rc = io_read_file(path, &buf, &len, e);
	if (!rc) {
		/* a NUL inside would end a line early: refuse it as a bad line */
		rc = memchr(buf, '\0', len) ? lm_seterr(e, "%s: a NUL byte in the manifest", path)
					    : parse((char *)buf, len, path, s, e);
		free(buf);
	}
	if (rc)
		shard_set_free(s);
	free(path);
	return rc;
}
