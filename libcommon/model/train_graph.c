/* train_graph.c: training micro-batches recorded once and replayed (see
 * train_graph.h). */
#include "model/train_graph.h"

#include <stdlib.h>
#include <string.h>

int train_graph_usable(const lm_backend *be)
{
	const char *env = getenv("LMPIPE_CUDA_GRAPH");
	return be->graph_begin && !(env && !strcmp(env, "0"));
}

/* The micro-batch's work, as an unrecorded step queues it. */
static int queue(model *m, optim *o, float scale, int first, int last, lm_err *e)
{
	if (first) {
		model_zero_grad(m);
		model_loss_reset(m);
	}
	if (model_forward_loss_staged(m, scale, 1, e) || model_backward(m, scale, e))
		return -1;
	if (last) {
		optim_clip(o, m);
		optim_step_staged(o, m);
	}
	return 0;
}

int train_graph_micro(train_graph *tg, model *m, optim *o, float scale, int first, int last,
		      int record, lm_err *e)
{
	lm_backend *be = m->be;
	int kind = (first ? 1 : 0) | (last ? 2 : 0);
	if (!tg->g[kind] && record) {
		be->graph_begin(be);
		int rc = queue(m, o, scale, first, last, e);
		void *g = be->graph_end(be);
		if (rc || !g) {
			if (!rc)
				be->sync(be, e);
			return lm_err_prefix(e, "recording the training step as a CUDA graph "
					     "(LMPIPE_CUDA_GRAPH=0 trains without)");
		}
		tg->g[kind] = g;
	}
	if (!tg->g[kind])
		return queue(m, o, scale, first, last, e);
	be->graph_run(be, tg->g[kind]);
	return 0;
}

void train_graph_free(train_graph *tg, lm_backend *be)
{
	for (int k = 0; k < 4; k++)
		if (tg->g[k])
			be->graph_free(be, tg->g[k]);
	memset(tg, 0, sizeof *tg);
}
