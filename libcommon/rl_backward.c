/* rl_backward.c: per-token weighted backward by interposing the
 * cross-entropy backward of the op table (see rl_backward.h). */
#include "rl_backward.h"

#include "backend.h"

static const lm_backend *base;     /* the model's own op table */
static const float *token_weights; /* device memory, one per token */

/* The model passes a uniform dloss; use the per-token weights instead. */
static void xent_bwd_weighted(float *dlogits, const float *logits, const float *lse,
			      const int32_t *targets, const float *dloss, int N, int V)
{
	(void)dloss;
	base->xent_bwd(dlogits, logits, lse, targets, token_weights, N, V);
}

int rl_backward_tokens(model *m, const float *weights, lm_err *e)
{
	const lm_backend *own = m->be;
	size_t n = (size_t)m->B * (size_t)m->T;
	float *w = own->alloc(n * sizeof *w);
	if (!w)
		return lm_seterr(e, "out of memory (%zu token weights)", n);
	own->upload(w, weights, n * sizeof *w);
	lm_backend weighted = *own;
	weighted.xent_bwd = xent_bwd_weighted;
	base = own;
	token_weights = w;
	m->be = &weighted;
	int rc = model_backward(m, 1.0f, e);
	m->be = own;
	base = NULL;
	token_weights = NULL;
	own->release(w);
	return rc;
}
