/* model.c: forward and backward passes of the decoder (see model.h), and
 * the memory they use.  Every computation goes through the backend's op
 * table; this file only sequences the ops and owns the buffers.
 *
 * Kept from the forward pass for the backward pass, per layer: the
 * residual stream entering each half-block, the normalised inputs and
 * their rstd, q/k (after RoPE) and v, the attention output (as attention
 * wrote it and with the heads merged, the output projection's input) and
 * its lse, the gate/up projections and the SwiGLU output.  Storing the
 * last two of these instead of recomputing them costs N x (C + F) values
 * a layer and saves two kernels a layer in the backward pass.
 *
 * The variants (model.h) change a few steps, each in one helper below:
 * GQA splits q/k/v with the key/value heads expanded to H (gqa.h), so that
 * RoPE, QK-norm and attention run on H heads as they are, and sums their
 * gradients back over each group; QK-norm keeps q and k before the norm
 * and the norm's rstd; ReLU^2 has one projection where SwiGLU has two;
 * soft-capping and the z-loss are the head's (logit_bwd, head_xent_ex). */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/profile.h"

struct model_acts {
	void **res, **res_mid;               /* the residual stream (lm_res_size) */
	float **rstd1, **rstd2, **lse;       /* fp32 */
	void **ln1, **ln2, **q, **k, **v, **o, **y, **h, **sw; /* act */
	void **qpre, **kpre;                 /* QK-norm: q, k before the norm (act) */
	float **qrstd, **krstd;              /* and its rstd */
	void *lnf, *logits;
	float *rstdf, *losses, *lse_v;
	/* scratch, shared by all layers (act unless noted) */
	void *qkv, *dsw, *dln, *dq, *dk, *dv, *dO, *dh;
	void *dres;                          /* fp32, or bf16 (lm_res_grad_size) */
	void *dres_act;                      /* dres in act, when act is not its type */
	int dres_act_fresh;                  /* dres_act holds dres (rmsnorm_bwd_act wrote both) */
	int attn_bthd;                       /* attention reads and writes y: no o, no dO */
	int attn_qkv;                        /* and reads qkvl: no q, k, v, qkv, dq, dk, dv */
	void **qkvl;                         /* attn_qkv: each layer's q/k/v projection (act) */
	int qkv_rope;                        /* attn_qkv with q and k turned by the product */
	float *tok_w;                        /* per-token loss weights (fp32) */
	float *extra;                        /* fp32 [N, max(V, C)]: extra gradients */
	float *tok_ent;                      /* fp32 [N]: per-token entropies or their gradients */
	int32_t *ids, *targets;              /* device copies */
	void *attn_ws;                       /* attention workspace */
	size_t attn_ws_bytes;
	long long count;
	int head_done;                       /* model_forward_loss did the head's backward */
	void **owned;                        /* every allocation, for model_free */
	int n_owned, cap_owned;
};

static void *grab(model *m, size_t bytes, int *fail)
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
	void *p = m->be->alloc(m->be, bytes);
	if (!p) {
		*fail = 1;
		return NULL;
	}
	a->owned[a->n_owned++] = p;
	return p;
}

/* An allocation after model_init, owned like the others (the logits, which
 * only the unfused forward pass needs; the scratch for extra gradients and
 * reads), with the out-of-memory message naming what. */
static void *grab_late(model *m, size_t bytes, const char *what, lm_err *e)
{
	int fail = 0;
	void *p = grab(m, bytes, &fail);
	if (!p) {
		m->be->sync(m->be, e);
		lm_err_prefix(e, "%s of batch %d x %d", what, m->maxB, m->maxT);
	}
	return p;
}

/* The fp32 scratch of N x max(V, C) values, made at its first use.  It is
 * the model's own working memory, so a read through a const model may make
 * it. */
static float *extra(const model *m, lm_err *e)
{
	struct model_acts *a = m->a;
	size_t width = (size_t)(m->cfg.vocab > m->cfg.d_model ? m->cfg.vocab : m->cfg.d_model);
	if (!a->extra)
		a->extra = grab_late((model *)m, (size_t)m->maxB * m->maxT * width * sizeof(float),
				     "the fp32 scratch", e);
	return a->extra;
}

static void **grab_layers(model *m, int L, size_t bytes, int *fail)
{
	void **v = calloc(L + 1, sizeof *v);
	if (!v) {
		*fail = 1;
		return NULL;
	}
	for (int l = 0; l <= L; l++)
		v[l] = grab(m, bytes, fail);
	return v;
}

/* Point the per-layer tensors into a buffer of the parameter layout whose
 * elements are esize bytes. */
static void point_params(model *m, char *base, size_t esize, layer_ptrs *lp, layer_cptrs *lc,
			 float **wte, float **lnf, void **head)
{
	const model_config *c = &m->cfg;
	size_t C = c->d_model, F = c->d_ff, D = C / c->n_heads;
	char *p = base, *wte0 = p;
	p += (size_t)c->vocab * C * esize;
	for (int l = 0; l < c->n_layers; l++) {
		layer_ptrs t = { 0 };
		t.ln1 = (float *)p; p += C * esize;
		t.wqkv = (float *)p; p += (size_t)model_qkv_rows(c) * C * esize;
		if (c->qk_norm) {
			t.q_norm = (float *)p; p += D * esize;
			t.k_norm = (float *)p; p += D * esize;
		}
		t.wo = (float *)p; p += C * C * esize;
		t.ln2 = (float *)p; p += C * esize;
		t.wgu = (float *)p; p += (size_t)model_gu_rows(c) * C * esize;
		t.wdown = (float *)p; p += C * F * esize;
		if (lp)
			lp[l] = t;
		if (lc)
			lc[l] = (layer_cptrs){ t.wqkv, t.wo, t.wgu, t.wdown };
	}
	if (wte)
		*wte = (float *)wte0;
	if (lnf)
		*lnf = (float *)p;
	p += C * esize;
	*head = c->tie_embeddings ? wte0 : p;
}

int model_init(model *m, const model_config *c, lm_backend *be, int maxB, int maxT,
	       lm_err *e)
{
	return model_init_ex(m, c, be, maxB, maxT, 0, e);
}

