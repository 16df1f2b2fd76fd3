/* model.c: forward and backward passes of the decoder (see model.h), and
 * the memory they use.  Every computation goes through the backend's op
 * table; this file only sequences the ops and owns the buffers.
 *
 * Kept from the forward pass for the backward pass, per layer: the
 * residual stream entering each half-block, the normalised inputs and
 * their rstd, q/k (after RoPE) and v, the attention output and its lse,
 * and the gate/up projections.  Cheap values (the merged heads and the
 * SwiGLU output) are recomputed in the backward pass instead of stored. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"

struct model_acts {
	float **res, **res_mid, **ln1, **ln2, **rstd1, **rstd2;
	float **q, **k, **v, **o, **lse, **h;
	float *lnf, *rstdf, *logits, *losses, *lse_v, *dloss;
	/* scratch, shared by all layers */
	float *qkv, *y, *sw, *dsw, *dres, *dln, *dq, *dk, *dv, *dO, *dh;
	int32_t *ids, *targets;              /* device copies */
	void *attn_ws;                       /* attention workspace */
	size_t attn_ws_bytes;
	int32_t *host_targets;
	float *host_losses;
	long long count;
	void **owned;                        /* every allocation, for model_free */
	int n_owned, cap_owned;
};

static float *grab(model *m, size_t nfloat, int *fail)
{
	struct model_acts *a = m->a;
	if (*fail)
		return NULL;
	if (a->n_owned == a->cap_owned) {
		int cap = a->cap_owned ? 2 * a->cap_owned : 64;
		void **o = realloc(a->owned, cap * sizeof *o);
		if (!o) {
			*fail = 1;
			return NULL;
		}
		a->owned = o;
		a->cap_owned = cap;
	}
	float *p = m->be->alloc(nfloat * sizeof(float));
	if (!p) {
		*fail = 1;
		return NULL;
	}
	a->owned[a->n_owned++] = p;
	return p;
}

static float **grab_layers(model *m, int L, size_t nfloat, int *fail)
{
	float **v = calloc(L + 1, sizeof *v);
	if (!v) {
		*fail = 1;
		return NULL;
	}
	for (int l = 0; l <= L; l++)
		v[l] = grab(m, nfloat, fail);
	return v;
}

static void point_params(model *m, float *base, layer_ptrs *lp, float **wte, float **lnf,
			 float **head)
{
	const model_config *c = &m->cfg;
	size_t C = c->d_model, F = c->d_ff;
	float *p = base;
	*wte = p;
	p += (size_t)c->vocab * C;
	for (int l = 0; l < c->n_layers; l++) {
		lp[l].ln1 = p; p += C;
		lp[l].wqkv = p; p += 3 * C * C;
		lp[l].wo = p; p += C * C;
		lp[l].ln2 = p; p += C;
		lp[l].wgu = p; p += 2 * F * C;
		lp[l].wdown = p; p += C * F;
	}
	*lnf = p;
	p += C;
	*head = c->tie_embeddings ? *wte : p;
}

