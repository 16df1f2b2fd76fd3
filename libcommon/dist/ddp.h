/* ddp.h: data parallel training of a model over a communicator (comm.h):
 * the gradients summed over the ranks in buckets started from the
 * backward pass's grad_ready hook (model.h), so that the sums overlap the
 * rest of the backward pass; the optimizer step either whole on every
 * rank (ZeRO 0) or on this rank's shard of the flat parameter buffer,
 * with the updated weights gathered afterwards (ZeRO 1 and 2); and the
 * checkpoints that go with it (the optimizer state gathered on rank 0,
 * and scattered again on load).
 *
 * Use: ddp_init after model_init; ddp_optim_init instead of optim_init;
 * per optimizer step, ddp_sync(d, 1) before the backward pass of the last
 * micro-batch (only it communicates), ddp_finish after it, ddp_step for
 * the clipped AdamW step.  Gradients of the mean over the global batch
 * need the loss scale 1 / (tokens of all ranks' micro-batches).
 *
 * The shard partition is the same for the gradient sums and the
 * optimizer: rank r owns [part[r], part[r + 1]) of the buffer.
 *
 * ZeRO-2 shards the gradients too, with --accum 1: the model is made
 * without its gradient buffer (model_init_ex with ddp_model_flags), each
 * range of layers that a bucket's sum covers is written by the backward
 * pass into a range buffer of its own, summed over the ranks as soon as
 * it is done, and its owned part kept in the rank's gradient shard, so a
 * rank holds about 1/N of the gradients plus the ranges in flight.  With
 * --accum > 1 the micro-batches before the last accumulate locally, in
 * the whole buffer, and ZeRO-2 works as ZeRO-1 (the sums in the same
 * order as ZeRO-0 either way, so the results are ZeRO-0's bit for bit on
 * the CPU). */
#ifndef LMPIPE_DDP_H
#define LMPIPE_DDP_H

#include "dist/comm.h"
#include "model/ckpt.h"
#include "model/model.h"
#include "model/optimizer.h"

typedef struct ddp_config {
	int zero;              /* 0, 1 or 2 */
	double bucket_mb;      /* the size of a gradient bucket; 0: DDP_BUCKET_MB */
	int accum;             /* micro-batches per optimizer step (0: 1) */
} ddp_config;

/* The model_init_ex flags the model of ddp_init must be made with:
 * MODEL_NO_GRADS when the gradients are sharded (ZeRO-2, --accum 1). */
int ddp_model_flags(const ddp_config *cfg);

#define DDP_BUCKET_MB 25.0

typedef struct ddp ddp;

/* Install the hook on m (not owned, nor is c); m made with the flags of
 * ddp_model_flags(cfg). */
int ddp_init(ddp **d, lm_comm *c, model *m, const ddp_config *cfg, lm_err *e);
void ddp_free(ddp *d);

/* This rank's shard of the flat buffer, and the bytes per rank that the
 * model, the gradients, the optimizer state and the communication
 * scratch take (for the line printed at start). */
void ddp_shard(const ddp *d, size_t *lo, size_t *hi);
typedef struct ddp_memory {
	double params, grads, optim, scratch;   /* bytes */
	int grads_sharded;                      /* 1: grads is the shard and the range buffers */
} ddp_memory;
void ddp_memory_use(const ddp *d, ddp_memory *mem);

/* The optimizer: whole (ZeRO 0) or this rank's shard (AdamW only). */
int ddp_optim_init(ddp *d, optim *o, const optim_config *c, lm_err *e);

/* Whether the next backward pass communicates. */
void ddp_sync(ddp *d, int on);
/* After that backward pass: wait for the bucket sums (and, ZeRO 0, the
 * gather of the summed gradients). */
int ddp_finish(ddp *d, lm_err *e);
/* Clipping by the global norm and the optimizer step with every group at
 * its peak lr times factor (optim_schedule), then (ZeRO 1, 2: AdamW only)
 * the gather of the weights.  m->sc->sumsq holds the global sum of
 * squares afterwards. */
int ddp_step(ddp *d, optim *o, double factor, lm_err *e);
/* ddp_step after optim_stage_scheduled: the step at the staged values.
 * At a world of one everything from ddp_sync to here is device work
 * alone (no collective, no wait for the device), which a recording of the
 * step (model/train_graph.h) may hold. */
int ddp_step_staged(ddp *d, optim *o, lm_err *e);

/* Before the host waits for the device (model_read_scalars): the queued
 * collectives done within the timeout, so that a dead rank fails the run
 * instead of hanging it. */
int ddp_settle(ddp *d, const char *what, lm_err *e);

/* Checkpoints: every rank calls them.  Save gathers the optimizer state
 * on rank 0, which alone writes path; the result is every rank's.  Load
 * reads path on every rank (a shared filesystem) and keeps this rank's
 * shard of the state. */
int ddp_save(ddp *d, const char *path, const optim *o, const train_state *st, lm_err *e);
int ddp_load(ddp *d, const char *path, optim *o, train_state *st, lm_err *e);

/* A rank-0-only result made every rank's: 0 when every rank's rc is 0,
 * else -1 (with, on the other ranks, a message saying rank 0 failed at
 * what). */
int ddp_agree(ddp *d, int rc, const char *what, lm_err *e);

#endif
