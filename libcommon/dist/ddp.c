/* ddp.c: data parallel training over a communicator (see ddp.h): the
 * bucketed gradient sums started from model_backward's grad_ready hook,
 * the whole or sharded (ZeRO) optimizer step, and the checkpoints.
 *
 * Buckets.  The parameter buffer holds the embedding, the layers 0 .. L-1,
 * the final norm and the LM head, in that order, and the backward pass
 * finishes them from the end: when layer l is ready, everything from its
 * first parameter to the end of the buffer is final.  The hook starts the
 * sum of the part not yet started once it holds a bucket's worth (and of
 * the rest at the embedding), in pieces of at most one bucket, so the
 * scratch of a sum stays bounded.  ZeRO-2's parts are in ddp_zero2.c. */
#include "dist/ddp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void on_ready(void *arg, int layer)
{
	ddp *d = arg;
	if (!d->sync)
		return;
	if (d->z2) {
		z2_ready(d, layer);
		return;
	}
	if (d->failed)
		return;
	ddp_progress(d, &d->reqs);
	size_t start = ddp_layer_offset(d->m, layer);
	if (layer < 0 || d->flushed - start >= d->bucket) {
		ddp_start_sums(d, &d->reqs, d->m->grads, start, d->flushed, d->part);
		d->flushed = start;
	}
}

int ddp_model_flags(const ddp_config *cfg)
{
	return cfg->zero == 2 && cfg->accum <= 1 ? MODEL_NO_GRADS : 0;
}

int ddp_init(ddp **out, lm_comm *c, model *m, const ddp_config *cfg, lm_err *e)
{
	if (cfg->zero < 0 || cfg->zero > 2)
		return lm_usage_err(e, "--zero %d: give 0, 1 or 2", cfg->zero);
	ddp *d = calloc(1, sizeof *d);
	if (!d || !(d->part = malloc(((size_t)c->world + 1) * sizeof *d->part))) {
		free(d);
		return lm_seterr(e, "out of memory");
	}
	d->c = c;
	d->m = m;
	d->zero = cfg->zero;
	d->n = m->n_params;
	double mb = cfg->bucket_mb > 0 ? cfg->bucket_mb : DDP_BUCKET_MB;
	d->bucket = (size_t)(mb * 1024 * 1024 / sizeof(float));
	if (d->bucket < SHARD_ALIGN)
		d->bucket = SHARD_ALIGN;
	d->flushed = d->n;
	dist_partition(d->part, d->n, c->world, SHARD_ALIGN);
	if ((m->grads == NULL) != (ddp_model_flags(cfg) == MODEL_NO_GRADS)) {
		ddp_free(d);
		return lm_seterr(e, "ddp_init: the model was made %s its gradient buffer, ZeRO-%d "
				 "with --accum %d needs it %s", m->grads ? "with" : "without", cfg->zero,
				 cfg->accum, m->grads ? "left out" : "made");
	}
	if (!m->grads && z2_init(d, e)) {
		ddp_free(d);
		return -1;
	}
	m->grad_ready = on_ready;
	m->grad_ready_arg = d;
	*out = d;
	return 0;
}

/* Collectives still pending here belong to a failed step: the
 * communicator is (being) aborted, so they are not waited for. */
void ddp_free(ddp *d)
{
	if (!d)
		return;
	if (d->m->grad_ready_arg == d) {
		d->m->grad_ready = NULL;
		d->m->grad_ready_arg = NULL;
	}
	z2_free(d);
	free(d->reqs.v);
	free(d->part);
	free(d);
}

void ddp_shard(const ddp *d, size_t *lo, size_t *hi)
{
	*lo = d->zero ? d->part[d->c->rank] : 0;
	*hi = d->zero ? d->part[d->c->rank + 1] : d->n;
}

