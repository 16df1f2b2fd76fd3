/* grow.h: the growable array: make room in a realloc'd buffer for `need`
 * elements, doubling its capacity so that n appends cost O(n). */
#ifndef LMPIPE_GROW_H
#define LMPIPE_GROW_H

#include <stddef.h>

#include "base/err.h"

/* Smallest capacity (in elements) a first growth gives. */
enum { GROW_FIRST_CAP = 16 };

/* lm_grow's realloc, out of line (lm_grow, the check, is inline in the
 * loops that append). */
int lm_grow_realloc(void **p, size_t *cap, size_t need, size_t elem, lm_err *e);

/* Make *p (capacity *cap elements of elem bytes) hold at least need
 * elements: nothing when it does, else realloc to the next doubling of
 * *cap (GROW_FIRST_CAP from empty).  0, or -1 with "out of memory (N
 * bytes)" or a size that does not fit size_t in e; *p and *cap are then
 * unchanged. */
static inline int lm_grow(void **p, size_t *cap, size_t need, size_t elem, lm_err *e)
{
	return need <= *cap ? 0 : lm_grow_realloc(p, cap, need, elem, e);
}

#endif
