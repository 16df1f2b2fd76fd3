/* lm_train.c: the training loop of lm-train (see lm_train.h): batches from the
 * shard reader, forward/backward with gradient accumulation, clipping,
 * AdamW on the cosine schedule, evaluation on the validation shards,
 * checkpoints (DIR/step-NNNNNNNN.safetensors and DIR/latest), metrics as
 * JSON Lines and one progress line on stderr. */
#define _POSIX_C_SOURCE 200809L
#include "app/lm_train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/atomic.h"
#include "cli/progress.h"
#include "data/shard_reader.h"
#include "model/backend.h"
#include "model/ckpt.h"

enum { NAME_MAX_LEN = 64, EXTRA_LEN = 96 };

typedef struct trainer {
	const train_config *tc;
	model m;
	optim o;
	train_state st;
	shard_reader *data, *val;
	uint32_t *win;               /* B x (T + 1) window buffer */
	int32_t *ids, *tgt;
	FILE *log;
	char last_ckpt[4096];
	int B, T;
} trainer;

static int open_reader(shard_reader **r, const char *const *paths, size_t n, sr_mode mode,
		       const trainer *t, lm_err *e)
{
	sr_config c = { .mode = mode, .batch = t->B, .context = t->T, .seed = t->st.data_seed,
			.prefetch = 1 };
	if (sr_open(r, paths, n, &c, e))
		return -1;
	if (sr_vocab_size(*r) > (uint32_t)t->m.cfg.vocab)
		return lm_seterr(e, "%s: the shards' vocabulary (%u) is larger than the model's (%d)",
				 paths[0], sr_vocab_size(*r), t->m.cfg.vocab);
	return 0;
}

/* Split windows of T + 1 tokens into inputs and targets. */
static void split_windows(trainer *t, int rows)
{
	int T = t->T;
	for (int b = 0; b < rows; b++)
		for (int i = 0; i < T; i++) {
			t->ids[b * T + i] = (int32_t)t->win[(size_t)b * (T + 1) + i];
			t->tgt[b * T + i] = (int32_t)t->win[(size_t)b * (T + 1) + i + 1];
		}
}

/* The validation loss: every batch queued, the loss sum read once. */
static int evaluate(trainer *t, double *val_loss, lm_err *e)
{
	long long count = 0;
	if (sr_seek(t->val, 0, e))
		return -1;
	model_loss_reset(&t->m);
	for (long long i = 0; !t->tc->eval_batches || i < t->tc->eval_batches; i++) {
		int rows = sr_next(t->val, t->win, e);
		if (rows < 0)
			return -1;
		if (rows == 0)
			break;
		split_windows(t, rows);
		if (model_forward_loss(&t->m, t->ids, t->tgt, rows, t->T, 0, 0, e))
			return -1;
		count += model_count(&t->m);
	}
	lm_scalars s;
	if (model_read_scalars(&t->m, &s, e))
		return -1;
	*val_loss = count ? s.loss_sum / count : NAN;
	return 0;
}

static int save(trainer *t, lm_err *e)
{
	const char *dir = t->tc->out_dir;
	char name[NAME_MAX_LEN];
	snprintf(name, sizeof name, "step-%08lld.safetensors", t->st.step);
	t->st.data_pos = sr_tell(t->data);
	snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s/%s", dir, name);
	if (ckpt_save(t->last_ckpt, &t->m, &t->o, &t->st, e) || ckpt_set_latest(dir, name, e))
		return -1;
	return 0;
}

/* One optimizer step: accum micro-batches, then clipping and AdamW, all
 * queued on the backend; the loss and the gradient norm are read once, at
 * the end.  *loss is the mean loss over the step's tokens. */
static int step(trainer *t, double lr, double *loss, double *gnorm, lm_err *e)
{
	const train_config *tc = t->tc;
	long long count = 0;
	model_zero_grad(&t->m);
	model_loss_reset(&t->m);
	for (int a = 0; a < tc->accum; a++) {
		if (sr_next(t->data, t->win, e) < 0)
			return -1;
		split_windows(t, t->B);
		float scale = 1.0f / (float)((long long)t->B * t->T * tc->accum);
		if (model_forward_loss(&t->m, t->ids, t->tgt, t->B, t->T, scale, 1, e) ||
		    model_backward(&t->m, scale, e))
			return -1;
		count += model_count(&t->m);
	}
	optim_clip(&t->o, &t->m);
	optim_step_clipped(&t->o, &t->m, lr);
	lm_scalars s;
	if (model_read_scalars(&t->m, &s, e))
		return lm_err_prefix(e, "step %lld", t->st.step + 1);
	*loss = count ? s.loss_sum / count : 0.0;
	*gnorm = sqrt(s.sumsq);
	return 0;
}

