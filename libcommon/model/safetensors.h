/* safetensors.h: reading and writing safetensors files (the checkpoint and
 * export format, man 5 lmpipe-checkpoint).
 *
 * Layout: u64 little-endian header length N, N bytes of JSON
 * {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *  ..., "__metadata__": {"key": "string value", ...}}, then the data, with
 * offsets relative to the end of the header.  The reader maps the file and
 * checks everything against its size (header length, dtypes, shapes, that
 * every tensor's byte count is its element count times the dtype size, and
 * that the tensors, in offset order, each start where the previous ended and
 * together cover the data exactly, as the reference implementation
 * requires), naming the file and tensor in each message.  The writer writes
 * the whole file or nothing (atomic.h), the data a chunk at a time (each
 * tensor's checksum computed on the way, the header written over its
 * placeholder last), with the header padded by spaces to
 * a multiple of 8 bytes, and the CRC-32C of each tensor's bytes in the
 * metadata under "lmpipe.crc32c.NAME" (8 lowercase hex digits).  A file
 * with such keys must have one for every tensor; a file without any (other
 * writers, lmpipe before checksums) is read unverified. */
#ifndef LMPIPE_SAFETENSORS_H
#define LMPIPE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum { SFT_MAX_DIMS = 8 };

typedef enum sft_dtype { SFT_F32, SFT_F16, SFT_BF16, SFT_I64, SFT_I32, SFT_U8, SFT_BOOL } sft_dtype;

typedef struct sft_tensor {
	const char *name;
	sft_dtype dtype;
	int ndim;
	int64_t shape[SFT_MAX_DIMS];
	const void *data;      /* into the mapping (read) or caller memory (write) */
	size_t nbytes;
} sft_tensor;

typedef struct sft_file {
	char *path;
	void *map;
	size_t size;
	sft_tensor *t;
	size_t n;
	void *json;            /* the parsed header (json_t *) */
	void *meta;            /* the __metadata__ object or NULL */
	uint32_t *crc;         /* per tensor, or NULL: the file has no checksums */
} sft_file;

size_t sft_dtype_size(sft_dtype d);

int sft_open(sft_file *f, const char *path, lm_err *e);
void sft_close(sft_file *f);
/* The tensor called name, or NULL. */
const sft_tensor *sft_find(const sft_file *f, const char *name);
/* A tensor that must exist with this dtype and exactly these dims, and
 * whose bytes match its checksum when the file has one; -1 with a message
 * naming file and tensor otherwise ("x.safetensors: tensor 'w': checksum
 * mismatch ..."). */
int sft_expect(const sft_file *f, const char *name, sft_dtype d, int ndim,
	       const int64_t *shape, const sft_tensor **out, lm_err *e);
/* The same without reading the data: for checking what a file holds before
 * allocating from its claims. */
int sft_expect_shape(const sft_file *f, const char *name, sft_dtype d, int ndim,
		     const int64_t *shape, const sft_tensor **out, lm_err *e);
/* Check t (one of f->t) against its checksum (0 when the file has none). */
int sft_verify(const sft_file *f, const sft_tensor *t, lm_err *e);
/* A __metadata__ value, or NULL. */
const char *sft_meta(const sft_file *f, const char *key);

/* Write n tensors (data in host memory) and n_meta key/value string pairs
 * (meta[2i], meta[2i+1]). */
int sft_write(const char *path, const sft_tensor *t, size_t n,
	      const char *const *meta, size_t n_meta, lm_err *e);

/* Where sft_write_ex takes the tensors' bytes from: fetch(arg, i, dst,
 * src, n, e) copies the n bytes at src (inside t[i].data, in memory the
 * caller knows, a device's) into dst (host memory): 0, or -1 with a
 * message in e. */
typedef int (*sft_fetch_fn)(void *arg, size_t i, void *dst, const void *src, size_t n,
			    lm_err *e);
/* The same file as sft_write, the data taken a chunk at a time through
 * fetch (NULL: t[i].data is host memory, read in place), checksummed and
 * written as it comes, the header's checksums written last over a
 * placeholder of the same length: no copy of the whole data is made. */
int sft_write_ex(const char *path, const sft_tensor *t, size_t n, const char *const *meta,
		 size_t n_meta, sft_fetch_fn fetch, void *arg, lm_err *e);

#endif