int model_init(model *m, const model_config *c, const lm_backend *be, int maxB, int maxT,
	       lm_err *e)
{
	memset(m, 0, sizeof *m);
	if (model_config_check(c, e))
		return -1;
	if (maxB < 1 || maxT < 1 || maxT > c->ctx)
		return lm_usage_err(e, "batch %d x context %d does not fit the model (context %d)",
				    maxB, maxT, c->ctx);
	m->cfg = *c;
	m->be = be;
	m->maxB = maxB;
	m->maxT = maxT;
	m->n_params = model_n_params(c);
	m->a = calloc(1, sizeof *m->a);
	m->lp = calloc(c->n_layers, sizeof *m->lp);
	m->lg = calloc(c->n_layers, sizeof *m->lg);
	if (!m->a || !m->lp || !m->lg) {
		model_free(m);
		return lm_seterr(e, "out of memory");
	}
	struct model_acts *a = m->a;
	int fail = 0, L = c->n_layers;
	size_t N = (size_t)maxB * maxT, C = c->d_model, F = c->d_ff, V = c->vocab;
	size_t BHT = (size_t)maxB * c->n_heads * maxT;
	m->params = grab(m, m->n_params, &fail);
	m->grads = grab(m, m->n_params, &fail);
	m->rope_cs = grab(m, (size_t)c->ctx * (C / c->n_heads), &fail);
	a->res = grab_layers(m, L, N * C, &fail);
	a->res_mid = grab_layers(m, L - 1, N * C, &fail);
	a->ln1 = grab_layers(m, L - 1, N * C, &fail);
	a->ln2 = grab_layers(m, L - 1, N * C, &fail);
	a->rstd1 = grab_layers(m, L - 1, N, &fail);
	a->rstd2 = grab_layers(m, L - 1, N, &fail);
	a->q = grab_layers(m, L - 1, N * C, &fail);
	a->k = grab_layers(m, L - 1, N * C, &fail);
	a->v = grab_layers(m, L - 1, N * C, &fail);
	a->o = grab_layers(m, L - 1, N * C, &fail);
	a->lse = grab_layers(m, L - 1, BHT, &fail);
	a->h = grab_layers(m, L - 1, N * 2 * F, &fail);
	a->lnf = grab(m, N * C, &fail);
	a->rstdf = grab(m, N, &fail);
	a->logits = grab(m, N * V, &fail);
	a->losses = grab(m, N, &fail);
	a->lse_v = grab(m, N, &fail);
	a->dloss = grab(m, N, &fail);
	a->qkv = grab(m, N * 3 * C, &fail);
	a->y = grab(m, N * C, &fail);
	a->sw = grab(m, N * F, &fail);
	a->dsw = grab(m, N * F, &fail);
	a->dres = grab(m, N * C, &fail);
	a->dln = grab(m, N * C, &fail);
	a->dq = grab(m, N * C, &fail);
	a->dk = grab(m, N * C, &fail);
	a->dv = grab(m, N * C, &fail);
	a->dO = grab(m, N * C, &fail);
	a->dh = grab(m, N * 2 * F, &fail);
	a->attn_ws_bytes = be->attn_workspace(maxB, c->n_heads, maxT, C / c->n_heads);
	a->attn_ws = grab(m, (a->attn_ws_bytes + sizeof(float) - 1) / sizeof(float), &fail);
	a->ids = (int32_t *)grab(m, N, &fail);
	a->targets = (int32_t *)grab(m, N, &fail);
	a->host_targets = malloc(N * sizeof *a->host_targets);
	a->host_losses = malloc(N * sizeof *a->host_losses);
	if (fail || !a->host_targets || !a->host_losses) {
		model_free(m);
		return lm_seterr(e, "out of memory for a model of %zu parameters at batch %d x %d",
				 model_n_params(c), maxB, maxT);
	}
	model_zero_grad(m);
	point_params(m, m->params, m->lp, &m->wte, &m->lnf, &m->head);
	point_params(m, m->grads, m->lg, &m->dwte, &m->dlnf, &m->dhead);
	int D = C / c->n_heads;
	float *cs = malloc((size_t)c->ctx * D * sizeof *cs);
	if (!cs) {
		model_free(m);
		return lm_seterr(e, "out of memory");
	}
	rope_table(cs, NULL, c->ctx, D, c->rope_theta);
	be->upload(m->rope_cs, cs, (size_t)c->ctx * D * sizeof *cs);
	free(cs);
	return 0;
}

void model_free(model *m)
{
	struct model_acts *a = m->a;
	if (a) {
		for (int i = 0; i < a->n_owned; i++)
			m->be->release(a->owned[i]);
		free(a->owned);
		float **lists[] = { a->res, a->res_mid, a->ln1, a->ln2, a->rstd1, a->rstd2,
				    a->q, a->k, a->v, a->o, a->lse, a->h };
		for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
			free(lists[i]);
		free(a->host_targets);
		free(a->host_losses);
		free(a);
	}
	free(m->lp);
	free(m->lg);
	memset(m, 0, sizeof *m);
}

