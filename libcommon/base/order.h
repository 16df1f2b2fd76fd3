/* order.h: the stable order of records by a string key (group ids of
 * rollouts), as an index array. */
#ifndef LMPIPE_ORDER_H
#define LMPIPE_ORDER_H

#include <stddef.h>

/* A malloc'd array idx[0..n) such that keys[idx[0]] <= keys[idx[1]] ...
 * (strcmp), records of equal keys in input order; NULL when out of memory
 * (or n == 0).  The caller frees it. */
size_t *order_by_key(const char *const *keys, size_t n);

#endif
