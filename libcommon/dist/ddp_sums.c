/* ddp_sums.c: the bucket sums that ddp.c's hook (ZeRO 0 and 1) and
 * ddp_zero2.c's ranges (ZeRO-2) start and wait for (ddp_internal.h). */
#include "dist/ddp_internal.h"

#include <stdlib.h>

size_t ddp_layer_offset(const model *m, int layer)
{
	return layer < 0 ? 0 : (size_t)(m->lp[layer].ln1 - m->params);
}

int ddp_push(ddp *d, ddp_reqs *q, lm_comm_req *r)
{
	if (q->n == q->cap) {
		int cap = q->cap ? 2 * q->cap : 16;
		lm_comm_req **v = realloc(q->v, (size_t)cap * sizeof *v);
		if (!v)
			return lm_seterr(&d->err, "out of memory");
		q->v = v;
		q->cap = cap;
	}
	q->v[q->n++] = r;
	return 0;
}

void ddp_start_sums(ddp *d, ddp_reqs *q, float *buf, size_t a, size_t b, const size_t *part)
{
	while (!d->failed && b > a) {
		size_t lo = b - a > d->bucket ? b - d->bucket : a;
		lm_comm_req *r;
		if (d->c->reduce_start(d->c, buf, lo, b, part, &r, &d->err) || (r && ddp_push(d, q, r)))
			d->failed = 1;
		b = lo;
	}
}

void ddp_progress(ddp *d, const ddp_reqs *q)
{
	for (int i = 0; d->c->progress && i < q->n; i++)
		d->c->progress(d->c, q->v[i]);
}

int ddp_wait_all(ddp *d, ddp_reqs *q, const char *what, lm_err *e)
{
	int rc = 0;
	for (int i = 0; i < q->n; i++)
		if (d->c->wait(d->c, q->v[i], what, rc ? NULL : e))
			rc = -1;
	q->n = 0;
	return rc;
}
