/* safetensors.c: the safetensors reader (mmap + jansson, every field
 * checked against the file) and the whole-or-nothing writer (see
 * safetensors.h). */
#define _POSIX_C_SOURCE 200809L
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/checked.h"
#include "base/crc32c.h"
#include "base/io.h"

enum { HEADER_LEN_BYTES = 8, HEADER_MAX = 100 << 20, HEADER_ALIGN = 8 };
/* "lmpipe.crc32c.NAME": the CRC-32C of tensor NAME's bytes, in hex */
#define CRC_KEY "lmpipe.crc32c."
enum { CRC_HEX = 8, CRC_KEY_MAX = 512 };

static const struct { const char *name; size_t size; } dtypes[] = {
	[SFT_F32] = { "F32", 4 }, [SFT_F16] = { "F16", 2 }, [SFT_BF16] = { "BF16", 2 },
	[SFT_I64] = { "I64", 8 }, [SFT_I32] = { "I32", 4 }, [SFT_U8] = { "U8", 1 },
	[SFT_BOOL] = { "BOOL", 1 },
};
enum { N_DTYPES = sizeof dtypes / sizeof dtypes[0] };

size_t sft_dtype_size(sft_dtype d) { return dtypes[d].size; }

static int parse_tensor(sft_file *f, const char *name, json_t *v, const char *data,
			size_t datalen, sft_tensor *t, lm_err *e)
{
	json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *offs = json_object_get(v, "data_offsets");
	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) ||
	    !json_is_array(offs) || json_array_size(offs) != 2)
		return lm_seterr(e, "%s: tensor '%s': needs dtype, shape and data_offsets", f->path, name);
	t->name = name;
	int d;
	for (d = 0; d < N_DTYPES; d++)
		if (!strcmp(json_string_value(dt), dtypes[d].name))
			break;
	if (d == N_DTYPES)
		return lm_seterr(e, "%s: tensor '%s': unsupported dtype '%s'", f->path, name,
				 json_string_value(dt));
	t->dtype = d;
	if (json_array_size(shape) > SFT_MAX_DIMS)
		return lm_seterr(e, "%s: tensor '%s': more than %d dimensions", f->path, name, SFT_MAX_DIMS);
	t->ndim = (int)json_array_size(shape);
	uint64_t numel = 1, bytes;
	for (int i = 0; i < t->ndim; i++) {
		json_t *x = json_array_get(shape, i);
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return lm_seterr(e, "%s: tensor '%s': bad shape", f->path, name);
		t->shape[i] = json_integer_value(x);
		if (ck_mul_u64(numel, (uint64_t)t->shape[i], &numel))
			return lm_seterr(e, "%s: tensor '%s': the element count overflows", f->path,
					 name);
	}
	if (ck_mul_u64(numel, dtypes[d].size, &bytes))
		return lm_seterr(e, "%s: tensor '%s': the byte count overflows", f->path, name);
	json_t *b = json_array_get(offs, 0), *en = json_array_get(offs, 1);
	if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
	    json_integer_value(en) < json_integer_value(b) ||
	    (uint64_t)json_integer_value(en) > datalen)
		return lm_seterr(e, "%s: tensor '%s': data_offsets outside the file (truncated?)",
				 f->path, name);
	t->nbytes = (size_t)(json_integer_value(en) - json_integer_value(b));
	if (t->nbytes != bytes)
		return lm_seterr(e, "%s: tensor '%s': %zu bytes for %llu elements of %s", f->path,
				 name, t->nbytes, (unsigned long long)numel, dtypes[d].name);
	t->data = data + json_integer_value(b);
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const sft_tensor *x = *(const sft_tensor *const *)a, *y = *(const sft_tensor *const *)b;
	if (x->data != y->data)
		return (const char *)x->data < (const char *)y->data ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* In offset order, each tensor starts where the previous ended and the last
 * ends at the end of the file: no byte is shared, none is unaccounted for. */
