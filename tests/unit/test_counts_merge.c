/* test_counts_merge.c: counts files merged on threads by hash partition
 * (bpe_counts_load_many) against the plain loader, one file after another
 * (bpe_counts_load): the same pre-tokens and counts, and, on 1, 2, 3 and 8
 * threads, the same entries in the same order (so the same bytes saved).
 * Seven files of 6000 pre-tokens each, overlapping, ~24000 distinct in all:
 * enough to fill every one of the 256 partitions.  Also a table that holds
 * counts before the load, and a bad file among good ones (the first bad one
 * in the order given is named, whatever the threads). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "base/io.h"
#include "learn/bpe_learn.h"

enum { FILES = 7, PER_FILE = 6000, STRIDE = 3000, MAX_TOK = 64 };

static char dir[] = "/tmp/lmpipe-cmrg.XXXXXX";
static char path[FILES][300];
static const char *paths[FILES];

/* Pre-token i: a few letters and digits, some long, with a count that
 * depends on the file too. */
static size_t pretoken(uint32_t i, uint8_t *s)
{
	int n = snprintf((char *)s, MAX_TOK, " w%u", i * 2654435761u % 1000003u);
	if (i % 97 == 0)
		n += snprintf((char *)s + n, MAX_TOK - (size_t)n, "-and-a-long-tail-%u", i);
	return (size_t)n;
}

typedef struct seq {
	uint8_t *b;
	size_t n, cap;
} seq;

/* The entries in table order, as bytes: length, count, bytes, ... */
static void seq_add(const uint8_t *s, size_t n, uint64_t count, void *arg)
{
	seq *q = arg;
	if (q->n + n + 16 > q->cap) {
		q->cap = (q->n + n + 16) * 2;
		q->b = realloc(q->b, q->cap);
	}
	memcpy(q->b + q->n, &n, sizeof n);
	memcpy(q->b + q->n + 8, &count, sizeof count);
	memcpy(q->b + q->n + 16, s, n);
	q->n += n + 16;
}

static seq in_order(const bpe_counts *c)
{
	seq q = { NULL, 0, 0 };
	bpe_counts_each(c, seq_add, &q);
	return q;
}

/* Whether x and y hold the same pre-tokens with the same counts: x then y
 * merged into one table must be x then x merged into another, entry by
 * entry (x's order first in both, every count doubled, nothing added). */
static int same_counts(const bpe_counts *x, const bpe_counts *y)
{
	lm_err e;
	if (bpe_counts_size(x) != bpe_counts_size(y) || bpe_counts_total(x) != bpe_counts_total(y))
		return 0;
	bpe_counts *xy = bpe_counts_new(&e), *xx = bpe_counts_new(&e);
	bpe_counts_merge(xy, x, &e);
	bpe_counts_merge(xy, y, &e);
	bpe_counts_merge(xx, x, &e);
	bpe_counts_merge(xx, x, &e);
	seq a = in_order(xy), b = in_order(xx);
	/* x's entries first in both, so the same sequence if y adds what x does */
	int same = bpe_counts_size(xy) == bpe_counts_size(x) && a.n == b.n && !memcmp(a.b, b.b, a.n);
	free(a.b);
	free(b.b);
	bpe_counts_free(xy);
	bpe_counts_free(xx);
	return same;
}

static void write_files(const bpe_specials *sp)
{
	lm_err e;
	uint8_t s[MAX_TOK];
	for (int f = 0; f < FILES; f++) {
		bpe_counts *c = bpe_counts_new(&e);
		for (uint32_t i = 0; i < PER_FILE; i++) {
			uint32_t id = (uint32_t)f * STRIDE + i;
			bpe_counts_add(c, s, pretoken(id, s), 1 + (id + (uint32_t)f) % 13, &e);
		}
		snprintf(path[f], sizeof path[f], "%s/%d.counts", dir, f);
		paths[f] = path[f];
		if (bpe_counts_save(c, sp, path[f], &e))
			skip_all(e.msg);
		bpe_counts_free(c);
	}
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	lm_err e;
	bpe_specials none = { 0, NULL, NULL };
	write_files(&none);

	bpe_counts *ref = bpe_counts_new(&e);
	for (int f = 0; f < FILES; f++)
		bpe_counts_load(ref, &none, paths[f], &e);
	ok(bpe_counts_size(ref) > 20000, "the plain loader: %zu distinct pre-tokens",
	   bpe_counts_size(ref));

	static const int threads[] = { 1, 2, 3, 8 };
	seq first = { NULL, 0, 0 };
	char saved1[320];
	snprintf(saved1, sizeof saved1, "%s/merged-1.counts", dir);
	for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
		bpe_counts *c = bpe_counts_new(&e);
		ok(bpe_counts_load_many(c, &none, paths, FILES, threads[t], &e) == 0,
		   "%d thread(s): loaded", threads[t]);
		ok(same_counts(c, ref), "%d thread(s): the plain loader's pre-tokens and counts",
		   threads[t]);
		seq q = in_order(c);
		if (t == 0)
			first = q;
		else {
			ok(q.n == first.n && !memcmp(q.b, first.b, q.n),
			   "%d threads: the entries in 1 thread's order", threads[t]);
			free(q.b);
		}
		char saved[320];
		snprintf(saved, sizeof saved, "%s/merged-%d.counts", dir, threads[t]);
		bpe_counts_save(c, &none, saved, &e);
		if (t > 0) {
			uint8_t *a, *b;
			size_t na, nb;
			int same = !io_read_file(saved1, &a, &na, &e) && !io_read_file(saved, &b, &nb, &e) &&
				   na == nb && !memcmp(a, b, na);
			ok(same, "%d threads: saved, the bytes of 1 thread's file", threads[t]);
			free(a);
			free(b);
		}
		bpe_counts_free(c);
	}

	/* a table holding counts already: they are added to */
	uint8_t s[MAX_TOK];
	bpe_counts *pre = bpe_counts_new(&e), *want = bpe_counts_new(&e);
	for (uint32_t i = 0; i < 500; i++) {
		bpe_counts_add(pre, s, pretoken(i * 7, s), 5, &e);
		bpe_counts_add(want, s, pretoken(i * 7, s), 5, &e);
	}
	bpe_counts_merge(want, ref, &e);
	ok(bpe_counts_load_many(pre, &none, paths, FILES, 3, &e) == 0 && same_counts(pre, want),
	   "into a table holding counts: they add up");

	/* bad files: the 3rd truncated, the 5th not a counts file */
	FILE *fp = fopen(path[4], "w");
	ok(truncate(path[2], 100) == 0 && fp && fputs("not counts\n", fp) >= 0 && fclose(fp) == 0,
	   "spoil the 3rd and the 5th file");
	for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
		bpe_counts *c = bpe_counts_new(&e);
		ok(bpe_counts_load_many(c, &none, paths, FILES, threads[t], &e) == -1 &&
		   strstr(e.msg, "2.counts: truncated"),
		   "%d thread(s): the first bad file named: %s", threads[t], e.msg);
		bpe_counts_free(c);
	}

	for (int f = 0; f < FILES; f++)
		unlink(path[f]);
	for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
		char saved[320];
		snprintf(saved, sizeof saved, "%s/merged-%d.counts", dir, threads[t]);
		unlink(saved);
	}
	rmdir(dir);
	free(first.b);
	bpe_counts_free(ref);
	bpe_counts_free(pre);
	bpe_counts_free(want);
	return done_testing();
}
