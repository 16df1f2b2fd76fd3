/* ddp_internal.h: what ddp.c (the hook, the step, the checkpoints) and
 * ddp_zero2.c (ZeRO-2's gradient shards) share: the state of a data
 * parallel run, and the bucket sums of ddp_sums.c. */
#ifndef LMPIPE_DDP_INTERNAL_H
#define LMPIPE_DDP_INTERNAL_H

#include "dist/ddp.h"

/* Shard boundaries on multiples of this many floats (256 bytes). */
enum { SHARD_ALIGN = 64 };

/* A list of started collectives. */
typedef struct ddp_reqs {
	lm_comm_req **v;
	int n, cap;
} ddp_reqs;

typedef struct zero2 zero2;

struct ddp {
	lm_comm *c;
	model *m;
	int zero;
	size_t n, bucket;        /* floats */
	size_t *part;            /* world + 1 */
	size_t flushed;          /* [flushed, n) is being summed */
	int sync;
	ddp_reqs reqs;           /* the bucket sums started (not ZeRO-2's, which are its ranges') */
	zero2 *z2;               /* ZeRO-2 with the gradients sharded (--accum 1); else NULL */
	int failed;              /* a start in the hook failed: the message is in err */
	lm_err err;
};

/* ddp_sums.c.  The first parameter of layer (-1: the embedding, offset 0). */
size_t ddp_layer_offset(const model *m, int layer);
int ddp_push(ddp *d, ddp_reqs *q, lm_comm_req *r);
/* Start the sums of buf[a, b) over the partition part, in pieces of at
 * most a bucket, from the end (the order every rank uses), into q; a
 * failure sets d->failed. */
void ddp_start_sums(ddp *d, ddp_reqs *q, float *buf, size_t a, size_t b, const size_t *part);
/* Let every started collective of q move on (OpenMPI). */
void ddp_progress(ddp *d, const ddp_reqs *q);
/* Wait for every collective of q (e NULL: no message) and empty it. */
int ddp_wait_all(ddp *d, ddp_reqs *q, const char *what, lm_err *e);

/* ZeRO-2 (ddp_zero2.c).  The gradients live in this rank's shard of the
 * buffer and in a few range buffers: the backward pass writes a range's
 * gradients into one, the hook starts its sum when the range is done, and
 * the buffer is taken back (its owned part copied into the shard) when
 * another range needs it.  z2_init sets d->z2 (m made with
 * MODEL_NO_GRADS). */
int z2_init(ddp *d, lm_err *e);
void z2_free(ddp *d);
/* Before the forward pass: the first range's buffer (and, with tied
 * embeddings, the embedding's) zeroed, the model's gradients pointed
 * into them. */
void z2_sync(ddp *d);
/* The hook's work at layer (see model.h grad_ready). */
void z2_ready(ddp *d, int layer);
/* After the backward pass: every range summed and in the shard. */
int z2_finish(ddp *d, lm_err *e);
/* The gradient shard (grads[i - lo] is parameter i's), and the bytes the
 * shard and the range buffers take. */
float *z2_shard(const ddp *d);
double z2_bytes(const ddp *d);

#endif