static int check_layout(sft_file *f, const char *data, size_t datalen, lm_err *e)
{
	const sft_tensor **order = malloc((f->n ? f->n : 1) * sizeof *order);
	if (!order)
		return lm_seterr(e, "%s: out of memory", f->path);
	for (size_t i = 0; i < f->n; i++)
		order[i] = &f->t[i];
	qsort(order, f->n, sizeof *order, by_offset);
	size_t at = 0;
	int rc = 0;
	for (size_t i = 0; !rc && i < f->n; i++) {
		size_t begin = (size_t)((const char *)order[i]->data - data);
		if (begin != at)
			rc = lm_seterr(e, "%s: tensor '%s': data starts at byte %zu, the previous "
				       "tensor ends at %zu (%s)", f->path, order[i]->name, begin, at,
				       begin < at ? "overlap" : "gap");
		at = begin + order[i]->nbytes;
	}
	if (!rc && at != datalen)
		rc = lm_seterr(e, "%s: the tensors end at byte %zu of %zu bytes of data", f->path,
			       at, datalen);
	free(order);
	return rc;
}

/* The checksums in the metadata: all tensors have one, or none has. */
static int read_checksums(sft_file *f, lm_err *e)
{
	size_t keys = 0, found = 0;
	const char *key;
	json_t *v;
	if (f->meta)
		json_object_foreach(f->meta, key, v)
			keys += !strncmp(key, CRC_KEY, sizeof CRC_KEY - 1);
	if (!keys)
		return 0;
	if (!(f->crc = calloc(f->n ? f->n : 1, sizeof *f->crc)))
		return lm_seterr(e, "%s: out of memory", f->path);
	for (size_t i = 0; i < f->n; i++) {
		sft_tensor *t = &f->t[i];
		char name[CRC_KEY_MAX];
		if (snprintf(name, sizeof name, "%s%s", CRC_KEY, t->name) >= (int)sizeof name)
			return lm_seterr(e, "%s: tensor '%s': name too long", f->path, t->name);
		const char *hex = json_string_value(json_object_get(f->meta, name));
		char *end;
		if (!hex)
			return lm_seterr(e, "%s: tensor '%s': no checksum, although the file has "
					 "checksums", f->path, t->name);
		unsigned long c = strtoul(hex, &end, 16);
		if (strlen(hex) != CRC_HEX || *end || c > UINT32_MAX)
			return lm_seterr(e, "%s: tensor '%s': bad checksum '%s'", f->path, t->name,
					 hex);
		f->crc[i] = (uint32_t)c;
		found++;
	}
	if (found != keys)
		return lm_seterr(e, "%s: %zu checksums for %zu tensors", f->path, keys, found);
	return 0;
}

static int parse_header(sft_file *f, lm_err *e)
{
	const unsigned char *p = f->map;
	if (f->size < HEADER_LEN_BYTES)
		return lm_seterr(e, "%s: not a safetensors file (%zu bytes)", f->path, f->size);
	uint64_t hlen = 0;
	for (int i = HEADER_LEN_BYTES - 1; i >= 0; i--)
		hlen = hlen << 8 | p[i];
	if (hlen > HEADER_MAX || hlen > f->size - HEADER_LEN_BYTES)
		return lm_seterr(e, "%s: not a safetensors file (header length %llu, file %zu bytes)",
				 f->path, (unsigned long long)hlen, f->size);
	json_error_t je;
	json_t *root = json_loadb((const char *)p + HEADER_LEN_BYTES, hlen,
				  JSON_REJECT_DUPLICATES, &je);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return lm_seterr(e, "%s: bad safetensors header: %s", f->path,
				 root ? "not a JSON object" : je.text);
	}
	f->json = root;
	size_t datalen = f->size - HEADER_LEN_BYTES - hlen;
	f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
	if (!f->t)
		return lm_seterr(e, "out of memory");
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			if (!json_is_object(v))
				return lm_seterr(e, "%s: __metadata__ is not an object", f->path);
			f->meta = v;
			continue;
		}
		if (parse_tensor(f, key, v, (const char *)p + HEADER_LEN_BYTES + hlen, datalen,
				 &f->t[f->n], e))
			return -1;
		f->n++;
	}
	if (check_layout(f, (const char *)p + HEADER_LEN_BYTES + hlen, datalen, e))
		return -1;
	return read_checksums(f, e);
}

