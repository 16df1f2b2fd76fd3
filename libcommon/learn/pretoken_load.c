/* pretoken_load.c: many counts files loaded on threads (see bpe_learn.h).
 * Each thread loads its share of the files into a table of its own (the
 * first thread into the caller's), then the tables are merged pairwise, in
 * parallel, the smaller into the larger.  Counts are sums, so the result
 * does not depend on which thread loaded what. */
#include "learn/bpe_learn_internal.h"

#include <omp.h>
#include <stdlib.h>

int bpe_counts_load_many(bpe_counts *c, const bpe_specials *sp, const char *const *paths,
			 int n, int threads, lm_err *e)
{
	int k = threads < n ? threads : n;
	if (k <= 1) {
		for (int i = 0; i < n; i++)
			if (bpe_counts_load(c, sp, paths[i], e))
				return -1;
		return 0;
	}
	bpe_counts **t = calloc((size_t)k, sizeof *t);
	lm_err *errs = calloc((size_t)k, sizeof *errs);
	int first_bad = n, rc = 0;
	if (!t || !errs) {
		free(t);
		free(errs);
		return lm_seterr(e, "out of memory");
	}
	t[0] = c;
	for (int i = 1; i < k && !rc; i++)
		if (!(t[i] = bpe_counts_new(e)))
			rc = -1;
	if (!rc) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(k)
		for (int i = 0; i < n; i++) {
			int me = omp_get_thread_num();
			if (bpe_counts_load(t[me], sp, paths[i], &errs[me])) {
#pragma omp critical
				if (i < first_bad) {
					first_bad = i;
					*e = errs[me];
				}
			}
		}
		if (first_bad < n)
			rc = -1;
	}
	for (int step = 1; !rc && step < k; step *= 2) {
		int fail = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(k) reduction(|:fail)
		for (int i = 0; i < k - step; i += 2 * step) {
			bpe_counts *a = t[i], *b = t[i + step];
			if (i > 0 && bpe_counts_size(b) > bpe_counts_size(a)) {
				t[i] = b; /* into the larger (the caller's table stays first) */
				b = a;
				a = t[i];
			}
			if (bpe_counts_merge(a, b, &errs[i]))
				fail = 1;
			bpe_counts_free(b);
			t[i + step] = NULL;
		}
		if (fail) {
			for (int i = 0; i < k; i++)
				if (errs[i].msg[0]) {
					*e = errs[i];
					break;
				}
			rc = -1;
		}
	}
	for (int i = 1; i < k; i++)
		bpe_counts_free(t[i]);
	free(t);
	free(errs);
	return rc;
}
