/* rl_backward.c: per-token weighted backward by interposing the
 * cross-entropy and matmul backward ops of the op table (see
 * rl_backward.h). */
#include "rl/rl_backward.h"

#include <stdlib.h>

#include "model/backend.h"

/* The state of the one backward pass in flight. */
static struct {
	const lm_backend *base;     /* the model's own op table */
	const float *token_weights; /* device memory, one per token */
	const float *dlogits;       /* host, or NULL */
	const float *dhidden;       /* host, or NULL */
	const float *hidden;        /* device: model_hidden, to recognise the LM head's backward */
	float *host;                /* scratch for the additions */
} cur;

/* dst (device, n floats) += add (host), through the host scratch. */
static void add_host(float *dst, const float *add, size_t n)
{
	cur.base->download(cur.host, dst, n * sizeof *cur.host);
	for (size_t i = 0; i < n; i++)
		cur.host[i] += add[i];
	cur.base->upload(dst, cur.host, n * sizeof *cur.host);
}

/* The model passes a uniform dloss; use the per-token weights instead. */
static void xent_bwd_weighted(float *dlogits, const float *logits, const float *lse,
			      const int32_t *targets, const float *dloss, int N, int V)
{
	(void)dloss;
	cur.base->xent_bwd(dlogits, logits, lse, targets, cur.token_weights, N, V);
	if (cur.dlogits)
		add_host(dlogits, cur.dlogits, (size_t)N * V);
}

/* The LM head's backward is the one whose input is the final hidden state:
 * its input gradient gets the value head's share. */
static void matmul_bwd_hidden(float *dinp, float *dw, const float *dout, const float *inp,
			      const float *w, int N, int IN, int OUT, int accumulate)
{
	cur.base->matmul_bwd(dinp, dw, dout, inp, w, N, IN, OUT, accumulate);
	if (cur.dhidden && inp == cur.hidden)
		add_host(dinp, cur.dhidden, (size_t)N * IN);
}

int rl_backward_extra(model *m, const float *weights, const float *dlogits,
		      const float *dhidden, lm_err *e)
{
	const lm_backend *own = m->be;
	size_t n = (size_t)m->B * (size_t)m->T;
	int width = m->cfg.vocab > m->cfg.d_model ? m->cfg.vocab : m->cfg.d_model;
	size_t scratch = dlogits || dhidden ? n * (size_t)width : 0;
	float *w = own->alloc(n * sizeof *w);
	float *host = scratch ? malloc(scratch * sizeof *host) : NULL;
	if (!w || (scratch && !host)) {
		if (w)
			own->release(w);
		free(host);
		return lm_seterr(e, "out of memory (%zu token weights)", n);
	}
	own->upload(w, weights, n * sizeof *w);
	lm_backend interposed = *own;
	interposed.xent_bwd = xent_bwd_weighted;
	interposed.matmul_bwd = matmul_bwd_hidden;
	cur.base = own;
	cur.token_weights = w;
	cur.dlogits = dlogits;
	cur.dhidden = dhidden;
	cur.hidden = model_hidden(m);
	cur.host = host;
	m->be = &interposed;
	int rc = model_backward(m, 1.0f, e);
	m->be = own;
	cur.base = NULL;
	cur.token_weights = cur.dlogits = cur.dhidden = cur.hidden = NULL;
	cur.host = NULL;
	own->release(w);
	free(host);
	return rc;
}

int rl_backward_tokens(model *m, const float *weights, lm_err *e)
{
	return rl_backward_extra(m, weights, NULL, NULL, e);
}
