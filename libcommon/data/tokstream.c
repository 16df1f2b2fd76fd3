/* tokstream.c: the token stream between programs (see tokstream.h and
 * man 5 lmpipe-tokens): a header, blocks of little-endian ids, an end
 * marker; concatenated streams read as one. */
#include "data/tokstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "data/shard.h"

enum {
	WRITE_BLOCK = 1 << 16,   /* ids per block the writer emits */
	READ_CHUNK = 1 << 16,    /* ids converted per fread */
	U16_VOCAB_MAX = 1 << 16, /* largest vocabulary a u16 id can index */
};

enum { ST_BLOCK, ST_DONE };  /* reader states: expect a block count; finished */

/* ---- writer ---- */

static int w_put(tokstream_writer *w, const void *p, size_t n, lm_err *e)
{
	if (n && fwrite(p, 1, n, w->fp) != n)
		return lm_seterr(e, "%s: write error:", w->name);
	return 0;
}

int tsw_open(tokstream_writer *w, FILE *fp, const char *name,
	     uint32_t vocab_size, uint32_t eot, lm_err *e)
{
	return tsw_open_tok(w, fp, name, vocab_size, eot, NULL, e);
}

int tsw_open_tok(tokstream_writer *w, FILE *fp, const char *name, uint32_t vocab_size,
		 uint32_t eot, const uint32_t *tok_crc, lm_err *e)
{
	memset(w, 0, sizeof *w);
	w->fp = fp;
	w->name = name ? name : "<stdout>";
	if (vocab_size == 0)
		return lm_seterr(e, "%s: vocabulary size must be at least 1", w->name);
	if (eot != TOKSTREAM_NO_EOT && eot >= vocab_size)
		return lm_seterr(e, "%s: end-of-text id %u >= vocabulary size %u",
				 w->name, eot, vocab_size);
	w->info.vocab_size = vocab_size;
	w->info.eot = eot;
	w->info.dtype = vocab_size <= U16_VOCAB_MAX ? 2 : 4;
	w->cap = WRITE_BLOCK;
	w->buf = malloc(w->cap * sizeof *w->buf);
	if (!w->buf)
		return lm_seterr(e, "%s: out of memory", w->name);
	w->info.has_tok = tok_crc != NULL;
	w->info.tok_crc = tok_crc ? *tok_crc : 0;
	/* without a tokenizer, the 16 bytes of every stream before identities */
	uint8_t h[TOKSTREAM_HEADER_TOK_LEN];
	size_t hlen = tok_crc ? TOKSTREAM_HEADER_TOK_LEN : TOKSTREAM_HEADER_LEN;
	memcpy(h, TOKSTREAM_MAGIC, 4);
	h[4] = TOKSTREAM_VERSION;
	h[5] = (uint8_t)w->info.dtype;
	le_put16(h + 6, (uint16_t)hlen);
	le_put32(h + 8, vocab_size);
	le_put32(h + 12, eot);
	le_put32(h + 16, w->info.tok_crc);
	if (w_put(w, h, hlen, e)) {
		free(w->buf);
		w->buf = NULL;
		return -1;
	}
	return 0;
}

int tsw_flush(tokstream_writer *w, lm_err *e)
{
	if (!w->n)
		return 0;
	uint8_t len[4];
	le_put32(len, (uint32_t)w->n);
	/* Pack in place: id i goes to bytes [i*dtype, (i+1)*dtype), which never
	 * lie past the 4 bytes of id i, and ids before i are already read. */
	uint8_t *out = (uint8_t *)w->buf;
	for (size_t i = 0; i < w->n; i++) {
		uint32_t v = w->buf[i];
		if (w->info.dtype == 2)
			le_put16(out + 2 * i, v);
		else
			le_put32(out + 4 * i, v);
	}
	int rc = w_put(w, len, sizeof len, e) ? -1 :
		 w_put(w, out, w->n * (size_t)w->info.dtype, e);
	w->n = 0;
	return rc;
}

int tsw_write(tokstream_writer *w, const uint32_t *ids, size_t n, lm_err *e)
{
	for (size_t i = 0; i < n; i++) {
		if (ids[i] >= w->info.vocab_size)
			return lm_seterr(e, "%s: token id %u >= vocabulary size %u",
					 w->name, ids[i], w->info.vocab_size);
		w->buf[w->n++] = ids[i];
		if (w->n == w->cap && tsw_flush(w, e))
			return -1;
	}
	return 0;
}