int model_init_ex(model *m, const model_config *c, lm_backend *be, int maxB, int maxT,
		  int flags, lm_err *e)
{
	memset(m, 0, sizeof *m);
	if (model_config_check(c, e))
		return -1;
	if (maxB < 1 || maxT < 1 || maxT > c->ctx)
		return lm_usage_err(e, "batch %d x context %d does not fit the model (context %d)",
				    maxB, maxT, c->ctx);
	if (!be->supports(be, LM_OP_ATTENTION, c->d_model / c->n_heads, maxT))
		return lm_usage_err(e, "device '%s' has no attention for head dimension %d (d_model %d / "
				    "%d heads)", be->name, c->d_model / c->n_heads, c->d_model, c->n_heads);
	m->cfg = *c;
	model_config_resolve(&m->cfg);
	c = &m->cfg;
	m->be = be;
	m->maxB = maxB;
	m->maxT = maxT;
	m->n_params = model_n_params(c);
	m->a = calloc(1, sizeof *m->a);
	m->lp = calloc(c->n_layers, sizeof *m->lp);
	m->lg = calloc(c->n_layers, sizeof *m->lg);
	m->lc = calloc(c->n_layers, sizeof *m->lc);
	if (!m->a || !m->lp || !m->lg || !m->lc) {
		model_free(m);
		return lm_seterr(e, "out of memory");
	}
	struct model_acts *a = m->a;
	int fail = 0, L = c->n_layers;
	size_t N = (size_t)maxB * maxT, C = c->d_model, F = c->d_ff;
	size_t QKV = model_qkv_rows(c), GU = model_gu_rows(c);
	size_t BHT = (size_t)maxB * c->n_heads * maxT, f4 = sizeof(float);
	size_t act = lm_dtype_size(be->act), NC = N * C * act;
	m->params = grab(m, m->n_params * f4, &fail);
	m->grads = flags & MODEL_NO_GRADS ? NULL : grab(m, m->n_params * f4, &fail);
	m->wact = be->act == LM_F32 ? m->params : grab(m, m->n_params * act, &fail);
	m->sc = grab(m, sizeof *m->sc, &fail);
	m->rope_cs = grab(m, (size_t)c->ctx * (C / c->n_heads) * f4, &fail);
	a->res = grab_layers(m, L, N * C * lm_res_size(be), &fail);
	a->res_mid = grab_layers(m, L - 1, N * C * lm_res_size(be), &fail);
	a->rstd1 = (float **)grab_layers(m, L - 1, N * f4, &fail);
	a->rstd2 = (float **)grab_layers(m, L - 1, N * f4, &fail);
	a->lse = (float **)grab_layers(m, L - 1, BHT * f4, &fail);
	a->ln1 = grab_layers(m, L - 1, NC, &fail);
	a->ln2 = grab_layers(m, L - 1, NC, &fail);
	/* the fused attention ops where the backend has them for this shape:
	 * fewer layout changes and fewer saved tensors */
	int Dh = (int)C / c->n_heads;
	const char *aq = getenv("LMPIPE_ATTN_QKV"); /* "0": the unfused path, to compare */
	a->attn_qkv = !(aq && !strcmp(aq, "0")) && be->attn_qkv_fwd && be->attn_qkv_bwd && !c->qk_norm &&
		      c->n_kv_heads == c->n_heads && be->supports(be, LM_OP_ATTENTION_QKV, Dh, maxT);
	/* RoPE in the q/k/v product's epilogue where the backend has it for this
	 * shape (LMPIPE_GEMM_ROPE=0: the attention turns q and k, to compare) */
	const char *gr = getenv("LMPIPE_GEMM_ROPE");
	a->qkv_rope = a->attn_qkv && !(gr && !strcmp(gr, "0")) && be->matmul_qkv_rope_fwd &&
		      be->supports(be, LM_OP_QKV_ROPE, Dh, maxT);
	a->attn_bthd = !a->attn_qkv && be->attn_fwd_bthd && be->attn_bwd_bthd &&
		       be->supports(be, LM_OP_ATTENTION_BTHD, Dh, maxT);
	if (a->attn_qkv) {
		a->qkvl = grab_layers(m, L - 1, N * QKV * act, &fail);
	} else {
		a->q = grab_layers(m, L - 1, NC, &fail);
		a->k = grab_layers(m, L - 1, NC, &fail);
		a->v = grab_layers(m, L - 1, NC, &fail);
	}
	if (!a->attn_bthd && !a->attn_qkv)
		a->o = grab_layers(m, L - 1, NC, &fail);
	a->h = grab_layers(m, L - 1, N * GU * act, &fail);
	if (c->qk_norm) {
		a->qpre = grab_layers(m, L - 1, NC, &fail);
		a->kpre = grab_layers(m, L - 1, NC, &fail);
		a->qrstd = (float **)grab_layers(m, L - 1, BHT * f4, &fail);
		a->krstd = (float **)grab_layers(m, L - 1, BHT * f4, &fail);
	}
	a->lnf = grab(m, NC, &fail);
	a->rstdf = grab(m, N * f4, &fail);
	a->losses = grab(m, N * f4, &fail);
	a->lse_v = grab(m, N * f4, &fail);
	a->tok_w = grab(m, N * f4, &fail);
	if (!a->attn_qkv)
		a->qkv = grab(m, N * QKV * act, &fail);
	a->y = grab_layers(m, L - 1, NC, &fail);
	a->sw = grab_layers(m, L - 1, N * F * act, &fail);
	a->dsw = grab(m, N * F * act, &fail);
	a->dres = grab(m, N * C * lm_res_grad_size(be), &fail);
	a->dres_act = be->act == LM_F32 || lm_res_grad_size(be) == act ? a->dres : grab(m, NC, &fail);
	a->dln = grab(m, NC, &fail);
	if (!a->attn_qkv) {
		a->dq = grab(m, NC, &fail);
		a->dk = grab(m, NC, &fail);
		a->dv = grab(m, NC, &fail);
	}
	if (!a->attn_bthd && !a->attn_qkv)
		a->dO = grab(m, NC, &fail);
	a->dh = grab(m, N * GU * act, &fail);
	a->attn_ws_bytes = be->attn_workspace(be, maxB, c->n_heads, maxT, C / c->n_heads);
	a->attn_ws = grab(m, a->attn_ws_bytes ? a->attn_ws_bytes : 1, &fail);
	a->ids = grab(m, N * sizeof *a->ids, &fail);
	a->targets = grab(m, N * sizeof *a->targets, &fail);
	if (fail) {
		lm_err why;
		be->sync(be, &why);
		size_t n_params = m->n_params; /* c is m's own config, which model_free clears */
		model_free(m);
		return lm_seterr(e, "%s, for a model of %zu parameters at batch %d x %d; a smaller "
				 "batch (with --accum to keep the tokens per step) needs less",
				 why.msg, n_params, maxB, maxT);
	}
	model_zero_grad(m);
	be->zero(be, m->sc, sizeof *m->sc);
	point_params(m, (char *)m->params, f4, m->lp, NULL, &m->wte, &m->lnf, (void **)&m->head);
	if (m->grads)
		model_grads_at(m, 0, m->n_params, m->grads);
	point_params(m, m->wact, act, NULL, m->lc, NULL, NULL, &m->head_c);
	int D = C / c->n_heads;
	float *cs = malloc((size_t)c->ctx * D * sizeof *cs);
	if (!cs) {
		model_free(m);
		return lm_seterr(e, "out of memory");
	}
	rope_table(cs, NULL, c->ctx, D, c->rope_theta);
	be->upload(be, m->rope_cs, cs, (size_t)c->ctx * D * sizeof *cs);
	free(cs);
	return be->sync(be, e);
}

