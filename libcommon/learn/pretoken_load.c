/* pretoken_load.c: many counts files loaded on threads and merged by hash
 * partition (see bpe_learn.h).
 *
 * The pre-tokens are cut into PARTS partitions by the top bits of their hash.
 * The files are taken a batch at a time (as many files as threads): each
 * thread reads and parses whole files of the batch and orders each file's
 * entries by partition (stably: within a partition, in file order); then each
 * thread takes whole partitions and adds into a partition's own table the
 * entries of that partition, file by file in the order given.  No two threads
 * touch one table, and a partition's table lists its pre-tokens in the order
 * they first occur in the files as given.  At the end the partitions' entries
 * are put back to back, in partition order, into the caller's table, whose
 * index is rebuilt on threads.  The result, its order included, is thus the
 * same whatever the number of threads; memory holds one batch of files
 * besides the tables. */
#include "learn/bpe_learn_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/grow.h"
#include "base/io.h"

/* AHEAD: how many entries ahead of the one added its slot and bytes are
 * fetched into the cache. */
enum { PART_BITS = 8, PARTS = 1 << PART_BITS, AHEAD = 8 };

/* A pre-token of a source, its bytes in the source's buffer. */
typedef struct src_ent {
	const uint8_t *s;
	uint64_t count, hash;
	uint32_t len;
} src_ent;

/* A counts file (or the caller's table as it was), parsed. */
typedef struct source {
	uint8_t *buf;              /* the file's bytes */
	src_ent *ent;              /* by partition, in file order within each */
	size_t n, cap;
	size_t start[PARTS + 1];   /* partition p is ent[start[p] .. start[p + 1]) */
} source;

static size_t part_of(uint64_t hash)
{
	return (size_t)(hash >> (64 - PART_BITS));
}

static void source_free(source *s)
{
	free(s->buf);
	free(s->ent);
	memset(s, 0, sizeof *s);
}

static int src_add(const uint8_t *s, uint32_t len, uint64_t count, void *arg, lm_err *e)
{
	source *src = arg;
	if (lm_grow((void **)&src->ent, &src->cap, src->n + 1, sizeof *src->ent, e))
		return -1;
	src->ent[src->n++] = (src_ent){ s, count, bpe_hash(s, len), len };
	return 0;
}

/* Order src's entries by partition, keeping their order within each. */
static int by_partition(source *src, lm_err *e)
{
	size_t at[PARTS] = { 0 };
	for (size_t i = 0; i < src->n; i++)
		at[part_of(src->ent[i].hash)]++;
	size_t sum = 0;
	for (size_t p = 0; p < PARTS; p++) {
		src->start[p] = sum;
		sum += at[p];
		at[p] = src->start[p];
	}
	src->start[PARTS] = sum;
	src_ent *o = malloc((src->n ? src->n : 1) * sizeof *o);
	if (!o)
		return lm_seterr(e, "out of memory (%zu pre-tokens)", src->n);
	for (size_t i = 0; i < src->n; i++)
		o[at[part_of(src->ent[i].hash)]++] = src->ent[i];
	free(src->ent);
	src->ent = o;
	src->cap = src->n;
	return 0;
}

static int read_source(source *src, const bpe_specials *sp, const char *path, lm_err *e)
{
	size_t n;
	if (io_read_file(path, &src->buf, &n, e))
		return -1;
	if (bpe_counts_parse(src->buf, n, io_name(path), sp, src_add, src, e))
		return -1;
	return by_partition(src, e);
}

/* The caller's table as a source (its bytes stay where they are). */
static int table_source(source *src, const bpe_counts *c, lm_err *e)
{
	src->ent = malloc((c->n ? c->n : 1) * sizeof *src->ent);
	if (!src->ent)
		return lm_seterr(e, "out of memory (%zu pre-tokens)", c->n);
	for (size_t i = 0; i < c->n; i++) {
		const bpe_count_ent *x = &c->ent[i];
		src->ent[i] = (src_ent){ c->bytes + x->off, x->count, x->hash, x->len };
	}
	src->n = src->cap = c->n;
	return by_partition(src, e);
}

/* Ask for the cache lines that adding x to t will read first: its home slot
 * and its bytes (in a file read a while ago). */
static void prefetch(const bpe_counts *t, const src_ent *x)
{
	__builtin_prefetch(&t->slot[x->hash & t->mask]);
	__builtin_prefetch(x->s);
}

