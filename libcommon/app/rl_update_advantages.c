/* rl_update_advantages.c: GRPO's advantages, each sequence's reward
 * normalised within the group of samples of its prompt. */
#include <stdlib.h>
#include <string.h>

#include "app/rl_update_internal.h"
#include "base/order.h"
#include "rl/rl_loss.h"

/* Advantages within each group (rl_group_normalize on the group alone). */
int grpo_advantages(const rlu_opts *o, seqs *v, size_t *n_groups, const char *name, lm_err *e)
{
	size_t n = v->n, *idx = NULL;
	const char **keys = calloc(n ? n : 1, sizeof *keys);
	float *r = malloc(n * sizeof *r), *a = malloc(n * sizeof *a);
	int rc = 0;
	for (size_t i = 0; keys && i < n; i++)
		keys[i] = v->s[i].group;
	if (keys)
		idx = order_by_key(keys, n);
	if (n && (!idx || !keys || !r || !a))
		rc = lm_seterr(e, "out of memory");
	*n_groups = 0;
	for (size_t lo = 0; rc == 0 && lo < n;) {
		size_t hi = lo + 1;
		while (hi < n && !strcmp(keys[idx[hi]], keys[idx[lo]]))
			hi++;
		for (size_t k = lo; k < hi; k++)
			r[k - lo] = (float)v->s[idx[k]].reward;
		if (rl_group_normalize(r, hi - lo, hi - lo, !o->no_std, o->adv_eps, a, e)) {
			rc = lm_err_prefix(e, "%s: group %s (line %lu)", name, keys[idx[lo]],
					   v->s[idx[lo]].lineno);
			break;
		}
		for (size_t k = lo; k < hi; k++)
			v->s[idx[k]].adv = a[k - lo];
		(*n_groups)++;
		lo = hi;
	}
	free(idx);
	free(keys);
	free(r);
	free(a);
	return rc;
}