void model_free(model *m)
{
	struct model_acts *a = m->a;
	if (a) {
		for (int i = 0; i < a->n_owned; i++)
			m->be->release(m->be, a->owned[i]);
		free(a->owned);
		void **lists[] = { (void **)a->res, (void **)a->res_mid, (void **)a->rstd1,
				   (void **)a->rstd2, (void **)a->lse, a->ln1, a->ln2, a->q, a->k,
				   a->v, a->o, a->y, a->h, a->sw, a->qpre, a->kpre, a->qkvl,
				   (void **)a->qrstd, (void **)a->krstd };
		for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
			free(lists[i]);
		free(a);
	}
	free(m->lp);
	free(m->lg);
	free(m->lc);
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
	m->be->upload(m->be, m->params, host, m->n_params * sizeof *host);
	free(host);
	free(t);
	model_params_changed(m);
	return m->be->sync(m->be, e);
}

void model_params_changed(model *m)
{
	if (m->wact != m->params)
		m->be->to_act(m->be, m->wact, m->params, m->n_params);
}

void model_zero_grad(model *m)
{
	if (m->grads)
		m->be->zero(m->be, m->grads, m->n_params * sizeof(float));
}

void model_grads_at(model *m, size_t a, size_t b, float *buf)
{
	/* where parameter p's gradient is, if p is in [a, b) */
#define GRAD_AT(p) ((p) ? buf + ((size_t)((p) - m->params) - a) : NULL)
#define IN_RANGE(p) ((size_t)((p) - m->params) >= a && (size_t)((p) - m->params) < b)
	if (IN_RANGE(m->wte))
		m->dwte = GRAD_AT(m->wte);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		if (IN_RANGE(p->ln1))
			m->lg[l] = (layer_ptrs){
				GRAD_AT(p->ln1), GRAD_AT(p->wqkv), GRAD_AT(p->wo), GRAD_AT(p->ln2),
				GRAD_AT(p->wgu), GRAD_AT(p->wdown), GRAD_AT(p->q_norm), GRAD_AT(p->k_norm),
			};
	}
	if (IN_RANGE(m->lnf))
		m->dlnf = GRAD_AT(m->lnf);
	if (m->cfg.tie_embeddings)
		m->dhead = m->dwte;
	else if (IN_RANGE(m->head))
		m->dhead = GRAD_AT(m->head);
#undef GRAD_AT
#undef IN_RANGE
}

void model_loss_reset(model *m)
{
	m->be->zero(m->be, &m->sc->loss_sum, sizeof m->sc->loss_sum);
}

int model_read_scalars(const model *m, lm_scalars *host, lm_err *e)
{
	m->be->download(m->be, host, m->sc, sizeof *host);
	return m->be->sync(m->be, e);
}

void model_queue_scalars(model *m, int slot)
{
	lm_backend *be = m->be;
	if (be->snap)
		be->snap(be, slot, m->sc, sizeof *m->sc);
	else
		be->download(be, &m->snap[slot], m->sc, sizeof *m->sc);
}

int model_take_scalars(model *m, int slot, lm_scalars *host, lm_err *e)
{
	lm_backend *be = m->be;
	if (be->snap)
		return be->snap_read(be, slot, host, sizeof *host, e);
	*host = m->snap[slot];
	return be->sync(be, e);
}

const void *model_logits(const model *m) { return m->a->logits; }
const void *model_hidden(const model *m) { return m->a->lnf; }
long long model_count(const model *m) { return m->a->count; }

/* rows x cols act values at src, as fp32 in host memory, through the
 * extra-gradient scratch (which has room for N x max(V, C)). */
static int read_act(const model *m, float *host, const void *src, size_t rows, size_t cols,
		    lm_err *e)
{
	lm_backend *be = m->be;
	size_t n = rows * cols;
	if (be->act == LM_F32) {
		be->download(be, host, src, n * sizeof *host);
		return be->sync(be, e);
	}
	float *x = extra(m, e);
	if (!x)
		return -1;
	be->from_act(be, x, src, n);
	be->download(be, host, x, n * sizeof *host);
	return be->sync(be, e);
}

int model_read_logits(const model *m, float *host, size_t rows, lm_err *e)
{
	if (!m->a->logits)
		return lm_seterr(e, "no logits: model_forward has not run");
	return read_act(m, host, m->a->logits, rows, (size_t)m->cfg.vocab, e);
}

int model_read_hidden(const model *m, float *host, size_t rows, lm_err *e)
{
	return read_act(m, host, m->a->lnf, rows, (size_t)m->cfg.d_model, e);
}

/* The fp32 [N] per-token buffer of entropies, made at its first use. */
static float *tok_ent(const model *m, lm_err *e)
{
	struct model_acts *a = m->a;
	if (!a->tok_ent)
		a->tok_ent = grab_late((model *)m, (size_t)m->maxB * m->maxT * sizeof(float),
				       "the per-token entropies", e);
	return a->tok_ent;
}

