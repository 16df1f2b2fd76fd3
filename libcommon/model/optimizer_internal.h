/* optimizer_internal.h: what optimizer.c and optimizer_range.c share. */
#ifndef LMPIPE_OPTIMIZER_INTERNAL_H
#define LMPIPE_OPTIMIZER_INTERNAL_H

#include "model/optimizer.h"

/* o cleared and configured by c (checked), its moments for n values
 * allocated and zeroed, the staged step's values and the tensor table:
 * 0, or -1 with the reason (what: the state's name in it) and o freed. */
int optim_state_init(optim *o, const optim_config *c, model *m, size_t n, const char *what,
		     lm_err *e);

#endif