/* Add partition p of every source, in order, into tab[p]; on k threads. */
static int add_partitions(bpe_counts **tab, const source *src, int n_src, int k, lm_err *e)
{
	lm_err *errs = malloc(PARTS * sizeof *errs); /* 256 KiB: not on a thread's stack */
	int bad = PARTS;
	if (!errs)
		return lm_seterr(e, "out of memory");
#pragma omp parallel for schedule(dynamic, 1) num_threads(k)
	for (int p = 0; p < PARTS; p++) {
		for (int f = 0; f < n_src; f++) {
			const source *s = &src[f];
			for (size_t i = s->start[p]; i < s->start[p + 1]; i++) {
				const src_ent *x = &s->ent[i];
				if (i + AHEAD < s->start[p + 1])
					prefetch(tab[p], &x[AHEAD]);
				if (bpe_counts_add_hashed(tab[p], x->s, x->len, x->hash, x->count, &errs[p])) {
#pragma omp critical
					if (p < bad)
						bad = p;
					f = n_src;
					break;
				}
			}
		}
	}
	if (bad < PARTS)
		*e = errs[bad];
	free(errs);
	return bad < PARTS ? -1 : 0;
}

/* Put the partitions' entries back to back into c (emptied), on k threads. */
static int gather(bpe_counts *c, bpe_counts **tab, int k, lm_err *e)
{
	size_t at[PARTS], bat[PARTS], n = 0, nb = 0;
	uint64_t total = 0;
	for (int p = 0; p < PARTS; p++) {
		at[p] = n;
		bat[p] = nb;
		n += tab[p]->n;
		nb += tab[p]->n_bytes;
		if (ck_add_u64(total, tab[p]->total, &total))
			return lm_seterr(e, "pre-token count overflow (beyond 2^64 - 1)");
	}
	if (n >= UINT32_MAX - 1)
		return lm_seterr(e, "pre-token table too large");
	bpe_count_ent *ent = malloc((n ? n : 1) * sizeof *ent);
	uint8_t *bytes = malloc(nb ? nb : 1);
	if (!ent || !bytes) {
		free(ent);
		free(bytes);
		return lm_seterr(e, "out of memory (pre-token table of %zu entries)", n);
	}
#pragma omp parallel for schedule(dynamic, 1) num_threads(k)
	for (int p = 0; p < PARTS; p++) {
		const bpe_counts *t = tab[p];
		for (size_t i = 0; i < t->n; i++) {
			ent[at[p] + i] = t->ent[i];
			ent[at[p] + i].off += bat[p];
		}
		if (t->n_bytes)
			memcpy(bytes + bat[p], t->bytes, t->n_bytes);
	}
	free(c->ent);
	free(c->bytes);
	c->ent = ent;
	c->cap_ent = n ? n : 1;
	c->n = n;
	c->bytes = bytes;
	c->cap_bytes = nb ? nb : 1;
	c->n_bytes = nb;
	c->total = total;
	return bpe_counts_reindex(c, k, e);
}

int bpe_counts_load_many(bpe_counts *c, const bpe_specials *sp, const char *const *paths,
			 int n, int threads, lm_err *e)
{
	int k = threads < 1 ? 1 : threads;
	int batch = k < n ? k : n;
	int kp = k < PARTS ? k : PARTS;
	bpe_counts *tab[PARTS] = { 0 };
	source *src = calloc((size_t)(batch > 0 ? batch : 1), sizeof *src);
	lm_err *errs = calloc((size_t)(batch > 0 ? batch : 1), sizeof *errs);
	int rc = src && errs ? 0 : lm_seterr(e, "out of memory");
	for (int p = 0; !rc && p < PARTS; p++)
		if (!(tab[p] = bpe_counts_new(e)))
			rc = -1;
	if (!rc && c->n) { /* what c holds comes first */
		rc = table_source(&src[0], c, e) || add_partitions(tab, src, 1, kp, e) ? -1 : 0;
		source_free(&src[0]);
	}
	for (int first = 0; !rc && first < n; first += batch) {
		int m = n - first < batch ? n - first : batch, bad = m;
#pragma omp parallel for schedule(dynamic, 1) num_threads(m)
		for (int i = 0; i < m; i++) {
			if (read_source(&src[i], sp, paths[first + i], &errs[i])) {
#pragma omp critical
				if (i < bad)
					bad = i;
			}
		}
		if (bad < m) {
			*e = errs[bad]; /* the first bad file in the order given */
			rc = -1;
		} else {
			rc = add_partitions(tab, src, m, kp, e);
		}
		for (int i = 0; i < m; i++)
			source_free(&src[i]);
	}
	if (!rc)
		rc = gather(c, tab, kp, e);
	for (int p = 0; p < PARTS; p++)
		bpe_counts_free(tab[p]);
	free(src);
	free(errs);
	return rc;
}
