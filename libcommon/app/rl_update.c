/* rl_update.c: the policy update of rl-update (see rl_update.h) as the
 * steps of the other rl_update_*.c files (rl_update_internal.h): records
 * to sequences, group advantages, reference passes, the algorithm's loop,
 * then the checkpoint and the metrics line. */
#include "app/rl_update.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "app/rl_update_internal.h"
#include "cli/progress.h"
#include "cli/tok_options.h"
#include "dist/launch.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "tok/bpe.h"
#include "tok/bpe_encode.h"

enum { NAME_MAX_LEN = 64, PROF_ROWS_MAX = 64 };

/* The --profile rows to o->on_profile (on rank 0). */
static int report_profile(const rlu_opts *o, lm_backend *be, int steps, double wall_s, int root,
			  lm_err *e)
{
	lm_prof_row rows[PROF_ROWS_MAX];
	int n = prof_rows(be, rows, PROF_ROWS_MAX, e);
	if (n < 0)
		return -1;
	if (root && o->on_profile)
		o->on_profile(rows, n, steps, wall_s * 1e3);
	return 0;
}

int rlu_run(const rlu_opts *o, FILE *in, const char *in_name, FILE *metrics, rlu_times *times,
	    lm_err *e)
{
	if ((o->algo == RLU_GRPO || o->algo == RLU_PPO) && o->kl_beta > 0 && !o->ref)
		return lm_usage_err(e, "the KL penalty needs the reference checkpoint (--ref)");
	double t0 = lm_now();
	model_config cfg;
	if (ckpt_read_config(o->checkpoint, &cfg, e))
		return -1;
	backend_set_threads(o->threads);
	lm_backend *be;
	rlu_par par;
	if (rlu_par_open(&par, o, in == stdin, &be, e)) {
		rlu_par_close(&par, 0);
		if (be)
			be->close(be);
		return -1;
	}
	seqs v = { 0 };
	value_head vh = { 0 };
	bpe_tokenizer tok = { 0 };
	bpe_encoder *enc = NULL;
	model m = { 0 };
	optim opt = { 0 };
	int have_m = 0, have_o = 0, have_t = 0, rc = 0;
	size_t groups = 0;
	stats st = { 0 };
	char name[NAME_MAX_LEN], path[4096];
	if (o->algo == RLU_DPO && !o->ref)
		rc = lm_usage_err(e, "DPO needs the reference checkpoint (--ref)");
	if (rc == 0 && (o->algo == RLU_SFT || o->algo == RLU_DPO)) {
		bpe_source src = { .tokenizer = o->tokenizer };
		if (!o->tokenizer)
			rc = lm_usage_err(e, "%s needs the tokenizer (-t)", o->algo == RLU_SFT ? "SFT" : "DPO");
		else if ((rc = bpe_open(&tok, &src, e)) == 0) {
			have_t = 1;
			v.tok = &tok;
			if (!(enc = bpe_encoder_new(&tok, 1, e)) || !(v.w = bpe_worker_new(enc, e)))
				rc = -1;
			else if (tok.n_vocab > (uint32_t)cfg.vocab)
				rc = lm_seterr(e, "the tokenizer has %u tokens but %s has a vocabulary of %d",
					       tok.n_vocab, o->checkpoint, cfg.vocab);
		}
	}
	if (rc == 0)
		rc = read_seqs(o, &v, in, in_name, cfg.vocab, cfg.ctx, e);
	if (rc == 0 && o->algo == RLU_GRPO)
		rc = grpo_advantages(o, &v, &groups, in_name, e);
	int maxT = 1;
	for (size_t i = 0; i < v.n; i++)
		maxT = v.s[i].T > maxT ? v.s[i].T : maxT;
	optim_config oc = { .lr_max = o->lr, .lr_min = o->lr, .warmup = 0, .cycle = 1,
			    .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps > 0 ? o->eps : 1e-8,
			    .weight_decay = o->weight_decay, .clip = o->clip_grad };
	train_state ts = { 0 };
	if (rc == 0 && !(rc = model_init(&m, &cfg, be, rlu_micro_batch(o, v.n), maxT, e)))
		have_m = 1;
	if (rc == 0)
		rc = rlu_par_attach(&par, &m, e);
	if (rc == 0 && !(rc = optim_init(&opt, &oc, &m, e)))
		have_o = 1;
	if (rc == 0)
		rc = ckpt_load(o->checkpoint, &m, NULL, &ts, e);
	if (rc == 0 && o->algo == RLU_PPO && !(rc = vh_init(&vh, cfg.d_model, e))) {
		int got = vh_load(&vh, o->checkpoint, e);
		rc = got < 0 ? -1 : 0;
		st.value_head_loaded = got > 0;
	}
	if (rc == 0 && o->profile)
		rc = prof_attach(be, e);
	double t_read = lm_now(), t_ref = t_read; /* the device, records and checkpoints read */
	if (rc == 0 && o->algo == RLU_DPO)
		rc = reference_logps(o, &cfg, be, maxT, &v, e);
	if (rc == 0 && (o->algo == RLU_GRPO || o->algo == RLU_PPO) && o->kl_beta > 0)
		rc = reference_tokens(o, &cfg, be, maxT, &v, e);
	t_ref = lm_now() - t_ref;
	int root = par.rank == 0;
	if (rc == 0 && root && mkdir(o->out_dir, 0777) && errno != EEXIST)
		rc = lm_seterr(e, "%s:", o->out_dir);
	if (rc == 0)
		rc = o->algo == RLU_DPO ? dpo_train(o, &par, &m, &opt, &v, &st, e)
		   : o->algo == RLU_PPO ? ppo_train(o, &par, &m, &opt, &vh, &v, &st, e)
		   : pg_train(o, &par, &m, &opt, &v, &st, e);
	if (rc == 0 && o->profile)
		rc = report_profile(o, be, (int)st.steps, lm_now() - t_read, par.rank == 0, e);
	prof_detach(be);
	if (rc == 0)
		rc = rlu_par_stats(&par, &st, e);
	double t_write = lm_now();
	int written = rc == 0 && root;
	if (written) {
		ts.step += st.steps;
		snprintf(name, sizeof name, "step-%08lld.safetensors", ts.step);
		snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
		sft_tensor vt[2];
		vh_tensors(&vh, vt);
		rc = ckpt_save_extra(path, &m, &opt, &ts, vt, o->algo == RLU_PPO ? 2 : 0, e);
		if (rc == 0)
			rc = ckpt_set_latest(o->out_dir, name, e);
		if (rc == 0)
			rc = write_metrics(o, &v, groups, &st, path, lm_now() - t0, metrics, e);
	}
	/* the ranks that trained wait for rank 0's writing, and fail with it */
	int agreed = par.world > 1 && (written || (rc == 0 && !root));
	if (agreed)
		rc = rlu_par_agree(&par, rc, "the checkpoint", e);
	/* any other failure of a rank ends every rank (the communicator
	 * aborts the job), so its message, naming the rank, goes first */
	if (rc && par.world > 1) {
		lm_err_prefix(e, "rank %d", par.rank);
		if (!agreed && o->note)
			o->note(e->msg);
	}
	if (rc == 0 && times)
		*times = (rlu_times){ .read = t_read - t0, .ref = t_ref, .fwd_bwd = st.t_fb,
				      .optim = st.t_opt, .write = lm_now() - t_write,
				      .total = lm_now() - t0 };
	vh_free(&vh);
	if (have_o)
		optim_free(&opt, &m);
	if (have_m)
		model_free(&m);
	if (v.w)
		bpe_worker_free(v.w);
	if (enc)
		bpe_encoder_free(enc);
	if (have_t)
		bpe_free(&tok);
	seqs_free(&v);
	rlu_par_close(&par, rc == 0 || agreed);
	be->close(be);
	return rc;
}

int rlu_launch(int gpus, char **argv, lm_err *e)
{
	return dist_launch(gpus, argv, e);
}
