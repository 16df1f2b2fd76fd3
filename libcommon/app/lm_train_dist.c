/* lm_train_dist.c: what lm-train's data parallel run needs besides the
 * training loop (see lm_train_internal.h): the world and the communicator
 * at start, the check that every rank was started alike, the memory line,
 * and --gpus N started plainly, which execs the MPI launcher. */
#define _POSIX_C_SOURCE 200809L
#include "app/lm_train_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/launch.h"
#include "model/backend.h"

int train_dist_open(train_config *c, lm_comm **comm, lm_backend **be, lm_err *e)
{
	dist_env env;
	*comm = NULL;
	*be = NULL;
	if (dist_env_detect(&env, e))
		return -1;
	if (!c->threads) /* a rank's share of the host, not all of it */
		backend_set_threads(dist_default_threads(&env));
	if (c->gpus && c->gpus != env.world)
		return lm_usage_err(e, "--gpus %d, but the launcher started %d rank%s (%s): give the "
				    "same number", c->gpus, env.world, env.world == 1 ? "" : "s",
				    env.source);
	int cuda = strcmp(c->device, "cpu") != 0;
	if (c->zero < 0 || c->zero > 2)
		return lm_usage_err(e, "--zero %d: give 0, 1 or 2", c->zero);
	if (cuda)
		backend_set_device(env.local_rank);
	if (!(*be = backend_open(c->device, e)))
		return -1;
	dist_options o = {
		.nccl_init = c->nccl_init, .timeout_s = c->dist_timeout,
		/* CUDA: NCCL whenever the run is data parallel in any way, so
		 * that --gpus 1 and --nccl-init exercise it at a world of one */
		.device_buffers = cuda && (env.world > 1 || c->gpus || c->nccl_init || c->zero),
		.stream = (*be)->native_stream ? (*be)->native_stream(*be) : NULL,
	};
	if (c->nccl_init && !cuda)
		return lm_usage_err(e, "--nccl-init is for --device cuda (the CPU ranks use MPI)");
	if (dist_open(comm, &env, &o, e))
		return -1;
	c->world = env.world;
	c->rank = env.rank;
	return 0;
}

static uint64_t hash_str(const char *s, uint64_t h)
{
	return dist_hash(s ? s : "", s ? strlen(s) + 1 : 1, h);
}

int train_dist_check(lm_comm *comm, const train_config *c, const model_config *mc,
		     const char *hparams, lm_err *e)
{
	uint64_t h = DIST_HASH_INIT;
	int ints[] = { mc->vocab, mc->ctx, mc->d_model, mc->n_layers, mc->n_heads, mc->d_ff,
		       mc->tie_embeddings, c->zero };
	double dbl[] = { mc->rope_theta, c->bucket_mb };
	h = dist_hash(ints, sizeof ints, h);
	h = dist_hash(dbl, sizeof dbl, h);
	h = hash_str(hparams, h);
	h = hash_str(c->device, h);
	return dist_check_same(comm, h, "configuration (options, model shape, data)", e);
}

static double mib(double bytes)
{
	return bytes / (1024.0 * 1024.0);
}

void train_dist_memory(const train_config *c, const ddp *d)
{
	ddp_memory m;
	ddp_memory_use(d, &m);
	const char *grads = m.grads_sharded ? " (this rank's shard and the range buffers in flight)"
			  : c->zero == 2 ? " (whole: --accum > 1 accumulates the micro-batches in it, "
					   "so ZeRO-2 shards it only with --accum 1)"
			  : "";
	train_note(c, "%d rank%s%s, per rank: weights %.1f MiB, gradients %.1f MiB%s, optimizer state "
		   "%.1f MiB%s, communication scratch %.1f MiB", c->world, c->world == 1 ? "" : "s",
		   c->zero ? (c->zero == 1 ? ", ZeRO-1" : ", ZeRO-2") : "", mib(m.params),
		   mib(m.grads), grads, mib(m.optim), c->zero ? " (this rank's shard)" : "",
		   mib(m.scratch));
}

int train_launch(int gpus, char **argv, lm_err *e)
{
	return dist_launch(gpus, argv, e);
}
