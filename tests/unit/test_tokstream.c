/* test_tokstream.c: the token stream format (man 5 lmpipe-tokens): round
 * trips, concatenation, and every malformed input the reader must refuse
 * with the stream name and byte offset. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "data/tokstream.h"

enum { BIG_N = 200000, U32_VOCAB = 100000 };

typedef struct mem {
	char *p;
	size_t n;
} mem;

/* Write ids as one stream into m (appended when m already holds data). */
static int write_stream(mem *m, uint32_t vocab, uint32_t eot,
			const uint32_t *ids, size_t n, lm_err *e)
{
	char *p = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&p, &len);
	tokstream_writer w;
	int rc = tsw_open(&w, fp, "mem", vocab, eot, e);
	if (!rc)
		rc = tsw_write(&w, ids, n, e);
	if (!rc)
		rc = tsw_close(&w, e);
	else
		free(w.buf);
	fclose(fp);
	m->p = realloc(m->p, m->n + len + 1);
	memcpy(m->p + m->n, p, len);
	m->n += len;
	free(p);
	return rc;
}

/* Read everything from bytes; returns the count or -1 (message in e). */
static long long read_all(const void *bytes, size_t n, uint32_t *out, size_t max,
			  tokstream_info *info, lm_err *e)
{
	FILE *fp = fmemopen((void *)bytes, n ? n : 1, "rb");
	if (!n) { /* fmemopen refuses size 0: read an empty prefix instead */
		fclose(fp);
		fp = fopen("/dev/null", "rb");
	}
	tokstream_reader r;
	long long total = 0;
	if (tsr_open(&r, fp, "in.tok", e)) {
		tsr_close(&r);
		fclose(fp);
		return -1;
	}
	if (info)
		*info = r.info;
	for (;;) {
		size_t want = max - (size_t)total < 777 ? max - (size_t)total : 777;
		long long got = tsr_read(&r, out + total, want, e);
		if (got < 0) {
			total = -1;
			break;
		}
		if (got == 0)
			break;
		total += got;
	}
	tsr_close(&r);
	fclose(fp);
	return total;
}

static void round_trip(uint32_t vocab, int dtype)
{
	uint32_t *ids = malloc(BIG_N * sizeof *ids), *back = malloc(BIG_N * sizeof *back);
	for (size_t i = 0; i < BIG_N; i++)
		ids[i] = (uint32_t)((i * 2654435761u) % vocab);
	ids[0] = vocab - 1;
	mem m = { 0 };
	lm_err e;
	tokstream_info info;
	is_int(write_stream(&m, vocab, 0, ids, BIG_N, &e), 0, "u%d: write", dtype * 8);
	is_int(m.n, TOKSTREAM_HEADER_LEN + (size_t)BIG_N * dtype + 4 * 5,
	       "u%d: size = header + ids + 4 block lengths + end marker", dtype * 8);
	long long n = read_all(m.p, m.n, back, BIG_N, &info, &e);
	is_int(n, BIG_N, "u%d: read back every id", dtype * 8);
	ok(n == BIG_N && !memcmp(ids, back, BIG_N * sizeof *ids), "u%d: ids equal", dtype * 8);
	is_int(info.dtype, dtype, "u%d: dtype", dtype * 8);
	is_int(info.vocab_size, vocab, "u%d: vocab", dtype * 8);
	is_int(info.eot, 0, "u%d: eot", dtype * 8);
	free(m.p);
	free(ids);
	free(back);
}

static void expect_error(const void *bytes, size_t n, const char *want, const char *name)
{
	uint32_t out[64];
	lm_err e = { .msg = "" };
	long long got = read_all(bytes, n, out, 64, NULL, &e);
	ok(got == -1 && strstr(e.msg, want) != NULL, "%s: %s", name, e.msg);
	if (got != -1 || !strstr(e.msg, want))
		diag("  want a message containing '%s'", want);
}