int model_token_logp(const model *m, float *logp, float *ent, lm_err *e)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	size_t N = (size_t)m->B * m->T;
	if (!a->logits)
		return lm_seterr(e, "no logits: model_forward has not run");
	be->download(be, logp, a->losses, N * sizeof *logp);
	if (ent) {
		float *d = tok_ent(m, e);
		if (!d)
			return -1;
		be->entropy_fwd(be, d, a->logits, a->lse_v, (int)N, m->cfg.vocab);
		be->download(be, ent, d, N * sizeof *ent);
	}
	if (be->sync(be, e))
		return -1;
	for (size_t i = 0; i < N; i++)
		logp[i] = logp[i] == 0 ? 0.0f : -logp[i];
	return 0;
}

const float *model_token_ce(const model *m) { return m->a->losses; }

const int32_t *model_token_targets(const model *m) { return m->a->targets; }

const float *model_token_entropy(const model *m, lm_err *e)
{
	struct model_acts *a = m->a;
	if (!a->logits) {
		lm_seterr(e, "no logits: model_forward has not run");
		return NULL;
	}
	float *d = tok_ent(m, e);
	double n = (double)m->B * m->T;
	if (d)
		PROF(m->be, "head.entropy", 4.0 * n * m->cfg.vocab, n * m->cfg.vocab * lm_dtype_size(m->be->act),
		     m->be->entropy_fwd(m->be, d, a->logits, a->lse_v, m->B * m->T, m->cfg.vocab));
	return d;
}

/* The ops as the model calls them: each a span of the profiler (profile.h)
 * named for its place in the model, with the work it does counted. */
static double esz(const model *m) { return (double)lm_dtype_size(m->be->act); }
/* a residual stream element's */
static double rsz(const model *m) { return (double)lm_res_size(m->be); }

static void p_matmul_fwd(model *m, const char *name, void *out, const void *addend,
			 const void *inp, const void *w, int N, int IN, int OUT)
{
	lm_backend *be = m->be;
	double bytes = ((double)N * IN + (double)OUT * IN) * esz(m) +
		       (double)N * OUT * (addend ? 2 * rsz(m) : esz(m));
	PROF(be, name, 2.0 * N * IN * OUT, bytes, be->matmul_fwd(be, out, addend, inp, w, N, IN, OUT));
}

static void p_matmul_bwd(model *m, const char *name, void *dinp, float *dw, const void *dout,
			 const void *inp, const void *w, int N, int IN, int OUT)
{
	lm_backend *be = m->be;
	/* dinp: dout and W read, dinp written; dW: dout and inp read, dW (fp32)
	 * read and written */
	double bytes = (2.0 * N * IN + 2.0 * N * OUT + (double)OUT * IN) * esz(m) + 8.0 * OUT * IN;
	if (!dw) /* the input gradient alone */
		bytes = ((double)N * IN + (double)N * OUT + (double)OUT * IN) * esz(m);
	PROF(be, name, (dw ? 4.0 : 2.0) * N * IN * OUT, bytes,
	     be->matmul_bwd(be, dinp, dw, dout, inp, w, N, IN, OUT));
}

/* The free multiprocessors of the weight-gradient queue's two stretches a
 * layer (backend.h dw_begin): beside gate/up's weight gradient and beside
 * q/k/v's, RMSNorm's backward runs in that many blocks.  From
 * LMPIPE_DW_LANE, "G,Q" or one number for both ("0": off); unset, gate/up's
 * alone beside DW_LANE_BLOCKS blocks from a width of DW_LANE_WIDTH on
 * (gpt2s: 583.2 and 582.5 K tokens/s against 576.9 and 574.8 K without, on
 * an H100, stop 69; q/k/v's, and narrower models such as ts, lost time in
 * stop 68), else off; 0 where the backend has no such queue. */
enum { DW_LANE_BLOCKS = 16, DW_LANE_WIDTH = 768 };

static void dw_lane(const model *m, int *gu, int *qkv)
{
	const char *v = getenv("LMPIPE_DW_LANE");
	*gu = *qkv = 0;
	if (!m->be->dw_begin)
		return;
	if (!v || !*v) {
		if (m->cfg.d_model >= DW_LANE_WIDTH)
			*gu = DW_LANE_BLOCKS;
		return;
	}
	char *end;
	long a = strtol(v, &end, 10), b = a;
	if (*end == ',')
		b = strtol(end + 1, &end, 10);
	if (*end || a < 0 || b < 0 || a > 1024 || b > 1024)
		return;
	*gu = (int)a;
	*qkv = (int)b;
}

/* dW (fp32) += dout^T . inp on the weight-gradient queue, `free`
 * multiprocessors left beside it; the ticket to wait for (backend.h). */
static int p_matmul_dw_side(model *m, const char *name, float *dw, const void *dout,
			    const void *inp, int N, int IN, int OUT, int free)
{
	lm_backend *be = m->be;
	double bytes = ((double)N * IN + (double)N * OUT) * esz(m) + 8.0 * OUT * IN;
	be->dw_begin(be, free);
	PROF(be, name, 2.0 * N * IN * OUT, bytes,
	     be->matmul_bwd(be, NULL, dw, dout, inp, NULL, N, IN, OUT));
	return be->dw_end(be);
}

static void p_rmsnorm_fwd(model *m, void *y, float *rstd, const void *x, const float *w, int N,
			  int C)
{
	lm_backend *be = m->be;
	PROF(be, "rmsnorm", 0, (double)N * C * (rsz(m) + esz(m)),
	     be->rmsnorm_fwd(be, y, rstd, x, w, N, C, (float)model_norm_eps(&m->cfg)));
}

/* Into the residual stream's gradient a->dres, whose act copy the fused
 * version writes on the way (dres_as_act then has nothing to do). */
