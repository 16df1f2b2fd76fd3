/* rl-update: one policy update from scored rollouts (GRPO family),
 * {prompt, response} records (SFT) or preference pairs (DPO); writes the
 * new checkpoint and a metrics line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/rl_update.h"
#include "base/io.h"
#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "model/ckpt.h"

static const char *const algos[] = { "grpo", "sft", "dpo", "ppo", NULL };
static const char *const losses[] = { "grpo_clip", "reinforce_with_baseline", "no_baseline", NULL };
static const char *const aggs[] = { "masked_mean", "normalize", NULL };
static const char *algo = "grpo", *loss = "grpo_clip", *agg = "masked_mean";
static const char *checkpoint, *ref, *tokenizer, *out_dir, *device = "cpu";
static int no_std, progress, whiten, profile;
static double gamma_ = 1.0, lambda = 0.95, vf_coef = 0.1, vf_clip = 0.2, ent_coef;
static double beta = 0.1, cliprange = 0.2, clip_high, kl_beta, adv_eps = 1e-6, constant, lr = 1e-5, adam_eps = 1e-8, wd, beta1 = 0.9, beta2 = 0.95, clip = 1.0;
static long long batch, micro_batch, epochs = 1, threads, gpus;

enum { RANKS_MAX = 1 << 16 };

static const opt_def opts[] = {
	{ 'c', "checkpoint", OPT_STR, &checkpoint, "FILE", "the policy to update: a checkpoint, or its run DIR (required)", 0, 0, NULL },
	{ 'o', "out", OPT_STR, &out_dir, "DIR", "where the new checkpoint goes (step-N.safetensors, latest)", 0, 0, NULL },
	{ 'a', "algo", OPT_CHOICE, &algo, "ALGO", "algorithm", 0, 0, algos },
	{ 't', "tokenizer", OPT_STR, &tokenizer, "FILE", "sft, dpo: the tokenizer of the model", 0, 0, NULL },
	{ 'r', "ref", OPT_STR, &ref, "FILE", "dpo, --kl: the reference checkpoint", 0, 0, NULL },
	{ 0, "beta", OPT_DOUBLE, &beta, "F", "dpo: the inverse temperature beta", 0, 1e6, NULL },
	{ 'l', "loss", OPT_CHOICE, &loss, "TYPE", "grpo: policy-gradient loss", 0, 0, losses },
	{ 0, "cliprange", OPT_DOUBLE, &cliprange, "F", "grpo_clip, ppo: ratio clipped to [1 - F, 1 + F]", 0, 10, NULL },
	{ 0, "clip-high", OPT_DOUBLE, &clip_high, "F", "grpo_clip, ppo: upper clip 1 + F instead (clip-higher)", 0, 10, NULL },
	{ 0, "kl", OPT_DOUBLE, &kl_beta, "F", "grpo, ppo: weight of the KL penalty to --ref", 0, 1e6, NULL },
	{ 0, "gamma", OPT_DOUBLE, &gamma_, "F", "ppo: GAE discount", 0, 1, NULL },
	{ 0, "lambda", OPT_DOUBLE, &lambda, "F", "ppo: GAE lambda", 0, 1, NULL },
	{ 0, "vf-coef", OPT_DOUBLE, &vf_coef, "F", "ppo: weight of the value loss", 0, 1e6, NULL },
	{ 0, "vf-clip", OPT_DOUBLE, &vf_clip, "F", "ppo: value clipped to the old one +- F", 0, 1e30, NULL },
	{ 0, "ent-coef", OPT_DOUBLE, &ent_coef, "F", "ppo: weight of the entropy bonus", 0, 1e6, NULL },
	{ 0, "whiten", OPT_FLAG, &whiten, NULL, "ppo: advantages to mean 0, std 1 over the batch's tokens", 0, 0, NULL },
	{ 0, "no-std", OPT_FLAG, &no_std, NULL, "grpo: advantage r - mean, not divided by the std (Dr. GRPO)", 0, 0, NULL },
	{ 0, "adv-eps", OPT_DOUBLE, &adv_eps, "F", "grpo: added to the std", 0, 1, NULL },
	{ 0, "agg", OPT_CHOICE, &agg, "HOW", "per-sequence loss: mean over its tokens, or sum / constant", 0, 0, aggs },
	{ 0, "constant", OPT_DOUBLE, &constant, "C", "normalize: the constant (default: the longest response)", 0, 1e12, NULL },
	{ 'b', "batch", OPT_INT, &batch, "N", "sequences per optimizer step (default: all)", 0, 1e12, NULL },
	{ 'm', "micro-batch", OPT_INT, &micro_batch, "N", "sequences per forward and backward pass (default 8); memory grows with N", 1, 1e6, NULL },
	{ 'e', "epochs", OPT_INT, &epochs, "N", "passes over the records", 1, 1e6, NULL },
	{ 0, "lr", OPT_DOUBLE, &lr, "F", "learning rate", 0, 10, NULL },
	{ 0, "weight-decay", OPT_DOUBLE, &wd, "F", "AdamW decoupled weight decay of matrices", 0, 10, NULL },
	{ 0, "beta1", OPT_DOUBLE, &beta1, "F", "AdamW beta1", 0, 1, NULL },
	{ 0, "beta2", OPT_DOUBLE, &beta2, "F", "AdamW beta2", 0, 1, NULL },
	{ 0, "eps", OPT_DOUBLE, &adam_eps, "F", "AdamW epsilon", 0, 1e6, NULL },
	{ 0, "clip", OPT_DOUBLE, &clip, "F", "max global gradient norm, 0: off", 0, 1e30, NULL },
	{ 0, "device", OPT_STR, &device, "DEV", "compute device", 0, 0, NULL },
	{ 0, "progress", OPT_FLAG, &progress, NULL, "show progress on stderr even when it is no terminal", 0, 0, NULL },
	{ 0, "profile", OPT_FLAG, &profile, NULL, "time every op of the update; print the table to stderr", 0, 0, NULL },
	{ 'j', "threads", OPT_INT, &threads, "N", "CPU threads (default: all)", 0, 4096, NULL },
	{ 0, "gpus", OPT_INT, &gpus, "N", "data parallel over N ranks on this host (execs mpirun -np N; with --device cpu, N processes); the records from FILE", 1, RANKS_MAX, NULL },
	OPT_END
};

static const opt_prog prog = {
	"-c CHECKPOINT -o DIR [OPTION]... [FILE]",
	"Update a policy: GRPO-family policy gradient or PPO (value head, GAE) on scored\n"
	"rollouts (rl-reward output), SFT on {\"prompt\", \"response\"} records, or DPO on\n"
	"{\"prompt\", \"chosen\", \"rejected\"};\n"
	"read FILE or stdin, write the new checkpoint in DIR and one JSON metrics line on stdout.",
	opts, NULL
};

static void note(const char *msg)
{
	warnmsg("%s", msg);
}

/* The options of some algorithms only: one given to another would do
 * nothing, which is said rather than ignored.  G, S, D, P: grpo, sft, dpo,
 * ppo; GC: grpo with the grpo_clip loss. */
