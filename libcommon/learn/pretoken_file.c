/* pretoken_file.c: the pre-token counts file (man 5 lmpipe-bpe-counts).
 *
 * All integers little-endian:
 *   header   "LMBPECNT" | u32 version (1) | u32 header length in bytes
 *            (from the start of the file) | char[16] pre-tokenizer ("gpt2",
 *            NUL padded) | u32 number of special tokens | per special:
 *            u32 length, bytes
 *   body     u64 number of entries | per entry: u32 length, u64 count, bytes
 *   trailer  u64 FNV-1a hash of the body
 * A reader skips header bytes past what it knows (header length), refuses a
 * newer version, another pre-tokenizer, other special tokens, a bad hash or
 * anything after the trailer.  It reads the whole file into memory and
 * parses it there (bpe_counts_parse), so a length field can claim no more
 * than the bytes that follow it; the body's hash is taken as it is parsed. */
#include "learn/bpe_learn_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"

static const char MAGIC[8] = { 'L', 'M', 'B', 'P', 'E', 'C', 'N', 'T' };
enum { VERSION = 1, PRETOK_NAME = 16, MAX_SPECIAL_LEN = 1 << 20 };
static const char PRETOK[PRETOK_NAME] = "gpt2";
static const uint64_t FNV_OFFSET = 0xCBF29CE484222325ull, FNV_PRIME = 0x100000001B3ull;

typedef struct wr {
	FILE *fp;
	uint64_t h;
} wr;

static void put(wr *w, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		w->h = (w->h ^ b[i]) * FNV_PRIME;
	fwrite(p, 1, n, w->fp);
}

static void put_u32(wr *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	put(w, b, 4);
}

