/* test_dist.c: the pieces of data parallel training that one process can
 * check (libcommon/dist): the launcher's environment, a rank's default
 * share of the host's threads, the shard partition,
 * the local communicator, NCCL's id through a file and over TCP (two
 * processes, fork), the embedding backward pass that adds a call's sum
 * (what lets N ranks' gradients equal one process's accumulation), and the
 * ZeRO step on shards equal to the whole-buffer step. */
#define _POSIX_C_SOURCE 200809L
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "base/rng.h"
#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/nccl_id.h"
#include "kernels/embedding.h"
#include "model/backend.h"
#include "model/optimizer.h"

static const char *const VARS[] = { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
				    "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "SLURM_PROCID",
				    "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_SIZE",
				    "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID", NULL };

static void clear_env(void)
{
	for (int i = 0; VARS[i]; i++)
		unsetenv(VARS[i]);
}

static void test_env(void)
{
	dist_env d;
	lm_err e;
	clear_env();
	ok(!dist_env_detect(&d, &e) && d.rank == 0 && d.world == 1 && !strcmp(d.source, "none"),
	   "no launcher: a world of one");
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_NTASKS", "3", 1);
	setenv("SLURM_LOCALID", "1", 1);
	ok(!dist_env_detect(&d, &e) && d.rank == 1 && d.world == 3 && d.local_rank == 1 &&
	   !strcmp(d.source, "slurm"), "Slurm: rank 1 of 3, local rank 1");
	setenv("PMIX_RANK", "2", 1);
	ok(!dist_env_detect(&d, &e) && d.rank == 2 && d.world == 3 && !strcmp(d.source, "pmix"),
	   "PMIx before Slurm (srun --mpi=pmix)");
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	ok(!dist_env_detect(&d, &e) && d.rank == 3 && d.world == 4 && d.local_rank == 0 &&
	   !strcmp(d.source, "mpirun"), "mpirun's variables first");
	ok(d.local_size == 0, "mpirun without OMPI_COMM_WORLD_LOCAL_SIZE: the local size unknown");
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	ok(!dist_env_detect(&d, &e) && d.local_size == 2, "mpirun: 2 ranks on this host");
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("PMIX_RANK");
	setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1", 1);
	setenv("SLURM_NODEID", "2", 1);
	ok(!dist_env_detect(&d, &e) && !strcmp(d.source, "slurm") && d.local_size == 1,
	   "srun, node 2 of tasks '2(x2),1': one rank on this host");
	setenv("SLURM_NODEID", "1", 1);
	ok(!dist_env_detect(&d, &e) && d.local_size == 2, "node 1: two");
	setenv("SLURM_STEP_TASKS_PER_NODE", "2(x", 1);
	ok(!dist_env_detect(&d, &e) && d.local_size == 0, "a malformed spec: unknown, not an error");
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_RANK", "4", 1);
	ok(dist_env_detect(&d, &e) && strstr(e.msg, "OMPI_COMM_WORLD_RANK=4 is not below"),
	   "a rank outside the world: %s", e.msg);
	setenv("OMPI_COMM_WORLD_RANK", "x", 1);
	ok(dist_env_detect(&d, &e) && strstr(e.msg, "'x' is not a number"), "a malformed rank: %s",
	   e.msg);
	clear_env();
}

static void test_threads(void)
{
	ok(dist_tasks_on_node("4", 0) == 4 && dist_tasks_on_node("4", 1) == -1,
	   "tasks per node '4': node 0 four, no node 1");
	ok(dist_tasks_on_node("2(x3),1", 0) == 2 && dist_tasks_on_node("2(x3),1", 2) == 2 &&
	   dist_tasks_on_node("2(x3),1", 3) == 1 && dist_tasks_on_node("2(x3),1", 4) == -1,
	   "'2(x3),1': 2, 2, 2, 1, then none");
	ok(dist_tasks_on_node("", 0) == -1 && dist_tasks_on_node("x", 0) == -1 &&
	   dist_tasks_on_node("2(x0)", 0) == -1 && dist_tasks_on_node("2(3)", 0) == -1 &&
	   dist_tasks_on_node("2,", 1) == -1 && dist_tasks_on_node("2", -1) == -1,
	   "malformed specs and nodes: -1");
	dist_env one = { 0, 1, 0, "none", 1 }, two = { 1, 2, 1, "mpirun", 2 };
	dist_env four = { 3, 8, 3, "mpirun", 4 }, unknown = { 1, 2, 1, "slurm", 0 };
	ok(dist_rank_threads(&one, 16, 16) == 0, "a world of one: OpenMP's default (0)");
	ok(dist_rank_threads(&unknown, 16, 16) == 0, "an unknown local size: OpenMP's default");
	ok(dist_rank_threads(&two, 16, 16) == 8, "2 unbound ranks on 16 processors: 8 each");
	ok(dist_rank_threads(&two, 1, 16) == 1, "a rank bound to one core keeps one");
	ok(dist_rank_threads(&four, 16, 32) == 8,
	   "4 ranks bound to the 16-processor packages of 32: two share a package, 8 each");
	ok(dist_rank_threads(&four, 2, 64) == 2, "4 ranks of 2 processors each (srun -c 2): 2");
	ok(dist_rank_threads(&four, 3, 3) == 1, "more ranks than processors: 1 each, not 0");
}