static void p_rmsnorm_bwd(model *m, void *dx, float *dw, const void *dy, const void *x,
			  const float *w, const float *rstd, int N, int C)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	double g = (double)lm_res_grad_size(be);
	a->dres_act_fresh = 0;
	if (be->rmsnorm_bwd_act && dx == a->dres && a->dres_act != a->dres) {
		PROF(be, "rmsnorm backward", 0, (double)N * C * (2 * g + rsz(m) + 2 * esz(m)),
		     be->rmsnorm_bwd_act(be, dx, a->dres_act, dw, dy, x, w, rstd, N, C));
		a->dres_act_fresh = 1;
		return;
	}
	if (be->rmsnorm_bwd_act && dx == a->dres && be->act != LM_F32) {
		/* the gradient in act itself: no copy, but in the blocks the
		 * weight-gradient queue leaves, as above */
		PROF(be, "rmsnorm backward", 0, (double)N * C * (2 * g + rsz(m) + esz(m)),
		     be->rmsnorm_bwd_act(be, dx, NULL, dw, dy, x, w, rstd, N, C));
		return;
	}
	PROF(be, "rmsnorm backward", 0, (double)N * C * (2 * g + rsz(m) + esz(m)),
	     be->rmsnorm_bwd(be, dx, dw, dy, x, w, rstd, N, C));
}

/* Layout changes, RoPE, SwiGLU: memory-bound, counted in bytes. */
#define P_MOVE(m, name, bytes, call) PROF((m)->be, name, 0, (bytes), call)

/* Attention of layer l into a->y[l], directly or through o and a heads
 * merge. */
static void p_attn_fwd(model *m, int l, int B, int H, int T, int D, float scale)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	if (a->attn_bthd) {
		PROF(be, "attention", 2.0 * B * H * T * (double)T * D, 4.0 * B * H * T * D * esz(m),
		     be->attn_fwd_bthd(be, a->q[l], a->k[l], a->v[l], a->y[l], a->lse[l], B, H, T, D, 1,
				       scale));
		return;
	}
	PROF(be, "attention", 2.0 * B * H * T * (double)T * D, 4.0 * B * H * T * D * esz(m),
	     be->attn_fwd(be, a->q[l], a->k[l], a->v[l], a->o[l], a->lse[l], B, H, T, D, 1, scale,
			  a->attn_ws, a->attn_ws_bytes));
	P_MOVE(m, "heads merge", 2.0 * B * T * H * D * esz(m),
	       be->heads_merge(be, a->y[l], a->o[l], B, T, H, D));
}

/* The backward of p_attn_fwd from the gradient of y in a->dln. */
static void p_attn_bwd(model *m, int l, int B, int H, int T, int D, float scale)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	if (a->attn_bthd) {
		PROF(be, "attention backward", 5.0 * B * H * T * (double)T * D, 8.0 * B * H * T * D * esz(m),
		     be->attn_bwd_bthd(be, a->q[l], a->k[l], a->v[l], a->y[l], a->dln, a->lse[l], a->dq,
				       a->dk, a->dv, B, H, T, D, 1, scale));
		return;
	}
	P_MOVE(m, "heads split", 2.0 * B * T * H * D * esz(m), be->heads_split(be, a->dO, a->dln, B, T, H, D));
	PROF(be, "attention backward", 5.0 * B * H * T * (double)T * D, 8.0 * B * H * T * D * esz(m),
	     be->attn_bwd(be, a->q[l], a->k[l], a->v[l], a->o[l], a->dO, a->lse[l], a->dq, a->dk,
			  a->dv, B, H, T, D, 1, scale, a->attn_ws, a->attn_ws_bytes));
}


/* Check the batch, count the targets, upload ids and targets. */
static int forward_prep(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
			lm_err *e)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	int V = m->cfg.vocab;
	if (B < 1 || T < 1 || B > m->maxB || T > m->maxT)
		return lm_seterr(e, "batch %d x %d exceeds the capacity %d x %d", B, T, m->maxB, m->maxT);
	int N = B * T;
	for (int i = 0; i < N; i++)
		if (ids[i] < 0 || ids[i] >= V)
			return lm_seterr(e, "token id %d at position %d is outside the vocabulary (%d)",
					 ids[i], i, V);
	a->count = 0;
	if (targets)
		for (int i = 0; i < N; i++) {
			if (targets[i] >= V)
				return lm_seterr(e, "target id %d at position %d is outside the "
						 "vocabulary (%d)", targets[i], i, V);
			a->count += targets[i] >= 0;
		}
	m->B = B;
	m->T = T;
	a->head_done = 0;
	be->upload(be, a->ids, ids, (size_t)N * sizeof *ids);
	if (targets)
		be->upload(be, a->targets, targets, (size_t)N * sizeof *targets);
	return 0;
}

/* Whether the backend's qkv_rope_split and qkv_rope_merge stand in for
 * attn_inputs and RoPE (and their backward): no QK-norm between them, one
 * key/value head per query head. */
static int rope_fused(const model *m)
{
	return m->be->qkv_rope_split && m->be->qkv_rope_merge && !m->cfg.qk_norm &&
	       m->cfg.n_kv_heads == m->cfg.n_heads;
}

/* q, k (after any QK-norm, before RoPE) and v of layer l out of a->qkv. */
static void attn_inputs(model *m, int l)
{
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T, H = c->n_heads, KV = c->n_kv_heads, D = c->d_model / H;
	double n = (double)B * T * c->d_model;
	void *q = c->qk_norm ? a->qpre[l] : a->q[l], *k = c->qk_norm ? a->kpre[l] : a->k[l];
	if (KV == H)
		P_MOVE(m, "qkv split", 6.0 * n * esz(m), be->qkv_split(be, q, k, a->v[l], a->qkv, B, T, H, D));
	else
		P_MOVE(m, "qkv split (GQA)", (2.0 + 4.0 * KV / H + 4.0) * n * esz(m),
		       be->qkv_split_gqa(be, q, k, a->v[l], a->qkv, B, T, H, KV, D));
	if (!c->qk_norm)
		return;
	const layer_ptrs *p = &m->lp[l];
	size_t rows = (size_t)B * H * T;
	float eps = (float)c->norm_eps;
	P_MOVE(m, "qk-norm", 4.0 * n * esz(m), be->headnorm_fwd(be, a->q[l], a->qrstd[l], q, p->q_norm, rows, D, eps));
	be->headnorm_fwd(be, a->k[l], a->krstd[l], k, p->k_norm, rows, D, eps);
}

/* The backward of attn_inputs: a->dq, a->dk (after RoPE's backward), a->dv
 * into a->qkv, the QK-norm gains' gradients accumulated. */
