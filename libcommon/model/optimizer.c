/* optimizer.c: the parameter groups (AdamW, and Muon on the blocks'
 * matrices batched by shape) over the model's parameter buffer, and
 * gradient clipping (see optimizer.h; the schedules are in schedule.c). */
#include "model/optimizer_internal.h"

#include "model/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MUON_PREFIX[] = "model.layers.";

int optim_config_check(const optim_config *c, lm_err *e)
{
	if (c->kind != OPTIM_ADAMW && c->kind != OPTIM_MUON)
		return lm_usage_err(e, "unknown optimizer %d", c->kind);
	if (c->schedule < SCHED_COSINE || c->schedule > SCHED_CONSTANT)
		return lm_usage_err(e, "unknown schedule %d", c->schedule);
	if (c->schedule == SCHED_WSD && !(c->decay_frac >= 0 && c->decay_frac <= 1))
		return lm_usage_err(e, "--decay-frac %g is not in [0, 1]", c->decay_frac);
	if (c->kind == OPTIM_MUON) {
		const muon_config *u = &c->muon;
		if (!(u->momentum >= 0 && u->momentum < 1) ||
		    !(u->momentum_start >= 0 && u->momentum_start < 1))
			return lm_usage_err(e, "Muon momentum %g (start %g) is not in [0, 1)", u->momentum,
					    u->momentum_start);
		if (u->scale != MUON_SCALE_ORIGINAL && u->scale != MUON_SCALE_MATCH_RMS_ADAMW)
			return lm_usage_err(e, "unknown Muon scale %d", u->scale);
	}
	return 0;
}

/* An integer from the environment variable name, or def. */
static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

/* The shape of tensor t is rows x cols, or (tr) cols x rows. */
static int shape_is(const model_tensor *t, int rows, int cols, int tr)
{
	return tr ? t->rows == cols && t->cols == rows : t->rows == rows && t->cols == cols;
}

/* The Muon group: the blocks' matrices, one set per shape and its
 * transpose (gate/up's d_ff x d and down's d x d_ff share one
 * Newton-Schulz batch: their X is the same m x k; LMPIPE_MUON_MERGE=0
 * keeps them apart), the transposed ones last in the set; or per chunk of
 * LMPIPE_MUON_CHUNK matrices (0: all of a set in one call; smaller calls
 * give the backend more to run side by side, muon_join).  The offsets are
 * uploaded once. */
static int muon_groups(optim *o, model *m, lm_err *e)
{
	lm_backend *be = m->be;
	int chunk = env_int("LMPIPE_MUON_CHUNK", 0), merge = env_int("LMPIPE_MUON_MERGE", 1) != 0;
	chunk = chunk > 0 ? chunk : 0;
	size_t *host = malloc((size_t)o->n_tensors * sizeof *host);
	o->sets = calloc((size_t)o->n_tensors, sizeof *o->sets);
	if (!host || !o->sets) {
		free(host);
		return lm_seterr(e, "out of memory");
	}
	for (int i = 0; i < o->n_tensors; i++) {
		const model_tensor *t = &o->tensors[i];
		o->is_muon[i] = t->cols > 0 && !strncmp(t->name, MUON_PREFIX, sizeof MUON_PREFIX - 1);
	}
	size_t ws = 0;
	for (int i = 0; i < o->n_tensors; i++) {
		const model_tensor *t = &o->tensors[i];
		int seen = 0;
		for (int s = 0; s < o->n_sets; s++)
			seen |= shape_is(t, o->sets[s].rows, o->sets[s].cols, 0) ||
				(merge && shape_is(t, o->sets[s].rows, o->sets[s].cols, 1));
		if (!o->is_muon[i] || seen)
			continue;
		int n = 0, n_same = 0;
		for (int tr = 0; tr < 1 + (merge && t->rows != t->cols); tr++) {
			for (int j = i; j < o->n_tensors; j++)
				if (o->is_muon[j] && shape_is(&o->tensors[j], t->rows, t->cols, tr))
					host[n++] = o->tensors[j].offset;
			if (!tr)
				n_same = n;
		}
		for (int at = 0, each = chunk ? chunk : n; at < n; at += each) {
			optim_muon_set *set = &o->sets[o->n_sets++];
			set->rows = t->rows;
			set->cols = t->cols;
			set->count = n - at < each ? n - at : each;
			int same = n_same - at; /* of this chunk, in t's shape */
			same = same < 0 ? 0 : same > set->count ? set->count : same;
			set->n_tr = set->count - same;
			set->offs = be->alloc(be, (size_t)set->count * sizeof *host);
			if (!set->offs)
				break;
			be->upload(be, set->offs, host + at, (size_t)set->count * sizeof *host);
			/* a part each, 256-byte aligned */
			set->ws_off = ws;
			ws += (be->muon_workspace(be, set->count, set->rows, set->cols) + 255) / 256 *
			      256;
		}
		if (!o->sets[o->n_sets - 1].offs)
			break;
	}
	free(host);
	if (!o->n_sets)
		return lm_usage_err(e, "the Muon group is empty: the model has no block matrices");
	o->muon_ws = be->alloc(be, ws);
	return 0;
}

