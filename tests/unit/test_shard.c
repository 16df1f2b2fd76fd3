/* test_shard.c: the shard format and reader: writer/reader round trips
 * (u16, u32, threads), every corrupt byte and every truncation found and
 * named, the CS336 get_batch window distribution, determinism, resuming,
 * prefetch, and sequential evaluation windows, also sliding ones. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "app/shard_pack.h"
#include "base/io.h"
#include "data/shard.h"
#include "data/shard_reader.h"

static char dir[] = "/tmp/lmpipe-shard.XXXXXX";

static const char *path_in(const char *name)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

/* Write ids[0..n) as one shard. */
static int write_shard(const char *path, const uint32_t *ids, size_t n, uint32_t vocab,
		       uint32_t eot, uint32_t frame_tokens, int threads)
{
	lm_err e;
	shard_writer *w;
	shard_writer_config cfg = { vocab, eot, frame_tokens, 3, threads, 0, 0 };
	if (shard_writer_open(&w, path, &cfg, &e)) {
		diag("%s", e.msg);
		return -1;
	}
	/* odd-sized pieces, to cross frame and group boundaries */
	for (size_t i = 0; i < n;) {
		size_t k = n - i < 777 ? n - i : 777;
		if (shard_writer_put(w, ids + i, k, &e)) {
			shard_writer_abort(w);
			diag("%s", e.msg);
			return -1;
		}
		i += k;
	}
	if (shard_writer_commit(w, &e)) {
		diag("%s", e.msg);
		return -1;
	}
	return 0;
}

/* Read a whole shard back through the sequential reader with T = 1:
 * windows k hold tokens k, k+1. */
static long long read_back(const char *path, uint32_t *out, size_t max, lm_err *e)
{
	shard_reader *r;
	sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = 64, .context = 1, .prefetch = 1 };
	const char *paths[] = { path };
	if (sr_open(&r, paths, 1, &cfg, e))
		return -1;
	uint32_t buf[64 * 2];
	long long n = 0;
	for (;;) {
		int got = sr_next(r, buf, e);
		if (got < 0) {
			sr_close(r);
			return -1;
		}
		if (got == 0)
			break;
		for (int b = 0; b < got && (size_t)n + 1 < max; b++) {
			out[n] = buf[2 * b];
			out[n + 1] = buf[2 * b + 1];
			n++;
		}
	}
	sr_close(r);
	return n + 1;
}

static void round_trip(uint32_t vocab, int threads)
{
	const size_t N = 50000;
	uint32_t *ids = malloc(N * sizeof *ids), *back = malloc(N * sizeof *back);
	for (size_t i = 0; i < N; i++)
		ids[i] = (uint32_t)((i * 2654435761u >> 7) % vocab);
	ids[N - 1] = vocab - 1;
	const char *p = path_in("rt.lms");
	lm_err e;
	is_int(write_shard(p, ids, N, vocab, 0, 1000, threads), 0,
	       "vocab %u, %d threads: write", vocab, threads);
	shard_file f;
	is_int(shard_file_open(&f, p, &e), 0, "open");
	is_int(f.m.dtype, vocab <= 65536 ? 2 : 4, "dtype");
	is_int(f.m.n_tokens, N, "token count");
	is_int(f.m.n_frames, 50, "frame count");
	size_t zeros = 0;
	for (size_t i = 0; i < N; i++)
		zeros += ids[i] == 0;
	is_int(f.m.n_docs, zeros, "documents = end-of-text ids");
	shard_file_close(&f);
	is_int(shard_test(p, &e), 0, "shard_test passes");
	long long n = read_back(p, back, N, &e);
	is_int(n, N, "read back all tokens");
	ok(n == (long long)N && !memcmp(ids, back, N * sizeof *ids), "ids equal");
	free(ids);
	free(back);
}

static void same_for_any_threads(void)
{
	enum { N = 300000 };
	uint32_t *ids = malloc(N * sizeof *ids);
	for (size_t i = 0; i < N; i++)
		ids[i] = (uint32_t)(i * i % 7919);
	write_shard(path_in("j1.lms"), ids, N, 8000, 0, 512, 1);
	write_shard(path_in("j4.lms"), ids, N, 8000, 0, 512, 4);
	uint8_t *a, *b;
	size_t na, nb;
	lm_err e;
	io_read_file(path_in("j1.lms"), &a, &na, &e);
	io_read_file(path_in("j4.lms"), &b, &nb, &e);
	ok(na == nb && !memcmp(a, b, na), "1 and 4 compressing threads write the same bytes");
	free(a);
	free(b);
	free(ids);
}

