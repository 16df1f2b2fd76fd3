/* test_safetensors.c: the safetensors writer and reader: round trip with
 * metadata, and clear errors for truncated, corrupt or mismatched files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "model/safetensors.h"

static void write_raw(const char *path, const void *buf, size_t n)
{
	FILE *fp = fopen(path, "wb");
	fwrite(buf, 1, n, fp);
	fclose(fp);
}

int main(void)
{
	char dir[] = "/tmp/lmpipe-sft.XXXXXX", path[256], bad[256];
	lm_err e;
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(path, sizeof path, "%s/a.safetensors", dir);
	snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
	float a[6] = { 1, 2, 3, 4, 5, 6 };
	int64_t b[2] = { -7, 1LL << 40 };
	sft_tensor t[2] = {
		{ "w", SFT_F32, 2, { 2, 3 }, a, sizeof a },
		{ "pos", SFT_I64, 1, { 2 }, b, sizeof b },
	};
	const char *meta[] = { "format", "pt", "step", "12" };
	is_int(sft_write(path, t, 2, meta, 2, &e), 0, "write");
	sft_file f;
	is_int(sft_open(&f, path, &e), 0, "read back");
	is_int(f.n, 2, "two tensors");
	const sft_tensor *w;
	int64_t shape[2] = { 2, 3 };
	ok(!sft_expect(&f, "w", SFT_F32, 2, shape, &w, &e) && !memcmp(w->data, a, sizeof a),
	   "F32 data round trip");
	ok(((uintptr_t)w->data - (uintptr_t)f.map) % 8 == 0, "data starts 8-aligned");
	const sft_tensor *p = sft_find(&f, "pos");
	ok(p && !memcmp(p->data, b, sizeof b), "I64 data round trip");
	is_str(sft_meta(&f, "step"), "12", "metadata");
	ok(sft_meta(&f, "nope") == NULL, "missing metadata key");
	shape[1] = 4;
	ok(sft_expect(&f, "w", SFT_F32, 2, shape, &w, &e) && strstr(e.msg, "shape [2,3], expected [2,4]"),
	   "shape mismatch: %s", e.msg);
	ok(sft_expect(&f, "x", SFT_F32, 2, shape, &w, &e) && strstr(e.msg, "no tensor 'x'"),
	   "missing tensor: %s", e.msg);
	size_t size = f.size;
	unsigned char *raw = malloc(size);
	memcpy(raw, f.map, size);
	sft_close(&f);

	write_raw(bad, raw, size - 4);
	ok(sft_open(&f, bad, &e) && strstr(e.msg, "outside the file"), "truncated: %s", e.msg);
	write_raw(bad, raw, 5);
	ok(sft_open(&f, bad, &e) && strstr(e.msg, "not a safetensors"), "tiny file: %s", e.msg);
	raw[7] = 0x7f;
	write_raw(bad, raw, size);
	ok(sft_open(&f, bad, &e) && strstr(e.msg, "header length"), "huge header length: %s", e.msg);
	raw[7] = 0;
	raw[9] = '[';
	write_raw(bad, raw, size);
	ok(sft_open(&f, bad, &e) && strstr(e.msg, "bad safetensors header"), "bad JSON: %s", e.msg);
	ok(sft_open(&f, dir, &e) && strstr(e.msg, "a directory, not a file"), "directory: %s", e.msg);
	snprintf(bad, sizeof bad, "%s/missing", dir);
	ok(sft_open(&f, bad, &e) && strstr(e.msg, "No such file"), "missing file: %s", e.msg);
	free(raw);
	unlink(path);
	snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
	unlink(bad);
	rmdir(dir);
	return done_testing();
}