int optim_state_init(optim *o, const optim_config *c, model *m, size_t n, const char *what,
		     lm_err *e)
{
	memset(o, 0, sizeof *o);
	o->cfg = *c;
	if (!o->cfg.muon.ns_steps)
		o->cfg.muon.ns_steps = MUON_NS_STEPS;
	if (optim_config_check(&o->cfg, e))
		return -1;
	lm_backend *be = m->be;
	o->m = be->alloc(be, n * sizeof(float));
	o->v = o->m ? be->alloc(be, n * sizeof(float)) : NULL;
	o->dv = o->v ? be->alloc(be, OPTIM_DEV_N * sizeof *o->dv) : NULL;
	o->n_tensors = model_tensors(&m->cfg, &o->tensors);
	o->is_muon = o->n_tensors > 0 ? calloc((size_t)o->n_tensors, 1) : NULL;
	if (!o->m || !o->v || !o->dv || o->n_tensors < 0 || !o->is_muon) {
		lm_err why;
		if (be->sync(be, &why))
			snprintf(why.msg, sizeof why.msg, "out of memory");
		optim_free(o, m);
		return lm_seterr(e, "%s, for %s", why.msg, what);
	}
	be->zero(be, o->m, n * sizeof(float));
	be->zero(be, o->v, n * sizeof(float));
	if (be->sync(be, e)) {
		optim_free(o, m);
		return lm_err_prefix(e, "%s", what);
	}
	return 0;
}

int optim_init(optim *o, const optim_config *c, model *m, lm_err *e)
{
	if (optim_state_init(o, c, m, m->n_params, "the optimizer state", e))
		return -1;
	if (c->kind != OPTIM_MUON)
		return 0;
	int rc = muon_groups(o, m, e);
	if (!rc && m->be->sync(m->be, e))
		rc = lm_err_prefix(e, "the Muon group's state");
	if (rc)
		optim_free(o, m);
	return rc;
}

void optim_free(optim *o, model *m)
{
	lm_backend *be = m->be;
	if (o->m)
		be->release(be, o->m);
	if (o->v)
		be->release(be, o->v);
	if (o->dv)
		be->release(be, o->dv);
	for (int s = 0; s < o->n_sets; s++)
		if (o->sets[s].offs)
			be->release(be, o->sets[s].offs);
	if (o->muon_ws)
		be->release(be, o->muon_ws);
	free(o->sets);
	free(o->is_muon);
	free(o->tensors);
	memset(o, 0, sizeof *o);
}

double clip_factor(double norm, double max_norm)
{
	return adamw_clip_factor(norm, max_norm);
}

