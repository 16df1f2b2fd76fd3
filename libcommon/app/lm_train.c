/* lm_train.c: the training loop of lm-train (see lm_train.h): batches from the
 * shard reader, forward/backward with gradient accumulation, clipping,
 * the optimizer's groups (AdamW, or Muon and AdamW) on the schedule, evaluation on the validation shards,
 * checkpoints (DIR/step-NNNNNNNN.safetensors and DIR/latest), metrics as
 * JSON Lines and one progress line on stderr; a stop asked for by a signal
 * saves at the next step boundary.  The directory and the hyper-parameters
 * that --resume restores are in lm_train_dir.c and lm_train_hparams.c.
 *
 * Data parallel (dist/ddp.h): every rank runs this loop on its share of
 * the windows; the gradients are summed in buckets during the last
 * micro-batch's backward pass, the loss and token counts summed for the
 * log, and rank 0 alone writes the log, the progress line and the
 * checkpoints (which hold the global data position). */
#define _POSIX_C_SOURCE 200809L
#include "app/lm_train_internal.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "cli/progress.h"
#include "data/shard_reader.h"
#include "dist/comm.h"
#include "dist/ddp.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/train_graph.h"

enum { NAME_MAX_LEN = 64, EXTRA_LEN = 96, GROUPS_LEN = 2048 };

/* What launch() queued for a step and finish() needs: its counted
 * targets, and the windows it took ([win0, win1) of the data). */
typedef struct queued {
	long long count;
	uint64_t win0, win1;
} queued;

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
	long long saved_step;        /* the step of last_ckpt; -1: none */
	const char *meta[4];         /* the checkpoints' extra metadata */
	int B, T;
	lm_comm *comm;
	ddp *dp;
	int stop;                    /* the ranks agreed to stop (a signal) */
	int agreed_fail;             /* the failure is every rank's (a stop) */
	train_windows wd;            /* --dump-windows */
	int graphed;                 /* steps recorded and replayed (train_graph.h) */
	int warm;                    /* a step ran in this process: a recording may be made */
	int mb_first, mb_last;       /* the micro-batch micro_batch() queues */
	queued q[2];                 /* steps n queued, by n % 2 (launch, finish) */
	train_graph tg;
	uint64_t staged;             /* windows read and staged for the next step (0: none) */
} trainer;

