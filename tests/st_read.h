/* st_read.h: just enough of a safetensors reader for the tests: load a
 * whole file and fetch one F32 tensor by name (libcommon gets the real
 * reader).  Layout: u64 little-endian header length N, N bytes of JSON,
 * then the raw data that each tensor's "data_offsets" index. */
#ifndef LMPIPE_ST_READ_H
#define LMPIPE_ST_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_file {
	unsigned char *buf;
	size_t size, hlen;
	char *json; /* NUL-terminated copy of the header */
} st_file;

static inline int st_open(st_file *f, const char *path)
{
	memset(f, 0, sizeof *f);
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return -1;
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	rewind(fp);
	f->buf = n > 8 ? malloc((size_t)n) : NULL;
	if (!f->buf || fread(f->buf, 1, (size_t)n, fp) != (size_t)n) {
		fclose(fp);
		free(f->buf);
		return -1;
	}
	fclose(fp);
	f->size = (size_t)n;
	for (int i = 7; i >= 0; i--)
		f->hlen = f->hlen << 8 | f->buf[i];
	if (f->hlen > f->size - 8 || !(f->json = malloc(f->hlen + 1))) {
		free(f->buf);
		return -1;
	}
	memcpy(f->json, f->buf + 8, f->hlen);
	f->json[f->hlen] = 0;
	return 0;
}

/* Copy the F32 tensor called name, which must hold exactly n values, to
 * out; 0 on success, -1 when it is missing or of another size or type. */
static inline int st_f32(const st_file *f, const char *name, float *out, size_t n)
{
	char key[256];
	unsigned long long b, e;
	snprintf(key, sizeof key, "\"%s\"", name);
	const char *at = strstr(f->json, key), *end, *off;
	if (!at || !(end = strchr(at, '}')))
		return -1;
	off = strstr(at, "\"data_offsets\"");
	const char *dt = strstr(at, "\"F32\"");
	if (!off || off > end || !dt || dt > end)
		return -1;
	if (sscanf(strchr(off, '['), "[%llu , %llu]", &b, &e) != 2)
		return -1;
	if (e < b || e - b != n * sizeof(float) || 8 + f->hlen + e > f->size)
		return -1;
	memcpy(out, f->buf + 8 + f->hlen + b, n * sizeof *out);
	return 0;
}

static inline void st_close(st_file *f)
{
	free(f->buf);
	free(f->json);
}

#endif
