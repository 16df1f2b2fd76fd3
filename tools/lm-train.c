/* lm-train: train a decoder-only transformer (the CS336 model) on token
 * shards, with checkpoints that Hugging Face loads; export a checkpoint for
 * transformers, or dump its logits (man 1 lm-train). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/lm_train.h"
#include "cli/blas_tune.h"
#include "cli/die.h"
#include "cli/options.h"
#include "cli/stop.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "model/model_json.h"

enum { DIM_MAX = 1 << 20, THREADS_MAX = 1024, RANKS_MAX = 1 << 16 };
static const double STEPS_MAX = 1e15;

/* The option table and what the command line gave, for train_config.given. */
static const opt_def *the_opts;
static const unsigned char *the_seen;

static int option_given(const char *name)
{
	return opt_given(the_opts, the_seen, name);
}

static void note(const char *msg)
{
	warnmsg("%s", msg);
}

/* The presets as JSON Lines: each line's "config" is a --config file. */
static void list_models(void)
{
	for (const model_preset *p = model_presets; p->name; p++) {
		char *s = model_preset_json(p);
		if (!s)
			die(EXIT_RUNTIME, "out of memory");
		printf("%s\n", s);
		free(s);
	}
}

/* The model: a preset or a config file, then the shape and variant
 * options, each of which overrides the field it names. */
static void set_model(train_config *tc, const char *name, const char *config, lm_err *e)
{
	if (name && config)
		die(EXIT_USAGE, "give -m NAME or --config FILE, not both");
	if (config) {
		if (model_config_load(config, &tc->model, e))
			die_err(e);
		return;
	}
	const model_preset *p = model_preset_find(name ? name : "ts");
	if (!p)
		die(EXIT_USAGE, "unknown model '%s' (see --list-models)", name);
	tc->model = p->cfg;
}

/* The --profile table (profile.h). */
static void print_profile(void *arg, const lm_prof_row *rows, int n, int steps, double wall_ms)
{
	(void)arg;
	prof_write_table(stderr, "lm-train", "steps", rows, n, steps, wall_ms);
}