static void put_u64(wr *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

static uint32_t header_len(const bpe_specials *sp)
{
	size_t n = sizeof MAGIC + 4 + 4 + PRETOK_NAME + 4;
	for (size_t i = 0; i < sp->n; i++)
		n += 4 + sp->len[i];
	return (uint32_t)n;
}

int bpe_counts_save(const bpe_counts *c, const bpe_specials *sp, const char *path, lm_err *e)
{
	atomic_file af;
	if (atomic_open(&af, path, e))
		return -1;
	wr w = { af.fp, 0 };
	put(&w, MAGIC, sizeof MAGIC);
	put_u32(&w, VERSION);
	put_u32(&w, header_len(sp));
	put(&w, PRETOK, PRETOK_NAME);
	put_u32(&w, (uint32_t)sp->n);
	for (size_t i = 0; i < sp->n; i++) {
		put_u32(&w, (uint32_t)sp->len[i]);
		put(&w, sp->s[i], sp->len[i]);
	}
	w.h = FNV_OFFSET;
	put_u64(&w, c->n);
	for (size_t i = 0; i < c->n; i++) {
		put_u32(&w, c->ent[i].len);
		put_u64(&w, c->ent[i].count);
		put(&w, c->bytes + c->ent[i].off, c->ent[i].len);
	}
	uint64_t h = w.h;
	put_u64(&w, h);
	if (ferror(af.fp)) {
		atomic_abort(&af);
		return lm_seterr(e, "%s: write error", path);
	}
	return atomic_commit(&af, e);
}

/* A counts file in memory, read front to back. */
typedef struct rd {
	const uint8_t *b;
	size_t n, pos;
	const char *name;
	lm_err *e;
} rd;

static int truncated(const rd *r)
{
	return lm_seterr(r->e, "%s: truncated at byte %llu", r->name, (unsigned long long)r->pos);
}

static int get(rd *r, void *p, size_t n)
{
	if (n > r->n - r->pos)
		return truncated(r);
	memcpy(p, r->b + r->pos, n);
	r->pos += n;
	return 0;
}

static int get_u32(rd *r, uint32_t *v)
{
	uint8_t b[4] = { 0 };
	if (get(r, b, 4))
		return -1;
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

static int get_u64(rd *r, uint64_t *v)
{
	uint32_t lo, hi;
	if (get_u32(r, &lo) || get_u32(r, &hi))
		return -1;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

static int read_header(rd *r, const bpe_specials *sp)
{
	char magic[sizeof MAGIC], pre[PRETOK_NAME];
	uint32_t version, hlen, n_sp;
	if (get(r, magic, sizeof magic) || memcmp(magic, MAGIC, sizeof MAGIC))
		return lm_seterr(r->e, "%s: not a bpe-learn counts file", r->name);
	if (get_u32(r, &version) || get_u32(r, &hlen))
		return -1;
	if (version != VERSION)
		return lm_seterr(r->e, "%s: counts file version %u, this program reads %d",
				 r->name, version, VERSION);
	if (get(r, pre, sizeof pre) || get_u32(r, &n_sp))
		return -1;
	if (memcmp(pre, PRETOK, sizeof pre))
		return lm_seterr(r->e, "%s: pre-tokenizer '%.16s' is not gpt2", r->name, pre);
	int same = n_sp == sp->n;
	for (uint32_t i = 0; i < n_sp; i++) {
		uint32_t len;
		if (get_u32(r, &len))
			return -1;
		if (len > MAX_SPECIAL_LEN)
			return lm_seterr(r->e, "%s: bad special token length %u", r->name, len);
		if (len > r->n - r->pos)
			return truncated(r);
		same = same && sp->len[i] == len && !memcmp(sp->s[i], r->b + r->pos, len);
		r->pos += len;
	}
	if (!same)
		return lm_seterr(r->e, "%s: counted with other special tokens than given (%u in the file)",
				 r->name, n_sp);
	if (hlen < r->pos)
		return lm_seterr(r->e, "%s: bad header length %u", r->name, hlen);
	if (hlen > r->n) { /* fields of a later minor revision, cut short */
		r->pos = r->n;
		return truncated(r);
	}
	r->pos = hlen; /* skip fields of a later minor revision */
	return 0;
}

/* FNV-1a of b[0 .. n) continued from h. */
static uint64_t fnv(uint64_t h, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * FNV_PRIME;
	return h;
}

/* The body's hash is taken entry by entry as the entries are parsed, so that
 * its chain of multiplies (serial, 4 cycles a byte) overlaps with the rest of
 * the parse instead of following it. */
static int read_body(rd *r, bpe_counts_visit fn, void *arg)
{
	uint64_t n, want;
	if (get_u64(r, &n))
		return -1;
	uint64_t h = fnv(FNV_OFFSET, r->b + r->pos - 8, 8);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t len;
		uint64_t k;
		if (get_u32(r, &len) || get_u64(r, &k))
			return -1;
		if (len == 0 || k == 0)
			return lm_seterr(r->e, "%s: bad entry %llu at byte %llu", r->name,
					 (unsigned long long)i, (unsigned long long)r->pos);
		if (len > r->n - r->pos)
			return truncated(r);
		h = fnv(h, r->b + r->pos - 12, 12 + (size_t)len);
		if (fn(r->b + r->pos, len, k, arg, r->e))
			return -1;
		r->pos += len;
	}
	if (get_u64(r, &want))
		return -1;
	if (h != want)
		return lm_seterr(r->e, "%s: checksum mismatch (corrupt file)", r->name);
	if (r->pos != r->n)
		return lm_seterr(r->e, "%s: data after the end at byte %llu", r->name,
				 (unsigned long long)r->pos);
	return 0;
}

int bpe_counts_parse(const uint8_t *b, size_t n, const char *name, const bpe_specials *sp,
		     bpe_counts_visit fn, void *arg, lm_err *e)
{
	rd r = { b, n, 0, name, e };
	return read_header(&r, sp) || read_body(&r, fn, arg) ? -1 : 0;
}

static int add_entry(const uint8_t *s, uint32_t len, uint64_t k, void *arg, lm_err *e)
{
	return bpe_counts_add(arg, s, len, k, e);
}

int bpe_counts_load(bpe_counts *c, const bpe_specials *sp, const char *path, lm_err *e)
{
	uint8_t *b;
	size_t n;
	if (io_read_file(path, &b, &n, e))
		return -1;
	int rc = bpe_counts_parse(b, n, io_name(path), sp, add_entry, c, e);
	free(b);
	return rc;
}