int sft_open(sft_file *f, const char *path, lm_err *e)
{
	memset(f, 0, sizeof *f);
	f->path = strdup(path);
	if (!f->path)
		return lm_seterr(e, "out of memory");
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		lm_seterr(e, "%s:", path);
		if (fd >= 0)
			close(fd);
		sft_close(f);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		sft_close(f);
		return lm_seterr(e, S_ISDIR(st.st_mode) ? "%s: a directory, not a file (a run's "
				 "directory holds its last checkpoint as 'latest')" : "%s: not a regular file",
				 path);
	}
	f->size = (size_t)st.st_size;
	if (f->size) {
		f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (f->map == MAP_FAILED) {
			f->map = NULL;
			lm_seterr(e, "%s: mmap:", path);
			close(fd);
			sft_close(f);
			return -1;
		}
	}
	close(fd);
	if (parse_header(f, e)) {
		sft_close(f);
		return -1;
	}
	return 0;
}

void sft_close(sft_file *f)
{
	if (f->map)
		munmap(f->map, f->size);
	json_decref(f->json);
	free(f->t);
	free(f->crc);
	free(f->path);
	memset(f, 0, sizeof *f);
}

const sft_tensor *sft_find(const sft_file *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

int sft_verify(const sft_file *f, const sft_tensor *t, lm_err *e)
{
	if (!f->crc)
		return 0;
	uint32_t c = crc32c(0, t->data, t->nbytes), want = f->crc[t - f->t];
	if (c != want)
		return lm_seterr(e, "%s: tensor '%s': checksum mismatch (CRC-32C %08" PRIx32
				 ", the metadata says %08" PRIx32 ")", f->path, t->name, c, want);
	return 0;
}

int sft_expect(const sft_file *f, const char *name, sft_dtype d, int ndim,
	       const int64_t *shape, const sft_tensor **out, lm_err *e)
{
	return sft_expect_shape(f, name, d, ndim, shape, out, e) || sft_verify(f, *out, e) ? -1 : 0;
}

int sft_expect_shape(const sft_file *f, const char *name, sft_dtype d, int ndim,
		     const int64_t *shape, const sft_tensor **out, lm_err *e)
{
	const sft_tensor *t = sft_find(f, name);
	if (!t)
		return lm_seterr(e, "%s: no tensor '%s'", f->path, name);
	if (t->dtype != d)
		return lm_seterr(e, "%s: tensor '%s' is %s, expected %s", f->path, name,
				 dtypes[t->dtype].name, dtypes[d].name);
	int same = t->ndim == ndim;
	for (int i = 0; same && i < ndim; i++)
		same = t->shape[i] == shape[i];
	if (!same) {
		char got[128] = "", want[128] = "";
		for (int i = 0; i < t->ndim; i++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
				 (long long)t->shape[i]);
		for (int i = 0; i < ndim; i++)
			snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
				 (long long)shape[i]);
		return lm_seterr(e, "%s: tensor '%s' has shape [%s], expected [%s]", f->path, name,
				 got, want);
	}
	*out = t;
	return 0;
}

