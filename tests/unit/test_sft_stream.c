/* test_sft_stream.c: the safetensors writer takes the data a chunk at a
 * time (sft_write_ex): a tensor larger than a chunk, an empty one and a
 * small one, written in place (sft_write) and through a fetch callback
 * from a stand-in for device memory, give the same bytes; each tensor's
 * checksum in the header is the CRC-32C of all its bytes (the chunks'
 * checksums chained) and the reader verifies the data against it; a
 * fetch that fails leaves no file and names the tensor. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "base/crc32c.h"
#include "model/safetensors.h"

enum { BIG = 3 << 20 };   /* floats: 12 MiB, more than one chunk */

typedef struct fake_dev {
	const char *base;       /* where the "device" addresses point */
	const char *host;       /* what they hold */
	int calls, fail_at;     /* fetches so far; the call that fails (0: none) */
	size_t most;            /* the largest fetch */
} fake_dev;

static int fetch(void *arg, size_t i, void *dst, const void *src, size_t n, lm_err *e)
{
	fake_dev *d = arg;
	(void)i;
	if (++d->calls == d->fail_at)
		return lm_seterr(e, "the device is gone");
	memcpy(dst, d->host + ((const char *)src - d->base), n);
	d->most = n > d->most ? n : d->most;
	return 0;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	*n = (size_t)ftell(fp);
	rewind(fp);
	unsigned char *b = malloc(*n ? *n : 1);
	if (b && fread(b, 1, *n, fp) != *n) {
		free(b);
		b = NULL;
	}
	fclose(fp);
	return b;
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/lmpipe-sfts.XXXXXX", a[256], b[256], c[256];
	lm_err e;
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(a, sizeof a, "%s/a.safetensors", dir);
	snprintf(b, sizeof b, "%s/b.safetensors", dir);
	snprintf(c, sizeof c, "%s/c.safetensors", dir);
	float *big = malloc(BIG * sizeof *big), small[5] = { 1, -2, 3, -4, 5 };
	for (size_t i = 0; i < BIG; i++)
		big[i] = (float)(i % 1009) * 0.5f - 7.0f;
	sft_tensor t[3] = {
		{ "big", SFT_F32, 1, { BIG }, big, BIG * sizeof *big },
		{ "empty", SFT_F32, 1, { 0 }, small, 0 },
		{ "small", SFT_F32, 1, { 5 }, small, sizeof small },
	};
	const char *meta[] = { "format", "pt" };
	is_int(sft_write(a, t, 3, meta, 1, &e), 0, "written in place");
	/* the same tensors at "device" addresses: an offset copy */
	size_t total = BIG * sizeof *big + sizeof small;
	char *host = malloc(total), *base = malloc(total);
	memcpy(host, big, BIG * sizeof *big);
	memcpy(host + BIG * sizeof *big, small, sizeof small);
	memset(base, 0, total);
	sft_tensor td[3] = { t[0], t[1], t[2] };
	td[0].data = base;
	td[1].data = td[2].data = base + BIG * sizeof *big;
	fake_dev d = { base, host, 0, 0, 0 };
	is_int(sft_write_ex(b, td, 3, meta, 1, fetch, &d, &e), 0, "written through fetch");
	ok(d.calls >= 3 && d.most < BIG * sizeof *big, "... in %d fetches of at most %zu bytes", d.calls,
	   d.most);
	size_t na = 0, nb = 0;
	unsigned char *fa = slurp(a, &na), *fb = slurp(b, &nb);
	ok(fa && fb && na == nb && !memcmp(fa, fb, na), "the same %zu bytes either way", na);
	sft_file f;
	is_int(sft_open(&f, b, &e), 0, "read back");
	char hex[16];
	snprintf(hex, sizeof hex, "%08x", crc32c(0, big, BIG * sizeof *big));
	const char *want = hex;
	is_str(sft_meta(&f, "lmpipe.crc32c.big"), want, "the big tensor's checksum: all its bytes");
	is_str(sft_meta(&f, "lmpipe.crc32c.empty"), "00000000", "the empty tensor's");
	const sft_tensor *x;
	int64_t sb[1] = { BIG }, ss[1] = { 5 };
	ok(!sft_expect(&f, "big", SFT_F32, 1, sb, &x, &e) && !memcmp(x->data, big, BIG * sizeof *big),
	   "the big tensor verifies against it and round-trips");
	ok(!sft_expect(&f, "small", SFT_F32, 1, ss, &x, &e) && !memcmp(x->data, small, sizeof small),
	   "the small one too");
	sft_close(&f);
	int before = entries(dir);
	d = (fake_dev){ base, host, 0, 2, 0 };
	ok(sft_write_ex(c, td, 3, meta, 1, fetch, &d, &e) != 0, "a failing fetch fails the write");
	ok(strstr(e.msg, "tensor 'big'") && strstr(e.msg, "the device is gone"),
	   "... naming the tensor: %s", e.msg);
	is_int(entries(dir), before, "... and leaves no file, whole or temporary");
	unlink(a);
	unlink(b);
	rmdir(dir);
	free(big), free(host), free(base), free(fa), free(fb);
	return done_testing();
}
