/* bpe-learn: learn a byte-level BPE vocabulary from text (man 1 bpe-learn). */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io.h"
#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/threads.h"
#include "learn/bpe_learn.h"
#include "text/docs.h"
#include "tok/bpe.h"

enum { MAX_THREADS = 1024, MAX_VOCAB = 1 << 30 };

static long long vocab_size, threads;
static opt_strlist special;
static const char *output, *gpt2_out, *counts_out;
static int from_counts, show_progress;

static const opt_def options[] = {
	{ 'v', "vocab-size", OPT_INT, &vocab_size, "N",
	  "ids in the vocabulary: 256 bytes + specials + merges", 1, MAX_VOCAB, NULL },
	{ 0, "special", OPT_STRLIST, &special, "TOKEN",
	  "a special token (repeatable): cuts the text, never merged, ids 0..", 0, 0, NULL },
	{ 'o', "output", OPT_STR, &output, "FILE", "write the tokenizer to FILE (man 5 lmpipe-tokenizer)", 0, 0, NULL },
	{ 0, "gpt2-out", OPT_STR, &gpt2_out, "DIR", "also write DIR/vocab.json and DIR/merges.txt (GPT-2 style)", 0, 0, NULL },
	{ 0, "counts-out", OPT_STR, &counts_out, "FILE",
	  "write the pre-token counts of the input to FILE (man 5 lmpipe-bpe-counts)", 0, 0, NULL },
	{ 0, "from-counts", OPT_FLAG, &from_counts, NULL,
	  "the FILEs are counts files (from --counts-out), merged, not text", 0, 0, NULL },
	{ 'j', "threads", OPT_INT, &threads, "N", "threads to count, load counts and merge (default: all CPUs allowed)", 1, MAX_THREADS, NULL },
	{ 0, "progress", OPT_FLAG, &show_progress, NULL, "show progress even when stderr is not a terminal", 0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"[OPTION]... [FILE]...",
	"Learn a byte-level BPE tokenizer (GPT-2 pre-tokenizer) from text FILEs, or stdin.",
	options,
	"At least one of -o, --gpt2-out and --counts-out is needed.  Counting in pieces:\n"
	"  bpe-learn --special TOK --counts-out part1.counts part1.txt   (one per piece)\n"
	"  bpe-learn --special TOK --from-counts -v N -o tok.txt part*.counts",
};

static progress bar;

/* arg: what earlier files added (bytes), or NULL */
static void on_progress(uint64_t done, void *arg)
{
	progress_update(&bar, done + (arg ? *(const uint64_t *)arg : 0), NULL);
}

static void count_inputs(bpe_counts *c, const bpe_specials *sp, char **files, int n_files)
{
	lm_err e;
	uint64_t total = 0;
	bpe_count_opts o = { cli_threads(threads), 0,
			     on_progress, &total };
	progress_start(&bar, show_progress, from_counts ? "loading counts" : "reading", "B", 0);
	if (from_counts) {
		static const char *const stdin_only[] = { "-" };
		const char *const *paths = n_files ? (const char *const *)files : stdin_only;
		if (bpe_counts_load_many(c, sp, paths, n_files ? n_files : 1, o.threads, &e))
			die_err(&e);
	}
	for (int i = 0; !from_counts && i < n_files; i++)
		if (docs_refuse_compressed(files[i], "bpe-learn", &e))
			die_err(&e);
	for (int i = 0; !from_counts && i < (n_files ? n_files : 1); i++) {
		const char *path = n_files ? files[i] : "-";
		FILE *fp = cli_open_input(path);
		uint64_t bytes;
		if (bpe_count_stream(c, fp, io_name(path), sp, &o, &bytes, &e))
			die_err(&e);
		io_close_read(fp);
		total += bytes;
	}
	progress_end(&bar, total, NULL);
	/* counts of nothing are counts (a piece of a corpus may hold no text) */
	if (bpe_counts_size(c) == 0 && (output || gpt2_out))
		die(EXIT_RUNTIME, "%s: no text to learn from (empty, or only special tokens)",
		    n_files == 1 ? io_name(files[0]) : n_files ? "input" : "<stdin>");
}

int main(int argc, char **argv)
{
	char **files;
	lm_err e;
	lm_init(argv[0]);
	int n_files = opt_parse_or_exit(&prog, argc, argv, &files);
	if (!output && !gpt2_out && !counts_out)
		die(EXIT_USAGE, "nothing to write: give -o FILE, --gpt2-out DIR or --counts-out FILE");
	if ((output || gpt2_out) && !vocab_size)
		die(EXIT_USAGE, "--vocab-size N is needed to learn a tokenizer");

	size_t *len = calloc(special.n + 1, sizeof *len);
	if (!len)
		die(EXIT_RUNTIME, "out of memory");
	for (size_t i = 0; i < special.n; i++)
		len[i] = strlen(special.v[i]);
	bpe_specials sp = { special.n, (const uint8_t **)special.v, len };
	if (bpe_specials_check(&sp, &e))
		die_err(&e);
	if ((output || gpt2_out) && (uint64_t)vocab_size < 256 + sp.n)
		die(EXIT_USAGE, "--vocab-size %lld is below 256 bytes + %zu special tokens",
		    vocab_size, sp.n);

	/* LMPIPE_BPE_TIMES: where the time goes, one line on stderr at the end */
	int show_times = getenv("LMPIPE_BPE_TIMES") != NULL;
	double t_start = omp_get_wtime();
	bpe_learn_times lt = { 0, 0, 0 };
	bpe_counts *c = bpe_counts_new(&e);
	if (!c)
		die_err(&e);
	count_inputs(c, &sp, files, n_files);
	double t_read = omp_get_wtime();
	if (counts_out && bpe_counts_save(c, &sp, counts_out, &e))
		die_err(&e);
	double t_learn = omp_get_wtime();

	if (output || gpt2_out) {
		bpe_tokenizer t;
		progress_start(&bar, show_progress, "learning", "merges",
			       (uint64_t)vocab_size - 256 - sp.n);
		int n_threads = cli_threads(threads);
		t_learn = omp_get_wtime();
		if (bpe_learn_timed(c, (uint32_t)vocab_size, &sp, n_threads, on_progress, NULL, &lt, &t, &e))
			die_err(&e);
		progress_end(&bar, t.n_merges, NULL);
		if (t.n_vocab < vocab_size)
			warnmsg("only %u ids: no pair left to merge after %u merges", t.n_vocab, t.n_merges);
		if (gpt2_out && mkdir(gpt2_out, 0777) && errno != EEXIST)
			die(EXIT_RUNTIME, "%s:", gpt2_out);
		if ((output && bpe_save(&t, output, &e)) || (gpt2_out && bpe_save_gpt2(&t, gpt2_out, &e)))
			die_err(&e);
		bpe_free(&t);
	}
	if (show_times)
		warnmsg("times: %s %.3f s, counts-out %.3f s, setup %.3f s, pairs %.3f s, merges %.3f s, "
			"write %.3f s", from_counts ? "load" : "count", t_read - t_start, t_learn - t_read,
			lt.setup_s, lt.pairs_s, lt.merges_s,
			omp_get_wtime() - t_learn - lt.setup_s - lt.pairs_s - lt.merges_s);
	bpe_counts_free(c);
	free(len);
	free(files);
	return EXIT_OK;
}
