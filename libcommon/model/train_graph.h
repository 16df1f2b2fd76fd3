/* train_graph.h: the work of a training micro-batch (and, after the last
 * one of a step, the optimizer's) recorded as a graph of the backend's
 * work (a CUDA graph) the first time it is asked for and replayed after,
 * so that a step is a few launches instead of hundreds.
 *
 * The work is the caller's function, queueing device work alone: nothing
 * in it may allocate, upload, download or wait for the device.  What
 * changes from step to step reaches the replay through memory: the caller
 * stages the batch (model_stage) and the optimizer's values (optim_stage_*)
 * before it.  The caller also makes sure the work ran unrecorded once
 * before a recording (workspaces grown, cuBLASLt's algorithms chosen), and
 * that its host-side effects are the same every time (pointers chosen,
 * flags set), since a replay does not repeat them.  Recordings are kept by
 * kind (the caller's number, below TRAIN_GRAPH_KINDS: the first, middle and
 * last micro-batch of a step differ).  A replay gives the same bits as
 * the unrecorded work. */
#ifndef LMPIPE_TRAIN_GRAPH_H
#define LMPIPE_TRAIN_GRAPH_H

#include "model/backend.h"

enum { TRAIN_GRAPH_KINDS = 4 };

typedef struct train_graph {
	void *g[TRAIN_GRAPH_KINDS];
} train_graph;

/* The backend records work, and LMPIPE_CUDA_GRAPH is not "0". */
int train_graph_usable(const lm_backend *be);

/* Replay the recording of kind if there is one; else, with record set,
 * record work(arg) and replay it; else run work(arg) unrecorded.  0, or
 * -1 with the reason (work's, or the recording's). */
int train_graph_run(train_graph *tg, lm_backend *be, int kind, int record,
		    int (*work)(void *arg, lm_err *e), void *arg, lm_err *e);

void train_graph_free(train_graph *tg, lm_backend *be);

#endif