static double trunc_normal(lm_rng *r, double std)
{
	enum { TRUNC_SIGMAS = 3 };
	double x;
	do
		x = rng_normal(r);
	while (fabs(x) > TRUNC_SIGMAS);
	return x * std;
}

int model_init_weights(model *m, lm_rng *r, lm_err *e)
{
	model_tensor *t = NULL;
	int n = model_tensors(&m->cfg, &t);
	float *host = malloc(m->n_params * sizeof *host);
	if (n < 0 || !host) {
		free(t);
		free(host);
		return lm_seterr(e, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		float *p = host + t[i].offset;
		int embed = !strcmp(t[i].name, "model.embed_tokens.weight");
		double std = !embed ? sqrt(2.0 / (t[i].rows + t[i].cols))
			   : m->cfg.tie_embeddings ? 1.0 / sqrt(m->cfg.d_model) : 1.0;
		for (size_t j = 0; j < t[i].numel; j++)
			p[j] = t[i].cols ? (float)trunc_normal(r, std) : 1.0f;
	}
	m->be->upload(m->params, host, m->n_params * sizeof *host);
	free(host);
	free(t);
	return 0;
}

void model_zero_grad(model *m)
{
	m->be->zero(m->grads, m->n_params * sizeof(float));
}

const float *model_logits(const model *m) { return m->a->logits; }
const float *model_hidden(const model *m) { return m->a->lnf; }
long long model_count(const model *m) { return m->a->count; }

int model_forward(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		  double *loss, lm_err *e)
{
	const lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	if (B < 1 || T < 1 || B > m->maxB || T > m->maxT)
		return lm_seterr(e, "batch %d x %d exceeds the capacity %d x %d", B, T, m->maxB, m->maxT);
	int N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab, H = c->n_heads, D = C / H;
	float scale = 1.0f / sqrtf((float)D);
	for (int i = 0; i < N; i++)
		if (ids[i] < 0 || ids[i] >= V)
			return lm_seterr(e, "token id %d at position %d is outside the vocabulary (%d)",
					 ids[i], i, V);
	m->B = B;
	m->T = T;
	be->upload(a->ids, ids, (size_t)N * sizeof *ids);
	be->embedding_fwd(a->res[0], a->ids, m->wte, N, C);
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		be->rmsnorm_fwd(a->ln1[l], a->rstd1[l], a->res[l], p->ln1, N, C, RMSNORM_EPS);
		be->matmul_fwd(a->qkv, a->ln1[l], p->wqkv, N, C, 3 * C, 0);
		be->qkv_split(a->q[l], a->k[l], a->v[l], a->qkv, B, T, H, D);
		be->rope_fwd(a->q[l], m->rope_cs, B, H, T, D);
		be->rope_fwd(a->k[l], m->rope_cs, B, H, T, D);
		int rc = be->attn_fwd(a->q[l], a->k[l], a->v[l], a->o[l], a->lse[l], B, H, T, D, 1, scale,
				      a->attn_ws, a->attn_ws_bytes);
		if (rc)
			return lm_seterr(e, "attention (layer %d): %s", l, attn_strerror(rc));
		be->heads_merge(a->y, a->o[l], B, T, H, D);
		be->copy(a->res_mid[l], a->res[l], (size_t)N * C * sizeof(float));
		be->matmul_fwd(a->res_mid[l], a->y, p->wo, N, C, C, 1);
		be->rmsnorm_fwd(a->ln2[l], a->rstd2[l], a->res_mid[l], p->ln2, N, C, RMSNORM_EPS);
		be->matmul_fwd(a->h[l], a->ln2[l], p->wgu, N, C, 2 * F, 0);
		be->swiglu_fwd(a->sw, a->h[l], N, F);
		be->copy(a->res[l + 1], a->res_mid[l], (size_t)N * C * sizeof(float));
		be->matmul_fwd(a->res[l + 1], a->sw, p->wdown, N, F, C, 1);
	}
	be->rmsnorm_fwd(a->lnf, a->rstdf, a->res[c->n_layers], m->lnf, N, C, RMSNORM_EPS);
	be->matmul_fwd(a->logits, a->lnf, m->head, N, C, V, 0);
	a->count = 0;
	if (!targets)
		return 0;
	for (int i = 0; i < N; i++) {
		if (targets[i] >= V)
			return lm_seterr(e, "target id %d at position %d is outside the vocabulary (%d)",
					 targets[i], i, V);
		a->count += targets[i] >= 0;
		a->host_targets[i] = targets[i];
	}
	be->upload(a->targets, targets, (size_t)N * sizeof *targets);
	be->xent_fwd(a->losses, a->lse_v, a->logits, a->targets, N, V);
	be->download(a->host_losses, a->losses, (size_t)N * sizeof(float));
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += a->host_losses[i];
	*loss = a->count ? sum / a->count : 0.0;
	return 0;
}