static int stop_nonfinite(trainer *t, double loss, double gnorm, lm_err *e)
{
	return lm_seterr(e, "step %lld: %s is %s; stopped%s%s", t->st.step + 1,
			 isfinite(loss) ? "gradient norm" : "loss",
			 isfinite(loss) ? (isnan(gnorm) ? "nan" : "inf") : (isnan(loss) ? "nan" : "inf"),
			 t->last_ckpt[0] ? ", last good checkpoint " : " (no checkpoint written)",
			 t->last_ckpt);
}

enum { PROFILE_ROWS = 64 };

static int report_profile(trainer *t, int steps, double wall_ms, lm_err *e)
{
	lm_prof_row rows[PROFILE_ROWS];
	int n = prof_rows(t->m.be, rows, PROFILE_ROWS, e);
	if (n < 0)
		return -1;
	if (t->tc->on_profile)
		t->tc->on_profile(t->tc->profile_arg, rows, n, steps, wall_ms);
	return 0;
}

static int loop(trainer *t, long long steps, lm_err *e)
{
	const train_config *tc = t->tc;
	const optim_config *oc = &tc->opt;
	long long cycle = oc->cycle ? oc->cycle : steps;
	uint64_t per_step = (uint64_t)t->B * t->T * tc->accum;
	progress p;
	progress_start(&p, tc->progress, "step", "steps", (uint64_t)steps);
	double t0 = lm_now(), prof_wall = 0;
	long long first = t->st.step, prof_steps = 0;
	while (t->st.step < steps) {
		int profiled = tc->profile && t->st.step > first && prof_steps < tc->profile;
		prof_pause(t->m.be, !profiled);
		double lr = lr_cosine(t->st.step, oc->lr_max, oc->lr_min, oc->warmup, cycle);
		double loss = 0, gnorm = 0, ts = lm_now();
		if (step(t, lr, &loss, &gnorm, e))
			return -1;
		if (!isfinite(loss) || !isfinite(gnorm))
			return stop_nonfinite(t, loss, gnorm, e);
		t->st.step++;
		t->st.tokens += per_step;
		double now = lm_now(), tps = per_step / (now - ts);
		if (profiled) {
			prof_steps++;
			prof_wall += (now - ts) * 1e3;
		}
		if (t->log)
			fprintf(t->log, "{\"step\":%lld,\"loss\":%.17g,\"lr\":%.17g,\"grad_norm\":%.17g,"
				"\"tokens\":%llu,\"tokens_per_s\":%.1f,\"elapsed_s\":%.3f}\n",
				t->st.step, loss, lr, gnorm, (unsigned long long)t->st.tokens, tps,
				now - t0);
		char extra[EXTRA_LEN];
		snprintf(extra, sizeof extra, "loss %.4f  %.0f tok/s", loss, tps);
		progress_update(&p, (uint64_t)t->st.step, extra);
		int last = t->st.step == steps;
		if (t->val && tc->eval_every && (t->st.step % tc->eval_every == 0 || last)) {
			double vl;
			if (evaluate(t, &vl, e))
				return -1;
			if (t->log)
				fprintf(t->log, "{\"step\":%lld,\"val_loss\":%.17g}\n", t->st.step, vl);
		}
		if (t->log && fflush(t->log))
			return lm_seterr(e, "%s: write error:", tc->log_path);
		if (tc->out_dir && ((tc->ckpt_every && t->st.step % tc->ckpt_every == 0) || last) &&
		    save(t, e))
			return -1;
	}
	progress_end(&p, (uint64_t)t->st.step, NULL);
	if (t->log && t->m.be->peak_bytes)
		fprintf(t->log, "{\"peak_device_bytes\":%zu}\n", t->m.be->peak_bytes(t->m.be));
	if (tc->profile && report_profile(t, (int)prof_steps, prof_wall, e))
		return -1;
	if (t->log && (fflush(t->log) || ferror(t->log)))
		return lm_seterr(e, "%s: write error:", tc->log_path);
	return 0;
}

static int setup_model(trainer *t, lm_backend *be, char *resume_path, lm_err *e)
{
	const train_config *tc = t->tc;
	model_config c = tc->model;
	if (resume_path && !tc->model_given && ckpt_read_config(resume_path, &c, e))
		return -1;
	if (tc->context > c.ctx)
		return lm_usage_err(e, "training context %d exceeds the model's context %d",
				    tc->context, c.ctx);
	t->T = tc->context ? tc->context : c.ctx;
	t->B = tc->batch;
	if (model_init(&t->m, &c, be, t->B, t->T, e) || optim_init(&t->o, &tc->opt, &t->m, e))
		return -1;
	if (resume_path)
		return ckpt_load(resume_path, &t->m, &t->o, &t->st, e);
	return model_init_weights(&t->m, &t->st.rng, e);
}

