/* order.c: stable order of records by a string key (see order.h). */
#include "base/order.h"

#include <stdlib.h>
#include <string.h>

static int cmp_key(const void *a, const void *b, void *arg)
{
	const char *const *keys = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(keys[i], keys[j]);
	return c ? c : (i > j) - (i < j); /* the index breaks ties: stable */
}

size_t *order_by_key(const char *const *keys, size_t n)
{
	size_t *idx = n ? malloc(n * sizeof *idx) : NULL;
	if (!idx)
		return NULL;
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof *idx, cmp_key, (void *)keys);
	return idx;
}