void ddp_memory_use(const ddp *d, ddp_memory *mem)
{
	size_t lo, hi, f = sizeof(float), act = lm_dtype_size(d->m->be->act);
	ddp_shard(d, &lo, &hi);
	mem->params = (double)d->n * f + (d->m->wact != d->m->params ? (double)d->n * act : 0);
	mem->grads = d->z2 ? z2_bytes(d) : (double)d->n * f;
	mem->grads_sharded = d->z2 != NULL;
	mem->optim = 2.0 * (hi - lo) * f;
	/* a sum holds every rank's copy of this rank's part of a bucket */
	size_t own = d->part[d->c->rank + 1] - d->part[d->c->rank];
	size_t piece = own < d->bucket ? own : d->bucket;
	mem->scratch = d->c->world > 1 && !strcmp(d->c->name, "mpi") ? (double)d->c->world * piece * f : 0;
}

int ddp_optim_init(ddp *d, optim *o, const optim_config *c, lm_err *e)
{
	size_t lo, hi;
	ddp_shard(d, &lo, &hi);
	return d->zero ? optim_init_range(o, c, d->m, lo, hi, e) : optim_init(o, c, d->m, e);
}

void ddp_sync(ddp *d, int on)
{
	d->sync = on || d->z2;  /* ZeRO-2's gradients have nowhere to accumulate locally */
	d->flushed = d->n;
	if (d->z2)
		z2_sync(d);
}

int ddp_finish(ddp *d, lm_err *e)
{
	if (!d->sync)
		return 0;
	if (d->z2) {
		d->sync = 0;
		return z2_finish(d, e);
	}
	/* A backward pass that did not reach the hook's last call, or none (a
	 * rank without a micro-batch of its own): the hook's calls are made
	 * now (sync still on), so the sums are cut in the pieces the other
	 * ranks cut. */
	for (int l = d->m->cfg.n_layers - 1; d->flushed > 0 && l >= -1; l--)
		if (l < 0 || ddp_layer_offset(d->m, l) < d->flushed)
			on_ready(d, l);
	d->sync = 0;
	d->flushed = d->n;
	if (d->failed) {
		*e = d->err;
		ddp_wait_all(d, &d->reqs, "the gradient sums", NULL);
		return -1;
	}
	if (ddp_wait_all(d, &d->reqs, "the gradient sums", e))
		return -1;
	if (d->zero || d->c->world == 1)
		return 0;
	size_t lo = d->part[d->c->rank];
	lm_comm_req *r;
	if (d->c->gather_start(d->c, d->m->grads, d->m->grads + lo, 0, d->n, d->part, -1, &r, e))
		return -1;
	return d->c->wait(d->c, r, "the gathering of the summed gradients", e);
}

int ddp_step(ddp *d, optim *o, double factor, lm_err *e)
{
	optim_stage_scheduled(o, d->m, factor);
	return ddp_step_staged(d, o, e);
}

int ddp_step_staged(ddp *d, optim *o, lm_err *e)
{
	model *m = d->m;
	lm_backend *be = m->be;
	if (!d->zero) {
		optim_clip(o, m);
		optim_step_staged(o, m);
		return 0;
	}
	size_t lo, hi;
	ddp_shard(d, &lo, &hi);
	const float *g = d->z2 ? z2_shard(d) : m->grads + lo;
	if (d->c->world == 1) {
		/* the shard is the whole buffer: the norm needs no host round
		 * trip (a wait for the whole backward pass), the weights no
		 * gathering, their act copy no refresh (the step writes it) */
		be->sumsq(be, &m->sc->sumsq, g, hi - lo);
		be->clip_scale(be, &m->sc->grad_scale, &m->sc->sumsq, o->cfg.clip);
		optim_step_range_staged(o, m, g, lo, hi);
		return 0;
	}
	double s = 0;
	if (hi > lo) {
		be->sumsq(be, &m->sc->sumsq, g, hi - lo);
		be->download(be, &s, &m->sc->sumsq, sizeof s);
		if (ddp_settle(d, "the gradient sums", e) || be->sync(be, e))
			return -1;
	}
	if (d->c->host_sum(d->c, &s, 1, "the gradient norm", e))
		return -1;
	be->upload(be, &m->sc->sumsq, &s, sizeof s);
	be->clip_scale(be, &m->sc->grad_scale, &m->sc->sumsq, o->cfg.clip);
	optim_step_range_staged(o, m, g, lo, hi);
	lm_comm_req *r;
	if (d->c->gather_start(d->c, m->params, m->params + lo, 0, d->n, d->part, -1, &r, e))
		return -1;
	if (d->c->wait(d->c, r, "the gathering of the updated weights", e))
		return -1;
	model_params_changed(m);
	return 0;
}

