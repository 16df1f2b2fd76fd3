/* io.c: checked reads and writes (see io.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { READ_CHUNK = 1 << 20 };

const char *io_name(const char *path)
{
	return !path || !strcmp(path, "-") ? "<stdin>" : path;
}

FILE *io_open_read(const char *path, lm_err *e)
{
	if (!path || !strcmp(path, "-"))
		return stdin;
	FILE *fp = fopen(path, "rb");
	if (!fp)
		lm_seterr(e, "%s:", path);
	return fp;
}

void io_close_read(FILE *fp)
{
	if (fp && fp != stdin)
		fclose(fp);
}

int io_read_some(FILE *fp, void *buf, size_t n, size_t *got, const char *name, lm_err *e)
{
	*got = fread(buf, 1, n, fp);
	if (*got < n && ferror(fp))
		return lm_seterr(e, "%s: read error:", name);
	return 0;
}

int io_write_all(FILE *fp, const void *buf, size_t n, const char *name, lm_err *e)
{
	if (n && fwrite(buf, 1, n, fp) != n)
		return lm_seterr(e, "%s: write error:", name);
	return 0;
}

int io_read_file(const char *path, uint8_t **buf, size_t *len, lm_err *e)
{
	FILE *fp = io_open_read(path, e);
	if (!fp)
		return -1;
	size_t cap = READ_CHUNK, n = 0;
	uint8_t *b = malloc(cap + 1);
	for (;;) {
		if (!b) {
			io_close_read(fp);
			return lm_seterr(e, "%s: out of memory", io_name(path));
		}
		size_t got;
		if (io_read_some(fp, b + n, cap - n, &got, io_name(path), e)) {
			free(b);
			io_close_read(fp);
			return -1;
		}
		n += got;
		if (n < cap)
			break;
		cap *= 2;
		uint8_t *nb = realloc(b, cap + 1);
		if (!nb)
			free(b);
		b = nb;
	}
	io_close_read(fp);
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}
