/* train_graph.c: training work recorded once and replayed (see
 * train_graph.h). */
#include "model/train_graph.h"

#include <stdlib.h>
#include <string.h>

int train_graph_usable(const lm_backend *be)
{
	const char *env = getenv("LMPIPE_CUDA_GRAPH");
	return be->graph_begin && !(env && !strcmp(env, "0"));
}

int train_graph_run(train_graph *tg, lm_backend *be, int kind, int record,
		    int (*work)(void *arg, lm_err *e), void *arg, lm_err *e)
{
	if (kind < 0 || kind >= TRAIN_GRAPH_KINDS)
		return lm_seterr(e, "train_graph_run: kind %d", kind);
	if (!tg->g[kind] && record) {
		be->graph_begin(be);
		int rc = work(arg, e);
		void *g = be->graph_end(be);
		if (rc || !g) {
			if (!rc)
				be->sync(be, e);
			if (g)
				be->graph_free(be, g);
			return lm_err_prefix(e, "recording the training step as a CUDA graph "
					     "(LMPIPE_CUDA_GRAPH=0 trains without)");
		}
		tg->g[kind] = g;
	}
	if (!tg->g[kind])
		return work(arg, e);
	be->graph_run(be, tg->g[kind]);
	return 0;
}

void train_graph_free(train_graph *tg, lm_backend *be)
{
	for (int k = 0; k < TRAIN_GRAPH_KINDS; k++)
		if (tg->g[k])
			be->graph_free(be, tg->g[k]);
	memset(tg, 0, sizeof *tg);
}
