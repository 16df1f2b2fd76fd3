/* lm-sample: generate text from a checkpoint, with a KV cache, in batches,
 * with per-token log-probabilities for RL (man 1 lm-sample). */
#include <stdlib.h>
#include <unistd.h>

#include "app/lm_sample.h"
#include "cli/blas_tune.h"
#include "cli/die.h"
#include "cli/options.h"
#include "model/backend.h"
#include "model/ckpt.h"

enum {
	MAX_THREADS = 1024, MAX_SAMPLES = 1 << 16, MAX_BATCH = 1 << 16, MAX_TOKENS = 1 << 24,
	MAX_TOP_K = 1 << 30, MAX_CONTEXT = 1 << 30, DEFAULT_MAX_TOKENS = 256,
};
#define MAX_TEMPERATURE 1e6
#define MAX_SEED 9.2e18 /* below INT64_MAX, as a double the range check can hold */

static lmsample_opts o;
static double temperature = 1.0, top_p = 1.0;
static long long top_k, n_samples = 1, batch, max_tokens = DEFAULT_MAX_TOKENS, seed, think_budget,
		 context, threads;
static opt_strlist stops;
static const char *on_error = "stop";
static int show_stats;
static const char *const on_error_choices[] = { "stop", "skip", NULL };

static const opt_def options[] = {
	{ 'c', "checkpoint", OPT_STR, &o.checkpoint, "FILE", "checkpoint from lm-train, or its run DIR (required)", 0, 0, NULL },
	BPE_SOURCE_OPTIONS(o.tok),
	{ 'i', "input", OPT_STR, &o.input, "FILE", "read prompts from FILE (default: stdin)", 0, 0, NULL },
	{ 0, "jsonl", OPT_FLAG, &o.jsonl, NULL, "JSON Lines in ({\"prompt\": ...}) and out (one object per sample)", 0, 0, NULL },
	{ 0, "max-tokens", OPT_INT, &max_tokens, "N", "completion tokens at most", 1, MAX_TOKENS, NULL },
	{ 0, "temperature", OPT_DOUBLE, &temperature, "F", "divide the logits by F; 0: greedy", 0, MAX_TEMPERATURE, NULL },
	{ 0, "top-p", OPT_DOUBLE, &top_p, "P", "sample from the nucleus of probability P (1: off)", 0, 1, NULL },
	{ 0, "top-k", OPT_INT, &top_k, "K", "sample from the K most probable tokens (0: off)", 0, MAX_TOP_K, NULL },
	{ 's', "seed", OPT_INT, &seed, "N", "seed of the samples' random streams", 0, MAX_SEED, NULL },
	{ 'n', "samples", OPT_INT, &n_samples, "K", "samples per prompt, one group", 1, MAX_SAMPLES, NULL },
	{ 'b', "batch", OPT_INT, &batch, "N", "sequences decoded together (default: 16, 64 on cuda; at least -n)", 1, MAX_BATCH, NULL },
	{ 0, "stop", OPT_STRLIST, &stops, "STRING", "stop when the completion contains STRING (repeatable)", 0, 0, NULL },
	{ 0, "think-budget", OPT_INT, &think_budget, "N", "close a <think> section after N tokens (0: off)", 0, MAX_TOKENS, NULL },
	{ 0, "think-close", OPT_STR, &o.think_close, "TEXT", "the text that closes it (default: Qwen3's, see lm-sample(1))", 0, 0, NULL },
	{ 0, "truncate", OPT_FLAG, &o.truncate, NULL, "cut long prompts from the left instead of refusing them", 0, 0, NULL },
	{ 0, "context", OPT_INT, &context, "N", "positions per sequence (default: the model's context)", 1, MAX_CONTEXT, NULL },
	{ 0, "on-error", OPT_CHOICE, &on_error, "WHAT", "a bad prompt record: stop or skip", 0, 0, on_error_choices },
	{ 0, "device", OPT_CHOICE, &o.device, "DEV", "where the model runs (default cpu)", 0, 0, backend_names },
	{ 'j', "threads", OPT_INT, &threads, "N", "CPU threads (default: all)", 1, MAX_THREADS, NULL },
	{ 0, "stats", OPT_FLAG, &show_stats, NULL, "at the end, times and token counts as JSON on stderr", 0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"-c CHECKPOINT -t TOKENIZER [OPTION]... [PROMPT]...",
	"Generate completions of PROMPTs (or of each line of stdin or --input) with a checkpoint.",
	options,
	"Text output streams each completion, followed by a newline.  With --jsonl each sample is\n"
	"an object with completion, completion_ids, logprobs (log-softmax at temperature 1),\n"
	"prompt_ids, group, sample and finish_reason.  See lm-sample(1).\n",
};

static void warn_skip(const char *msg)
{
	warnmsg("%s (skipped)", msg);
}

static void note(const char *msg)
{
	warnmsg("%s", msg);
}

int main(int argc, char **argv)
{
	lm_err e;
	blas_tune_reexec(argv);
	lm_init(argv[0]);
	o.n_prompts = opt_parse_or_exit(&prog, argc, argv, &o.prompts);
	if (!o.checkpoint)
		die(EXIT_USAGE, "generation needs a checkpoint: -c CHECKPOINT (from lm-train)");
	static char ckpt_buf[4096];
	o.checkpoint = ckpt_resolve(o.checkpoint, ckpt_buf, sizeof ckpt_buf); /* a run's DIR: DIR/latest */
	if (!o.tok.tokenizer && !o.tok.gpt2_dir && !o.tok.vocab)
		die(EXIT_USAGE, "generation needs the checkpoint's tokenizer: -t TOKENIZER");
	o.out = stdout;
	o.out_name = "<stdout>";
	o.sp = (sample_params){ temperature, (uint32_t)top_k, top_p, 0 };
	o.seed = (uint64_t)seed;
	o.n_samples = (uint32_t)n_samples;
	o.batch = (uint32_t)batch;
	o.max_tokens = (uint32_t)max_tokens;
	o.context = (uint32_t)context;
	o.stop = &stops;
	o.think_budget = (uint32_t)think_budget;
	if (o.think_close && !think_budget)
		die(EXIT_USAGE, "--think-close is the text that --think-budget N closes with: give "
		    "--think-budget too");
	o.skip_bad = on_error[1] == 'k';
	o.warn = warn_skip;
	o.note = note;
	lmsample_stats st;
	if (show_stats)
		o.stats = &st;
	backend_set_threads((int)threads);
	/* a terminal waiting in silence looks like a hang */
	if (!o.n_prompts && !o.input && isatty(STDIN_FILENO) && isatty(STDERR_FILENO))
		warnmsg("type a prompt and Enter: each is answered before the next is read (Ctrl-D ends)");
	if (lmsample_run(&o, &e) < 0)
		die_err(&e);
	if (show_stats)
		warnmsg("stats: {\"load_s\":%.6f,\"generate_s\":%.6f,\"prompts\":%llu,\"samples\":%llu,"
			"\"prompt_tokens\":%llu,\"new_tokens\":%llu,\"new_tokens_per_s\":%.1f,"
			"\"prefill_s\":%.6f,\"prefill_turns\":%llu,\"prefill_max_s\":%.6f,"
			"\"decode_s\":%.6f,\"decode_turns\":%llu,\"decode_tokens\":%llu,"
			"\"decode_max_s\":%.6f,\"decode_tokens_per_s\":%.1f,\"input_s\":%.6f,"
			"\"feed_s\":%.6f,\"choose_s\":%.6f,\"output_s\":%.6f}", st.load_s,
			st.generate_s, (unsigned long long)st.prompts, (unsigned long long)st.samples,
			(unsigned long long)st.prompt_tokens, (unsigned long long)st.new_tokens,
			st.generate_s > 0 ? (double)st.new_tokens / st.generate_s : 0.0, st.gen.prefill_s,
			(unsigned long long)st.gen.prefill_turns, st.gen.prefill_max_s, st.gen.decode_s,
			(unsigned long long)st.gen.decode_turns,
			(unsigned long long)st.gen.decode_tokens, st.gen.decode_max_s,
			st.gen.decode_s > 0 ? (double)st.gen.decode_tokens / st.gen.decode_s : 0.0,
			st.gen.input_s, st.gen.feed_s, st.gen.choose_s, st.gen.output_s);
	free(o.prompts);
	free(stops.v);
	free(o.tok.special.v);
	return EXIT_OK;
}