static void copy_corrupt(const uint8_t *src, size_t n, size_t at, uint8_t flip, const char *dst,
			 size_t len)
{
	FILE *fp = fopen(dst, "wb");
	for (size_t i = 0; i < len && i < n; i++)
		fputc(i == at ? src[i] ^ flip : src[i], fp);
	fclose(fp);
}

/* Does the reader, reading every window, fail naming the file? */
static int reader_fails(const char *path, lm_err *e)
{
	uint32_t buf[1 << 12];
	return read_back(path, buf, sizeof buf / sizeof *buf, e) < 0;
}

static void corruption(void)
{
	const size_t N = 300;
	uint32_t ids[300];
	for (size_t i = 0; i < N; i++)
		ids[i] = (uint32_t)(i * 7 % 50);
	const char *good = path_in("good.lms"), *bad = path_in("bad.lms");
	write_shard(good, ids, N, 50, 49, 64, 1);
	uint8_t *raw;
	size_t len;
	lm_err e;
	io_read_file(good, &raw, &len, &e);
	shard_file f;
	shard_file_open(&f, good, &e);
	uint64_t first_frame = f.frame_off[0], index_off = f.m.index_offset;
	int all_t = 1, all_r = 1, named_t = 1, named_r = 1;
	int step = getenv("LMPIPE_SANITIZE") && !strcmp(getenv("LMPIPE_SANITIZE"), "1") ? 3 : 1;
	for (size_t at = 0; at < len; at += (size_t)step) {
		for (int fl = 0; fl < 2; fl++) {
			copy_corrupt(raw, len, at, fl ? 0xFF : 0x01, bad, len);
			lm_err te = { .msg = "" }, re = { .msg = "" };
			int tf = shard_test(bad, &te) != 0, rf = reader_fails(bad, &re);
			char want[64] = "";
			if (at >= first_frame && at < index_off) {
				uint64_t k = 0;
				while (k + 1 < f.m.n_frames && f.frame_off[k + 1] <= at)
					k++;
				snprintf(want, sizeof want, "frame %llu: ", (unsigned long long)k);
			}
			if (!tf || !rf) {
				diag("byte %zu ^ %d: not detected (test %d, reader %d)", at, fl, tf, rf);
				all_t &= tf;
				all_r &= rf;
				continue;
			}
			if (strncmp(te.msg, bad, strlen(bad)) || !strstr(te.msg, want)) {
				named_t = 0;
				diag("byte %zu: -t said '%s', want '%s'", at, te.msg, want);
			}
			if (strncmp(re.msg, bad, strlen(bad)) || !strstr(re.msg, want)) {
				named_r = 0;
				diag("byte %zu: reader said '%s', want '%s'", at, re.msg, want);
			}
		}
	}
	ok(all_t, "every corrupt byte of a %zu-byte shard fails shard_test", len);
	ok(all_r, "every corrupt byte fails the reader");
	ok(named_t, "shard_test names the file (and the frame for frame bytes)");
	ok(named_r, "the reader names the file (and the frame for frame bytes)");

	int all_trunc = 1;
	for (size_t cut = 0; cut < len; cut++) {
		copy_corrupt(raw, len, len, 0, bad, cut);
		lm_err te;
		shard_file g;
		if (shard_file_open(&g, bad, &te) == 0) {
			shard_file_close(&g);
			all_trunc = 0;
			diag("cut at %zu opened", cut);
		}
	}
	ok(all_trunc, "every truncation is refused at open");
	copy_corrupt(raw, len, len, 0, bad, len - 5);
	shard_file g;
	shard_file_open(&g, bad, &e);
	ok(strstr(e.msg, "bad.lms: truncated") != NULL, "truncated message: %s", e.msg);

	copy_corrupt(raw, len, 4, 0x02, bad, len); /* version 1 ^ 2 = 3 */
	shard_file_open(&g, bad, &e);
	ok(strstr(e.msg, "bad.lms: unsupported shard version 3 (this reads 1 and 2)") != NULL,
	   "unknown version refused: %s", e.msg);
	copy_corrupt(raw, len, 0, 0x20, bad, len);
	shard_file_open(&g, bad, &e);
	ok(strstr(e.msg, "bad.lms: not a shard") != NULL, "bad magic refused: %s", e.msg);
	shard_file_close(&f);
	free(raw);
}

