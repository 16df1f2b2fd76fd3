/* shard_file.c: opening one shard, checking its header, index and size, and
 * reading verified frames with pread (see shard.h). */
#define _POSIX_C_SOURCE 200809L
#include "data/shard.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "base/checked.h"
#include "base/crc32c.h"
#include "base/le.h"

static int read_at(const shard_file *f, void *buf, size_t n, uint64_t off, lm_err *e)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = pread(f->fd, p, n, (off_t)off);
		if (r < 0)
			return lm_seterr(e, "%s: read error:", f->path);
		if (r == 0)
			return lm_seterr(e, "%s: truncated at byte %llu", f->path,
					 (unsigned long long)off);
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* Check the fixed header h (hlen bytes read) against the file size. */
static int parse_header(shard_file *f, const uint8_t *h, uint32_t hlen, lm_err *e)
{
	shard_meta *m = &f->m;
	if (le_get32(h + hlen - 4) != crc32c(0, h, hlen - 4))
		return lm_seterr(e, "%s: header checksum mismatch", f->path);
	f->header_crc = le_get32(h + hlen - 4);
	m->dtype = h[8];
	m->vocab_size = le_get32(h + 12);
	m->eot = le_get32(h + 16);
	m->frame_tokens = le_get32(h + 20);
	m->n_tokens = le_get64(h + 24);
	m->n_docs = le_get64(h + 32);
	m->n_frames = le_get64(h + 40);
	m->index_offset = le_get64(h + 48);
	m->header_len = hlen;
	m->has_tok = hlen == SHARD_HEADER_TOK_LEN;
	m->tok_crc = m->has_tok ? le_get32(h + 60) : 0;
	if (m->dtype != 2 && m->dtype != 4)
		return lm_seterr(e, "%s: unknown dtype of %d bytes", f->path, m->dtype);
	if (m->vocab_size == 0 || (m->dtype == 2 && m->vocab_size > SHARD_U16_VOCAB_MAX))
		return lm_seterr(e, "%s: vocabulary size %u does not fit dtype u%d",
				 f->path, m->vocab_size, m->dtype * 8);
	if (m->eot != SHARD_NO_EOT && m->eot >= m->vocab_size)
		return lm_seterr(e, "%s: end-of-text id %u >= vocabulary size %u",
				 f->path, m->eot, m->vocab_size);
	if (m->frame_tokens == 0 || m->frame_tokens > SHARD_MAX_FRAME_TOKENS)
		return lm_seterr(e, "%s: bad frame size of %u tokens", f->path, m->frame_tokens);
	/* ceil(n_tokens / F) without the wrap of n_tokens + F - 1 */
	uint64_t frames = m->n_tokens / m->frame_tokens + (m->n_tokens % m->frame_tokens != 0);
	if (m->n_frames != frames)
		return lm_seterr(e, "%s: %llu frames cannot hold %llu tokens", f->path,
				 (unsigned long long)m->n_frames, (unsigned long long)m->n_tokens);
	if (m->n_docs > m->n_tokens)
		return lm_seterr(e, "%s: more documents than tokens", f->path);
	uint64_t end;
	if (ck_muladd_u64(m->n_frames, SHARD_INDEX_ENTRY, m->index_offset, &end) ||
	    m->n_frames > (m->file_size - hlen) / SHARD_INDEX_ENTRY)
		return lm_seterr(e, "%s: %llu frames: an index larger than the file (%llu bytes)",
				 f->path, (unsigned long long)m->n_frames,
				 (unsigned long long)m->file_size);
	if (m->index_offset < hlen)
		return lm_seterr(e, "%s: bad index offset %llu", f->path,
				 (unsigned long long)m->index_offset);
	if (m->file_size < end)
		return lm_seterr(e, "%s: truncated (%llu bytes, the header says %llu)", f->path,
				 (unsigned long long)m->file_size, (unsigned long long)end);
	if (m->file_size > end)
		return lm_seterr(e, "%s: %llu bytes of trailing garbage", f->path,
				 (unsigned long long)(m->file_size - end));
	return 0;
}

static int load_index(shard_file *f, uint32_t hlen, uint32_t index_crc, lm_err *e)
{
	/* parse_header bounded n_frames by the file size: these cannot wrap */
	uint64_t nf = f->m.n_frames;
	size_t bytes = (size_t)nf * SHARD_INDEX_ENTRY;
	uint8_t *idx = malloc(bytes ? bytes : 1);
	f->frame_off = calloc(nf ? nf : 1, sizeof *f->frame_off);
	f->frame_size = calloc(nf ? nf : 1, sizeof *f->frame_size);
	f->frame_crc = calloc(nf ? nf : 1, sizeof *f->frame_crc);
	if (!idx || !f->frame_off || !f->frame_size || !f->frame_crc) {
		free(idx);
		return lm_seterr(e, "%s: out of memory", f->path);
	}
	if (read_at(f, idx, bytes, f->m.index_offset, e)) {
		free(idx);
		return -1;
	}
	if (crc32c(0, idx, bytes) != index_crc) {
		free(idx);
		return lm_seterr(e, "%s: frame index checksum mismatch", f->path);
	}
	uint64_t expect = hlen;
	size_t bound = ZSTD_compressBound((size_t)f->m.frame_tokens * (size_t)f->m.dtype);
	for (uint64_t k = 0; k < nf; k++) {
		const uint8_t *p = idx + k * SHARD_INDEX_ENTRY;
		f->frame_off[k] = le_get64(p);
		f->frame_size[k] = le_get32(p + 8);
		f->frame_crc[k] = le_get32(p + 12);
		if (f->frame_off[k] != expect || f->frame_size[k] == 0 ||
		    f->frame_size[k] > bound) {
			free(idx);
			return lm_seterr(e, "%s: frame %llu: bad index entry", f->path,
					 (unsigned long long)k);
		}
		expect += f->frame_size[k];
		if (f->frame_size[k] > f->max_frame_size)
			f->max_frame_size = f->frame_size[k];
	}
	free(idx);
	if (expect != f->m.index_offset)
		return lm_seterr(e, "%s: frames end at byte %llu, the index starts at %llu",
				 f->path, (unsigned long long)expect,
				 (unsigned long long)f->m.index_offset);
	return 0;
}