void optim_clip(optim *o, model *m)
{
	lm_backend *be = m->be;
	PROF(be, "gradient norm", 2.0 * m->n_params, 4.0 * m->n_params,
	     be->sumsq(be, &m->sc->sumsq, m->grads, m->n_params));
	be->clip_scale(be, &m->sc->grad_scale, &m->sc->sumsq, o->cfg.clip);
}

double optim_grad_norm(const model *m)
{
	lm_scalars s;
	m->be->sumsq(m->be, &m->sc->sumsq, m->grads, m->n_params);
	if (model_read_scalars(m, &s, NULL))
		return NAN;
	return sqrt(s.sumsq);
}

/* The Muon group at the staged lr and momentum, one batched call per
 * shape, the shapes side by side where the backend can (muon_join); the
 * profile counts the whole phase as one row. */
static void muon_step(optim *o, model *m)
{
	lm_backend *be = m->be;
	const muon_config *c = &o->cfg.muon;
	void *p_act = m->wact == m->params ? NULL : m->wact;
	muon_hparams h = {
		.weight_decay = (float)c->weight_decay, .nesterov = 1, .ns_steps = c->ns_steps,
		.scale = (muon_scale)c->scale, .dev = o->dv + ADAMW_DEV_N,
	};
	double flops = 0, bytes = 0;
	for (int s = 0; s < o->n_sets; s++) {
		const optim_muon_set *set = &o->sets[s];
		double r = set->rows, k = set->cols, mn = r < k ? r : k, mx = r < k ? k : r;
		flops += set->count * h.ns_steps * (4.0 * mn * mn * mx + 2.0 * mn * mn * mn);
		bytes += set->count * r * k * 16.0;
	}
	PROF(be, "Muon", flops, bytes, {
		for (int s = 0; s < o->n_sets; s++) {
			const optim_muon_set *set = &o->sets[s];
			be->muon_step(be, m->params, m->grads, o->m, p_act, set->offs, set->count,
				      set->n_tr, set->rows, set->cols, &h, &m->sc->grad_scale,
				      (char *)o->muon_ws + set->ws_off);
		}
		if (be->muon_join && be->prof)
			be->muon_join(be);
	});
}

/* AdamW tensors are contiguous in buffer order: each maximal run of them
 * with the same decay flag is one segment; the backend's adamw_multi steps
 * up to ADAMW_SEGS_MAX segments a call (one launch), else adamw_step one
 * a call, at the staged lr and t. */
static void adamw_flush(optim *o, model *m, const adamw_seg *segs, int n, adamw_hparams *h)
{
	lm_backend *be = m->be;
	size_t esize = lm_dtype_size(be->act), total = 0;
	void *act = m->wact == m->params ? NULL : m->wact;
	/* bytes an element: weight, m and v read and written, the gradient
	 * read (all fp32), and the compute copy written where there is one */
	double bytes = 28.0 + (act ? (double)esize : 0);
	for (int i = 0; i < n; i++)
		total += segs[i].n;
	if (be->adamw_multi && n > 1) {
		PROF(be, "AdamW", 12.0 * total, bytes * total,
		     be->adamw_multi(be, m->params, m->grads, o->m, o->v, act, segs, n, h,
				     &m->sc->grad_scale));
		return;
	}
	float wd = h->weight_decay;
	for (int i = 0; i < n; i++) {
		size_t off = segs[i].off, k = segs[i].n;
		void *p_act = act ? (char *)act + off * esize : NULL;
		h->weight_decay = segs[i].decay ? wd : 0.0f;
		PROF(be, "AdamW", 12.0 * k, bytes * k,
		     be->adamw_step(be, m->params + off, m->grads + off, o->m + off, o->v + off, p_act,
				    k, h, &m->sc->grad_scale));
	}
	h->weight_decay = wd;
}