int main(int argc, char **argv)
{
	const char *model_name = NULL, *device = "cpu", *export_dir = NULL, *ckpt = NULL;
	const char *dump = NULL, *ids = NULL, *tok = NULL, *config = NULL, *mlp = NULL;
	long long kv_heads = 0;
	double softcap = 0, z_loss = 0, norm_eps = 0;
	int qk_norm = 0;
	long long vocab = 0, ctx = 0, d = 0, layers = 0, heads = 0, dff = 0;
	long long batch = 16, accum = 1, steps = 0, warmup = 0, cycle = 0, seed = 0, threads = 0;
	long long eval_every = 0, eval_batches = 20, eval_stride = 0, ckpt_every = 0, keep_last = 0;
	uint64_t tokens = 0;
	double theta = 0, lr = 1e-3, lr_min_ratio = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
	double wd = 0.1, clip = 1.0, decay_frac = 0.2;
	const char *optimizer = "adamw", *schedule = "cosine", *decay_shape_name = "linear";
	const char *muon_scale_name = "original";
	muon_config mu = { .lr = 0.02, .momentum = 0.95, .momentum_start = -1, .weight_decay = 0 };
	long long ns_steps = MUON_NS_STEPS;
	int tie = 0, list = 0, resume = 0, force = 0, show_progress = 0, info = 0;
	long long profile = 0, gpus = 0, zero = 0;
	double bucket_mb = 25, dist_timeout = 60;
	const char *nccl_init = NULL, *dump_windows = NULL;
	int deterministic = 0;
	const char *residual = "f32", *residual_grad = "f32";
	opt_strlist data = { 0 }, val = { 0 };
	train_config tc = { 0 };
	const opt_def opts[] = {
		{ 'm', "model", OPT_STR, &model_name, "NAME", "model preset (see --list-models; default ts)", 0, 0, NULL },
		{ 0, "list-models", OPT_FLAG, &list, NULL, "list the presets as JSON Lines and exit", 0, 0, NULL },
		{ 0, "config", OPT_STR, &config, "FILE", "model config: lmpipe JSON or a Hugging Face config.json", 0, 0, NULL },
		{ 0, "vocab", OPT_INT, &vocab, "N", "vocabulary size", 1, DIM_MAX, NULL },
		{ 0, "context", OPT_INT, &ctx, "T", "context length (model and training windows)", 1, DIM_MAX, NULL },
		{ 0, "d-model", OPT_INT, &d, "N", "model width", 1, DIM_MAX, NULL },
		{ 0, "layers", OPT_INT, &layers, "N", "transformer blocks", 1, DIM_MAX, NULL },
		{ 0, "heads", OPT_INT, &heads, "N", "attention heads", 1, DIM_MAX, NULL },
		{ 0, "d-ff", OPT_INT, &dff, "N", "MLP hidden width", 1, DIM_MAX, NULL },
		{ 0, "rope-theta", OPT_DOUBLE, &theta, "F", "RoPE base (default: the preset's, 10000)", 1, 1e12, NULL },
		{ 0, "tie-embeddings", OPT_FLAG, &tie, NULL, "share the embedding with the LM head", 0, 0, NULL },
		{ 0, "kv-heads", OPT_INT, &kv_heads, "N", "key/value heads (grouped-query attention)", 1, DIM_MAX, NULL },
		{ 0, "qk-norm", OPT_FLAG, &qk_norm, NULL, "RMSNorm of each head of q and k (Qwen3)", 0, 0, NULL },
		{ 0, "mlp", OPT_CHOICE, &mlp, "KIND", "the MLP (default swiglu)", 0, 0, model_mlp_names },
		{ 0, "softcap", OPT_DOUBLE, &softcap, "F", "soft-cap the logits at F, 0: off", 0, 1e6, NULL },
		{ 0, "z-loss", OPT_DOUBLE, &z_loss, "F", "z-loss coefficient, 0: off", 0, 1, NULL },
		{ 0, "norm-eps", OPT_DOUBLE, &norm_eps, "F", "RMSNorm epsilon (default 1e-5)", 1e-12, 0.1, NULL },
		{ 'b', "batch", OPT_INT, &batch, "B", "sequences per micro-batch", 1, DIM_MAX, NULL },
		{ 0, "accum", OPT_INT, &accum, "N", "micro-batches per optimizer step", 1, DIM_MAX, NULL },
		{ 'n', "steps", OPT_INT, &steps, "N", "optimizer steps in all", 1, STEPS_MAX, NULL },
		{ 0, "tokens", OPT_SIZE, &tokens, "N", "token budget instead of --steps", 0, 0, NULL },
		{ 0, "optimizer", OPT_CHOICE, &optimizer, "NAME", "muon: Muon on the blocks' matrices, AdamW on the rest", 0, 0, optim_kind_names },
		{ 0, "lr", OPT_DOUBLE, &lr, "F", "peak learning rate of the AdamW group", 0, 10, NULL },
		{ 0, "lr-min-ratio", OPT_DOUBLE, &lr_min_ratio, "F", "final learning rate as a fraction of each group's peak", 0, 1, NULL },
		{ 0, "schedule", OPT_CHOICE, &schedule, "NAME", "learning-rate schedule", 0, 0, lr_schedule_names },
		{ 0, "warmup", OPT_INT, &warmup, "N", "linear warmup steps", 0, STEPS_MAX, NULL },
		{ 0, "cycle", OPT_INT, &cycle, "N", "step where the schedule reaches lr-min (default: last)", 0, STEPS_MAX, NULL },
		{ 0, "decay-frac", OPT_DOUBLE, &decay_frac, "F", "wsd: the fraction of the cycle that decays", 0, 1, NULL },
		{ 0, "decay-shape", OPT_CHOICE, &decay_shape_name, "NAME", "wsd: the decay's shape (sqrt: 1 - sqrt)", 0, 0, decay_shape_names },
		{ 0, "beta1", OPT_DOUBLE, &beta1, "F", "AdamW beta1", 0, 1, NULL },
		{ 0, "beta2", OPT_DOUBLE, &beta2, "F", "AdamW beta2", 0, 1, NULL },
		{ 0, "eps", OPT_DOUBLE, &eps, "F", "AdamW epsilon", 0, 1, NULL },
		{ 0, "weight-decay", OPT_DOUBLE, &wd, "F", "AdamW's decoupled weight decay of the matrices", 0, 10, NULL },
		{ 0, "muon-lr", OPT_DOUBLE, &mu.lr, "F", "peak learning rate of the Muon group", 0, 10, NULL },
		{ 0, "muon-momentum", OPT_DOUBLE, &mu.momentum, "F", "Muon's Nesterov momentum", 0, 0.999999, NULL },
		{ 0, "muon-momentum-start", OPT_DOUBLE, &mu.momentum_start, "F", "momentum at step 0 of the warm-up (default: no warm-up)", 0, 0.999999, NULL },
		{ 0, "muon-momentum-warmup", OPT_INT, &mu.momentum_warmup, "N", "steps of the linear momentum warm-up", 0, STEPS_MAX, NULL },
		{ 0, "muon-weight-decay", OPT_DOUBLE, &mu.weight_decay, "F", "Muon's decoupled weight decay (default 0)", 0, 10, NULL },
		{ 0, "muon-scale", OPT_CHOICE, &muon_scale_name, "NAME", "update scale: sqrt(max(1, rows/cols)), or 0.2 sqrt(max(rows, cols))", 0, 0, muon_scale_names },
		{ 0, "muon-ns-steps", OPT_INT, &ns_steps, "N", "Newton-Schulz iterations", 1, 99, NULL },
		{ 0, "clip", OPT_DOUBLE, &clip, "F", "max global gradient norm, 0: off", 0, 1e30, NULL },
		{ 's', "seed", OPT_INT, &seed, "N", "seed of initialisation and data order", 0, 9e18, NULL },
		{ 'd', "data", OPT_STRLIST, &data, "PREFIX", "training shards (repeatable)", 0, 0, NULL },
		{ 0, "val", OPT_STRLIST, &val, "PREFIX", "validation shards, their loss at the end (repeatable)", 0, 0, NULL },
		{ 0, "eval-every", OPT_INT, &eval_every, "N", "validation loss every N steps too (needs --val)", 0, STEPS_MAX, NULL },
		{ 0, "eval-batches", OPT_INT, &eval_batches, "N", "batches per evaluation, 0: all", 0, STEPS_MAX, NULL },
		{ 0, "eval-stride", OPT_INT, &eval_stride, "N", "sliding validation windows, every N tokens, each scoring only new targets; 0: the context", 0, 1 << 30, NULL },
		{ 'o', "out", OPT_STR, &tc.out_dir, "DIR", "checkpoint directory (step-N.safetensors, latest)", 0, 0, NULL },
		{ 0, "ckpt-every", OPT_INT, &ckpt_every, "N", "checkpoint every N steps and at the end (needs -o)", 0, STEPS_MAX, NULL },
		{ 0, "keep-last", OPT_INT, &keep_last, "N", "keep only the newest N checkpoints, 0: all (needs -o)", 0, STEPS_MAX, NULL },
		{ 0, "resume", OPT_FLAG, &resume, NULL, "continue the run in DIR exactly, with its hyper-parameters", 0, 0, NULL },
		{ 0, "force", OPT_FLAG, &force, NULL, "start a new run in a DIR that holds checkpoints", 0, 0, NULL },
		{ 0, "log", OPT_STR, &tc.log_path, "FILE", "metrics as JSON Lines (- for stdout)", 0, 0, NULL },
		{ 0, "device", OPT_CHOICE, &device, "DEV", "compute device", 0, 0, backend_names },
		{ 'j', "threads", OPT_INT, &threads, "N", "CPU threads (default: all)", 1, THREADS_MAX, NULL },
		{ 'c', "checkpoint", OPT_STR, &ckpt, "FILE", "checkpoint (or its run DIR) to evaluate (with --val), inspect, export or dump", 0, 0, NULL },
		{ 0, "info", OPT_FLAG, &info, NULL, "print the checkpoint's shape, step, tokens and hyper-parameters", 0, 0, NULL },
		{ 't', "tokenizer", OPT_STR, &tok, "FILE", "the shards' tokenizer: recorded in checkpoints; bits/byte of --val; --export-hf's", 0, 0, NULL },
		{ 0, "export-hf", OPT_STR, &export_dir, "DIR", "write config.json + model.safetensors and exit", 0, 0, NULL },
		{ 0, "dump-logits", OPT_STR, &dump, "FILE", "write the logits on --ids to FILE and exit", 0, 0, NULL },
		{ 0, "ids", OPT_STR, &ids, "FILE", "token ids for --dump-logits: one sequence per line", 0, 0, NULL },
		{ 0, "progress", OPT_FLAG, &show_progress, NULL, "show progress even when stderr is not a terminal", 0, 0, NULL },
		{ 0, "profile", OPT_INT, &profile, "N", "time every op of N steps after the first; print the table to stderr", 1, STEPS_MAX, NULL },
		{ 0, "gpus", OPT_INT, &gpus, "N", "data parallel over N ranks on this host (execs mpirun -np N; with --device cpu, N processes)", 1, RANKS_MAX, NULL },
		{ 0, "zero", OPT_INT, &zero, "N", "ZeRO: 1 shards the AdamW state over the ranks, 2 the gradients too", 0, 2, NULL },
		{ 0, "bucket-mb", OPT_DOUBLE, &bucket_mb, "F", "gradient bucket size in MiB, summed while backward goes on", 0.001, 1e6, NULL },
		{ 0, "nccl-init", OPT_STR, &nccl_init, "HOW", "NCCL's id: mpi (default), file:PATH (shared filesystem), tcp:HOST:PORT (rank 0)", 0, 0, NULL },
		{ 0, "deterministic", OPT_FLAG, &deterministic, NULL, "bit-identical runs on one GPU (slower kernels where needed; the CPU always is)", 0, 0, NULL },
		{ 0, "residual", OPT_CHOICE, &residual, "TYPE", "the residual stream's values: bf16 halves its memory traffic (CUDA) and rounds it", 0, 0, train_residual_names },
		{ 0, "residual-grad", OPT_CHOICE, &residual_grad, "TYPE", "its gradient's values in the backward pass (bf16 needs --residual bf16)", 0, 0, train_residual_names },
		{ 0, "dump-windows", OPT_STR, &dump_windows, "FILE", "write each step's training windows (offsets into the shards) to FILE", 0, 0, NULL },
		{ 0, "dist-timeout", OPT_DOUBLE, &dist_timeout, "S", "seconds a rank waits for the others before the run fails", 0.1, 1e6, NULL },
		OPT_END,
	};
	unsigned char seen[sizeof opts / sizeof opts[0]] = { 0 };
	const opt_prog prog = {
		"--data PREFIX [-m NAME | --config FILE] [OPTION]...\n"
		"  or:  lm-train -c CHECKPOINT --val PREFIX [-t TOKENIZER]\n"
		"  or:  lm-train -c CHECKPOINT --info\n"
		"  or:  lm-train -c CHECKPOINT --export-hf DIR\n"
		"  or:  lm-train -c CHECKPOINT --ids FILE --dump-logits OUT",
		"Train a decoder-only transformer on token shards; evaluate or inspect a\n"
		"checkpoint, export it for Hugging Face transformers, or dump its logits.",
		opts,
		"See lm-train(1), lmpipe-model-config(5) and lmpipe-checkpoint(5).\n",
	};
	the_opts = opts;
	the_seen = seen;
	blas_tune_reexec(argv);
	lm_init(argv[0]);
	char **operands;
	int n_operands = opt_parse_or_exit_seen(&prog, argc, argv, &operands, seen);
	free(operands);
	if (n_operands)
		die(EXIT_USAGE, "unexpected operand (see --help)");
	if (list) {
		list_models();
		return EXIT_OK;
	}
	lm_err e;
	static char ckpt_buf[4096]; /* a run's DIR: DIR/latest */
	ckpt = ckpt_resolve(ckpt, ckpt_buf, sizeof ckpt_buf);
	if (ckpt && (info || (val.n && !data.n))) {
		backend_set_threads((int)threads);
		train_eval_opts eo = { ckpt, val.v, val.n, option_given("eval-batches") ? eval_batches : 0,
				       option_given("batch") ? (int)batch : 0, tok, device, (int)eval_stride };
		if (info ? train_info(ckpt, stdout, &e) : train_evaluate(&eo, stdout, &e))
			die_err(&e);
		free(val.v);
		return EXIT_OK;
	}
	if (export_dir || dump) {
		if (!ckpt)
			die(EXIT_USAGE, "--export-hf and --dump-logits need -c CHECKPOINT");
		if (dump && !ids)
			die(EXIT_USAGE, "--dump-logits needs --ids FILE");
		backend_set_threads((int)threads);
		if ((export_dir && train_export_hf(ckpt, export_dir, tok, device, &e)) ||
		    (dump && train_dump_logits(ckpt, ids, dump, device, &e)))
			die_err(&e);
		if (export_dir && !tok)
			warnmsg("no -t TOKENIZER: %s holds the model alone, no tokenizer files", export_dir);
		return EXIT_OK;
	}
	if (!data.n)
		die(EXIT_USAGE, "no training data: give --data PREFIX");
	if (!steps && !tokens && !resume)
		die(EXIT_USAGE, "give --steps N or --tokens N");
	/* options that would do nothing without another: said, not ignored */
	if (option_given("eval-every") && !val.n)
		die(EXIT_USAGE, "--eval-every needs --val PREFIX (the validation shards)");
	if ((option_given("ckpt-every") || option_given("keep-last")) && !tc.out_dir)
		die(EXIT_USAGE, "--%s needs --out DIR (where checkpoints go)",
		    option_given("ckpt-every") ? "ckpt-every" : "keep-last");
	set_model(&tc, model_name, config, &e);
	tc.model_given = model_name || config || vocab || ctx || d || layers || heads || dff || theta ||
			 tie || kv_heads || qk_norm || mlp || option_given("softcap") ||
			 option_given("z-loss") || norm_eps;
	if (vocab) tc.model.vocab = (int)vocab;
	if (ctx) tc.model.ctx = (int)ctx;
	if (d) tc.model.d_model = (int)d;
	if (layers) tc.model.n_layers = (int)layers;
	if (heads) tc.model.n_heads = (int)heads;
	if (dff) tc.model.d_ff = (int)dff;
	if (theta) tc.model.rope_theta = theta;
	if (tie) tc.model.tie_embeddings = 1;
	if (kv_heads) tc.model.n_kv_heads = (int)kv_heads;
	if (qk_norm) tc.model.qk_norm = 1;
	if (mlp) tc.model.mlp = model_mlp_parse(mlp);
	if (option_given("softcap")) tc.model.softcap = softcap;
	if (option_given("z-loss")) tc.model.z_loss = z_loss;
	if (norm_eps) tc.model.norm_eps = norm_eps;
	if (model_config_check(&tc.model, &e))
		die_err(&e);
	tc.device = device;
	tc.threads = (int)threads;
	tc.context = (int)ctx;
	tc.batch = (int)batch;
	tc.accum = (int)accum;
	tc.steps = steps;
	tc.tokens = tokens;
	if (mu.momentum_start < 0)
		mu.momentum_start = mu.momentum;
	mu.scale = optim_name_index(muon_scale_names, muon_scale_name);
	mu.ns_steps = (int)ns_steps;
	tc.opt = (optim_config){ .lr_max = lr, .warmup = warmup, .cycle = cycle, .beta1 = beta1,
				 .beta2 = beta2, .eps = eps, .weight_decay = wd, .clip = clip,
				 .schedule = optim_name_index(lr_schedule_names, schedule),
				 .decay_frac = decay_frac,
				 .decay_shape = optim_name_index(decay_shape_names, decay_shape_name),
				 .kind = optim_name_index(optim_kind_names, optimizer), .muon = mu };
	tc.lr_min_ratio = lr_min_ratio;
	tc.seed = (uint64_t)seed;
	tc.data = data.v;
	tc.n_data = data.n;
	tc.val = val.v;
	tc.n_val = val.n;
	tc.eval_every = eval_every;
	tc.eval_batches = eval_batches;
	tc.eval_stride = (int)eval_stride;
	tc.ckpt_every = ckpt_every;
	tc.keep_last = keep_last;
	tc.tokenizer = tok;
	tc.resume = resume;
	tc.force = force;
	tc.progress = show_progress;
	tc.given = option_given;
	tc.note = note;
	tc.stop = &lm_stop_signal;
	lm_stop_on_signal();
	tc.profile = (int)profile;
	tc.on_profile = print_profile;
	tc.gpus = (int)gpus;
	tc.zero = (int)zero;
	tc.bucket_mb = bucket_mb;
	tc.nccl_init = nccl_init;
	tc.dist_timeout = dist_timeout;
	tc.dump_windows = dump_windows;
	tc.deterministic = deterministic;
	tc.residual = optim_name_index(train_residual_names, residual);
	tc.residual_grad = optim_name_index(train_residual_names, residual_grad);
	/* a new user's lost hour: training without -o keeps nothing; said on a
	 * terminal only (scripts that time or log runs leave -o out on purpose) */
	if (!tc.out_dir && !dump_windows && isatty(STDERR_FILENO))
		warnmsg("no --out DIR: the trained model will not be saved (give -o DIR for checkpoints)");
	if (train_launch((int)gpus, argv, &e))
		die_err(&e);
	int rc = train_run(&tc, &e);
	free(data.v);
	free(val.v);
	if (rc)
		die_err(&e);
	return EXIT_OK;
}
