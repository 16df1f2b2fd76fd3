/* test_shard_crafted.c: shards crafted by hand, with valid checksums, whose
 * header claims what the file cannot hold (issue 22): a frame count whose
 * index size wraps, a token count that wraps the frame count, a huge frame
 * size in a tiny shard, ids beyond the vocabulary.  Each must be refused
 * with a message naming the file, never crash or allocate from the claim. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../tap.h"
#include "app/shard_pack.h"
#include "base/crc32c.h"
#include "base/le.h"
#include "data/shard.h"
#include "data/shard_reader.h"

static char dir[] = "/tmp/lmpipe-crafted.XXXXXX";

static const char *path_in(const char *name)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

typedef struct craft {
	int dtype;
	uint32_t vocab, eot, frame_tokens;
	uint64_t tokens, docs, frames, index_offset;
} craft;

/* Write a shard: the header of c, then body (frames), then index, each
 * checksum right so that only the claims are wrong. */
static void write_crafted(const char *path, const craft *c, const uint8_t *body, size_t nbody,
			  const uint8_t *index, size_t nindex)
{
	uint8_t h[SHARD_HEADER_LEN] = { 0 };
	memcpy(h, SHARD_MAGIC, 4);
	le_put16(h + 4, SHARD_VERSION);
	le_put16(h + 6, SHARD_HEADER_LEN);
	h[8] = (uint8_t)c->dtype;
	le_put32(h + 12, c->vocab);
	le_put32(h + 16, c->eot);
	le_put32(h + 20, c->frame_tokens);
	le_put64(h + 24, c->tokens);
	le_put64(h + 32, c->docs);
	le_put64(h + 40, c->frames);
	le_put64(h + 48, c->index_offset);
	le_put32(h + 56, nindex ? crc32c(0, index, nindex) : 0);
	le_put32(h + 60, crc32c(0, h, SHARD_HEADER_LEN - 4));
	FILE *fp = fopen(path, "wb");
	if (!fp)
		return;
	fwrite(h, 1, sizeof h, fp);
	if (nbody)
		fwrite(body, 1, nbody, fp);
	if (nindex)
		fwrite(index, 1, nindex, fp);
	fclose(fp);
}

/* Item 1: n_frames = 2^62 + 3, so n_frames * 16 wraps to 48: an index of
 * three entries then matches the file size and the index checksum, and the
 * arrays sized from the wrapped count are overrun from the fourth entry on. */
static void index_overflow(void)
{
	uint8_t body[3] = { 0 }, index[3 * SHARD_INDEX_ENTRY];
	for (int k = 0; k < 3; k++) {
		le_put64(index + SHARD_INDEX_ENTRY * k, SHARD_HEADER_LEN + (uint64_t)k);
		le_put32(index + SHARD_INDEX_ENTRY * k + 8, 1);
		le_put32(index + SHARD_INDEX_ENTRY * k + 12, crc32c(0, body, 1));
	}
	craft c = { 2, 1000, SHARD_NO_EOT, 1, (1ull << 62) + 3, 0, (1ull << 62) + 3,
		    SHARD_HEADER_LEN + sizeof body };
	const char *p = path_in("wrap-index.lms");
	write_crafted(p, &c, body, sizeof body, index, sizeof index);
	lm_err e;
	shard_file f;
	is_int(shard_file_open(&f, p, &e), -1, "frame count whose index size wraps refused");
	ok(strstr(e.msg, "wrap-index.lms: 4611686018427387907 frames") != NULL,
	   "message names the file and the frames: %s", e.msg);
	is_int(shard_test(p, &e), -1, "shard-pack -t refuses it");
}

/* Item 2: 2^64 - 1 tokens in 0 frames of 2 tokens: (n + F - 1) / F wraps
 * to 0. */