static void attn_inputs_bwd(model *m, int l)
{
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T, H = c->n_heads, KV = c->n_kv_heads, D = c->d_model / H;
	double n = (double)B * T * c->d_model;
	if (c->qk_norm) {
		const layer_ptrs *p = &m->lp[l], *g = &m->lg[l];
		size_t rows = (size_t)B * H * T;
		P_MOVE(m, "qk-norm backward", 6.0 * n * esz(m),
		       be->headnorm_bwd(be, a->dq, g->q_norm, a->dq, a->qpre[l], p->q_norm, a->qrstd[l], rows, D));
		be->headnorm_bwd(be, a->dk, g->k_norm, a->dk, a->kpre[l], p->k_norm, a->krstd[l], rows, D);
	}
	if (KV == H)
		P_MOVE(m, "qkv merge", 6.0 * n * esz(m), be->qkv_merge(be, a->qkv, a->dq, a->dk, a->dv, B, T, H, D));
	else
		P_MOVE(m, "qkv merge (GQA)", (6.0 + 2.0 * KV / H) * n * esz(m),
		       be->qkv_merge_gqa(be, a->qkv, a->dq, a->dk, a->dv, B, T, H, KV, D));
}

/* The MLP's activation: SwiGLU of a->h[l] or its squared ReLU. */
static void mlp_act(model *m, int l)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	size_t N = (size_t)m->B * m->T, F = m->cfg.d_ff;
	if (m->cfg.mlp == MODEL_MLP_RELU2)
		P_MOVE(m, "relu^2", 2.0 * N * F * esz(m), be->relu2_fwd(be, a->sw[l], a->h[l], N * F));
	else
		P_MOVE(m, "swiglu", 3.0 * N * F * esz(m), be->swiglu_fwd(be, a->sw[l], a->h[l], (int)N, (int)F));
}

static void mlp_act_bwd(model *m, int l)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	size_t N = (size_t)m->B * m->T, F = m->cfg.d_ff;
	if (m->cfg.mlp == MODEL_MLP_RELU2)
		P_MOVE(m, "relu^2 backward", 3.0 * N * F * esz(m),
		       be->relu2_bwd(be, a->dh, a->dsw, a->h[l], N * F));
	else
		P_MOVE(m, "swiglu backward", 5.0 * N * F * esz(m),
		       be->swiglu_bwd(be, a->dh, a->dsw, a->h[l], (int)N, (int)F));
}

/* The logit variants of the config; 0 when there are none. */
static int logit_opts(const model *m, lm_logit_opts *lo)
{
	lo->softcap = (float)m->cfg.softcap;
	lo->z_loss = (float)m->cfg.z_loss;
	return lo->softcap > 0 || lo->z_loss > 0;
}

/* Embedding, blocks and final RMSNorm, up to the LM head's input. */
static void forward_blocks(model *m)
{
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T;
	int N = B * T, C = c->d_model, F = c->d_ff, H = c->n_heads, D = C / H;
	int QKV = model_qkv_rows(c), GU = model_gu_rows(c);
	float scale = 1.0f / sqrtf((float)D);
	P_MOVE(m, "embedding", (4 + rsz(m)) * N * C, be->embedding_fwd(be, a->res[0], a->ids, m->wte, N, C));
	for (int l = 0; l < c->n_layers; l++) {
		const layer_ptrs *p = &m->lp[l];
		const layer_cptrs *w = &m->lc[l];
		p_rmsnorm_fwd(m, a->ln1[l], a->rstd1[l], a->res[l], p->ln1, N, C);
		if (a->attn_qkv) {
			const float *cs = m->rope_cs; /* NULL once the product has turned q and k */
			if (a->qkv_rope) {
				PROF(be, "matmul qkv + rope", 2.0 * N * C * QKV,
				     ((double)N * C + (double)QKV * C + (double)N * QKV) * esz(m),
				     be->matmul_qkv_rope_fwd(be, a->qkvl[l], a->ln1[l], w->wqkv, cs,
							     c->rope_theta, B, T, H, D));
				cs = NULL;
			} else {
				p_matmul_fwd(m, "matmul qkv", a->qkvl[l], NULL, a->ln1[l], w->wqkv, N, C, QKV);
			}
			PROF(be, "attention", 2.0 * B * H * T * (double)T * D, 6.0 * N * C * esz(m),
			     be->attn_qkv_fwd(be, a->qkvl[l], cs, a->y[l], a->lse[l], B, T, H, D, scale));
			goto attn_done;
		}
		p_matmul_fwd(m, "matmul qkv", a->qkv, NULL, a->ln1[l], w->wqkv, N, C, QKV);
		if (rope_fused(m)) {
			P_MOVE(m, "qkv split + rope", 6.0 * N * C * esz(m),
			       be->qkv_rope_split(be, a->q[l], a->k[l], a->v[l], a->qkv, m->rope_cs, B, T, H, D));
		} else {
			attn_inputs(m, l);
			P_MOVE(m, "rope", 2.0 * N * C * esz(m), be->rope_fwd(be, a->q[l], m->rope_cs, B, H, T, D));
			P_MOVE(m, "rope", 2.0 * N * C * esz(m), be->rope_fwd(be, a->k[l], m->rope_cs, B, H, T, D));
		}
		p_attn_fwd(m, l, B, H, T, D, scale);
	attn_done:
		p_matmul_fwd(m, "matmul o", a->res_mid[l], a->res[l], a->y[l], w->wo, N, C, C);
		p_rmsnorm_fwd(m, a->ln2[l], a->rstd2[l], a->res_mid[l], p->ln2, N, C);
		if (c->mlp == MODEL_MLP_SWIGLU && be->gate_up_swiglu_fwd) {
			double bytes = ((double)N * C + (double)GU * C + 1.5 * N * GU) * esz(m);
			PROF(be, "matmul gate_up + swiglu", 2.0 * N * C * GU, bytes,
			     be->gate_up_swiglu_fwd(be, a->h[l], a->sw[l], a->ln2[l], w->wgu, N, C, F));
		} else {
			p_matmul_fwd(m, "matmul gate_up", a->h[l], NULL, a->ln2[l], w->wgu, N, C, GU);
			mlp_act(m, l);
		}
		p_matmul_fwd(m, "matmul down", a->res[l + 1], a->res_mid[l], a->sw[l], w->wdown, N, F, C);
	}
	p_rmsnorm_fwd(m, a->lnf, a->rstdf, a->res[c->n_layers], m->lnf, N, C);
}