int ddp_settle(ddp *d, const char *what, lm_err *e)
{
	return d->c->settle ? d->c->settle(d->c, what, e) : 0;
}

int ddp_agree(ddp *d, int rc, const char *what, lm_err *e)
{
	double bad = rc ? 1 : 0;
	lm_err mine;
	if (d->c->world == 1)
		return rc;
	if (d->c->host_sum(d->c, &bad, 1, what, rc ? &mine : e))
		return -1;
	if (bad > 0 && !rc)
		return lm_seterr(e, "another rank failed during %s", what);
	return rc;
}

/* An optimizer whose m and v cover the whole buffer, for checkpoints. */
static int full_optim(ddp *d, const optim *o, optim *full, lm_err *e)
{
	lm_backend *be = d->m->be;
	*full = *o;
	full->m = be->alloc(be, d->n * sizeof(float));
	full->v = full->m ? be->alloc(be, d->n * sizeof(float)) : NULL;
	if (!full->v) {
		if (full->m)
			be->release(be, full->m);
		lm_err why;
		be->sync(be, &why);
		return lm_seterr(e, "%s, for gathering the optimizer state", why.msg);
	}
	return 0;
}

static void full_free(ddp *d, optim *full)
{
	d->m->be->release(d->m->be, full->m);
	d->m->be->release(d->m->be, full->v);
}

int ddp_save(ddp *d, const char *path, const optim *o, const train_state *st, lm_err *e)
{
	int root = d->c->rank == 0;
	if (!d->zero)
		return ddp_agree(d, root ? ckpt_save(path, d->m, o, st, e) : 0, "the checkpoint", e);
	optim full = *o;
	int rc = root ? full_optim(d, o, &full, e) : 0;
	if (ddp_agree(d, rc, "the checkpoint", e))
		return -1;
	size_t lo, hi;
	ddp_shard(d, &lo, &hi);
	for (int k = 0; k < 2 && !rc; k++) {
		float *buf = k ? full.v : full.m, *mine = k ? o->v : o->m;
		lm_comm_req *r;
		rc = d->c->gather_start(d->c, root ? buf : NULL, mine, 0, d->n, d->part, 0, &r, e) ||
		     d->c->wait(d->c, r, "the gathering of the optimizer state", e);
	}
	if (!rc)
		rc = ddp_settle(d, "the gathering of the optimizer state", e);
	if (!rc && root)
		rc = ckpt_save(path, d->m, &full, st, e);
	if (root)
		full_free(d, &full);
	return ddp_agree(d, rc ? -1 : 0, "the checkpoint", e);
}

int ddp_load(ddp *d, const char *path, optim *o, train_state *st, lm_err *e)
{
	if (!d->zero)
		return ckpt_load(path, d->m, o, st, e);
	optim full;
	if (full_optim(d, o, &full, e))
		return -1;
	size_t lo, hi;
	ddp_shard(d, &lo, &hi);
	int rc = ckpt_load(path, d->m, &full, st, e);
	if (!rc && hi > lo) {
		d->m->be->copy(d->m->be, o->m, full.m + lo, (hi - lo) * sizeof(float));
		d->m->be->copy(d->m->be, o->v, full.v + lo, (hi - lo) * sizeof(float));
	}
	o->t = full.t;
	full_free(d, &full);
	return rc ? -1 : d->m->be->sync(d->m->be, e);
}
