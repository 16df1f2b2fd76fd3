/* test_bpe_encode.c: the encoder on a hand-made tokenizer: merge order
 * against a naive reference (scan, heap and rank-bucket paths), special
 * tokens (longest match wins), and chunked multi-threaded streams equal to
 * one-piece encoding. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "text/pretok.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"
#include "tok/bpe_stream.h"

static char dir[] = "/tmp/lmpipe-enc.XXXXXX";

/* Sizes of the heavier cases, smaller under the sanitizers. */
static size_t scaled(size_t n)
{
	const char *san = getenv("LMPIPE_SANITIZE");
	return san && !strcmp(san, "1") ? n / 8 : n;
}

/* Bytes are ids 0..255; merges build a small vocabulary over "abc " with
 * overlapping candidates so that rank order matters. */
static const char *const merges[][2] = {
	{ "a", "b" }, { "b", "c" }, { "c", "a" }, { "ab", "c" }, { "a", "bc" }, { "b", "b" },
	{ "ab", "ab" }, { "c", "c" }, { " ", "a" }, { "abab", "ab" }, { "cc", "cc" }, { "ca", "b" },
	{ "a", "a" }, { "aa", "aa" }, { "aaaa", "aaaa" }, { "\xf0", "\x9f" }, { "\xf0\x9f", "\x99" },
	{ "\xf0\x9f\x99", "\x83" },
	{ "\xf0\x9f\x99\x83", "\xf0\x9f\x99\x83" },
};
enum { N_MERGES = sizeof merges / sizeof merges[0] };

/* With ordered set, the merge a+bc (a second way to make "abc") is left
 * out, so the merges are ordered and huge pieces use rank buckets. */
static int make_tokenizer(bpe_tokenizer *t, const char *path, int ordered)
{
	FILE *fp = fopen(path, "w");
	char tok[N_MERGES][32];
	int n = 0;
	int skip = ordered ? 4 : -1;   /* merges[4] is { "a", "bc" } */
	for (int m = 0; m < N_MERGES; m++) {
		snprintf(tok[m], sizeof tok[m], "%s%s", merges[m][0], merges[m][1]);
		int dup = 0;
		for (int k = 0; k < m; k++)
			dup |= !strcmp(tok[k], tok[m]);
		n += !dup;
	}
	fprintf(fp, "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens %d\nspecials 0\nmerges %d\n", 256 + n,
		N_MERGES - (skip >= 0));
	for (int i = 0; i < 256; i++)
		fprintf(fp, "t %d \"\\x%02x\"\n", i, i);
	int id = 256;
	for (int m = 0; m < N_MERGES; m++) {
		int dup = 0;
		for (int k = 0; k < m; k++)
			dup |= !strcmp(tok[k], tok[m]);
		if (dup)
			continue;
		fprintf(fp, "t %d \"", id++);
		for (const char *c = tok[m]; *c; c++)
			fprintf(fp, "\\x%02x", (uint8_t)*c);
		fputs("\"\n", fp);
	}
	for (int m = 0; m < N_MERGES; m++) {
		if (m == skip)
			continue;
		fputs("m \"", fp);
		for (const char *c = merges[m][0]; *c; c++)
			fprintf(fp, "\\x%02x", (uint8_t)*c);
		fputs("\" \"", fp);
		for (const char *c = merges[m][1]; *c; c++)
			fprintf(fp, "\\x%02x", (uint8_t)*c);
		fputs("\"\n", fp);
	}
	fputs("end\n", fp);
	fclose(fp);
	lm_err e;
	if (bpe_load(t, path, &e)) {
		diag("%s", e.msg);
		return -1;
	}
	return 0;
}

/* The definition: repeatedly merge the leftmost pair of lowest rank. */
static size_t naive_piece(const bpe_tokenizer *t, const uint8_t *s, size_t n, uint32_t *out)
{
	size_t m = n;
	for (size_t i = 0; i < n; i++)
		out[i] = t->byte_id[s[i]];
	for (;;) {
		uint32_t best = UINT32_MAX, res = 0;
		size_t bi = 0;
		for (size_t i = 0; i + 1 < m; i++)
			for (uint32_t r = 0; r < t->n_merges && r < best; r++)
				if (t->merges[r].left == out[i] && t->merges[r].right == out[i + 1]) {
					best = r;
					bi = i;
					res = t->merges[r].result;
				}
		if (best == UINT32_MAX)
			return m;
		out[bi] = res;
		memmove(out + bi + 1, out + bi + 2, (m - bi - 2) * sizeof *out);
		m--;
	}
}