enum { G = 1, S = 2, D = 4, P = 8, GC = 16 };
static const struct { const char *name; int algos; const char *for_; } ALGO_OPTS[] = {
	{ "beta", D, "--algo dpo" },
	{ "loss", G, "--algo grpo" },
	{ "cliprange", GC | P, "the grpo_clip loss and --algo ppo" },
	{ "clip-high", GC | P, "the grpo_clip loss and --algo ppo" },
	{ "kl", G | P, "--algo grpo and ppo" },
	{ "gamma", P, "--algo ppo" }, { "lambda", P, "--algo ppo" }, { "vf-coef", P, "--algo ppo" },
	{ "vf-clip", P, "--algo ppo" }, { "ent-coef", P, "--algo ppo" }, { "whiten", P, "--algo ppo" },
	{ "no-std", G, "--algo grpo" }, { "adv-eps", G, "--algo grpo" },
	{ "agg", G | P, "--algo grpo and ppo" }, { "constant", G | P, "--algo grpo and ppo" },
};

static int given(const unsigned char *seen, const char *name)
{
	return opt_given(opts, seen, name);
}

static void check_algo_options(const unsigned char *seen, int algo_bit)
{
	int have = algo_bit | (algo_bit == G && !strcmp(loss, "grpo_clip") ? GC : 0);
	for (size_t i = 0; i < sizeof ALGO_OPTS / sizeof ALGO_OPTS[0]; i++) {
		if (!given(seen, ALGO_OPTS[i].name) || (ALGO_OPTS[i].algos & have))
			continue;
		if (algo_bit == G && (ALGO_OPTS[i].algos & GC))
			die(EXIT_USAGE, "--%s is for %s, not the %s loss", ALGO_OPTS[i].name,
			    ALGO_OPTS[i].for_, loss);
		die(EXIT_USAGE, "--%s is for %s, not --algo %s", ALGO_OPTS[i].name, ALGO_OPTS[i].for_,
		    algo);
	}
	if (given(seen, "constant") && strcmp(agg, "normalize"))
		die(EXIT_USAGE, "--constant is the divisor of --agg normalize");
	if (ref && !(algo_bit == D || ((algo_bit == G || algo_bit == P) && kl_beta > 0)))
		die(EXIT_USAGE, "--ref is the reference model of --algo dpo and of --kl, which this run "
		    "does not use");
}