static void window_distribution(void)
{
	/* CS336 test_get_batch: arange(100), context 7, 1000 batches of 32. */
	uint32_t ids[100];
	for (uint32_t i = 0; i < 100; i++)
		ids[i] = i;
	const char *p = path_in("arange.lms");
	write_shard(p, ids, 100, 100, SHARD_NO_EOT, 16, 1);
	enum { T = 7, B = 32, ITERS = 1000, STARTS = 100 - T };
	shard_reader *r;
	lm_err e;
	sr_config cfg = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 42, .prefetch = 1 };
	const char *paths[] = { p };
	is_int(sr_open(&r, paths, 1, &cfg, &e), 0, "open arange shard");
	is_int(sr_starts(r), STARTS, "93 valid start positions");
	static uint32_t out[B * (T + 1)];
	long counts[STARTS] = { 0 };
	int consecutive = 1;
	for (int it = 0; it < ITERS; it++) {
		if (sr_next(r, out, &e) != B) {
			ok(0, "sr_next: %s", e.msg);
			break;
		}
		for (int b = 0; b < B; b++) {
			uint32_t s = out[b * (T + 1)];
			for (int j = 0; j <= T; j++)
				consecutive &= out[b * (T + 1) + j] == s + (uint32_t)j;
			if (s < STARTS)
				counts[s]++;
		}
	}
	ok(consecutive, "windows are T+1 consecutive tokens (x then y shifted by one)");
	double expect = (double)ITERS * B / STARTS, p1 = 1.0 / STARTS;
	double sigma = sqrt((double)ITERS * B * p1 * (1 - p1));
	long lo = counts[0], hi = counts[0], total = 0;
	int covered = 1;
	for (int s = 0; s < STARTS; s++) {
		covered &= counts[s] > 0;
		lo = counts[s] < lo ? counts[s] : lo;
		hi = counts[s] > hi ? counts[s] : hi;
		total += counts[s];
	}
	is_int(total, ITERS * B, "every start is in [0, 92]");
	ok(covered, "every start position drawn");
	ok(lo >= expect - 5 * sigma && hi <= expect + 5 * sigma,
	   "counts %ld..%ld within 5 sigma of %.1f (sigma %.1f)", lo, hi, expect, sigma);
	sr_close(r);

	/* Across shards: starts are uniform over the union. */
	write_shard(path_in("u-000000.lms"), ids, 40, 100, SHARD_NO_EOT, 16, 1);
	write_shard(path_in("u-000001.lms"), ids + 40, 35, 100, SHARD_NO_EOT, 16, 1);
	write_shard(path_in("u-000002.lms"), ids + 75, 25, 100, SHARD_NO_EOT, 16, 1);
	const char *pre[] = { path_in("u") };
	is_int(shard_seal(pre[0], &e), 0, "seal the 3 shards (write their manifest)");
	is_int(sr_open(&r, pre, 1, &cfg, &e), 0, "open a prefix of 3 shards");
	is_int(sr_shards(r), 3, "3 shards found");
	is_int(sr_starts(r), 33 + 28 + 18, "starts: n_i - T per shard");
	long c2[100] = { 0 };
	int inside = 1;
	for (int it = 0; it < ITERS; it++) {
		sr_next(r, out, &e);
		for (int b = 0; b < B; b++) {
			uint32_t s = out[b * (T + 1)];
			c2[s]++;
			inside &= (s < 33) || (s >= 40 && s < 68) || (s >= 75 && s < 93);
			for (int j = 0; j <= T; j++)
				inside &= out[b * (T + 1) + j] == s + (uint32_t)j;
		}
	}
	ok(inside, "no window crosses a shard end");
	double ex2 = (double)ITERS * B / 79, sg2 = sqrt(ex2 * (1 - 1.0 / 79));
	int fine = 1;
	for (int s = 0; s < 100; s++) {
		int valid = (s < 33) || (s >= 40 && s < 68) || (s >= 75 && s < 93);
		if (valid && (c2[s] == 0 || fabs((double)c2[s] - ex2) > 5 * sg2))
			fine = 0;
	}
	ok(fine, "every start of every shard drawn, within 5 sigma");
	sr_close(r);

	/* sr_window_offset: where each window handed out starts in the
	 * concatenated set (the ids are their own positions), for one rank
	 * of two as well, and for sequential windows. */
	for (int rank = 0; rank < 3; rank++) {
		sr_config wc = cfg;
		wc.world = rank ? 2 : 1;
		wc.rank = rank ? rank - 1 : 0;
		wc.mode = rank == 2 ? SR_SEQUENTIAL : SR_RANDOM;
		sr_open(&r, pre, 1, &wc, &e);
		int same = 1, n = 0;
		for (int it = 0; it < 20; it++) {
			uint64_t k0 = sr_tell(r);
			int got = sr_next(r, out, &e);
			for (int b = 0; b < got; b++, n++)
				same &= sr_window_offset(r, k0 + (uint64_t)b) == out[b * (T + 1)];
		}
		ok(same && n > 0, "window offsets are the windows' first positions (%s, %d windows)",
		   rank == 2 ? "sequential" : rank ? "rank 1 of 2" : "random", n);
		ok(sr_shard_tokens(r, 0) == 40 && sr_shard_tokens(r, 2) == 25 &&
		   strstr(sr_shard_path(r, 1), "u-000001.lms"), "shards in manifest order");
		sr_close(r);
	}
}

