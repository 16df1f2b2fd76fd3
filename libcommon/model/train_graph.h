/* train_graph.h: one training micro-batch, and after the last one the
 * clipping and the optimizer step, recorded as a graph of the backend's
 * work (a CUDA graph) the first time it is asked for and replayed after,
 * so that a step is a handful of launches instead of hundreds.
 *
 * What changes from step to step reaches the recorded work through
 * memory: the caller stages the batch (model_stage) and, before the last
 * micro-batch, the optimizer's values (optim_stage_*) first.  A graph is
 * recorded only when the caller says the sequence has run unrecorded
 * before (workspaces grown, cuBLASLt's algorithms chosen), and only for a
 * run that makes no collectives (one rank, no ZeRO) and no profile: the
 * caller decides, train_graph_usable() says whether the backend can.
 * Replayed steps give the same bits as unrecorded ones. */
#ifndef LMPIPE_TRAIN_GRAPH_H
#define LMPIPE_TRAIN_GRAPH_H

#include "model/optimizer.h"

typedef struct train_graph {
	/* by kind: bit 0 the first micro-batch of a step (it zeroes the
	 * gradients and the loss), bit 1 the last (the optimizer step) */
	void *g[4];
} train_graph;

/* The backend records work, and LMPIPE_CUDA_GRAPH is not "0". */
int train_graph_usable(const lm_backend *be);

/* Queue the staged micro-batch: with first, the gradients and the loss
 * sum zeroed; the forward pass with the loss and the backward pass at
 * scale; with last, optim_clip and optim_step_staged.  Replays the
 * recording of this kind if there is one, else records it when record
 * is set (then replays it), else queues the work unrecorded.  0, or -1
 * with the reason. */
int train_graph_micro(train_graph *tg, model *m, optim *o, float scale, int first, int last,
		      int record, lm_err *e);

void train_graph_free(train_graph *tg, lm_backend *be);

#endif
