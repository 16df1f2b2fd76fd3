/* test_sft_crafted.c: safetensors files crafted by hand (issue 22): tensors
 * that alias or skip bytes, duplicate names, and the per-tensor CRC-32C
 * checksums (a flipped bit is named with its tensor; a file without
 * checksums, as lmpipe wrote before them, still reads). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "model/safetensors.h"

static char dir[] = "/tmp/lmpipe-sftc.XXXXXX";
static char path[256];

/* Write header JSON json (unpadded) and n data bytes of pattern. */
static void craft(const char *json, size_t n)
{
	size_t len = strlen(json);
	uint8_t lenbuf[8];
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (uint8_t)((uint64_t)len >> (8 * i));
	FILE *fp = fopen(path, "wb");
	if (!fp)
		return;
	fwrite(lenbuf, 1, 8, fp);
	fwrite(json, 1, len, fp);
	for (size_t i = 0; i < n; i++)
		fputc((int)(i * 7 + 1), fp);
	fclose(fp);
}

static int opens(const char *json, size_t n, lm_err *e)
{
	sft_file f;
	craft(json, n);
	if (sft_open(&f, path, e))
		return 0;
	sft_close(&f);
	return 1;
}

static void offsets(void)
{
	lm_err e;
	ok(opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &e),
	   "contiguous tensors covering the data read");
	ok(!opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, &e) &&
	   strstr(e.msg, "data starts at byte 0, the previous tensor ends at 16 (overlap)"),
	   "two tensors over the same bytes refused: %s", e.msg);
	ok(!opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, &e) &&
	   strstr(e.msg, "tensor 'b': data starts at byte 12, the previous tensor ends at 8 (gap)"),
	   "a gap between tensors refused: %s", e.msg);
	ok(!opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, &e) &&
	   strstr(e.msg, "the tensors end at byte 8 of 12 bytes of data"),
	   "data not covered to the end refused: %s", e.msg);
	ok(!opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &e),
	   "a duplicate tensor name refused: %s", e.msg);
	ok(!opens("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
		  "\"data_offsets\":[0,0]}}", 0, &e) && strstr(e.msg, "overflows"),
	   "an element count whose byte count wraps to 0 refused: %s", e.msg);
}

static void checksums(void)
{
	lm_err e;
	float a[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 7, 8 };
	sft_tensor t[2] = {
		{ "w", SFT_F32, 2, { 2, 3 }, a, sizeof a },
		{ "b", SFT_F32, 1, { 2 }, b, sizeof b },
	};
	is_int(sft_write(path, t, 2, NULL, 0, &e), 0, "write");
	sft_file f;
	const sft_tensor *w;
	int64_t shape[2] = { 2, 3 };
	is_int(sft_open(&f, path, &e), 0, "read back");
	ok(f.crc != NULL, "the file has checksums");
	is_int(sft_expect(&f, "w", SFT_F32, 2, shape, &w, &e), 0, "intact tensor verifies");
	size_t size = f.size;
	uint8_t *raw = malloc(size);
	memcpy(raw, f.map, size);
	sft_close(&f);

	raw[size - sizeof b - 3] ^= 0x10; /* a bit of w's last element */
	FILE *fp = fopen(path, "wb");
	fwrite(raw, 1, size, fp);
	fclose(fp);
	is_int(sft_open(&f, path, &e), 0, "a flipped bit still opens (the header is intact)");
	ok(sft_expect(&f, "w", SFT_F32, 2, shape, &w, &e) &&
	   strstr(e.msg, "tensor 'w': checksum mismatch (CRC-32C "),
	   "the flipped bit is found and the tensor named: %s", e.msg);
	is_int(sft_expect_shape(&f, "w", SFT_F32, 2, shape, &w, &e), 0,
	       "sft_expect_shape does not read the data");
	int64_t bs[1] = { 2 };
	is_int(sft_expect(&f, "b", SFT_F32, 1, bs, &w, &e), 0, "the other tensor verifies");
	sft_close(&f);
	free(raw);

	ok(opens("{\"__metadata__\":{\"format\":\"pt\"},"
		 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &e),
	   "a file without checksums (lmpipe before them, other writers) reads");
	ok(!opens("{\"__metadata__\":{\"lmpipe.crc32c.a\":\"00000000\"},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &e) &&
	   strstr(e.msg, "tensor 'b': no checksum"), "a tensor without a checksum among "
	   "checksummed ones refused: %s", e.msg);
	ok(!opens("{\"__metadata__\":{\"lmpipe.crc32c.a\":\"xyz\"},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &e) &&
	   strstr(e.msg, "tensor 'a': bad checksum 'xyz'"), "a malformed checksum refused: %s",
	   e.msg);
	ok(!opens("{\"__metadata__\":{\"lmpipe.crc32c.a\":\"00000000\","
		  "\"lmpipe.crc32c.zz\":\"00000000\"},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &e) &&
	   strstr(e.msg, "2 checksums for 1 tensors"), "a checksum of no tensor refused: %s",
	   e.msg);
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	snprintf(path, sizeof path, "%s/x.safetensors", dir);
	offsets();
	checksums();
	unlink(path);
	rmdir(dir);
	return done_testing();
}