static void determinism(void)
{
	uint32_t ids[5000];
	for (uint32_t i = 0; i < 5000; i++)
		ids[i] = i % 4000;
	const char *p = path_in("det.lms");
	write_shard(p, ids, 5000, 4000, SHARD_NO_EOT, 256, 2);
	enum { T = 16, B = 4, W = T + 1, NB = 10 };
	const char *paths[] = { p };
	lm_err e;
	uint32_t a[NB][B * W], b[NB][B * W], c[B * W];
	shard_reader *r;
	for (int pf = 0; pf < 2; pf++) {
		sr_config cfg = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 7,
				  .prefetch = pf, .cache_frames = 2 };
		sr_open(&r, paths, 1, &cfg, &e);
		for (int i = 0; i < NB; i++)
			sr_next(r, pf ? b[i] : a[i], &e);
		is_int(sr_tell(r), NB * B, "tell counts windows (prefetch %d)", pf);
		sr_close(r);
	}
	ok(!memcmp(a, b, sizeof a), "same seed: same batches with and without prefetch");
	sr_config tc = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 7,
			 .prefetch = 1, .threads = 3, .cache_frames = 1 };
	sr_open(&r, paths, 1, &tc, &e);
	for (int i = 0; i < NB; i++)
		sr_next(r, b[i], &e);
	sr_close(r);
	ok(!memcmp(a, b, sizeof a), "3 filling threads: the same batches");
	/* Two ranks of batch B draw what one reader of batch 2B draws. */
	int same = 1;
	for (int rank = 0; rank < 2; rank++) {
		sr_config rc = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 7,
				 .prefetch = 1, .world = 2, .rank = rank };
		sr_open(&r, paths, 1, &rc, &e);
		for (int j = 0; j < NB / 2; j++) {
			sr_next(r, c, &e);
			same &= !memcmp(c, a[2 * j + rank], sizeof c);
		}
		sr_close(r);
	}
	ok(same, "ranks 0 and 1 of world 2 take alternate batches of the one sequence");
	sr_config badr = { .mode = SR_RANDOM, .batch = B, .context = T, .world = 2, .rank = 2 };
	is_int(sr_open(&r, paths, 1, &badr, &e), -1, "rank >= world refused");
	sr_config cfg = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 7, .prefetch = 1 };
	sr_open(&r, paths, 1, &cfg, &e);
	sr_next(r, c, &e);
	sr_seek(r, 6 * B, &e);
	sr_next(r, c, &e);
	ok(!memcmp(c, a[6], sizeof c), "resumed at window 24: batch 6 again");
	sr_close(r);
	cfg.seed = 8;
	sr_open(&r, paths, 1, &cfg, &e);
	sr_next(r, c, &e);
	ok(memcmp(c, a[0], sizeof c) != 0, "another seed: other windows");
	sr_close(r);

	/* Sequential: windows k*T .. k*T + T, floor((n - 1) / T) of them. */
	cfg = (sr_config){ .mode = SR_SEQUENTIAL, .batch = B, .context = T, .prefetch = 1 };
	sr_open(&r, paths, 1, &cfg, &e);
	is_int(sr_windows(r), (5000 - 1) / T, "sequential window count");
	long total = 0;
	int right = 1, got;
	while ((got = sr_next(r, c, &e)) > 0) {
		for (int w = 0; w < got; w++)
			for (int j = 0; j < W; j++)
				right &= c[w * W + j] == ids[(total + w) * T + j];
		total += got;
	}
	is_int(total, (5000 - 1) / T, "every sequential window, then 0");
	ok(right, "sequential windows hold the right tokens");
	sr_seek(r, 0, &e);
	sr_next(r, c, &e);
	ok(c[0] == ids[0] && c[W] == ids[T], "seek 0 starts over");
	sr_close(r);
}