static size_t naive(const bpe_tokenizer *t, const uint8_t *s, size_t n, uint32_t *out)
{
	size_t k = 0;
	for (size_t p = 0; p < n;) {
		size_t l = pretok_next(s + p, n - p);
		k += naive_piece(t, s + p, l, out + k);
		p += l;
	}
	return k;
}

static void random_text(uint8_t *s, size_t n, const char *alphabet, unsigned *seed)
{
	size_t k = strlen(alphabet);
	for (size_t i = 0; i < n; i++)
		s[i] = (uint8_t)alphabet[rand_r(seed) % k];
}

static int same_ids(const bpe_ids *a, const uint32_t *b, size_t nb)
{
	return a->n == nb && !memcmp(a->v, b, nb * sizeof *b);
}

static void test_merges(bpe_tokenizer *t, const char *what)
{
	lm_err e;
	bpe_encoder *heap = bpe_encoder_new(t, 0, &e), *buckets = bpe_encoder_new(t, 0, &e);
	bpe_encoder_set_huge_piece(heap, (size_t)-1);
	bpe_encoder_set_huge_piece(buckets, 0);
	bpe_worker *wh = bpe_worker_new(heap, &e), *wb = bpe_worker_new(buckets, &e);
	unsigned seed = 7;
	static const size_t lens[] = { 1, 2, 5, 40, 63, 64, 65, 100, 300, 2000 };
	static const char *const alphabets[] = { "abc", "ab", "a", "abc ", "cab c", "\xf0\x9f\x99\x83" };
	int bad = 0, tried = 0;
	for (size_t a = 0; a < sizeof alphabets / sizeof *alphabets; a++)
		for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
			for (int rep = 0; rep < 4; rep++) {
				size_t n = lens[l];
				uint8_t *s = malloc(n);
				uint32_t *want = malloc(n * sizeof *want);
				bpe_ids h = { 0 }, b = { 0 };
				random_text(s, n, alphabets[a], &seed);
				size_t nw = naive(t, s, n, want);
				bpe_encode_ordinary(wh, s, n, &h, &e);
				bpe_encode_ordinary(wb, s, n, &b, &e);
				if (!same_ids(&h, want, nw) || !same_ids(&b, want, nw)) {
					if (!bad)
						diag("  first mismatch: alphabet %zu, length %zu", a, n);
					bad++;
				}
				tried++;
				bpe_ids_free(&h);
				bpe_ids_free(&b);
				free(s);
				free(want);
			}
	ok(!bad, "%s: scan, heap and bucket merges equal the definition on %d random texts", what, tried);

	/* a large piece: heap and buckets agree (the naive one is too slow) */
	size_t n = scaled(1 << 20);
	uint8_t *s = malloc(n);
	bpe_ids h = { 0 }, b = { 0 };
	random_text(s, n, "abc", &seed);
	ok(bpe_encode_ordinary(wh, s, n, &h, &e) == 0 && bpe_encode_ordinary(wb, s, n, &b, &e) == 0 &&
	   h.n == b.n && !memcmp(h.v, b.v, h.n * sizeof *h.v), "%s: a %zu-byte pre-token: heap = buckets", what, n);
	bpe_ids_free(&h);
	bpe_ids_free(&b);
	free(s);
	bpe_worker_free(wh);
	bpe_worker_free(wb);
	bpe_encoder_free(heap);
	bpe_encoder_free(buckets);
}

static void test_specials(bpe_tokenizer *t)
{
	lm_err e;
	uint32_t eot, eot2, other;
	bpe_add_special(t, "<|endoftext|>", 13, &eot, &e);
	bpe_add_special(t, "<|endoftext|><|endoftext|>", 26, &eot2, &e);
	bpe_add_special(t, "<|x", 3, &other, &e);
	bpe_encoder *enc = bpe_encoder_new(t, 1, &e), *ord = bpe_encoder_new(t, 0, &e);
	bpe_worker *w = bpe_worker_new(enc, &e), *wo = bpe_worker_new(ord, &e);
	const char *text = "ab<|endoftext|><|endoftext|><|endoftext|>c<|x<|endoftext|";
	bpe_ids ids = { 0 };
	is_int(bpe_encode(w, (const uint8_t *)text, strlen(text), &ids, &e), 0, "encode with specials");
	uint32_t want[] = { 256, eot2, eot, t->byte_id['c'], other, t->byte_id['<'], t->byte_id['|'] };
	ok(ids.n >= 7 && !memcmp(ids.v, want, sizeof want), "longest special wins, then the shorter one");
	bpe_ids o = { 0 };
	bpe_encode_ordinary(wo, (const uint8_t *)text, strlen(text), &o, &e);
	int has_special = 0;
	for (size_t i = 0; i < o.n; i++)
		has_special |= o.v[i] == eot || o.v[i] == eot2 || o.v[i] == other;
	ok(!has_special && o.n > ids.n, "ordinary encoding ignores specials");
	const uint8_t *s = (const uint8_t *)"xx<|endoftext|>yy";
	ok(bpe_special_spans(enc, s, 17, 5) && !bpe_special_spans(enc, s, 17, 2) &&
	   !bpe_special_spans(enc, s, 17, 15), "bpe_special_spans");
	bpe_ids_free(&ids);
	bpe_ids_free(&o);
	bpe_worker_free(w);
	bpe_worker_free(wo);
	bpe_encoder_free(enc);
	bpe_encoder_free(ord);
}