static void token_count_wrap(void)
{
	craft c = { 2, 1000, SHARD_NO_EOT, 2, UINT64_MAX, 0, 0, SHARD_HEADER_LEN };
	const char *p = path_in("wrap-tokens.lms");
	write_crafted(p, &c, NULL, 0, NULL, 0);
	lm_err e;
	shard_file f;
	is_int(shard_file_open(&f, p, &e), -1, "token count that wraps the frame count refused");
	ok(strstr(e.msg, "wrap-tokens.lms: 0 frames cannot hold 18446744073709551615 tokens")
	   != NULL, "message: %s", e.msg);
	is_int(shard_test(p, &e), -1, "shard-pack -t refuses it");
}

/* One real frame of ids (u16), and its index entry at offset 64. */
static size_t one_frame(const uint32_t *ids, size_t n, uint8_t *comp, size_t cap,
			uint8_t index[SHARD_INDEX_ENTRY])
{
	uint8_t raw[64];
	for (size_t i = 0; i < n; i++)
		le_put16(raw + 2 * i, ids[i]);
	size_t got = ZSTD_compress(comp, cap, raw, 2 * n, 3);
	le_put64(index, SHARD_HEADER_LEN);
	le_put32(index + 8, (uint32_t)got);
	le_put32(index + 12, crc32c(0, comp, got));
	return got;
}

/* Item 6: frames of 2^24 tokens in a shard of 20 tokens: the reader must
 * not size its frame cache (64 entries per thread) from the frame size. */
static void huge_frame_size(void)
{
	uint32_t ids[20];
	for (int i = 0; i < 20; i++)
		ids[i] = (uint32_t)i;
	uint8_t comp[256], index[SHARD_INDEX_ENTRY];
	size_t n = one_frame(ids, 20, comp, sizeof comp, index);
	craft c = { 2, 1000, SHARD_NO_EOT, SHARD_MAX_FRAME_TOKENS, 20, 0, 1,
		    SHARD_HEADER_LEN + n };
	const char *p = path_in("huge-frame.lms");
	write_crafted(p, &c, comp, n, index, sizeof index);
	lm_err e;
	shard_reader *r;
	sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = 2, .context = 4 };
	const char *paths[] = { p };
	if (!ok(sr_open(&r, paths, 1, &cfg, &e) == 0, "a 20-token shard with 2^24-token frames opens"))
		diag("%s", e.msg);
	else {
		uint32_t out[2 * 5];
		is_int(sr_next(r, out, &e), 2, "two windows read");
		ok(sr_cache_bytes(r) <= 20 * 2, "frame cache sized by what the shard holds "
		   "(%zu bytes)", sr_cache_bytes(r));
		ok(out[0] == 0 && out[4] == 4 && out[5] == 4 && out[9] == 8, "right ids");
		sr_close(r);
	}
	is_int(shard_test(p, &e), 0, "shard-pack -t accepts it");
}

/* Item 8: an id beyond the shard's vocabulary reaches the reader. */
static void id_beyond_vocab(void)
{
	uint32_t ids[20];
	for (int i = 0; i < 20; i++)
		ids[i] = (uint32_t)i;
	ids[13] = 500;
	uint8_t comp[256], index[SHARD_INDEX_ENTRY];
	size_t n = one_frame(ids, 20, comp, sizeof comp, index);
	craft c = { 2, 100, SHARD_NO_EOT, 32, 20, 0, 1, SHARD_HEADER_LEN + n };
	const char *p = path_in("beyond.lms");
	write_crafted(p, &c, comp, n, index, sizeof index);
	lm_err e;
	is_int(shard_test(p, &e), -1, "shard-pack -t refuses it");
	shard_reader *r;
	sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = 8, .context = 4 };
	const char *paths[] = { p };
	if (!ok(sr_open(&r, paths, 1, &cfg, &e) == 0, "the reader opens it (frames are read later)"))
		return;
	uint32_t out[8 * 5];
	is_int(sr_next(r, out, &e), -1, "the reader refuses the frame with id 500");
	ok(strstr(e.msg, "beyond.lms: frame 0: token id 500 >= vocabulary size 100") != NULL,
	   "message: %s", e.msg);
	sr_close(r);
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	index_overflow();
	token_count_wrap();
	huge_frame_size();
	id_beyond_vocab();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? done_testing() : (done_testing(), 1);
}