int tsw_close(tokstream_writer *w, lm_err *e)
{
	int rc = tsw_flush(w, e);
	uint8_t end[4] = { 0, 0, 0, 0 };
	if (!rc)
		rc = w_put(w, end, sizeof end, e);
	free(w->buf);
	w->buf = NULL;
	return rc;
}

/* ---- reader ---- */

/* Read exactly n bytes.  Returns 1, 0 on end of input before the first
 * byte, -1 on a read error or a partial read ("truncated" with what). */
static int r_get(tokstream_reader *r, void *p, size_t n, const char *what, lm_err *e)
{
	size_t got = fread(p, 1, n, r->fp);
	r->offset += got;
	if (got == n)
		return 1;
	if (ferror(r->fp))
		return lm_seterr(e, "%s: read error:", r->name);
	if (got == 0)
		return 0;
	return lm_seterr(e, "%s: byte %llu: truncated %s", r->name,
			 (unsigned long long)r->offset, what);
}

/* Read a header whose first byte is at r->offset into *info.  Returns 1, 0
 * at a clean end of input, -1 on error. */
static int read_header(tokstream_reader *r, tokstream_info *info, lm_err *e)
{
	uint8_t h[TOKSTREAM_HEADER_LEN];
	unsigned long long at = (unsigned long long)r->offset;
	int rc = r_get(r, h, sizeof h, "stream header", e);
	if (rc <= 0)
		return rc;
	if (memcmp(h, TOKSTREAM_MAGIC, 4)) {
		int text = 1; /* printable ASCII, blanks or UTF-8: text given for tokens */
		for (size_t i = 0; i < sizeof h && text; i++)
			text = (h[i] >= 0x20 && h[i] != 0x7f) || h[i] == '\t' || h[i] == '\n' ||
			       h[i] == '\r';
		int shard = !memcmp(h, SHARD_MAGIC, 4); /* a shard given for its tokens */
		return lm_seterr(e, "%s: byte %llu: not a token stream (bad magic)%s", r->name, at,
				 shard ? "; it is a shard: shard-pack -d writes its tokens as a "
					 "token stream"
				 : text ? "; it starts like text (bpe-encode makes token streams of "
					  "text; decimal ids: bpe-decode --text)" : "");
	}
	if (h[4] != TOKSTREAM_VERSION)
		return lm_seterr(e, "%s: byte %llu: unsupported token stream version %u (this reads %d)",
				 r->name, at + 4, h[4], TOKSTREAM_VERSION);
	uint32_t hlen = le_get16(h + 6);
	if (hlen < TOKSTREAM_HEADER_LEN)
		return lm_seterr(e, "%s: byte %llu: header length %u < %d",
				 r->name, at + 6, hlen, TOKSTREAM_HEADER_LEN);
	info->dtype = h[5];
	info->vocab_size = le_get32(h + 8);
	info->eot = le_get32(h + 12);
	if (info->dtype != 2 && info->dtype != 4)
		return lm_seterr(e, "%s: byte %llu: unknown dtype of %d bytes",
				 r->name, at + 5, info->dtype);
	if (info->vocab_size == 0 ||
	    (info->dtype == 2 && info->vocab_size > U16_VOCAB_MAX))
		return lm_seterr(e, "%s: byte %llu: vocabulary size %u does not fit dtype u%d",
				 r->name, at + 8, info->vocab_size, info->dtype * 8);
	if (info->eot != TOKSTREAM_NO_EOT && info->eot >= info->vocab_size)
		return lm_seterr(e, "%s: byte %llu: end-of-text id %u >= vocabulary size %u",
				 r->name, at + 12, info->eot, info->vocab_size);
	info->has_tok = hlen >= TOKSTREAM_HEADER_TOK_LEN;
	info->tok_crc = 0;
	if (info->has_tok) {
		uint8_t b[4];
		int got = r_get(r, b, sizeof b, "stream header", e);
		if (got < 0)
			return -1;
		if (got == 0)
			return lm_seterr(e, "%s: byte %llu: truncated stream header",
					 r->name, (unsigned long long)r->offset);
		info->tok_crc = le_get32(b);
	}
	for (uint32_t skip = hlen - (info->has_tok ? TOKSTREAM_HEADER_TOK_LEN : TOKSTREAM_HEADER_LEN);
	     skip > 0;) {
		uint8_t junk[64];
		size_t n = skip < sizeof junk ? skip : sizeof junk;
		int got = r_get(r, junk, n, "stream header", e);
		if (got < 0)
			return -1;
		if (got == 0)
			return lm_seterr(e, "%s: byte %llu: truncated stream header",
					 r->name, (unsigned long long)r->offset);
		skip -= (uint32_t)n;
	}
	return 1;
}

