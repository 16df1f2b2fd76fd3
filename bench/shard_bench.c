/* shard_bench.c: helper of bench/shard-pack.sh (built by it, not by make).
 *
 *   shard_bench gen N VOCAB DOCLEN SEED   a Zipfian (s = 1) token stream of N
 *                                         ids on stdout, end-of-text id 0
 *                                         every DOCLEN ids on average
 *   shard_bench raw                       a token stream on stdin as raw
 *                                         u16 ids on stdout
 *   shard_bench read T B ITERS PREFIX RAW the shard reader against the
 *                                         reference: CS336 get_batch on the
 *                                         raw u16 ids in RAW, mmap'd
 *
 * Prints one JSON line per measurement. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "cli/die.h"
#include "cli/progress.h"
#include "data/shard_reader.h"
#include "data/tokstream.h"

enum { GEN_CHUNK = 1 << 16, WARMUP_BATCHES = 20 };
static const double STEP_S = 10e-3; /* a stand-in training step */

static int gen(uint64_t n, uint32_t vocab, uint64_t doclen, uint64_t seed)
{
	/* Inverse CDF of Zipf over ids 1..vocab-1 (id 0 is end-of-text). */
	double *cdf = malloc(vocab * sizeof *cdf), sum = 0;
	for (uint32_t i = 1; i < vocab; i++)
		cdf[i] = (sum += 1.0 / i);
	uint32_t *buf = malloc(GEN_CHUNK * sizeof *buf);
	tokstream_writer w;
	lm_err e;
	if (tsw_open(&w, stdout, "<stdout>", vocab, 0, &e))
		die_err(&e);
	for (uint64_t k = 0; k < n;) {
		size_t m = n - k < GEN_CHUNK ? (size_t)(n - k) : GEN_CHUNK;
		for (size_t i = 0; i < m; i++, k++) {
			if (lm_draw_below(seed ^ 1, k, doclen) == 0) {
				buf[i] = 0;
				continue;
			}
			double u = lm_draw_unit(seed, k) * sum;
			uint32_t lo = 1, hi = vocab - 1;
			while (lo < hi) {
				uint32_t mid = lo + (hi - lo) / 2;
				if (cdf[mid] < u)
					lo = mid + 1;
				else
					hi = mid;
			}
			buf[i] = lo;
		}
		if (tsw_write(&w, buf, m, &e))
			die_err(&e);
	}
	if (tsw_close(&w, &e))
		die_err(&e);
	free(buf);
	free(cdf);
	return 0;
}

static int raw_u16(void)
{
	tokstream_reader r;
	lm_err e;
	uint32_t *ids = malloc(GEN_CHUNK * sizeof *ids);
	uint16_t *out = malloc(GEN_CHUNK * sizeof *out);
	if (tsr_open(&r, stdin, "<stdin>", &e))
		die_err(&e);
	if (r.info.vocab_size > 65536)
		die(1, "raw: the vocabulary does not fit u16");
	long long n;
	while ((n = tsr_read(&r, ids, GEN_CHUNK, &e)) > 0) {
		for (long long i = 0; i < n; i++)
			out[i] = (uint16_t)ids[i];
		if (fwrite(out, 2, (size_t)n, stdout) != (size_t)n)
			die(1, "write error:");
	}
	if (n < 0)
		die_err(&e);
	tsr_close(&r);
	free(ids);
	free(out);
	return 0;
}

static void json(const char *what, int T, int B, double per_batch_s, const char *extra)
{
	printf("{\"bench\":\"shard-read\",\"what\":\"%s\",\"T\":%d,\"B\":%d,"
	       "\"ms_per_batch\":%.4f,\"windows_per_s\":%.0f%s}\n",
	       what, T, B, per_batch_s * 1e3, B / per_batch_s, extra ? extra : "");
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	nanosleep(&ts, NULL);
}

static double time_reader(const char *prefix, int T, int B, int iters, int prefetch,
			  int threads, double step_s, uint32_t *out)
{
	shard_reader *r;
	lm_err e;
	sr_config cfg = { .mode = SR_RANDOM, .batch = B, .context = T, .seed = 1,
			  .prefetch = prefetch, .threads = threads };
	const char *paths[] = { prefix };
	if (sr_open(&r, paths, 1, &cfg, &e))
		die_err(&e);
	for (int i = 0; i < WARMUP_BATCHES; i++)
		if (sr_next(r, out, &e) < 0)
			die_err(&e);
	double wait = 0;
	for (int i = 0; i < iters; i++) {
		double t0 = lm_now();
		if (sr_next(r, out, &e) < 0)
			die_err(&e);
		wait += lm_now() - t0;
		/* stand-in for a GPU training step (the CPU thread waits) */
		if (step_s > 0)
			sleep_s(step_s);
	}
	sr_close(r);
	return wait / iters;
}

static int bench_read(int T, int B, int iters, const char *prefix, const char *raw_path)
{
	size_t W = (size_t)T + 1;
	uint32_t *out = malloc((size_t)B * W * sizeof *out);
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	double fill = time_reader(prefix, T, B, iters, 0, 1, 0, out);
	json("shard reader fill, 1 thread, no prefetch", T, B, fill, NULL);
	double fill_n = time_reader(prefix, T, B, iters, 0, ncpu, 0, out);
	char what[128];
	snprintf(what, sizeof what, "shard reader fill, %d threads, no prefetch", ncpu);
	json(what, T, B, fill_n, NULL);
	double wait = time_reader(prefix, T, B, iters / 4, 1, 1, STEP_S, out);
	json("shard reader, prefetch (1 thread), 10 ms step: time the step waits", T, B,
	     wait, NULL);

	int fd = open(raw_path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		die(1, "%s:", raw_path);
	size_t n = (size_t)st.st_size / 2;
	const uint16_t *ids = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (ids == MAP_FAILED)
		die(1, "mmap %s:", raw_path);
	uint64_t k = 0;
	double t0 = 0;
	for (int i = 0; i < iters + WARMUP_BATCHES; i++) {
		if (i == WARMUP_BATCHES)
			t0 = lm_now();
		for (int b = 0; b < B; b++) {
			size_t s = (size_t)lm_draw_below(1, k++, n - W + 1);
			for (size_t j = 0; j < W; j++)
				out[(size_t)b * W + j] = ids[s + j];
		}
	}
	double ref = (lm_now() - t0) / iters;
	char extra[96];
	snprintf(extra, sizeof extra, ",\"shard_vs_ref\":%.2f", fill / ref);
	json("reference: CS336 get_batch on mmap'd raw u16 (page cache warm)", T, B, ref, extra);
	munmap((void *)ids, (size_t)st.st_size);
	close(fd);
	free(out);
	return 0;
}

int main(int argc, char **argv)
{
	lm_init(argv[0]);
	if (argc == 6 && !strcmp(argv[1], "gen"))
		return gen(strtoull(argv[2], NULL, 10), (uint32_t)strtoul(argv[3], NULL, 10),
			   strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
	if (argc == 2 && !strcmp(argv[1], "raw"))
		return raw_u16();
	if (argc == 7 && !strcmp(argv[1], "read"))
		return bench_read(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5], argv[6]);
	die(2, "usage: shard_bench gen N VOCAB DOCLEN SEED | raw | read T B ITERS PREFIX RAW");
}