int model_forward(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		  double *loss, lm_err *e)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	int N = B * T, C = m->cfg.d_model, V = m->cfg.vocab;
	if (!a->logits && !(a->logits = grab_late(m, (size_t)m->maxB * m->maxT * V * esz(m), "the logits", e)))
		return -1;
	if (forward_prep(m, ids, targets, B, T, e))
		return -1;
	forward_blocks(m);
	p_matmul_fwd(m, "matmul head", a->logits, NULL, a->lnf, m->head_c, N, C, V);
	if (m->cfg.softcap > 0)
		P_MOVE(m, "soft-capping", 2.0 * N * V * esz(m),
		       be->softcap_fwd(be, a->logits, (size_t)N * V, (float)m->cfg.softcap));
	if (!targets)
		return loss ? be->sync(be, e) : 0;
	if (loss)
		model_loss_reset(m);
	P_MOVE(m, "cross-entropy", (double)N * V * esz(m),
	       be->xent_fwd(be, a->losses, a->lse_v, a->logits, a->targets, N, V, &m->sc->loss_sum));
	if (!loss)
		return 0;
	lm_scalars s;
	if (model_read_scalars(m, &s, e))
		return -1;
	*loss = a->count ? s.loss_sum / a->count : 0.0;
	return 0;
}

int model_stage(model *m, const int32_t *ids, const int32_t *targets, int B, int T, lm_err *e)
{
	if (!targets)
		return lm_seterr(e, "model_forward_loss needs targets");
	return forward_prep(m, ids, targets, B, T, e);
}

int model_forward_loss(model *m, const int32_t *ids, const int32_t *targets, int B, int T,
		       float grad_scale, int grad, lm_err *e)
{
	if (model_stage(m, ids, targets, B, T, e))
		return -1;
	return model_forward_loss_staged(m, grad_scale, grad, e);
}

int model_forward_loss_staged(model *m, float grad_scale, int grad, lm_err *e)
{
	lm_backend *be = m->be;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T;
	int N = B * T, C = m->cfg.d_model, V = m->cfg.vocab;
	(void)e;
	forward_blocks(m);
	lm_logit_opts lo;
	const char *what = grad ? "head+xent fwd+bwd" : "head+xent";
	double flops = (grad ? 6.0 : 2.0) * N * C * V;
	double bytes = ((double)N * C + (double)V * C) * esz(m) * (grad ? 3 : 1);
	void *dx = grad ? a->dln : NULL;
	if (logit_opts(m, &lo))
		PROF(be, what, flops, bytes,
		     be->head_xent_ex(be, a->lnf, m->head_c, a->targets, grad_scale, N, C, V, a->losses,
				      a->lse_v, &m->sc->loss_sum, dx, m->dhead, &lo));
	else
		PROF(be, what, flops, bytes,
		     be->head_xent(be, a->lnf, m->head_c, a->targets, grad_scale, N, C, V, a->losses,
				   a->lse_v, &m->sc->loss_sum, dx, m->dhead));
	a->head_done = grad;
	return 0;
}

/* The extra gradient g (host, n fp32 values) added to dst (act). */
static int add_extra(model *m, void *dst, const float *g, size_t n, lm_err *e)
{
	lm_backend *be = m->be;
	float *x = extra(m, e);
	if (!x)
		return -1;
	be->upload(be, x, g, n * sizeof *g);
	be->add_act(be, dst, x, n);
	return 0;
}

/* The residual stream's gradient as a product input: itself when act is
 * fp32, else its act copy. */
static const void *dres_as_act(model *m)
{
	struct model_acts *a = m->a;
	size_t n = (size_t)m->B * m->T * (size_t)m->cfg.d_model;
	if (a->dres_act != a->dres && !a->dres_act_fresh)
		P_MOVE(m, "residual gradient to act", n * (4 + esz(m)),
		       m->be->to_act(m->be, a->dres_act, a->dres, n));
	return a->dres_act;
}

static void ready(model *m, int layer)
{
	if (m->grad_ready)
		m->grad_ready(m->grad_ready_arg, layer);
}