static void test_partition(void)
{
	size_t part[6];
	dist_partition(part, 1000, 5, 64);
	int good = part[0] == 0 && part[5] == 1000;
	for (int r = 0; r < 5; r++)
		good &= part[r] <= part[r + 1] && (part[r] % 64 == 0);
	ok(good, "partition of 1000 over 5: aligned, ordered, whole (%zu %zu %zu %zu %zu %zu)",
	   part[0], part[1], part[2], part[3], part[4], part[5]);
	dist_partition(part, 10, 3, 64);
	ok(part[0] == 0 && part[3] == 10, "fewer values than the alignment: still whole");
}

static void test_local(void)
{
	lm_comm *c;
	lm_err e;
	dist_env env = { 0, 1, 0, "none", 1 };
	dist_options o = { 0 };
	if (!ok(!dist_open(&c, &env, &o, &e), "the local communicator opens without MPI"))
		return;
	float buf[8] = { 0 }, mine[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	size_t part[2] = { 0, 8 };
	lm_comm_req *r;
	ok(!c->gather_start(c, buf, mine + 2, 2, 6, part, -1, &r, &e) && !c->wait(c, r, "x", &e) &&
	   buf[2] == 3 && buf[5] == 6 && buf[6] == 0, "a local gather copies this rank's part");
	double x[2] = { 1.5, 2 };
	ok(!c->host_sum(c, x, 2, "x", &e) && x[0] == 1.5 && x[1] == 2, "a local sum is the value");
	ok(!dist_check_same(c, 42, "configuration", &e), "one rank agrees with itself");
	c->close(c, 1);
}

/* NCCL's id from rank 0 (this process) to rank 1 (a child). */
static void test_id(const char *spec, const char *what)
{
	unsigned char id[128], got[128];
	for (int i = 0; i < 128; i++)
		id[i] = (unsigned char)(i * 7 + 3);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		lm_err e;
		memset(got, 0, sizeof got);
		int rc = nccl_id_share(spec, 1, 2, got, sizeof got, 10, &e);
		_exit(rc ? 2 : memcmp(got, id, sizeof id) ? 3 : 0);
	}
	lm_err e;
	usleep(200000);  /* the other rank starts first and waits */
	int rc = nccl_id_share(spec, 0, 2, id, sizeof id, 10, &e);
	int st = 0;
	waitpid(pid, &st, 0);
	ok(!rc && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: rank 1 gets rank 0's id (%s; child %d)",
	   what, rc ? e.msg : "sent", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	nccl_id_done(spec, 0);
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof a;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &n))
		return -1;
	close(fd);
	return ntohs(a.sin_port);
}

static void test_ids(void)
{
	char dir[] = "/tmp/lmpipe-dist.XXXXXX", spec[128];
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(spec, sizeof spec, "file:%s/id", dir);
	test_id(spec, "--nccl-init file:");
	ok(access(spec + 5, F_OK) != 0, "rank 0 removes the file once the ranks joined");
	FILE *f = fopen(spec + 5, "w");
	if (f)
		fclose(f);
	unsigned char id[128] = { 0 };
	lm_err e;
	ok(nccl_id_share(spec, 0, 2, id, sizeof id, 1, &e) && strstr(e.msg, "the file exists"),
	   "a file left by an earlier run is refused: %s", e.msg);
	ok(nccl_id_share(spec, 1, 2, id, sizeof id, 1, &e) && strstr(e.msg, "not an id"),
	   "... and not taken for an id: %s", e.msg);
	remove(spec + 5);
	rmdir(dir);
	int port = free_port();
	snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", port);
	test_id(spec, "--nccl-init tcp:");
	ok(nccl_id_share("tcp:nocolon", 1, 2, id, sizeof id, 1, &e) && e.code == 2,
	   "tcp: without a port: %s", e.msg);
	ok(nccl_id_share("udp:x", 1, 2, id, sizeof id, 1, &e) && e.code == 2, "another scheme: %s",
	   e.msg);
}

