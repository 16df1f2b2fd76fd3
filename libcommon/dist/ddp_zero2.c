/* ddp_zero2.c: ZeRO-2, the gradients sharded (see ddp.h, ddp_internal.h).
 *
 * Ranges.  The hook of ddp.c cuts the buffer, from its end, into the
 * ranges whose sums it starts together: a range ends where the last one
 * began and begins at the first layer whose parameters make it a bucket's
 * worth (the embedding ends the last one).  Here the same cut is made
 * once, at the start, and each range R0 (the top: the final norm, the
 * head, the last layers) .. R[K-1] (the embedding) gets a range buffer for
 * the backward pass to write it into: the model's gradients of a range
 * are pointed into its buffer (model_grads_at) before its first write.
 *
 * Buffers.  A range's buffer is in use from then until its sum is done and
 * the owned part copied into the shard, which happens when another range
 * needs the buffer (or at the end of the backward pass).  The embedding's
 * range gets buffer 0; the others take buffers 1 and 2 in turn, so a
 * range is summed while the next one is computed.  Without tied
 * embeddings R0 (which holds the LM head, often the other big one) shares
 * buffer 0 with the embedding's range, which it is done with long before;
 * with tied embeddings the head's gradient is the embedding's, written
 * first by the head's backward pass, so the embedding's range is in use
 * from the start and keeps buffer 0 to itself.  Each buffer is as large as
 * the largest range it serves.
 *
 * The sums are those of ddp.c over the same ranges in the same pieces,
 * each range's partition the global one cut to it, so each rank's shard
 * holds the values ZeRO-0 and ZeRO-1 compute, bit for bit on the CPU. */
#include "dist/ddp_internal.h"

#include <stdlib.h>
#include <string.h>

/* The buffers: the embedding's range, and two in turn for the others. */
enum { EMBED_BUF = 0, TURN_BUFS = 2, MAX_BUFS = EMBED_BUF + 1 + TURN_BUFS };

typedef struct z2_range {
	size_t a, b;             /* [a, b) of the flat buffer */
	size_t *part;            /* world + 1: the partition cut to the range, from 0 */
	int buf;
	int zeroed;              /* direct (below): zeroed in this backward pass */
} z2_range;

typedef struct z2_buf {
	float *p;
	size_t cap;              /* floats */
	int range;               /* the range it holds (-1: none) */
	ddp_reqs reqs;           /* that range's sums, while they run */
} z2_buf;

struct zero2 {
	z2_range *r;
	int n_ranges;
	z2_buf b[MAX_BUFS];
	int n_bufs;
	float *shard;            /* part[rank] .. part[rank + 1] */
	int next;                /* the range the backward pass writes now */
	/* A world of one: the shard is the whole buffer, so each range's
	 * gradients are written into it in place; no range buffer, no copy,
	 * no sum (what is left of ZeRO-2 with nothing to shard). */
	int direct;
};

/* The ranges, as the hook of ddp.c cuts them. */
static int cut_ranges(ddp *d, zero2 *z)
{
	const model *m = d->m;
	int L = m->cfg.n_layers;
	if (!(z->r = calloc((size_t)L + 1, sizeof *z->r)))
		return -1;
	size_t flushed = d->n;
	for (int l = L - 1; l >= -1; l--) {
		size_t start = ddp_layer_offset(m, l);
		if (l < 0 || flushed - start >= d->bucket) {
			z->r[z->n_ranges++] = (z2_range){ .a = start, .b = flushed };
			flushed = start;
		}
	}
	return 0;
}

/* Which buffer each range uses, and each buffer's size. */
static void assign_buffers(zero2 *z, int tied)
{
	int K = z->n_ranges, turn = 0;
	z->n_bufs = 1;
	for (int k = 0; k < K; k++) {
		z2_range *r = &z->r[k];
		if (k == K - 1 || (k == 0 && !tied && K >= 3))
			r->buf = EMBED_BUF;
		else {
			r->buf = EMBED_BUF + 1 + turn;
			turn = (turn + 1) % TURN_BUFS;
		}
		if (r->buf + 1 > z->n_bufs)
			z->n_bufs = r->buf + 1;
		size_t need = r->b - r->a;
		if (need > z->b[r->buf].cap)
			z->b[r->buf].cap = need;
	}
}