int tsr_open(tokstream_reader *r, FILE *fp, const char *name, lm_err *e)
{
	memset(r, 0, sizeof *r);
	r->fp = fp;
	r->name = name ? name : "<stdin>";
	r->state = ST_BLOCK;
	int rc = read_header(r, &r->info, e);
	if (rc == 0)
		return lm_seterr(e, "%s: empty input (no token stream header)", r->name);
	if (rc < 0)
		return -1;
	r->raw_cap = (size_t)READ_CHUNK * 4;
	r->raw = malloc(r->raw_cap);
	if (!r->raw)
		return lm_seterr(e, "%s: out of memory", r->name);
	return 0;
}

/* At a block boundary: read the next block count, or an end marker and the
 * header after it.  Leaves r->left > 0, or state ST_DONE. */
static int next_block(tokstream_reader *r, lm_err *e)
{
	while (r->left == 0 && r->state != ST_DONE) {
		uint8_t b[4];
		unsigned long long at = (unsigned long long)r->offset;
		int rc = r_get(r, b, sizeof b, "block length", e);
		if (rc < 0)
			return -1;
		if (rc == 0)
			return lm_seterr(e, "%s: byte %llu: truncated stream (no end marker)",
					 r->name, at);
		uint32_t n = le_get32(b);
		if (n > TOKSTREAM_MAX_BLOCK)
			return lm_seterr(e, "%s: byte %llu: block of %u ids exceeds the maximum %d",
					 r->name, at, n, TOKSTREAM_MAX_BLOCK);
		if (n > 0) {
			r->left = n;
			break;
		}
		tokstream_info next;
		at = (unsigned long long)r->offset;
		rc = read_header(r, &next, e);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			r->state = ST_DONE;
			break;
		}
		if (next.vocab_size != r->info.vocab_size || next.eot != r->info.eot ||
		    next.dtype != r->info.dtype)
			return lm_seterr(e, "%s: byte %llu: concatenated stream differs from the first "
					 "(vocabulary %u, end-of-text %u, u%d vs %u, %u, u%d)",
					 r->name, at, next.vocab_size, next.eot, next.dtype * 8,
					 r->info.vocab_size, r->info.eot, r->info.dtype * 8);
		if (next.has_tok != r->info.has_tok || next.tok_crc != r->info.tok_crc) {
			char x[16] = "none", y[16] = "none";
			if (next.has_tok)
				snprintf(x, sizeof x, "%08x", next.tok_crc);
			if (r->info.has_tok)
				snprintf(y, sizeof y, "%08x", r->info.tok_crc);
			return lm_seterr(e, "%s: byte %llu: concatenated stream made by another "
					 "tokenizer (identity %s vs %s)", r->name, at, x, y);
		}
	}
	return 0;
}

long long tsr_read(tokstream_reader *r, uint32_t *ids, size_t max, lm_err *e)
{
	size_t got = 0;
	const size_t dt = (size_t)r->info.dtype;
	while (got < max) {
		if (r->left == 0) {
			/* Return what we have at a block boundary, so a pipe
			 * consumer sees a flushed block without waiting. */
			if (got > 0 || r->state == ST_DONE)
				break;
			if (next_block(r, e))
				return -1;
			if (r->state == ST_DONE)
				break;
		}
		size_t n = max - got;
		if (n > r->left)
			n = (size_t)r->left;
		if (n > r->raw_cap / dt)
			n = r->raw_cap / dt;
		uint64_t at = r->offset;
		int rc = r_get(r, r->raw, n * dt, "block", e);
		if (rc < 0)
			return -1;
		if (rc == 0)
			return lm_seterr(e, "%s: byte %llu: truncated block",
					 r->name, (unsigned long long)r->offset);
		uint32_t vocab = r->info.vocab_size;
		for (size_t i = 0; i < n; i++) {
			uint32_t v = dt == 2 ? le_get16(r->raw + 2 * i) : le_get32(r->raw + 4 * i);
			if (v >= vocab)
				return lm_seterr(e, "%s: byte %llu: token id %u >= vocabulary size %u",
						 r->name, (unsigned long long)(at + i * dt), v, vocab);
			ids[got + i] = v;
		}
		got += n;
		r->left -= n;
	}
	return (long long)got;
}

void tsr_close(tokstream_reader *r)
{
	free(r->raw);
	r->raw = NULL;
	r->raw_cap = 0;
}