int model_backward(model *m, float loss_scale, lm_err *e)
{
	const lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T;
	int N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab, H = c->n_heads, D = C / H;
	float scale = 1.0f / sqrtf((float)D);
	for (int i = 0; i < N; i++)
		a->host_losses[i] = loss_scale;
	be->upload(a->dloss, a->host_losses, (size_t)N * sizeof(float));
	be->xent_bwd(a->logits, a->logits, a->lse_v, a->targets, a->dloss, N, V);
	be->matmul_bwd(a->dln, m->dhead, a->logits, a->lnf, m->head, N, C, V, 0);
	be->zero(a->dres, (size_t)N * C * sizeof(float));
	be->rmsnorm_bwd(a->dres, m->dlnf, a->dln, a->res[c->n_layers], m->lnf, a->rstdf, N, C);
	for (int l = c->n_layers - 1; l >= 0; l--) {
		const layer_ptrs *p = &m->lp[l], *g = &m->lg[l];
		be->swiglu_fwd(a->sw, a->h[l], N, F);
		be->matmul_bwd(a->dsw, g->wdown, a->dres, a->sw, p->wdown, N, F, C, 0);
		be->swiglu_bwd(a->dh, a->dsw, a->h[l], N, F);
		be->matmul_bwd(a->dln, g->wgu, a->dh, a->ln2[l], p->wgu, N, C, 2 * F, 0);
		be->rmsnorm_bwd(a->dres, g->ln2, a->dln, a->res_mid[l], p->ln2, a->rstd2[l], N, C);
		be->heads_merge(a->y, a->o[l], B, T, H, D);
		be->matmul_bwd(a->dln, g->wo, a->dres, a->y, p->wo, N, C, C, 0);
		be->heads_split(a->dO, a->dln, B, T, H, D);
		int rc = be->attn_bwd(a->q[l], a->k[l], a->v[l], a->o[l], a->dO, a->lse[l],
				      a->dq, a->dk, a->dv, B, H, T, D, 1, scale, a->attn_ws,
				      a->attn_ws_bytes);
		if (rc)
			return lm_seterr(e, "attention backward (layer %d): %s", l, attn_strerror(rc));
		be->rope_bwd(a->dq, m->rope_cs, B, H, T, D);
		be->rope_bwd(a->dk, m->rope_cs, B, H, T, D);
		be->qkv_merge(a->qkv, a->dq, a->dk, a->dv, B, T, H, D);
		be->matmul_bwd(a->dln, g->wqkv, a->qkv, a->ln1[l], p->wqkv, N, C, 3 * C, 0);
		be->rmsnorm_bwd(a->dres, g->ln1, a->dln, a->res[l], p->ln1, a->rstd1[l], N, C);
	}
	be->embedding_bwd(m->dwte, a->ids, a->dres, N, C);
	return 0;
}
