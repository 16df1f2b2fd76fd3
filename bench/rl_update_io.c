/* rl_update_io.c: where rl-update's reading and writing go, for
 * bench/rl-update-io.sh: the steps before the first forward pass (the
 * checkpoint's config, the backend, the rollouts parsed as JSON, the
 * model and AdamW state allocated, the weights loaded) and the checkpoint
 * written after the update (weights and AdamW state, ckpt_save_extra, into
 * OUT/step.safetensors).  The rollouts are parsed both ways in the same
 * call: a record at a time (jsonl_next, as rl-update did) and in batches
 * on threads (jsonl_next_batch, as it does); the conversion of the parsed
 * records into sequences is not timed.  One JSON line a repeat, seconds.
 *
 * usage: rl_update_io DEVICE CHECKPOINT ROLLOUTS OUT REPEAT   (threads: OMP_NUM_THREADS) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonl.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/model.h"
#include "model/optimizer.h"

enum { MICRO_BATCH = 64 };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, const lm_err *e)
{
	fprintf(stderr, "rl_update_io: %s: %s\n", what, e->msg);
	return 1;
}

/* Parse every record of path, the count into *n; batch: jsonl_next_batch. */
static int parse(const char *path, int batch, size_t *n, lm_err *e)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return lm_seterr(e, "%s:", path);
	jsonl_reader r;
	jsonl_init(&r, fp, path);
	int rc;
	*n = 0;
	if (batch) {
		jsonl_batch b;
		jsonl_batch_init(&b);
		do {
			rc = jsonl_next_batch(&r, JSON_ALLOW_NUL, &b, JSONL_BATCH, e);
			*n += b.n;
		} while (rc == JSONL_OK);
		jsonl_batch_free(&b);
	} else {
		json_t *o;
		while ((rc = jsonl_next(&r, JSON_ALLOW_NUL, &o, e)) == JSONL_OK) {
			json_decref(o);
			++*n;
		}
	}
	jsonl_free(&r);
	fclose(fp);
	return rc == JSONL_END ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: rl_update_io DEVICE CHECKPOINT ROLLOUTS OUT REPEAT\n");
		return 2;
	}
	const char *dev = argv[1], *ck = argv[2], *ro = argv[3], *out = argv[4];
	int repeat = atoi(argv[5]);
	char path[4096];
	snprintf(path, sizeof path, "%s/step.safetensors", out);
	for (int k = 0; k < repeat; k++) {
		lm_err e;
		model_config cfg;
		double t0 = now_s();
		if (ckpt_read_config(ck, &cfg, &e))
			return fail("config", &e);
		double t1 = now_s();
		lm_backend *be = backend_open(dev, &e);
		if (!be)
			return fail("backend", &e);
		double t2 = now_s();
		size_t n1, n2;
		if (parse(ro, 0, &n1, &e))
			return fail("parse", &e);
		double t3 = now_s();
		if (parse(ro, 1, &n2, &e))
			return fail("parse in batches", &e);
		double t4 = now_s();
		model m;
		optim o;
		optim_config oc = { .lr_max = 1e-5, .lr_min = 1e-5, .cycle = 1, .beta1 = 0.9,
				    .beta2 = 0.95, .eps = 1e-8 };
		train_state ts = { 0 };
		if (model_init(&m, &cfg, be, MICRO_BATCH, cfg.ctx, &e))
			return fail("model_init", &e);
		double t5 = now_s();
		if (optim_init(&o, &oc, &m, &e))
			return fail("optim_init", &e);
		double t6 = now_s();
		if (ckpt_load(ck, &m, NULL, &ts, &e) || be->sync(be, &e))
			return fail("load", &e);
		double t7 = now_s();
		unlink(path);
		if (ckpt_save_extra(path, &m, &o, &ts, NULL, 0, &e))
			return fail("save", &e);
		double t8 = now_s();
		struct stat st;
		double mb = stat(path, &st) ? 0 : (double)st.st_size / 1e6;
		printf("{\"bench\":\"rl-update-io\",\"device\":\"%s\",\"records\":%zu,\"threads\":%d,"
		       "\"config_s\":%.4f,\"backend_s\":%.4f,\"parse_one_by_one_s\":%.4f,"
		       "\"parse_batches_s\":%.4f,\"model_init_s\":%.4f,\"optim_init_s\":%.4f,"
		       "\"load_s\":%.4f,\"save_s\":%.4f,\"save_mb\":%.1f}\n",
		       dev, n2 == n1 ? n2 : 0, omp_get_max_threads(), t1 - t0, t2 - t1, t3 - t2,
		       t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7, mb);
		fflush(stdout);
		optim_free(&o, &m);
		model_free(&m);
		be->close(be);
	}
	unlink(path);
	return 0;
}