static void adamw_steps(optim *o, model *m)
{
	adamw_hparams h = {
		.beta1 = (float)o->cfg.beta1, .beta2 = (float)o->cfg.beta2, .eps = (float)o->cfg.eps,
		.weight_decay = (float)o->cfg.weight_decay, .dev = o->dv,
	};
	adamw_seg segs[ADAMW_SEGS_MAX];
	int n = 0;
	for (int i = 0; i < o->n_tensors;) {
		if (o->is_muon[i]) {
			i++;
			continue;
		}
		int j = i;
		size_t k = 0;
		while (j < o->n_tensors && !o->is_muon[j] && o->tensors[j].decay == o->tensors[i].decay)
			k += o->tensors[j++].numel;
		if (n == ADAMW_SEGS_MAX) {
			adamw_flush(o, m, segs, n, &h);
			n = 0;
		}
		segs[n++] = (adamw_seg){ .off = o->tensors[i].offset, .n = k, .decay = o->tensors[i].decay };
		i = j;
	}
	if (n)
		adamw_flush(o, m, segs, n, &h);
}

/* The step's values into o->dv (AdamW's lr and bias corrections at the
 * new count, Muon's lr and its momentum at the old one), the step counted. */
static void stage(optim *o, model *m, double adam_lr, double muon_lr)
{
	long long t = o->t++;
	double v[OPTIM_DEV_N];
	adamw_dev_values(v, adam_lr, (float)o->cfg.beta1, (float)o->cfg.beta2, o->t);
	v[ADAMW_DEV_N + MUON_DEV_LR] = muon_lr;
	v[ADAMW_DEV_N + MUON_DEV_MOMENTUM] = optim_muon_momentum(&o->cfg.muon, t);
	m->be->upload(m->be, o->dv, v, sizeof v);
}

void optim_stage_scheduled(optim *o, model *m, double factor)
{
	stage(o, m, o->cfg.lr_max * factor, o->cfg.muon.lr * factor);
}

void optim_stage_clipped(optim *o, model *m, double lr)
{
	stage(o, m, lr, o->cfg.lr_max > 0 ? o->cfg.muon.lr * lr / o->cfg.lr_max : 0);
}

void optim_step_staged(optim *o, model *m)
{
	if (o->n_sets)
		muon_step(o, m);
	adamw_steps(o, m);
	/* Unprofiled, the AdamW group (other tensors, other state) runs on the
	 * caller's stream while Muon's lanes go on; profiled, Muon's row is
	 * its whole phase, joined before AdamW starts. */
	if (o->n_sets && m->be->muon_join && !m->be->prof)
		m->be->muon_join(m->be);
}

void optim_step_scheduled(optim *o, model *m, double factor)
{
	optim_stage_scheduled(o, m, factor);
	optim_step_staged(o, m);
}

void optim_step_clipped(optim *o, model *m, double lr)
{
	optim_stage_clipped(o, m, lr);
	optim_step_staged(o, m);
}

void optim_step(optim *o, model *m, double lr, double grad_scale)
{
	float s = (float)grad_scale;
	m->be->upload(m->be, &m->sc->grad_scale, &s, sizeof s);
	optim_step_clipped(o, m, lr);
}

/* The AdamW and Muon groups' sizes. */
static void group_sizes(const optim *o, int muon, int *tensors, size_t *params)
{
	*tensors = 0;
	*params = 0;
	for (int i = 0; i < o->n_tensors; i++)
		if (o->is_muon[i] == muon) {
			(*tensors)++;
			*params += o->tensors[i].numel;
		}
}

/* The Muon group's distinct shapes in tensor order (whatever the sets):
 * their number; the s-th one's rows and cols through muon_shape, which
 * returns its count of matrices. */
static int muon_shape(const optim *o, int s, int *rows, int *cols)
{
	for (int i = 0, k = 0; i < o->n_tensors; i++) {
		const model_tensor *t = &o->tensors[i];
		int first = o->is_muon[i], count = 0;
		for (int j = 0; j < o->n_tensors; j++)
			if (o->is_muon[j] && shape_is(&o->tensors[j], t->rows, t->cols, 0)) {
				first &= j >= i;
				count++;
			}
		if (first && k++ == s) {
			*rows = t->rows;
			*cols = t->cols;
			return count;
		}
	}
	return 0;
}