int shard_file_open(shard_file *f, const char *path, lm_err *e)
{
	memset(f, 0, sizeof *f);
	f->fd = -1;
	f->path = strdup(path);
	if (!f->path)
		return lm_seterr(e, "%s: out of memory", path);
	f->fd = open(path, O_RDONLY);
	struct stat st;
	if (f->fd < 0 || fstat(f->fd, &st)) {
		lm_seterr(e, "%s:", path);
		goto fail;
	}
	f->m.file_size = (uint64_t)st.st_size;
	uint8_t h[SHARD_HEADER_TOK_LEN];
	if (f->m.file_size < 8) {
		lm_seterr(e, "%s: %s", path, f->m.file_size ? "truncated header" : "empty file");
		goto fail;
	}
	if (read_at(f, h, 8, 0, e))
		goto fail;
	if (memcmp(h, SHARD_MAGIC, 4)) {
		lm_seterr(e, "%s: not a shard (bad magic)", path);
		goto fail;
	}
	uint32_t version = le_get16(h + 4), hlen = le_get16(h + 6);
	if (version != SHARD_VERSION && version != SHARD_VERSION_TOK) {
		lm_seterr(e, "%s: unsupported shard version %u (this reads %d and %d)", path,
			  version, SHARD_VERSION, SHARD_VERSION_TOK);
		goto fail;
	}
	uint32_t want = version == SHARD_VERSION ? SHARD_HEADER_LEN : SHARD_HEADER_TOK_LEN;
	if (hlen != want) {
		lm_seterr(e, "%s: bad header length %u for version %u", path, hlen, version);
		goto fail;
	}
	if (f->m.file_size < hlen) {
		lm_seterr(e, "%s: truncated header", path);
		goto fail;
	}
	if (read_at(f, h, hlen, 0, e) || parse_header(f, h, hlen, e) ||
	    load_index(f, hlen, le_get32(h + 56), e))
		goto fail;
	return 0;
fail:
	shard_file_close(f);
	return -1;
}

void shard_file_close(shard_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f->frame_off);
	free(f->frame_size);
	free(f->frame_crc);
	memset(f, 0, sizeof *f);
	f->fd = -1;
}

size_t shard_frame_bytes(const shard_file *f)
{
	uint64_t F = f->m.frame_tokens < f->m.n_tokens ? f->m.frame_tokens : f->m.n_tokens;
	return (size_t)F * (size_t)f->m.dtype;
}

uint32_t shard_frame_tokens(const shard_file *f, uint64_t k)
{
	uint64_t left = f->m.n_tokens - k * f->m.frame_tokens;
	return left < f->m.frame_tokens ? (uint32_t)left : f->m.frame_tokens;
}

/* Every id of a frame below the shard's vocabulary size: a reader must not
 * hand a model an id its embedding does not have. */
static int check_ids(const shard_file *f, uint64_t k, const uint8_t *raw, size_t n, lm_err *e)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t id = f->m.dtype == 2 ? le_get16(raw + 2 * i) : le_get32(raw + 4 * i);
		if (id >= f->m.vocab_size)
			return lm_seterr(e, "%s: frame %llu: token id %u >= vocabulary size %u",
					 f->path, (unsigned long long)k, id, f->m.vocab_size);
	}
	return 0;
}

int shard_read_frame(const shard_file *f, uint64_t k, void *dctx, uint8_t *comp,
		     uint8_t *raw, lm_err *e)
{
	unsigned long long kk = (unsigned long long)k;
	if (k >= f->m.n_frames)
		return lm_seterr(e, "%s: frame %llu: no such frame", f->path, kk);
	size_t n = f->frame_size[k];
	if (read_at(f, comp, n, f->frame_off[k], e))
		return lm_err_prefix(e, "frame %llu", kk);
	if (crc32c(0, comp, n) != f->frame_crc[k])
		return lm_seterr(e, "%s: frame %llu: checksum mismatch", f->path, kk);
	size_t want = (size_t)shard_frame_tokens(f, k) * (size_t)f->m.dtype;
	size_t got = ZSTD_decompressDCtx(dctx, raw, shard_frame_bytes(f), comp, n);
	if (ZSTD_isError(got))
		return lm_seterr(e, "%s: frame %llu: %s", f->path, kk, ZSTD_getErrorName(got));
	if (got != want)
		return lm_seterr(e, "%s: frame %llu: %zu bytes of ids, want %zu", f->path, kk,
				 got, want);
	return check_ids(f, k, raw, want / (size_t)f->m.dtype, e);
}

void shard_ids_from_raw(const uint8_t *raw, int dtype, size_t n, uint32_t *out)
{
	if (dtype == 2)
		for (size_t i = 0; i < n; i++)
			out[i] = le_get16(raw + 2 * i);
	else
		for (size_t i = 0; i < n; i++)
			out[i] = le_get32(raw + 4 * i);
}