int model_backward_ex(model *m, const model_grad_in *g, lm_err *e)
{
	lm_backend *be = m->be;
	const model_config *c = &m->cfg;
	struct model_acts *a = m->a;
	int B = m->B, T = m->T;
	int N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab, H = c->n_heads, D = C / H;
	int QKV = model_qkv_rows(c), GU = model_gu_rows(c);
	float scale = 1.0f / sqrtf((float)D);
	lm_logit_opts lo;
	int variant = logit_opts(m, &lo);
	const float *wdev = g->weights_dev ? g->weights_dev : g->weights ? a->tok_w : NULL;
	if (wdev) { /* the z-loss belongs to the plain objective, not to weighted (RL) ones */
		lo.z_loss = 0;
		variant = lo.softcap > 0;
	}
	const float *dent_in = g->dentropy_dev ? g->dentropy_dev : g->dentropy;
	if (a->head_done && (wdev || g->dlogits || g->dhidden || g->dhidden_dev || dent_in))
		return lm_seterr(e, "model_backward_ex: weights and extra gradients need model_forward, "
				 "not model_forward_loss");
	if (a->head_done)
		goto blocks;
	if (g->weights && !g->weights_dev)
		be->upload(be, a->tok_w, g->weights, (size_t)N * sizeof *g->weights);
	/* the entropy's gradient needs the logits, which xent_bwd overwrites */
	const float *dent = g->dentropy_dev;
	float *dz = dent_in ? extra(m, e) : NULL, *up = g->dentropy && !dent ? tok_ent(m, e) : NULL;
	if (dent_in && (!dz || (!dent && !up)))
		return -1;
	if (up) {
		be->upload(be, up, g->dentropy, (size_t)N * sizeof *up);
		dent = up;
	}
	if (dent) {
		P_MOVE(m, "entropy backward", 2.0 * N * V * esz(m) + 4.0 * N * V,
		       be->entropy_bwd(be, dz, a->logits, a->lse_v, dent, N, V));
	}
	if (variant) {
		/* logit_bwd takes one extra gradient w.r.t. the capped logits,
		 * through the cap's derivative: the entropy's or the host's */
		const float *x = dz;
		int host_after = 0;
		if (g->dlogits && dz) {
			if (lo.softcap > 0)
				return lm_seterr(e, "model_backward_ex: soft-capped logits take an entropy "
						 "gradient or extra logit gradients, not both");
			host_after = 1; /* no cap: the host's gradient adds after */
		} else if (g->dlogits) {
			float *h = extra(m, e);
			if (!h)
				return -1;
			be->upload(be, h, g->dlogits, (size_t)N * V * sizeof *h);
			x = h;
		}
		P_MOVE(m, "cross-entropy backward", 2.0 * N * V * esz(m),
		       be->logit_bwd(be, a->logits, a->logits, a->lse_v, a->targets,
				     wdev, x, g->scale, N, V, &lo));
		if (host_after && add_extra(m, a->logits, g->dlogits, (size_t)N * V, e))
			return -1;
	} else {
		P_MOVE(m, "cross-entropy backward", 2.0 * N * V * esz(m),
		       be->xent_bwd(be, a->logits, a->logits, a->lse_v, a->targets,
				    wdev, g->scale, N, V));
		if (dent)
			be->add_act(be, a->logits, dz, (size_t)N * V);
		if (g->dlogits && add_extra(m, a->logits, g->dlogits, (size_t)N * V, e))
			return -1;
	}
	p_matmul_bwd(m, "matmul head backward", a->dln, m->dhead, a->logits, a->lnf, m->head_c, N, C, V);
	if (g->dhidden_dev)
		be->add_act(be, a->dln, g->dhidden_dev, (size_t)N * C);
	else if (g->dhidden && add_extra(m, a->dln, g->dhidden, (size_t)N * C, e))
		return -1;
blocks:
	a->head_done = 0;
	int side_gu, side_qkv, ticket = 0;
	const void *dqkv;
	dw_lane(m, &side_gu, &side_qkv);
	const char *je = getenv("LMPIPE_DW_EARLY");
	int dw_early = !(je && *je == '0');
	be->zero(be, a->dres, (size_t)N * C * lm_res_grad_size(be));
	p_rmsnorm_bwd(m, a->dres, m->dlnf, a->dln, a->res[c->n_layers], m->lnf, a->rstdf, N, C);
	for (int l = c->n_layers - 1; l >= 0; l--) {
		const layer_ptrs *p = &m->lp[l], *gr = &m->lg[l];
		const layer_cptrs *w = &m->lc[l];
		p_matmul_bwd(m, "matmul down backward", a->dsw, gr->wdown, dres_as_act(m), a->sw[l], w->wdown, N,
			     F, C);
		mlp_act_bwd(m, l);
		/* with the weight-gradient queue, gate/up's and q/k/v's weight
		 * gradients run beside the RMSNorm backward that follows each
		 * (their operands a->dh, a->ln2[l], a->qkvl[l] or a->qkv and
		 * a->ln1[l] are not written before the layer's end, where the
		 * queue is waited for) */
		if (side_gu) {
			p_matmul_bwd(m, "matmul gate_up backward", a->dln, NULL, a->dh, a->ln2[l], w->wgu, N,
				     C, GU);
			ticket = p_matmul_dw_side(m, "matmul gate_up weight gradient", gr->wgu, a->dh,
						  a->ln2[l], N, C, GU, side_gu);
		} else {
			p_matmul_bwd(m, "matmul gate_up backward", a->dln, gr->wgu, a->dh, a->ln2[l], w->wgu,
				     N, C, GU);
		}
		p_rmsnorm_bwd(m, a->dres, gr->ln2, a->dln, a->res_mid[l], p->ln2, a->rstd2[l], N, C);
		if (ticket && dw_early) {
			/* the pair alone on its split: o's products get the whole GPU */
			be->dw_wait(be, ticket);
			ticket = 0;
		}
		p_matmul_bwd(m, "matmul o backward", a->dln, gr->wo, dres_as_act(m), a->y[l], w->wo, N, C, C);
		if (a->attn_qkv) {
			PROF(be, "attention backward", 5.0 * B * H * T * (double)T * D, 10.0 * N * C * esz(m),
			     be->attn_qkv_bwd(be, a->qkvl[l], m->rope_cs, a->y[l], a->dln, a->lse[l], B, T, H,
					      D, scale, a->attn_ws, a->attn_ws_bytes));
			dqkv = a->qkvl[l];
			goto qkv_grads;
		}
		p_attn_bwd(m, l, B, H, T, D, scale);
		if (rope_fused(m)) {
			P_MOVE(m, "qkv merge + rope backward", 6.0 * N * C * esz(m),
			       be->qkv_rope_merge(be, a->qkv, a->dq, a->dk, a->dv, m->rope_cs, B, T, H, D));
		} else {
			P_MOVE(m, "rope backward", 2.0 * N * C * esz(m), be->rope_bwd(be, a->dq, m->rope_cs, B, H, T, D));
			P_MOVE(m, "rope backward", 2.0 * N * C * esz(m), be->rope_bwd(be, a->dk, m->rope_cs, B, H, T, D));
			attn_inputs_bwd(m, l);
		}
		dqkv = a->qkv;
	qkv_grads:
		if (side_qkv) {
			p_matmul_bwd(m, "matmul qkv backward", a->dln, NULL, dqkv, a->ln1[l], w->wqkv, N, C,
				     QKV);
			ticket = p_matmul_dw_side(m, "matmul qkv weight gradient", gr->wqkv, dqkv,
						  a->ln1[l], N, C, QKV, side_qkv);
		} else {
			p_matmul_bwd(m, "matmul qkv backward", a->dln, gr->wqkv, dqkv, a->ln1[l], w->wqkv, N,
				     C, QKV);
		}
		p_rmsnorm_bwd(m, a->dres, gr->ln1, a->dln, a->res[l], p->ln1, a->rstd1[l], N, C);
		if (ticket)
			be->dw_wait(be, ticket);
		ticket = 0;
		ready(m, l);
	}
	P_MOVE(m, "embedding backward", (4.0 + lm_res_grad_size(be)) * N * C,
	       be->embedding_bwd(be, m->dwte, a->ids, a->dres, N, C));
	ready(m, -1);
	return be->failed ? be->sync(be, e) : 0;
}

int model_backward(model *m, float loss_scale, lm_err *e)
{
	model_grad_in g = { .scale = loss_scale };
	return model_backward_ex(m, &g, e);
}