int z2_init(ddp *d, lm_err *e)
{
	lm_backend *be = d->m->be;
	zero2 *z = calloc(1, sizeof *z);
	if (!z || cut_ranges(d, z)) {
		free(z);
		return lm_seterr(e, "out of memory");
	}
	d->z2 = z;
	assign_buffers(z, d->m->cfg.tie_embeddings);
	int W = d->c->world;
	z->direct = W == 1;
	if (z->direct)
		for (int i = 0; i < z->n_bufs; i++)
			z->b[i].cap = 0;
	for (int k = 0; k < z->n_ranges; k++) {
		z2_range *r = &z->r[k];
		if (!(r->part = malloc(((size_t)W + 1) * sizeof *r->part)))
			return lm_seterr(e, "out of memory");
		for (int j = 0; j <= W; j++) {
			size_t p = d->part[j] < r->a ? r->a : d->part[j] > r->b ? r->b : d->part[j];
			r->part[j] = p - r->a;
		}
	}
	size_t lo = d->part[d->c->rank], hi = d->part[d->c->rank + 1];
	z->shard = be->alloc(be, (hi > lo ? hi - lo : 1) * sizeof(float));
	for (int i = 0; i < z->n_bufs && z->shard; i++) {
		z->b[i].range = -1;
		if (!z->direct && !(z->b[i].p = be->alloc(be, z->b[i].cap * sizeof(float))))
			break;
	}
	if (!z->shard || (!z->direct && !z->b[z->n_bufs - 1].p)) {
		lm_err why;
		be->sync(be, &why);
		return lm_seterr(e, "%s, for the gradient shard and range buffers (ZeRO-2)", why.msg);
	}
	/* every gradient points somewhere from the start, so that a step
	 * failed half-way never writes through a stale pointer */
	for (int k = 0; k < z->n_ranges; k++)
		model_grads_at(d->m, z->r[k].a, z->r[k].b,
			       z->direct ? z->shard + z->r[k].a : z->b[z->r[k].buf].p);
	return 0;
}

void z2_free(ddp *d)
{
	zero2 *z = d->z2;
	if (!z)
		return;
	lm_backend *be = d->m->be;
	for (int i = 0; i < z->n_bufs; i++) {
		if (z->b[i].p)
			be->release(be, z->b[i].p);
		free(z->b[i].reqs.v);
	}
	if (z->shard)
		be->release(be, z->shard);
	for (int k = 0; k < z->n_ranges; k++)
		free(z->r[k].part);
	free(z->r);
	free(z);
	d->z2 = NULL;
}

float *z2_shard(const ddp *d)
{
	return d->z2->shard;
}

double z2_bytes(const ddp *d)
{
	const zero2 *z = d->z2;
	double floats = (double)(d->part[d->c->rank + 1] - d->part[d->c->rank]);
	for (int i = 0; i < z->n_bufs; i++)
		floats += (double)z->b[i].cap;
	return floats * sizeof(float);
}

/* Wait for buffer i's sums and copy the owned part of its range into the
 * shard; the buffer is free afterwards. */
static int retire(ddp *d, int i, lm_err *e)
{
	zero2 *z = d->z2;
	z2_buf *b = &z->b[i];
	if (b->range < 0)
		return 0;
	const z2_range *r = &z->r[b->range];
	b->range = -1;
	if (ddp_wait_all(d, &b->reqs, "the gradient sums", e))
		return -1;
	int me = d->c->rank;
	size_t lo = r->part[me], hi = r->part[me + 1];
	if (hi > lo) {
		lm_backend *be = d->m->be;
		be->copy(be, z->shard + (r->a + lo - d->part[me]), b->p + lo, (hi - lo) * sizeof(float));
	}
	return 0;
}

/* Range k's buffer taken (after its last user's sums), zeroed, and the
 * model's gradients of the range pointed into it. */
static void take(ddp *d, int k)
{
	zero2 *z = d->z2;
	const z2_range *r = &z->r[k];
	if (z->direct) {
		if (!z->r[k].zeroed)
			d->m->be->zero(d->m->be, z->shard + r->a, (r->b - r->a) * sizeof(float));
		z->r[k].zeroed = 1;
		return;
	}
	z2_buf *b = &z->b[r->buf];
	if (b->range == k)
		return;
	if (retire(d, r->buf, d->failed ? NULL : &d->err))
		d->failed = 1;
	b->range = k;
	d->m->be->zero(d->m->be, b->p, (r->b - r->a) * sizeof(float));
	model_grads_at(d->m, r->a, r->b, b->p);
}

void z2_sync(ddp *d)
{
	zero2 *z = d->z2;
	z->next = 0;
	for (int k = 0; k < z->n_ranges; k++)
		z->r[k].zeroed = 0;
	take(d, 0);
	if (d->m->cfg.tie_embeddings)
		take(d, z->n_ranges - 1);
}

void z2_ready(ddp *d, int layer)
{
	zero2 *z = d->z2;
	for (int i = 0; i < z->n_bufs; i++)
		ddp_progress(d, &z->b[i].reqs);
	size_t start = ddp_layer_offset(d->m, layer);
	if (z->next >= z->n_ranges || z->r[z->next].a != start)
		return;
	const z2_range *r = &z->r[z->next];
	z2_buf *b = &z->b[r->buf];
	if (!z->direct)
		ddp_start_sums(d, &b->reqs, b->p, 0, r->b - r->a, r->part);
	if (++z->next < z->n_ranges)
		take(d, z->next);
}

int z2_finish(ddp *d, lm_err *e)
{
	zero2 *z = d->z2;
	int rc = 0;
	if (z->next < z->n_ranges && !d->failed) {
		d->failed = 1;
		lm_seterr(&d->err, "the backward pass did not reach every gradient-ready hook "
			  "(ZeRO-2 needs each range's)");
	}
	for (int i = 0; i < z->n_bufs; i++)
		if (retire(d, i, rc || d->failed ? NULL : e))
			rc = -1;
	if (d->failed) {
		*e = d->err;
		d->failed = 0;
		return -1;
	}
	return rc;
}
