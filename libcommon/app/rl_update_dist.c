/* rl_update_dist.c: rl-update data parallel (see rl_update_internal.h):
 * the world and the communicator at start, each rank's share of a
 * batch's micro-batches, and the sums of the gradients (dist/ddp.h, the
 * buckets lm-train uses) and of the statistics. */
#include "app/rl_update_internal.h"

#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "dist/ddp.h"
#include "model/backend.h"

int rlu_par_open(rlu_par *p, const rlu_opts *o, int in_stdin, lm_backend **be, lm_err *e)
{
	dist_env env;
	memset(p, 0, sizeof *p);
	*be = NULL;
	if (dist_env_detect(&env, e))
		return -1;
	if (!o->threads) /* a rank's share of the host, not all of it */
		backend_set_threads(dist_default_threads(&env));
	if (o->gpus && o->gpus != env.world)
		return lm_usage_err(e, "--gpus %d, but the launcher started %d rank%s (%s): give the "
				    "same number", o->gpus, env.world, env.world == 1 ? "" : "s", env.source);
	if (env.world > 1 && in_stdin)
		return lm_usage_err(e, "%d ranks read the records from stdin, which the launcher gives "
				    "to rank 0 only: give them as FILE", env.world);
	const char *device = o->device ? o->device : "cpu";
	int cuda = strcmp(device, "cpu") != 0;
	if (cuda)
		backend_set_device(env.local_rank);
	if (!(*be = backend_open(device, e)))
		return -1;
	dist_options d = {
		.device_buffers = cuda && env.world > 1,
		.stream = (*be)->native_stream ? (*be)->native_stream(*be) : NULL,
	};
	if (dist_open(&p->comm, &env, &d, e))
		return -1;
	p->rank = env.rank;
	p->world = env.world;
	return 0;
}

int rlu_par_attach(rlu_par *p, model *m, lm_err *e)
{
	ddp_config dc = { .zero = 0 };
	return ddp_init(&p->dp, p->comm, m, &dc, e);
}

void rlu_par_close(rlu_par *p, int ok)
{
	ddp_free(p->dp);
	if (p->comm)
		p->comm->close(p->comm, ok);
	memset(p, 0, sizeof *p);
}

void rlu_par_share(const rlu_par *p, size_t M, size_t *first, size_t *end)
{
	*first = M * (size_t)p->rank / (size_t)p->world;
	*end = M * ((size_t)p->rank + 1) / (size_t)p->world;
}

void rlu_par_before(rlu_par *p, size_t j, size_t end)
{
	p->armed = j + 1 == end;
	ddp_sync(p->dp, p->armed);
}

int rlu_par_sum(rlu_par *p, double *x, int n, lm_err *e)
{
	return p->comm->host_sum(p->comm, x, n, "the sums of the statistics", e);
}

int rlu_par_grads(rlu_par *p, value_head *h, lm_err *e)
{
	/* a rank without a micro-batch of its own (or whose last one had no
	 * response tokens, so no backward pass) still joins the sums: the
	 * buckets are started at ddp_finish */
	if (!p->armed)
		ddp_sync(p->dp, 1);
	p->armed = 0;
	if (ddp_finish(p->dp, e) || ddp_settle(p->dp, "the gradient sums", e))
		return -1;
	if (!h || p->world == 1)
		return 0;
	size_t n = (size_t)h->d + 1;
	double *x = malloc(n * sizeof *x);
	if (!x)
		return lm_seterr(e, "out of memory");
	for (size_t i = 0; i < n; i++)
		x[i] = i < (size_t)h->d ? h->gw[i] : h->gb[0];
	int rc = p->comm->host_sum(p->comm, x, (int)n, "the value head's gradient sums", e);
	for (size_t i = 0; !rc && i < n; i++)
		*(i < (size_t)h->d ? &h->gw[i] : &h->gb[0]) = (float)x[i];
	free(x);
	return rc;
}

int rlu_par_stats(rlu_par *p, stats *st, lm_err *e)
{
	if (p->world == 1)
		return 0;
	double x[] = {
		st->loss, st->entropy_sum, st->logp_sum, (double)st->tokens, st->clipped, st->kl_sum,
		st->ratio_sum, st->margin_sum, (double)st->pairs, (double)st->right, st->ppo.pg,
		st->ppo.vf, st->ppo.entropy, st->ppo.clipped, st->ppo.vf_clipped, st->ppo.ratio,
		(double)st->ppo.tokens,
	};
	if (rlu_par_sum(p, x, (int)(sizeof x / sizeof x[0]), e))
		return -1;
	int k = 0;
	st->loss = x[k++], st->entropy_sum = x[k++], st->logp_sum = x[k++];
	st->tokens = (long long)x[k++], st->clipped = x[k++], st->kl_sum = x[k++];
	st->ratio_sum = x[k++], st->margin_sum = x[k++], st->pairs = (long long)x[k++];
	st->right = (long long)x[k++], st->ppo.pg = x[k++], st->ppo.vf = x[k++];
	st->ppo.entropy = x[k++], st->ppo.clipped = x[k++], st->ppo.vf_clipped = x[k++];
	st->ppo.ratio = x[k++], st->ppo.tokens = (long long)x[k++];
	return 0;
}

int rlu_par_agree(rlu_par *p, int rc, const char *what, lm_err *e)
{
	return ddp_agree(p->dp, rc, what, e);
}
