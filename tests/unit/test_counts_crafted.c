/* test_counts_crafted.c: pre-token counts files crafted by hand (issue 22):
 * an entry length that claims 4 GiB in a tiny file must be refused as
 * truncated without being allocated, and counts whose pair sums overflow
 * 64-bit arithmetic must be refused rather than learned in the wrong order;
 * a saved file with one byte changed (in a count, a pre-token's bytes, or
 * the stored hash) fails its checksum. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../tap.h"
#include "learn/bpe_learn.h"

static char dir[] = "/tmp/lmpipe-cntc.XXXXXX";

static void put_u32(FILE *fp, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		fputc((int)(v >> (8 * i)) & 0xFF, fp);
}

static void put_u64(FILE *fp, uint64_t v)
{
	put_u32(fp, (uint32_t)v);
	put_u32(fp, (uint32_t)(v >> 32));
}

/* A header without specials, then one entry claiming len bytes, 3 given. */
static void craft_long_entry(const char *path, uint32_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		return;
	fwrite("LMBPECNT", 1, 8, fp);
	put_u32(fp, 1);
	put_u32(fp, 8 + 4 + 4 + 16 + 4);
	char pre[16] = "gpt2";
	fwrite(pre, 1, sizeof pre, fp);
	put_u32(fp, 0);
	put_u64(fp, 1);
	put_u32(fp, len);
	put_u64(fp, 1);
	fwrite("abc", 1, 3, fp);
	fclose(fp);
}

/* The file at path, whole, into *buf (malloc'd); its size, or 0. */
static size_t slurp(const char *path, uint8_t **buf)
{
	FILE *fp = fopen(path, "rb");
	size_t n = 0, cap = 1 << 16;
	*buf = malloc(cap);
	if (!fp || !*buf)
		return fp ? (fclose(fp), 0) : 0;
	n = fread(*buf, 1, cap, fp);
	fclose(fp);
	return n < cap ? n : 0;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
	FILE *fp = fopen(path, "wb");
	if (fp) {
		fwrite(b, 1, n, fp);
		fclose(fp);
	}
}

/* A valid counts file with two entries, then each of its body's parts
 * changed in one byte: the load must fail on the checksum (the entry
 * loaded before it is discarded with the rest). */
static void test_checksum(const char *path, const bpe_specials *none)
{
	lm_err e;
	bpe_counts *c = bpe_counts_new(&e);
	ok(c && !bpe_counts_add(c, (const uint8_t *)"zzqq", 4, 5, &e) &&
	   !bpe_counts_add(c, (const uint8_t *)"xy", 2, 7, &e) && !bpe_counts_save(c, none, path, &e),
	   "a counts file of two entries saved");
	bpe_counts_free(c);
	uint8_t *b;
	size_t n = slurp(path, &b);
	uint8_t *z = n ? memmem(b, n, "zzqq", 4) : NULL;
	ok(z != NULL, "its bytes read back, the entry found");
	if (!z) {
		free(b);
		return;
	}
	size_t at = (size_t)(z - b);
	c = bpe_counts_new(&e);
	ok(!bpe_counts_load(c, none, path, &e) && bpe_counts_size(c) == 2 && bpe_counts_total(c) == 12,
	   "the file as saved loads");
	bpe_counts_free(c);
	/* an entry is [u32 length][u64 count][bytes]; the hash (u64) closes
	 * the file.  (A changed length or number of entries reads as a
	 * truncated file or a bad entry first.) */
	struct { const char *what; size_t off; uint8_t bit; } cut[] = {
		{ "a pre-token's byte", at + 1, 0x01 },
		{ "a count's high byte", at - 1, 0x40 },
		{ "the stored hash", n - 1, 0x01 },
	};
	for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
		b[cut[i].off] ^= cut[i].bit;
		spit(path, b, n);
		c = bpe_counts_new(&e);
		ok(bpe_counts_load(c, none, path, &e) == -1 && strstr(e.msg, "checksum mismatch"),
		   "%s changed: %s", cut[i].what, e.msg);
		bpe_counts_free(c);
		b[cut[i].off] ^= cut[i].bit;
	}
	free(b);
	unlink(path);
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	char path[300];
	snprintf(path, sizeof path, "%s/long.counts", dir);
	lm_err e;
	bpe_specials none = { 0, NULL, NULL };

	/* Without the sanitizers (which reserve terabytes of address space),
	 * a 1 GiB address-space limit makes a 4 GiB allocation fail. */
	const char *san = getenv("LMPIPE_SANITIZE");
	if (!san || strcmp(san, "1")) {
		struct rlimit rl = { (rlim_t)1 << 30, (rlim_t)1 << 30 };
		setrlimit(RLIMIT_AS, &rl);
	}
	craft_long_entry(path, 0xFFFFFFF0u);
	bpe_counts *c = bpe_counts_new(&e);
	ok(bpe_counts_load(c, &none, path, &e) == -1 && strstr(e.msg, "long.counts: truncated"),
	   "an entry of 4 GiB in a 60-byte file: truncated, nothing allocated: %s", e.msg);
	bpe_counts_free(c);

	/* Counts near 2^62: the pair (a, b) occurs 2^62 + 2 * 2^62 times. */
	c = bpe_counts_new(&e);
	bpe_counts_add(c, (const uint8_t *)"ab", 2, 1ull << 62, &e);
	bpe_counts_add(c, (const uint8_t *)"abab", 4, 1ull << 62, &e);
	bpe_tokenizer t;
	ok(bpe_learn(c, 300, &none, NULL, NULL, &t, &e) == -1 && strstr(e.msg, "overflow"),
	   "pair counts beyond 2^63 - 1 refused: %s", e.msg);
	bpe_counts_free(c);

	c = bpe_counts_new(&e);
	bpe_counts_add(c, (const uint8_t *)"ab", 2, UINT64_MAX, &e);
	ok(bpe_counts_add(c, (const uint8_t *)"ab", 2, 2, &e) == -1 && strstr(e.msg, "overflow"),
	   "a pre-token count beyond 2^64 - 1 refused: %s", e.msg);
	bpe_counts_free(c);

	snprintf(path, sizeof path, "%s/sum.counts", dir);
	test_checksum(path, &none);

	snprintf(path, sizeof path, "%s/long.counts", dir);
	unlink(path);
	rmdir(dir);
	return done_testing();
}