/* Sequential windows with a stride S < T over two shards: shard i holds
 * floor((n_i - 1 - T) / S) + 1 windows starting every S tokens, the first
 * of each shard marked; together the first's T targets and the others'
 * last S cover each target of a shard once, up to the last window's end. */
static void sliding(void)
{
	enum { T = 16, B = 5, W = T + 1, N0 = 300, N1 = 37, N2 = 10 };
	static const int strides[] = { 1, 5, 8, 16 };
	uint32_t a[N0], b[N1], c2[N2];
	for (uint32_t i = 0; i < N0; i++)
		a[i] = i;
	for (uint32_t i = 0; i < N1; i++)
		b[i] = 1000 + i;
	for (uint32_t i = 0; i < N2; i++)
		c2[i] = 2000 + i;
	write_shard(path_in("s0.lms"), a, N0, 4000, SHARD_NO_EOT, 64, 1);
	write_shard(path_in("s1.lms"), b, N1, 4000, SHARD_NO_EOT, 64, 1);
	write_shard(path_in("s2.lms"), c2, N2, 4000, SHARD_NO_EOT, 64, 1); /* too short: none */
	const char *paths[] = { path_in("s0.lms"), path_in("s2.lms"), path_in("s1.lms") };
	const uint32_t *tok[] = { a, c2, b };
	const int n[] = { N0, N2, N1 };
	lm_err e;
	for (size_t si = 0; si < sizeof strides / sizeof *strides; si++) {
		int S = strides[si];
		sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = B, .context = T, .prefetch = 1,
				  .stride = S };
		shard_reader *r;
		if (sr_open(&r, paths, 3, &cfg, &e)) {
			ok(0, "stride %d: open: %s", S, e.msg);
			continue;
		}
		uint64_t want = 0;
		for (int f = 0; f < 3; f++)
			want += n[f] - 1 >= T ? (uint64_t)(n[f] - 1 - T) / S + 1 : 0;
		is_int(sr_windows(r), want, "stride %d: %llu windows", S, (unsigned long long)want);
		uint32_t buf[B * W];
		int right = 1, firsts = 0, got;
		uint64_t k = 0, covered[3] = { 0 };
		int f = 0, at = 0; /* the shard and window start expected next */
		while ((got = sr_next(r, buf, &e)) > 0)
			for (int w = 0; w < got; w++, k++) {
				while (at + T > n[f] - 1) {
					f++;
					at = 0;
				}
				int first = sr_window_first(r, k);
				right &= first == (at == 0);
				firsts += first;
				for (int j = 0; j < W; j++)
					right &= buf[w * W + j] == tok[f][at + j];
				covered[f] = (uint64_t)at + T; /* targets 1 .. at + T reached */
				at += S;
			}
		is_int(k, want, "stride %d: every window, then 0", S);
		ok(right, "stride %d: each window's tokens and first-of-shard mark", S);
		is_int(firsts, 2, "stride %d: two shards with windows, two first windows", S);
		ok(covered[0] > (uint64_t)N0 - 1 - S && covered[2] > (uint64_t)N1 - 1 - S,
		   "stride %d: the windows reach within %d targets of each shard's end", S, S);
		ok(!sr_window_first(r, want), "stride %d: no window past the end", S);
		sr_close(r);
	}
	shard_reader *r;
	sr_config bad = { .mode = SR_SEQUENTIAL, .batch = B, .context = T, .stride = T + 1 };
	is_int(sr_open(&r, paths, 3, &bad, &e), -1, "a stride above the context refused");
	ok(strstr(e.msg, "stride of 17 tokens") != NULL && e.code == 2, "%s", e.msg);
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	round_trip(1000, 1);
	round_trip(65536, 3);
	round_trip(100000, 2);
	same_for_any_threads();
	corruption();
	window_distribution();
	determinism();
	sliding();

	lm_err e;
	shard_reader *r;
	sr_config cfg = { .mode = SR_RANDOM, .batch = 1, .context = 100 };
	const char *paths[] = { path_in("arange.lms") };
	is_int(sr_open(&r, paths, 1, &cfg, &e), -1, "context longer than every shard refused");
	ok(strstr(e.msg, "no shard holds a window of 101 tokens") != NULL, "%s", e.msg);
	const char *missing[] = { path_in("nothing") };
	is_int(sr_open(&r, missing, 1, &cfg, &e), -1, "missing prefix refused");
	ok(strstr(e.msg, "nothing: no such shard") != NULL, "%s", e.msg);

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? done_testing() : (done_testing(), 1);
}
