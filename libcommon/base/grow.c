/* grow.c: the growable array's realloc (see grow.h). */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>

int lm_grow_realloc(void **p, size_t *cap, size_t need, size_t elem, lm_err *e)
{
	size_t c = *cap ? *cap : GROW_FIRST_CAP;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return lm_seterr(e, "a buffer of %zu elements does not fit in memory", need);
		c *= 2;
	}
	if (elem && c > SIZE_MAX / elem)
		return lm_seterr(e, "a buffer of %zu elements of %zu bytes does not fit in memory",
				 c, elem);
	void *q = realloc(*p, c * elem);
	if (!q)
		return lm_seterr(e, "out of memory (%zu bytes)", c * elem);
	*p = q;
	*cap = c;
	return 0;
}