const char *sft_meta(const sft_file *f, const char *key)
{
	json_t *v = f->meta ? json_object_get(f->meta, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The header of n tensors with checksums crc[i] (the written file's
 * layout: metadata, then the tensors in order), padded to HEADER_ALIGN;
 * its length does not depend on the checksums' values. */
static char *make_header(const sft_tensor *t, size_t n, const uint32_t *crc,
			 const char *const *meta, size_t n_meta, size_t *len)
{
	json_t *root = json_object();
	size_t off = 0;
	if (n_meta || n) {
		json_t *m = json_object();
		for (size_t i = 0; i < n_meta; i++)
			json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1]));
		for (size_t i = 0; i < n; i++) {
			char key[CRC_KEY_MAX], hex[CRC_HEX + 1];
			snprintf(key, sizeof key, "%s%s", CRC_KEY, t[i].name);
			snprintf(hex, sizeof hex, "%08" PRIx32, crc[i]);
			json_object_set_new(m, key, json_string(hex));
		}
		json_object_set_new(root, "__metadata__", m);
	}
	for (size_t i = 0; i < n; i++) {
		json_t *shape = json_array();
		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(shape, json_integer(t[i].shape[d]));
		json_t *v = json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtypes[t[i].dtype].name,
				      "shape", shape, "data_offsets", (json_int_t)off,
				      (json_int_t)(off + t[i].nbytes));
		json_object_set_new(root, t[i].name, v);
		off += t[i].nbytes;
	}
	char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!s)
		return NULL;
	size_t l = strlen(s), padded = (l + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
	char *h = realloc(s, padded + 1);
	if (!h) {
		free(s);
		return NULL;
	}
	memset(h + l, ' ', padded - l);
	h[padded] = '\0';
	*len = padded;
	return h;
}

/* Bytes of a tensor taken (fetched, checksummed, written) at a time, and
 * of written data after which the kernel is asked to start writing it
 * out, so that the final fsync has less left to wait for. */
enum { WRITE_CHUNK = 8 << 20, WRITEBACK_EVERY = 64 << 20 };

static void start_writeback(FILE *fp, size_t from, size_t to)
{
#ifdef SYNC_FILE_RANGE_WRITE
	sync_file_range(fileno(fp), (off_t)from, (off_t)(to - from), SYNC_FILE_RANGE_WRITE);
#else
	(void)fp, (void)from, (void)to;
#endif
}

/* One chunk of the data: tensor i's bytes [off, off + len). */
typedef struct chunk {
	size_t i, off, len;
	const char *at;           /* where its bytes are, once taken */
} chunk;

/* The chunk after c (c->i == n: none yet), skipping empty tensors: 0 at
 * the end. */
static int next_chunk(const sft_tensor *t, size_t n, chunk *c)
{
	size_t i = c->i, off = c->off + c->len;
	if (i == n)
		i = 0, off = 0;
	while (i < n && off >= t[i].nbytes)
		i++, off = 0;
	if (i >= n)
		return 0;
	c->i = i;
	c->off = off;
	c->len = t[i].nbytes - off < WRITE_CHUNK ? t[i].nbytes - off : WRITE_CHUNK;
	return 1;
}

/* Take chunk c (through buf when fetch copies it from elsewhere) and add
 * it to its tensor's checksum. */
static int take(const sft_tensor *t, chunk *c, uint32_t *crc, sft_fetch_fn fetch, void *arg,
		char *buf, const char *path, lm_err *e)
{
	c->at = (const char *)t[c->i].data + c->off;
	if (fetch) {
		if (fetch(arg, c->i, buf, c->at, c->len, e))
			return lm_err_prefix(e, "%s: tensor '%s'", path, t[c->i].name);
		c->at = buf;
	}
	crc[c->i] = crc32c(c->off ? crc[c->i] : 0, c->at, c->len);
	return 0;
}

/* The tensors' bytes after the header (at bytes of the file), each
 * checksummed on the way into crc[i]: while one thread writes a chunk,
 * the calling thread (the one a device's copies must come from) takes the
 * next into the other of the two buffers. */