static char *resume_path(const train_config *tc, lm_err *e)
{
	if (!tc->resume)
		return NULL;
	size_t n = strlen(tc->out_dir) + sizeof "/latest";
	char *p = malloc(n);
	if (!p) {
		lm_seterr(e, "out of memory");
		return NULL;
	}
	snprintf(p, n, "%s/latest", tc->out_dir);
	struct stat st;
	if (stat(p, &st)) {
		lm_seterr(e, "%s: no checkpoint to resume from:", p);
		free(p);
		return NULL;
	}
	return p;
}

/* Resuming at step: drop the log's records of later steps, which the run
 * that was stopped wrote after its last checkpoint and this run writes
 * again, and a last line that a kill cut short (the log is rewritten
 * whole, then appended to). */
static int log_cut(const char *path, long long step, lm_err *e)
{
	FILE *in = fopen(path, "r");
	if (!in)
		return errno == ENOENT ? 0 : lm_seterr(e, "%s:", path);
	atomic_file af;
	if (atomic_open(&af, path, e)) {
		fclose(in);
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, in)) > 0) {
		long long s;
		if (line[n - 1] != '\n') /* cut short by the kill */
			break;
		if (sscanf(line, "{\"step\":%lld", &s) == 1 && s > step)
			continue;
		fwrite(line, 1, (size_t)n, af.fp);
	}
	free(line);
	int bad = ferror(in);
	fclose(in);
	if (bad) {
		atomic_abort(&af);
		return lm_seterr(e, "%s: read error", path);
	}
	return atomic_commit(&af, e);
}

static void trainer_free(trainer *t)
{
	if (t->data)
		sr_close(t->data);
	if (t->val)
		sr_close(t->val);
	if (t->log && t->log != stdout)
		fclose(t->log);
	free(t->win);
	free(t->ids);
	free(t->tgt);
	if (t->m.be) {
		optim_free(&t->o, &t->m);
		model_free(&t->m);
	}
}

int train_run(const train_config *tc, lm_err *e)
{
	trainer t = { .tc = tc };
	int rc = -1;
	backend_set_threads(tc->threads);
	lm_backend *be = backend_open(tc->device, e);
	if (!be)
		return -1;
	char *rp = NULL;
	if (tc->resume && !tc->out_dir) {
		lm_usage_err(e, "--resume needs --out DIR");
		goto out;
	}
	if (tc->out_dir && mkdir(tc->out_dir, 0777) && errno != EEXIST) {
		lm_seterr(e, "%s:", tc->out_dir);
		goto out;
	}
	if (tc->out_dir) /* checkpoints a killed run was writing */
		atomic_clean_stale(tc->out_dir, NULL, NULL);
	rp = resume_path(tc, e);
	if (tc->resume && !rp)
		goto out;
	t.st.data_seed = tc->seed;
	rng_seed(&t.st.rng, tc->seed);
	if (setup_model(&t, be, rp, e) || (tc->profile && prof_attach(be, e)))
		goto out;
	if (rp)
		snprintf(t.last_ckpt, sizeof t.last_ckpt, "%s", rp);
	t.win = malloc((size_t)t.B * (t.T + 1) * sizeof *t.win);
	t.ids = malloc((size_t)t.B * t.T * sizeof *t.ids);
	t.tgt = malloc((size_t)t.B * t.T * sizeof *t.tgt);
	if (!t.win || !t.ids || !t.tgt) {
		lm_seterr(e, "out of memory");
		goto out;
	}
	if (open_reader(&t.data, tc->data, tc->n_data, SR_RANDOM, &t, e) ||
	    (tc->n_val && open_reader(&t.val, tc->val, tc->n_val, SR_SEQUENTIAL, &t, e)) ||
	    sr_seek(t.data, t.st.data_pos, e))
		goto out;
	if (tc->log_path && rp && strcmp(tc->log_path, "-") &&
	    log_cut(tc->log_path, t.st.step, e))
		goto out;
	if (tc->log_path) {
		t.log = !strcmp(tc->log_path, "-") ? stdout : fopen(tc->log_path, rp ? "a" : "w");
		if (!t.log) {
			lm_seterr(e, "%s:", tc->log_path);
			goto out;
		}
	}
	if (t.log) {
		char what[EXTRA_LEN * 2];
		be->describe(be, what, sizeof what);
		fprintf(t.log, "{\"device\":\"%s\",\"backend\":\"%s\",\"parameters\":%zu}\n",
			be->name, what, t.m.n_params);
	}
	uint64_t per_step = (uint64_t)t.B * t.T * tc->accum;
	long long steps = tc->steps ? tc->steps : (long long)((tc->tokens + per_step - 1) / per_step);
	rc = loop(&t, steps, e);
out:
	free(rp);
	trainer_free(&t);
	prof_detach(be);
	be->close(be);
	return rc;
}