int main(void)
{
	round_trip(50257, 2);
	round_trip(65536, 2);
	round_trip(U32_VOCAB, 4);

	lm_err e;
	uint32_t a[] = { 1, 2, 3 }, b[] = { 4, 5 }, out[16];
	mem m = { 0 };
	write_stream(&m, 10, 9, a, 3, &e);
	write_stream(&m, 10, 9, b, 2, &e);
	tokstream_info info;
	long long n = read_all(m.p, m.n, out, 16, &info, &e);
	is_int(n, 5, "concatenated streams read as one");
	ok(n == 5 && out[0] == 1 && out[3] == 4 && out[4] == 5, "concatenated ids in order");
	is_int(info.eot, 9, "end-of-text id kept");

	mem z = { 0 };
	write_stream(&z, 10, TOKSTREAM_NO_EOT, NULL, 0, &e);
	is_int(z.n, TOKSTREAM_HEADER_LEN + 4, "stream of no ids: header + end marker");
	is_int(read_all(z.p, z.n, out, 16, &info, &e), 0, "stream of no ids reads as 0 ids");
	is_int(info.eot, TOKSTREAM_NO_EOT, "no end-of-text id");

	mem c = { 0 };
	write_stream(&c, 10, 9, a, 3, &e);
	write_stream(&c, 11, 9, b, 2, &e);
	expect_error(c.p, c.n, "in.tok: byte 30: concatenated stream differs", "mismatched concatenation");
	free(c.p);

	/* Truncation at every byte of a small stream is refused. */
	const size_t first_len = TOKSTREAM_HEADER_LEN + 4 + 3 * 2 + 4;
	int all = 1;
	for (size_t cut = 1; cut < m.n; cut++) {
		if (cut == first_len) /* the first stream alone is valid */
			continue;
		lm_err te = { .msg = "" };
		long long got = read_all(m.p, cut, out, 16, NULL, &te);
		if (got != -1 || !strstr(te.msg, "truncated") || !strstr(te.msg, "in.tok: byte ")) {
			all = 0;
			diag("cut at %zu: got %lld, '%s'", cut, got, te.msg);
		}
	}
	ok(all, "a stream cut at any byte is 'truncated', with name and offset");
	expect_error(m.p, 16 + 4 + 3 * 2, "in.tok: byte 26: truncated stream (no end marker)",
		     "no end marker");
	expect_error(m.p, 16 + 4 + 1, "in.tok: byte 21: truncated block", "cut inside a block");

	expect_error("", 0, "in.tok: empty input", "empty input");

	uint8_t bad[64];
	memcpy(bad, m.p, 30);
	bad[0] = 'X';
	expect_error(bad, 30, "in.tok: byte 0: not a token stream (bad magic)", "wrong magic");
	memcpy(bad, m.p, 30);
	bad[4] = 2;
	expect_error(bad, 30, "in.tok: byte 4: unsupported token stream version 2", "unknown version");
	memcpy(bad, m.p, 30);
	bad[5] = 3;
	expect_error(bad, 30, "in.tok: byte 5: unknown dtype of 3 bytes", "unknown dtype");
	memcpy(bad, m.p, 30);
	bad[6] = 15;
	expect_error(bad, 30, "in.tok: byte 6: header length 15 < 16", "short header length");
	memcpy(bad, m.p, 30);
	bad[12] = 10;
	expect_error(bad, 30, "in.tok: byte 12: end-of-text id 10 >= vocabulary size 10",
		     "end-of-text id outside the vocabulary");

	/* A longer header: its extra bytes are skipped. */
	uint8_t longer[64];
	memcpy(longer, m.p, 16);
	longer[6] = 20;
	memset(longer + 16, 0xAB, 4);
	memcpy(longer + 20, m.p + 16, 4 + 3 * 2 + 4);
	n = read_all(longer, 20 + 4 + 6 + 4, out, 16, NULL, &e);
	ok(n == 3 && out[0] == 1 && out[2] == 3, "longer header length: extra bytes skipped");

	/* An id at the vocabulary size in the second id of the block. */
	memcpy(bad, m.p, m.n);
	bad[16 + 4 + 2] = 10;
	expect_error(bad, m.n, "in.tok: byte 22: token id 10 >= vocabulary size 10", "id >= vocab");
	memcpy(bad, m.p, 16);
	bad[16] = 0xFF, bad[17] = 0xFF, bad[18] = 0xFF, bad[19] = 0x7F;
	expect_error(bad, 20, "in.tok: byte 16: block of 2147483647 ids exceeds", "huge block length");

	/* The writer refuses ids outside the vocabulary and a bad eot. */
	char *p = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&p, &len);
	tokstream_writer w;
	is_int(tsw_open(&w, fp, "out.tok", 10, 3, &e), 0, "writer opens");
	uint32_t big[] = { 9, 10 };
	is_int(tsw_write(&w, big, 2, &e), -1, "writer refuses id 10 of vocab 10");
	is_str(e.msg, "out.tok: token id 10 >= vocabulary size 10", "writer message");
	tsw_close(&w, &e);
	is_int(tsw_open(&w, fp, "out.tok", 10, 10, &e), -1, "writer refuses eot >= vocab");
	fclose(fp);
	free(p);

	/* A full device: the write error is reported, not lost. */
	fp = fopen("/dev/full", "wb");
	if (fp) {
		setvbuf(fp, NULL, _IONBF, 0);
		int rc = tsw_open(&w, fp, "/dev/full", 10, 3, &e);
		if (!rc)
			rc = tsw_close(&w, &e);
		else
			free(w.buf);
		ok(rc == -1 && strstr(e.msg, "/dev/full: write error: No space left on device"),
		   "full device: %s", e.msg);
		fclose(fp);
	}

	free(m.p);
	free(z.p);
	return done_testing();
}