static int write_data(FILE *fp, const char *path, const sft_tensor *t, size_t n, uint32_t *crc,
		      sft_fetch_fn fetch, void *arg, char *bufs[2], size_t at, lm_err *e)
{
	for (size_t i = 0; i < n; i++)
		crc[i] = 0;
	chunk cur = { .i = n }, next;
	if (!next_chunk(t, n, &cur))
		return 0;
	if (take(t, &cur, crc, fetch, arg, bufs[0], path, e))
		return -1;
	size_t pushed = at;
	lm_err we = { .msg = "" };
	for (int slot = 1;; slot ^= 1) {
		next = cur;
		int more = next_chunk(t, n, &next), werr = 0, terr = 0;
#pragma omp parallel num_threads(2) if (more)
		{
			int me = omp_get_thread_num(), nt = omp_get_num_threads();
			if (me == nt - 1)
				werr = io_write_all(fp, cur.at, cur.len, path, &we);
			if (me == 0 && more)
				terr = take(t, &next, crc, fetch, arg, bufs[slot], path, e);
		}
		if (werr) {
			*e = we;
			return -1;
		}
		if (terr)
			return -1;
		at += cur.len;
		if (at - pushed >= WRITEBACK_EVERY) {
			start_writeback(fp, pushed, at);
			pushed = at;
		}
		if (!more)
			return 0;
		cur = next;
	}
}

/* The header with the checksums over its placeholder (of the same length). */
static int write_header(FILE *fp, const char *path, const sft_tensor *t, size_t n,
			const uint32_t *crc, const char *const *meta, size_t n_meta, size_t hlen,
			lm_err *e)
{
	size_t len;
	char *h = make_header(t, n, crc, meta, n_meta, &len);
	if (!h)
		return lm_seterr(e, "%s: out of memory for the header", path);
	int rc = 0;
	if (len != hlen)
		rc = lm_seterr(e, "%s: the header changed length (%zu, then %zu bytes)", path, hlen, len);
	else if (fflush(fp) || pwrite(fileno(fp), h, len, HEADER_LEN_BYTES) != (ssize_t)len)
		rc = lm_seterr(e, "%s: write error:", path);
	free(h);
	return rc;
}

int sft_write_ex(const char *path, const sft_tensor *t, size_t n, const char *const *meta,
		 size_t n_meta, sft_fetch_fn fetch, void *arg, lm_err *e)
{
	size_t hlen, biggest = 0;
	for (size_t i = 0; i < n; i++)
		biggest = t[i].nbytes > biggest ? t[i].nbytes : biggest;
	size_t buflen = biggest < WRITE_CHUNK ? biggest : WRITE_CHUNK;
	uint32_t *crc = calloc(n ? n : 1, sizeof *crc);
	char *bufs[2] = { NULL, NULL };
	if (fetch) {
		bufs[0] = malloc(buflen ? buflen : 1);
		bufs[1] = malloc(buflen ? buflen : 1);
	}
	/* the checksums are known once the data is written: a placeholder
	 * header first, the real one over it at the end */
	char *h = crc && (!fetch || (bufs[0] && bufs[1])) ? make_header(t, n, crc, meta, n_meta, &hlen)
							  : NULL;
	if (!h) {
		free(crc);
		free(bufs[0]);
		free(bufs[1]);
		return lm_seterr(e, "%s: out of memory for the header", path);
	}
	unsigned char lenbuf[HEADER_LEN_BYTES];
	for (int i = 0; i < HEADER_LEN_BYTES; i++)
		lenbuf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	atomic_file af;
	int rc = atomic_open(&af, path, e);
	if (rc == 0) {
		rc = io_write_all(af.fp, lenbuf, sizeof lenbuf, path, e) ||
		     io_write_all(af.fp, h, hlen, path, e) ||
		     write_data(af.fp, path, t, n, crc, fetch, arg, bufs, HEADER_LEN_BYTES + hlen, e) ||
		     write_header(af.fp, path, t, n, crc, meta, n_meta, hlen, e) ? -1 : 0;
		if (rc)
			atomic_abort(&af);
		else
			rc = atomic_commit(&af, e);
	}
	free(h);
	free(crc);
	free(bufs[0]);
	free(bufs[1]);
	return rc;
}

int sft_write(const char *path, const sft_tensor *t, size_t n,
	      const char *const *meta, size_t n_meta, lm_err *e)
{
	return sft_write_ex(path, t, n, meta, n_meta, NULL, NULL, e);
}