static int open_reader(shard_reader **r, const char *const *paths, size_t n, sr_mode mode,
		       const trainer *t, lm_err *e)
{
	sr_config c = { .mode = mode, .batch = t->B, .context = t->T, .seed = t->st.data_seed,
			.prefetch = 1, .world = mode == SR_RANDOM ? t->tc->world : 1,
			.rank = mode == SR_RANDOM ? t->tc->rank : 0,
			.stride = mode == SR_SEQUENTIAL ? t->tc->eval_stride : 0 };
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

/* The training data's position: the windows taken by the steps run (a
 * batch read ahead for the next step is not one of them). */
static uint64_t data_pos(const trainer *t)
{
	return sr_tell(t->data) - t->staged;
}

/* The next training batch read, split and staged on the backend. */
static int next_batch(trainer *t, lm_err *e)
{
	if (sr_next(t->data, t->win, e) < 0)
		return -1;
	split_windows(t, t->B);
	return model_stage(&t->m, t->ids, t->tgt, t->B, t->T, e);
}

/* The validation loss: every batch queued, the loss sum read once.  With
 * several ranks, rank r takes batches r, r + world, ... */
static int evaluate(trainer *t, double *val_loss, lm_err *e)
{
	long long count = 0;
	int world = t->tc->world, rank = t->tc->rank;
	if (sr_seek(t->val, 0, e))
		return -1;
	model_loss_reset(&t->m);
	for (long long i = 0; !t->tc->eval_batches || i < t->tc->eval_batches; i++) {
		uint64_t k0 = sr_tell(t->val);
		int rows = sr_next(t->val, t->win, e);
		if (rows < 0)
			return -1;
		if (rows == 0)
			break;
		if (i % world != rank)
			continue;
		train_eval_targets(t->val, k0, t->win, rows, t->T, t->tc->eval_stride, t->ids, t->tgt);
		if (model_forward_loss(&t->m, t->ids, t->tgt, rows, t->T, 0, 0, e))
			return -1;
		count += model_count(&t->m);
	}
	lm_scalars s;
	if (model_read_scalars(&t->m, &s, e))
		return -1;
	double sum[2] = { s.loss_sum, (double)count };
	if (t->comm->host_sum(t->comm, sum, 2, "the validation loss", e))
		return -1;
	*val_loss = sum[1] > 0 ? sum[0] / sum[1] : NAN;
	return 0;
}

static int save(trainer *t, lm_err *e)
{
	const char *dir = t->tc->out_dir;
	char name[NAME_MAX_LEN];
	snprintf(name, sizeof name, "step-%08lld.safetensors", t->st.step);
	/* the global position: every rank has taken as many windows */
	t->st.data_pos = data_pos(t) * (uint64_t)t->tc->world;
	snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s/%s", dir, name);
	if (ddp_save(t->dp, t->last_ckpt, &t->o, &t->st, e))
		return -1;
	int rc = 0;
	if (t->tc->rank == 0)
		rc = ckpt_set_latest(dir, name, e) ||
		     (t->tc->keep_last && train_dir_prune(dir, t->tc->keep_last, e)) ? -1 : 0;
	if (ddp_agree(t->dp, rc, "the checkpoint", e))
		return -1;
	t->saved_step = t->st.step;
	return 0;
}

/* A signal asked for a stop: save where the run is and say so. */
static int interrupted(trainer *t, long long steps, lm_err *e)
{
	const train_config *tc = t->tc;
	int sig = *tc->stop ? *tc->stop : SIGTERM;
	t->agreed_fail = 1;
	if (tc->out_dir && t->saved_step != t->st.step && save(t, e))
		return -1;
	lm_seterr(e, "%s at step %lld of %lld: %s%s%s", sig == SIGTERM ? "SIGTERM" : "SIGINT",
		  t->st.step, steps, tc->out_dir ? "saved " : "nothing saved (no --out)",
		  tc->out_dir ? t->last_ckpt : "", tc->out_dir ? "; continue with --resume" : "");
	e->code = 128 + sig;
	return -1;
}

/* The device work of one micro-batch (t->mb_first, t->mb_last say which),
 * its batch and, for the last, the optimizer's values staged: with the
 * first, the gradients and the loss sum zeroed; forward and backward; with
 * the last, the gradients' sums and the step.  Run as it is, or recorded
 * and replayed (train_graph.h) at a world of one, where it holds no
 * collective and no wait for the device. */
static int micro_batch(void *arg, lm_err *e)
{
	trainer *t = arg;
	float scale = 1.0f / (float)((long long)t->B * t->T * t->tc->accum * t->tc->world);
	if (t->mb_first) {
		model_zero_grad(&t->m);
		model_loss_reset(&t->m);
	}
	ddp_sync(t->dp, t->mb_last);
	if (model_forward_loss_staged(&t->m, scale, 1, e) || model_backward(&t->m, scale, e))
		return -1;
	return t->mb_last && (ddp_finish(t->dp, e) || ddp_step_staged(t->dp, &t->o, e)) ? -1 : 0;
}

/* Queue step n (counted from 1): accum micro-batches, then clipping and
 * the optimizer at the schedule's factor for the step, all on the backend,
 * and a copy of the step's scalars (the loss sum, the gradient's sum of
 * squares) into snapshot slot n % 2, for finish().  Each micro-batch's
 * batch is read while the one before it runs; with ahead, the next step's
 * first batch is read and staged too (its uploads queued behind this
 * step's work), so that the device does not wait for the host there. */
static int launch(trainer *t, long long n, int ahead, lm_err *e)
{
	const train_config *tc = t->tc;
	queued *q = &t->q[n & 1];
	double sched = optim_schedule(&t->o.cfg, n - 1);
	q->count = 0;
	q->win0 = data_pos(t);
	for (int a = 0; a < tc->accum; a++) {
		if (t->staged)
			t->staged = 0;
		else if (next_batch(t, e))
			return lm_err_prefix(e, "step %lld", n);
		t->mb_first = a == 0;
		t->mb_last = a == tc->accum - 1;
		if (t->mb_last)
			optim_stage_scheduled(&t->o, &t->m, sched);
		int rc = t->graphed ? train_graph_run(&t->tg, t->m.be, t->mb_first | t->mb_last << 1,
						      t->warm, micro_batch, t, e)
				    : micro_batch(t, e);
		if (rc)
			return lm_err_prefix(e, "step %lld", n);
		q->count += model_count(&t->m);
	}
	q->win1 = data_pos(t);
	if (ddp_settle(t->dp, "the step's collectives", e))
		return lm_err_prefix(e, "step %lld", n);
	model_queue_scalars(&t->m, (int)(n & 1));
	if (ahead) {
		if (next_batch(t, e))
			return lm_err_prefix(e, "step %lld", n + 1);
		t->staged = (uint64_t)t->B;
	}
	return 0;
}

/* Step n's results, once its work is done: *loss, the mean loss over the
 * step's tokens, and *gnorm; and whether the ranks agree to stop. */
static int finish(trainer *t, long long n, double *loss, double *gnorm, lm_err *e)
{
	const train_config *tc = t->tc;
	lm_scalars s;
	if (model_take_scalars(&t->m, (int)(n & 1), &s, e))
		return lm_err_prefix(e, "step %lld", n);
	/* the stop asked for by a signal is decided together */
	double sum[3] = { s.loss_sum, (double)t->q[n & 1].count, tc->stop && *tc->stop };
	if (t->comm->host_sum(t->comm, sum, 3, "the step's loss", e))
		return lm_err_prefix(e, "step %lld", n);
	t->stop = sum[2] > 0;
	*loss = sum[1] > 0 ? sum[0] / sum[1] : 0.0;
	*gnorm = sqrt(s.sumsq);
	return 0;
}

/* Whether step n (of steps) may read and stage the next step's first
 * batch: one follows, with no evaluation between them (its batches go
 * through the same buffers), at a world of one, not profiling, on a
 * backend that queues its work (a CUDA stream).  One that computes as it
 * is called (the CPU) has nothing to overlap: a step queued ahead would
 * run inside the step before it, and the log would give each step the
 * next one's time (the last step none). */
static int stage_next(const trainer *t, long long n, long long steps)
{
	const train_config *tc = t->tc;
	return t->m.be->native_stream && tc->world == 1 && !tc->profile && n < steps &&
	       !(t->val && tc->eval_every && n % tc->eval_every == 0);
}

/* Whether step n + 1 may be queued before step n's results are read: it
 * follows directly (as above), no checkpoint is written after step n (it
 * must hold step n's weights) and no stop is asked for. */
static int run_ahead(const trainer *t, long long n, long long steps)
{
	const train_config *tc = t->tc;
	return stage_next(t, n, steps) && !(tc->out_dir && tc->ckpt_every && n % tc->ckpt_every == 0) &&
	       !t->stop && !(tc->stop && *tc->stop);
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
	const optim_config *oc = &t->o.cfg;
	uint64_t per_step = (uint64_t)t->B * t->T * tc->accum * tc->world;
	progress p;
	progress_start(&p, tc->progress, "training", "steps", (uint64_t)steps);
	if (tc->rank)
		p.on = 0;
	double t0 = lm_now(), prof_wall = 0, train_s = 0;
	long long first = t->st.step, prof_steps = 0;
	/* one rank alone must not stop on its own signal: finish() agrees; a
	 * step queued ahead is finished first */
	int queued_next = 0;
	while (queued_next ||
	       (t->st.step < steps && !t->stop && !(tc->world == 1 && tc->stop && *tc->stop))) {
		long long n = t->st.step + 1;
		int profiled = tc->profile && t->st.step > first && prof_steps < tc->profile;
		prof_pause(t->m.be, !profiled);
		double sched = optim_schedule(oc, n - 1), lr = oc->lr_max * sched;
		double loss = 0, gnorm = 0, ts = lm_now();
		if (!queued_next && launch(t, n, stage_next(t, n, steps), e))
			return -1;
		/* step n + 1 queued before step n's results are read, so that the
		 * device goes on while the host reads, logs and launches */
		queued_next = run_ahead(t, n, steps);
		if (queued_next && launch(t, n + 1, stage_next(t, n + 1, steps), e))
			return -1;
		const queued *q = &t->q[n & 1];
		if (finish(t, n, &loss, &gnorm, e) ||
		    train_windows_step(&t->wd, n, t->data, q->win0, q->win1 - q->win0, e))
			return -1;
		if (!isfinite(loss) || !isfinite(gnorm))
			return stop_nonfinite(t, loss, gnorm, e);
		t->warm = 1;
		t->st.step++;
		t->st.tokens += per_step;
		double now = lm_now(), tps = per_step / (now - ts);
		train_s += now - ts;
		if (profiled) {
			prof_steps++;
			prof_wall += (now - ts) * 1e3;
		}
		if (t->log) {
			char muon[EXTRA_LEN] = "";
			if (oc->kind == OPTIM_MUON)
				snprintf(muon, sizeof muon, ",\"muon_lr\":%.17g,\"muon_momentum\":%.17g",
					 oc->muon.lr * sched, optim_muon_momentum(&oc->muon, t->st.step - 1));
			fprintf(t->log, "{\"step\":%lld,\"loss\":%.17g,\"lr\":%.17g%s,\"grad_norm\":%.17g,"
				"\"tokens\":%llu,\"tokens_per_s\":%.1f,\"elapsed_s\":%.3f,\"train_s\":%.3f}\n",
				t->st.step, loss, lr, muon, gnorm, (unsigned long long)t->st.tokens, tps,
				now - t0, train_s);
		}
		char extra[EXTRA_LEN];
		snprintf(extra, sizeof extra, "loss %.4f  %.0f tok/s", loss, tps);
		progress_update(&p, (uint64_t)t->st.step, extra);
		int last = t->st.step == steps;
		/* --val: at the end, and every --eval-every steps when given */
		if (t->val && ((tc->eval_every && t->st.step % tc->eval_every == 0) || last)) {
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
	if (t->log && t->m.be->peak_bytes && !tc->rank)
		fprintf(t->log, "{\"peak_device_bytes\":%zu}\n", t->m.be->peak_bytes(t->m.be));
	if (tc->profile && report_profile(t, (int)prof_steps, prof_wall, e))
		return -1;
	if (t->log && (fflush(t->log) || ferror(t->log)))
		return lm_seterr(e, "%s: write error:", tc->log_path);
	if (train_windows_commit(&t->wd, e))
		return -1;
	return t->st.step < steps ? interrupted(t, steps, e) : 0;
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
	if (tc->eval_stride > t->T) /* (the validation reader says so too, but only with --val) */
		return lm_usage_err(e, "an evaluation stride of %d tokens: it must be 1 to the context, %d",
				    tc->eval_stride, t->T);
	ddp_config dc = { .zero = tc->zero, .bucket_mb = tc->bucket_mb, .accum = tc->accum };
	if (model_init_ex(&t->m, &c, be, t->B, t->T, ddp_model_flags(&dc), e) ||
	    ddp_init(&t->dp, t->comm, &t->m, &dc, e) ||
	    ddp_optim_init(t->dp, &t->o, &tc->opt, e))
		return -1;
	if (resume_path)
		return ddp_load(t->dp, resume_path, &t->o, &t->st, e);
	return model_init_weights(&t->m, &t->st.rng, e);
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
	train_windows_abort(&t->wd);
	if (t->data)
		sr_close(t->data);
	if (t->val)
		sr_close(t->val);
	if (t->log && t->log != stdout)
		fclose(t->log);
	free(t->win);
	free(t->ids);
	free(t->tgt);
	ddp_free(t->dp);
	if (t->m.be) {
		train_graph_free(&t->tg, t->m.be);
		optim_free(&t->o, &t->m);
		model_free(&t->m);
	}
}

/* The data must fill one optimizer step with distinct windows. */
static int check_data_size(const trainer *t, lm_err *e)
{
	const train_config *tc = t->tc;
	uint64_t need = (uint64_t)t->B * tc->accum * tc->world;
	if (sr_starts(t->data) < need) {
		char ranks[32] = "";
		if (tc->world > 1)
			snprintf(ranks, sizeof ranks, " x %d ranks", tc->world);
		return lm_usage_err(e, "%s: %llu tokens hold %llu windows of %d + 1 tokens, fewer than "
				    "one step's %llu (--batch %d x --accum %d%s): give less --context or "
				    "--batch, or more data", tc->data[0],
				    (unsigned long long)sr_tokens(t->data),
				    (unsigned long long)sr_starts(t->data), t->T,
				    (unsigned long long)need, t->B, tc->accum, ranks);
	}
	return 0;
}

/* --resume: the checkpoint, and the run's hyper-parameters from it. */
static int resume_setup(train_config *c, char **rp, lm_err *e)
{
	int fallback;
	char *hp = NULL;
	if (train_dir_resume_path(c->out_dir, rp, &fallback, e))
		return -1;
	if (fallback)
		train_note(c, "%s/latest is missing: resuming from %s, the newest checkpoint there",
			   c->out_dir, *rp);
	int rc = ckpt_read_meta(*rp, TRAIN_META_KEY, &hp, e);
	model_config mc;
	if (!rc && !c->context && !(c->given && c->given("context")) &&
	    !(rc = ckpt_read_config(*rp, &mc, e)))
		c->context = mc.ctx;
	if (!rc)
		rc = train_hparams_resume(c, hp, *rp, e);
	free(hp);
	return rc;
}

/* An option of Muon or of WSD given to a run (its options as resumed) of
 * another optimizer or schedule would do nothing: a usage error. */
static int unused_options(const train_config *c, lm_err *e)
{
	static const char *const muon[] = { "muon-lr", "muon-momentum", "muon-momentum-start",
					    "muon-momentum-warmup", "muon-weight-decay", "muon-scale",
					    "muon-ns-steps", NULL };
	static const char *const wsd[] = { "decay-frac", "decay-shape", NULL };
	for (int i = 0; c->given && muon[i]; i++)
		if (c->opt.kind != OPTIM_MUON && c->given(muon[i]))
			return lm_usage_err(e, "--%s is for --optimizer muon (this run's optimizer is %s)",
					    muon[i], optim_kind_names[c->opt.kind]);
	for (int i = 0; c->given && wsd[i]; i++)
		if (c->opt.schedule != SCHED_WSD && c->given(wsd[i]))
			return lm_usage_err(e, "--%s is for --schedule wsd (this run's schedule is %s)",
					    wsd[i], lr_schedule_names[c->opt.schedule]);
	return 0;
}

int train_run(const train_config *tc0, lm_err *e)
{
	train_config c = *tc0;
	trainer t = { .tc = &c, .saved_step = -1 };
	train_dir dir = { 0 };
	char *rp = NULL;
	int rc = -1;
	backend_set_threads(c.threads);
	lm_backend *be;
	if (train_dist_open(&c, &t.comm, &be, e)) {
		if (be)
			be->close(be);
		return -1;
	}
	if (c.rank)  /* rank 0 says what the run does */
		c.note = NULL;
	if (c.dump_windows && c.world > 1) {
		lm_usage_err(e, "--dump-windows needs a world of one rank (it has %d)", c.world);
		goto out;
	}
	be->deterministic = c.deterministic;
	if (c.resume && !c.out_dir) {
		lm_usage_err(e, "--resume needs --out DIR");
		goto out;
	}
	/* (a new run's options are all given: checked before -o is made) */
	if (!c.resume && unused_options(&c, e))
		goto out;
	if (c.out_dir && !c.rank && train_dir_prepare(&dir, c.out_dir, c.resume, c.force, e))
		goto out;
	if (dir.stale_removed)
		train_note(&c, "%s: removed %d unfinished file(s) of an interrupted run", c.out_dir,
			   dir.stale_removed);
	if (c.resume && resume_setup(&c, &rp, e))
		goto out;
	if (!c.steps && !c.tokens) {
		lm_usage_err(e, "%s records no run length: give --steps N or --tokens N", rp);
		goto out;
	}
	if (c.resume && unused_options(&c, e)) /* with the run's own */
		goto out;
	c.opt.lr_min = c.opt.lr_max * c.lr_min_ratio;
	t.st.data_seed = c.seed;
	rng_seed(&t.st.rng, c.seed);
	if (c.residual_grad && !c.residual) {
		lm_usage_err(e, "--residual-grad bf16 needs --residual bf16 (the stream itself)");
		goto out;
	}
	be->res = c.residual ? LM_BF16 : LM_F32; /* (the run's own, on --resume) */
	be->res_grad = c.residual_grad ? LM_BF16 : LM_F32;
	if (setup_model(&t, be, rp, e) || (c.profile && prof_attach(be, e)))
		goto out;
	/* the profile times each op, which a replayed recording hides; with
	 * several ranks the collectives wait on the host */
	t.graphed = c.world == 1 && !c.profile && train_graph_usable(be);
	if (rp) {
		snprintf(t.last_ckpt, sizeof t.last_ckpt, "%s", rp);
		t.saved_step = t.st.step;
	}
	uint64_t per_step = (uint64_t)t.B * t.T * c.accum * c.world;
	if (!c.steps)
		c.steps = (long long)((c.tokens + per_step - 1) / per_step);
	if (!c.opt.cycle)
		c.opt.cycle = c.steps;
	if (rp && t.st.step >= c.steps) {
		train_note(&c, "%s is at step %lld of %lld: the run is complete, nothing to do "
			   "(-n N extends it)", rp, t.st.step, c.steps);
		rc = 0;
		goto out;
	}
	c.context = t.T;
	char *hp = train_hparams_json(&c);
	if (!hp) {
		lm_seterr(e, "out of memory");
		goto out;
	}
	t.meta[1] = hp;
	if (train_dist_check(t.comm, &c, &t.m.cfg, hp, e)) {
		t.agreed_fail = 1;  /* every rank sees the difference */
		goto out;
	}
	if (c.world > 1 || c.zero)
		train_dist_memory(&c, t.dp);
	t.meta[0] = TRAIN_META_KEY;
	t.meta[2] = TOKENIZER_META_KEY;
	t.st.meta = t.meta;
	t.st.n_meta = 2;
	t.win = malloc((size_t)t.B * (t.T + 1) * sizeof *t.win);
	t.ids = malloc((size_t)t.B * t.T * sizeof *t.ids);
	t.tgt = malloc((size_t)t.B * t.T * sizeof *t.tgt);
	if (!t.win || !t.ids || !t.tgt) {
		lm_seterr(e, "out of memory");
		goto out;
	}
	if (t.st.data_pos % ((uint64_t)c.world * t.B)) {
		lm_usage_err(e, "%s: its data position (%llu windows) is no whole number of steps of "
			     "%d ranks x --batch %d: keep the global batch of the run", rp,
			     (unsigned long long)t.st.data_pos, c.world, t.B);
		goto out;
	}
	if (open_reader(&t.data, c.data, c.n_data, SR_RANDOM, &t, e) || check_data_size(&t, e) ||
	    (c.n_val && open_reader(&t.val, c.val, c.n_val, SR_SEQUENTIAL, &t, e)) ||
	    sr_seek(t.data, t.st.data_pos / c.world, e) ||
	    train_tokenizer_record(&c, t.data, c.n_val ? t.val : NULL, rp,
				   (char **)&t.meta[3], e))
		goto out;
	if (c.dump_windows && train_windows_open(&t.wd, c.dump_windows, t.data,
						 c.n_val ? t.val : NULL, t.B, t.T, c.accum, e))
		goto out;
	if (c.rank)  /* rank 0 alone writes the log */
		c.log_path = NULL;
	if (c.log_path && rp && strcmp(c.log_path, "-") && log_cut(c.log_path, t.st.step, e))
		goto out;
	if (c.log_path) {
		t.log = !strcmp(c.log_path, "-") ? stdout : fopen(c.log_path, rp ? "a" : "w");
		if (!t.log) {
			lm_seterr(e, "%s:", c.log_path);
			goto out;
		}
	}
	t.o.cfg.cycle = c.opt.cycle;
	char groups[GROUPS_LEN];
	/* The groups in words where progress is shown (a terminal, --progress). */
	if ((c.progress || isatty(STDERR_FILENO)) && !optim_describe(&t.o, groups, sizeof groups))
		for (char *line = strtok(groups, "\n"); line; line = strtok(NULL, "\n"))
			train_note(&c, "%s", line);
	if (t.log) {
		char what[EXTRA_LEN * 2];
		be->describe(be, what, sizeof what);
		if (optim_groups_json(&t.o, groups, sizeof groups))
			snprintf(groups, sizeof groups, "[]");
		fprintf(t.log, "{\"device\":\"%s\",\"backend\":\"%s\",\"parameters\":%zu,"
			"\"optimizer\":\"%s\",\"schedule\":\"%s\",\"groups\":%s,\"world\":%d,"
			"\"zero\":%d,\"graph\":%s}\n", be->name, what, t.m.n_params,
			optim_kind_names[t.o.cfg.kind], lr_schedule_names[t.o.cfg.schedule], groups, c.world,
			c.zero, t.graphed ? "true" : "false");
	}
	rc = loop(&t, c.steps, e);
out:
	if (rc && t.saved_step < 0)
		train_dir_forget(&dir);
	/* A failure of one rank ends them all (the communicator aborts the
	 * job, or NCCL's work, before the device memory is freed, which
	 * would wait for it), so its message is printed first, naming the
	 * rank. */
	if (rc && c.world > 1) {
		lm_err_prefix(e, "rank %d", c.rank);
		if (!t.agreed_fail && tc0->note)
			tc0->note(e->msg);
	}
	if (rc && !t.agreed_fail) {
		t.comm->close(t.comm, 0);
		t.comm = NULL;
	}
	free((char *)t.meta[1]);
	free((char *)t.meta[3]);
	free(rp);
	trainer_free(&t);
	prof_detach(be);
	if (t.comm)
		t.comm->close(t.comm, 1);
	be->close(be);
	return rc;
}