static int muon_shapes(const optim *o)
{
	int n = 0, r, c;
	while (muon_shape(o, n, &r, &c))
		n++;
	return n;
}

#define APPEND(...)                                                    \
	do {                                                           \
		int k_ = snprintf(buf + len, n - len, __VA_ARGS__);    \
		if (k_ < 0 || (size_t)k_ >= n - len)                   \
			return -1;                                     \
		len += (size_t)k_;                                     \
	} while (0)

int optim_describe(const optim *o, char *buf, size_t n)
{
	const optim_config *c = &o->cfg;
	size_t len = 0, params;
	int tensors;
	buf[0] = 0;
	if (o->n_sets) {
		const muon_config *u = &c->muon;
		group_sizes(o, 1, &tensors, &params);
		int shapes = muon_shapes(o);
		APPEND("group muon: %d matrices (%zu parameters) in %d shape%s", tensors, params,
		       shapes, shapes > 1 ? "s" : "");
		for (int s = 0; s < shapes; s++) {
			int rows, cols, count = muon_shape(o, s, &rows, &cols);
			APPEND("%s%dx%d x%d", s ? ", " : " (", rows, cols, count);
		}
		APPEND("), lr %g, momentum %g", u->lr, u->momentum);
		if (u->momentum_warmup > 0)
			APPEND(" from %g over %lld steps", u->momentum_start, u->momentum_warmup);
		APPEND(" Nesterov, %d Newton-Schulz steps, scale %s, weight decay %g\n", u->ns_steps,
		       muon_scale_names[u->scale], u->weight_decay);
	}
	group_sizes(o, 0, &tensors, &params);
	APPEND("group adamw: %d tensors (%zu parameters), lr %g, betas %g/%g, eps %g, weight decay "
	       "%g (matrices)\nschedule %s", tensors, params, c->lr_max, c->beta1, c->beta2, c->eps,
	       c->weight_decay, lr_schedule_names[c->schedule]);
	if (c->schedule == SCHED_WSD)
		APPEND(" (decay over the last %g, %s)", c->decay_frac, decay_shape_names[c->decay_shape]);
	APPEND(", warmup %lld, to %g of the peak at step %lld", c->warmup,
	       c->lr_max > 0 ? c->lr_min / c->lr_max : 0, c->cycle);
	return 0;
}

int optim_groups_json(const optim *o, char *buf, size_t n)
{
	const optim_config *c = &o->cfg;
	size_t len = 0, params;
	int tensors;
	APPEND("[");
	if (o->n_sets) {
		const muon_config *u = &c->muon;
		group_sizes(o, 1, &tensors, &params);
		APPEND("{\"name\":\"muon\",\"tensors\":%d,\"parameters\":%zu,\"lr\":%.17g,"
		       "\"weight_decay\":%.17g,\"momentum\":%.17g,\"momentum_start\":%.17g,"
		       "\"momentum_warmup\":%lld,\"nesterov\":true,\"ns_steps\":%d,\"scale\":\"%s\"},",
		       tensors, params, u->lr, u->weight_decay, u->momentum, u->momentum_start,
		       u->momentum_warmup, u->ns_steps, muon_scale_names[u->scale]);
	}
	group_sizes(o, 0, &tensors, &params);
	APPEND("{\"name\":\"adamw\",\"tensors\":%d,\"parameters\":%zu,\"lr\":%.17g,"
	       "\"weight_decay\":%.17g,\"beta1\":%.17g,\"beta2\":%.17g,\"eps\":%.17g}]",
	       tensors, params, c->lr_max, c->weight_decay, c->beta1, c->beta2, c->eps);
	return 0;
}