/* The --profile table (profile.h). */
static void print_profile(const lm_prof_row *rows, int n, int steps, double wall_ms)
{
	prof_write_table(stderr, "rl-update", steps == 1 ? "step" : "steps", rows, n, steps, wall_ms);
}

int main(int argc, char **argv)
{
	lm_init(argv[0]);
	char **operands;
	unsigned char seen[sizeof opts / sizeof opts[0]] = { 0 };
	int n = opt_parse_or_exit_seen(&prog, argc, argv, &operands, seen);
	int algo_bit = !strcmp(algo, "sft") ? S : !strcmp(algo, "dpo") ? D : !strcmp(algo, "ppo") ? P : G;
	check_algo_options(seen, algo_bit);
	const char *path = cli_one_input(operands, n);
	static char ckpt_buf[4096], ref_buf[4096]; /* a run's DIR: DIR/latest */
	checkpoint = ckpt_resolve(checkpoint, ckpt_buf, sizeof ckpt_buf);
	ref = ckpt_resolve(ref, ref_buf, sizeof ref_buf);
	if (!checkpoint || !out_dir)
		die(EXIT_USAGE, "-c CHECKPOINT and -o DIR are required\nTry 'rl-update --help' for more information.");
	lm_err e;
	if (rlu_launch((int)gpus, argv, &e))
		die_err(&e);
	rlu_opts o = {
		.algo = !strcmp(algo, "sft") ? RLU_SFT : !strcmp(algo, "dpo") ? RLU_DPO
		      : !strcmp(algo, "ppo") ? RLU_PPO : RLU_GRPO,
		.checkpoint = checkpoint, .ref = ref, .beta = beta,
		.clip_low = cliprange, .clip_high = clip_high > 0 ? clip_high : cliprange, .kl_beta = kl_beta, .tokenizer = tokenizer, .out_dir = out_dir, .device = device,
		.no_std = no_std, .adv_eps = adv_eps,
		.agg = strcmp(agg, "normalize") ? RL_AGG_MASKED_MEAN : RL_AGG_NORMALIZE,
		.constant = constant, .batch = batch, .micro_batch = micro_batch, .epochs = epochs, .lr = lr, .weight_decay = wd,
		.gamma = gamma_, .lambda = lambda, .vf_coef = vf_coef, .vf_clip = vf_clip,
		.ent_coef = ent_coef, .whiten = whiten,
		.beta1 = beta1, .beta2 = beta2, .eps = adam_eps, .clip_grad = clip, .threads = (int)threads, .progress = progress,
		.gpus = (int)gpus, .note = note, .profile = profile, .on_profile = print_profile,
	};
	if (rl_pg_type_parse(loss, &o.loss, &e))
		die_err(&e);
	FILE *in = cli_open_input(path);
	rlu_times t;
	if (rlu_run(&o, in, io_name(path), stdout, &t, &e))
		die_err(&e);
	io_close_read(in);
	fprintf(stderr, "rl-update: %.3f s: read %.3f, reference %.3f, forward/backward %.3f, "
		"optimizer %.3f, write %.3f\n", t.total, t.read, t.ref, t.fwd_bwd, t.optim, t.write);
	free(operands);
	return EXIT_OK;
}