static bpe_ids collected;

static int collect(void *ctx, const uint32_t *ids, size_t n, lm_err *e)
{
	if (bpe_ids_reserve(&collected, n, e))
		return -1;
	memcpy(collected.v + collected.n, ids, n * sizeof *ids);
	collected.n += n;
	return 0;
}

static void test_stream(bpe_tokenizer *t)
{
	lm_err e;
	unsigned seed = 11;
	size_t n = scaled(400000);
	uint8_t *s = malloc(n);
	/* words of mixed classes, newlines, apostrophes, specials */
	static const char *const words[] = { "ab", "cab", " abc", "\n", "\n\n", "'s", "'ll", "12", " 7", ".",
					     "<|endoftext|>", "\t", "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x99\x83", "  ",
					     "ca'", "<|x", "\r\n" };
	size_t k = 0;
	while (k < n) {
		const char *wd = words[rand_r(&seed) % (sizeof words / sizeof *words)];
		size_t l = strlen(wd);
		if (k + l > n)
			break;
		memcpy(s + k, wd, l);
		k += l;
	}
	n = k;
	FILE *fp = fmemopen(s, n, "r");
	bpe_encoder *enc = bpe_encoder_new(t, 1, &e);
	bpe_worker *w = bpe_worker_new(enc, &e);
	bpe_ids whole = { 0 };
	bpe_encode(w, s, n, &whole, &e);
	static const size_t chunks[] = { 64, 100, 4096 };
	for (size_t c = 0; c < 3; c++)
		for (int threads = 1; threads <= 3; threads += 2) {
			bpe_stream_opts o = { threads, chunks[c], 0, t->eot, NULL };
			bpe_stream *st = bpe_stream_new(enc, &o, &e);
			collected.n = 0;
			rewind(fp);
			int rc = bpe_stream_file(st, fp, "mem", collect, NULL, &e);
			ok(rc == 0 && collected.n == whole.n && !memcmp(collected.v, whole.v, whole.n * 4),
			   "stream with %zu-byte chunks on %d threads = whole text", chunks[c], threads);
			bpe_stream_free(st);
		}
	/* one document per line: each line alone, then end-of-text */
	bpe_stream_opts o = { 2, 64, 1, t->eot, NULL };
	bpe_stream *st = bpe_stream_new(enc, &o, &e);
	collected.n = 0;
	rewind(fp);
	bpe_stream_file(st, fp, "mem", collect, NULL, &e);
	bpe_ids lines = { 0 };
	for (size_t p = 0; p < n;) {
		const uint8_t *nl = memchr(s + p, '\n', n - p);
		size_t l = nl ? (size_t)(nl - (s + p)) : n - p;
		bpe_encode(w, s + p, l, &lines, &e);
		bpe_ids_reserve(&lines, 1, &e);
		lines.v[lines.n++] = t->eot;
		p += l + 1;
	}
	ok(collected.n == lines.n && !memcmp(collected.v, lines.v, lines.n * 4), "--doc-per-line stream");
	bpe_stream_free(st);
	bpe_ids_free(&lines);
	bpe_ids_free(&collected);
	bpe_ids_free(&whole);
	bpe_worker_free(w);
	bpe_encoder_free(enc);
	fclose(fp);
	free(s);
}

int main(void)
{
	bpe_tokenizer t;
	char path[256];
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(path, sizeof path, "%s/small.tok", dir);
	if (!ok(make_tokenizer(&t, path, 1) == 0, "hand-made ordered tokenizer loads"))
		return done_testing();
	test_merges(&t, "ordered merges");
	bpe_free(&t);
	if (!ok(make_tokenizer(&t, path, 0) == 0, "hand-made tokenizer with two ways to one token loads"))
		return done_testing();
	unlink(path);
	rmdir(dir);
	test_merges(&t, "unordered merges");
	test_specials(&t);
	test_stream(&t);
	bpe_free(&t);
	return done_testing();
}