/* Two calls into one table equal the two calls' separate tables added. */
static void test_embedding(void)
{
	enum { V = 5, C = 70, N = 40 };
	static float acc[V * C], t0[V * C], t1[V * C], dout[2][N * C];
	int32_t ids[2][N];
	lm_rng r;
	rng_seed(&r, 3);
	for (int k = 0; k < 2; k++)
		for (int n = 0; n < N; n++) {
			ids[k][n] = (int32_t)rng_below(&r, V);
			for (int c = 0; c < C; c++)
				dout[k][n * C + c] = (float)rng_normal(&r) * 1e-3f * (float)(1 + n % 7);
		}
	embedding_bwd_cpu(acc, ids[0], dout[0], N, C);
	embedding_bwd_cpu(acc, ids[1], dout[1], N, C);
	embedding_bwd_cpu(t0, ids[0], dout[0], N, C);
	embedding_bwd_cpu(t1, ids[1], dout[1], N, C);
	int same = 1;
	for (int i = 0; i < V * C; i++)
		same &= acc[i] == t0[i] + t1[i];
	ok(same, "embedding backward: accumulating two micro-batches is the sum of their gradients, "
	   "bit for bit");
}

/* A few AdamW steps through ddp with ZeRO-1 or 2 at a world of one (the
 * shard is the buffer, stepped through optim_step_range; ZeRO-2: the model
 * without its gradient buffer, the backward pass writing into the range
 * buffers, a bucket smaller than a layer, so every layer is a range of its
 * own) against the plain optimizer, with the embeddings tied or not. */
static void test_zero_step(int zero, int tied)
{
	model_config c = { 16, 8, 16, 3, 2, 24, 10000.0, tied, MODEL_PLAIN };
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model a, b;
	optim oa, ob;
	optim_config oc = { .lr_max = 1e-2, .lr_min = 1e-3, .warmup = 0, .cycle = 10, .beta1 = 0.9,
			    .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 0.5 };
	lm_rng r;
	lm_comm *comm;
	dist_env env = { 0, 1, 0, "none", 1 };
	dist_options o = { 0 };
	ddp *d;
	ddp_memory mem = { 0 };
	ddp_config dc = { .zero = zero, .bucket_mb = 0.0005 };
	if (!be || model_init(&a, &c, be, 2, 8, &e) ||
	    model_init_ex(&b, &c, be, 2, 8, ddp_model_flags(&dc), &e) ||
	    dist_open(&comm, &env, &o, &e) || ddp_init(&d, comm, &b, &dc, &e) ||
	    optim_init(&oa, &oc, &a, &e) || ddp_optim_init(d, &ob, &oc, &e)) {
		ok(0, "setup: %s", e.msg);
		return;
	}
	rng_seed(&r, 5);
	model_init_weights(&a, &r, &e);
	rng_seed(&r, 5);
	model_init_weights(&b, &r, &e);
	int32_t ids[16], tg[16];
	int fail = 0;
	for (int s = 0; s < 3; s++) {
		for (int i = 0; i < 16; i++) {
			ids[i] = (int32_t)rng_below(&r, c.vocab);
			tg[i] = (int32_t)rng_below(&r, c.vocab);
		}
		model_zero_grad(&a);
		model_zero_grad(&b);
		ddp_sync(d, 1);
		fail |= model_forward_loss(&a, ids, tg, 2, 8, 1.0f / 16, 1, &e) || model_backward(&a, 1.0f / 16, &e) ||
			model_forward_loss(&b, ids, tg, 2, 8, 1.0f / 16, 1, &e) || model_backward(&b, 1.0f / 16, &e) ||
			ddp_finish(d, &e);
		double f = optim_schedule(&oc, s);
		optim_clip(&oa, &a);
		optim_step_scheduled(&oa, &a, f);
		fail |= ddp_step(d, &ob, f, &e);
	}
	optim om;
	optim_config muon = oc;
	muon.kind = OPTIM_MUON;
	muon.muon.lr = 0.02;
	ok(ddp_optim_init(d, &om, &muon, &e) && e.code == 2 && strstr(e.msg, "AdamW only"),
	   "ZeRO-%d with Muon is refused: %s", zero, e.msg);
	ddp_memory_use(d, &mem);
	ok(zero == 1 ? b.grads && !mem.grads_sharded : !b.grads && mem.grads_sharded,
	   "ZeRO-%d: %s", zero, zero == 1 ? "the model keeps its gradient buffer" :
	   "the model has no gradient buffer of its own, the memory line says the gradients are sharded");
	ok(!fail && !memcmp(a.params, b.params, a.n_params * sizeof(float)) &&
	   !memcmp(oa.m, ob.m, a.n_params * sizeof(float)) && !memcmp(oa.v, ob.v, a.n_params * sizeof(float)),
	   "ZeRO-%d steps (%s embeddings, clipping on) equal the plain AdamW steps%s%s", zero,
	   tied ? "tied" : "untied", fail ? ": " : "", fail ? e.msg : "");
	ddp_free(d);
	optim_free(&oa, &a);
	optim_free(&ob, &b);
	model_free(&a);
	model_free(&b);
	comm->close(comm, 1);
	be->close(be);
}

int main(void)
{
	test_env();
	test_threads();
	test_partition();
	test_local();
	test_ids();
	test_embedding();
	for (int zero = 1; zero <= 2; zero++)
		for (int tied = 0; tied <= 1; tied++)
			test_zero_step(zero, tied);
	return done_testing();
}
