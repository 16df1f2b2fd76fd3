/* bpe-encode: text to token ids with a byte-level BPE tokenizer
 * (man 1 bpe-encode). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/io.h"
#include "cli/die.h"
#include "cli/files.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/threads.h"
#include "cli/tok_options.h"
#include "learn/bpe_learn.h"
#include "text/docs.h"
#include "tok/bpe_build.h"
#include "tok/bpe_encode.h"
#include "tok/bpe_identity.h"
#include "tok/bpe_output.h"
#include "tok/bpe_pre.h"
#include "tok/bpe_stream.h"

enum { MAX_THREADS = 1024, MIN_CHUNK = 64 };

static bpe_source src;
static int text, no_specials, doc_per_line, eot_per_file, show_progress, pretokenize, from_pretok;
static long long threads;
static uint64_t chunk;
static const char *output, *save_tokenizer, *counts_out, *range;

static const opt_def options[] = {
	BPE_SOURCE_OPTIONS(src),
	{ 0, "no-specials", OPT_FLAG, &no_specials, NULL, "treat special-token text as ordinary text", 0, 0, NULL },
	{ 0, "text", OPT_FLAG, &text, NULL, "write decimal ids, one document per line", 0, 0, NULL },
	{ 'j', "threads", OPT_INT, &threads, "N", "encoding threads (default: all CPUs allowed)", 1, MAX_THREADS, NULL },
	{ 0, "doc-per-line", OPT_FLAG, &doc_per_line, NULL,
	  "each input line is a document: end-of-text replaces its newline", 0, 0, NULL },
	{ 0, "eot-per-file", OPT_FLAG, &eot_per_file, NULL, "write end-of-text after each input file", 0, 0, NULL },
	{ 0, "chunk", OPT_SIZE, &chunk, "SIZE", "bytes of text per unit of work (default 256Ki)", MIN_CHUNK,
	  1 << 30, NULL },
	{ 0, "save-tokenizer", OPT_STR, &save_tokenizer, "FILE",
	  "also write the tokenizer (with added specials) as an lmpipe tokenizer file", 0, 0, NULL },
	{ 0, "pretokenize", OPT_FLAG, &pretokenize, NULL,
	  "write the text's pre-tokens to -o FILE (man 5 lmpipe-pretok), not ids; needs no tokenizer, only "
	  "its --special tokens", 0, 0, NULL },
	{ 0, "counts-out", OPT_STR, &counts_out, "FILE",
	  "--pretokenize: also the pre-token counts, as bpe-learn --counts-out makes them", 0, 0, NULL },
	{ 0, "from-pretok", OPT_FLAG, &from_pretok, NULL,
	  "the FILEs are pre-token files (--pretokenize), not text: the same ids as their text's", 0, 0, NULL },
	{ 'r', "range", OPT_STR, &range, "START:END",
	  "only the documents of the one plain FILE that start in this byte range, read in place: "
	  "the same text as doc-cat -r START:END FILE", 0, 0, NULL },
	{ 'o', "output", OPT_STR, &output, "FILE", "write to FILE (whole or nothing), not stdout", 0, 0, NULL },
	{ 0, "progress", OPT_FLAG, &show_progress, NULL, "show progress even when stderr is not a terminal",
	  0, 0, NULL },
	OPT_END
};

static const opt_prog prog = {
	"[OPTION]... [FILE]...",
	"Encode text (FILEs, or stdin) into token ids: a token stream (man 5 lmpipe-tokens) on stdout.",
	options,
	"Each FILE is encoded on its own; special tokens in the text become their ids.",
};

/* The inputs in turn: the FILEs (or stdin), or with --range the one
 * FILE's documents that start in the range, mapped and read in place
 * (docs_span_open: what doc-cat -r writes, without its process and pipe). */
typedef struct inputs {
	cli_inputs in;
	docs_span span;
	int done;
	FILE *fp;
	const char *name;
} inputs;

/* --range's documents: end-of-text separated text, as doc-cat's default */
static docs_opts range_docs = { DOCS_TEXT, DOCS_SEP_EOT, NULL, BPE_EOT_TEXT, 0, DOCS_TO_END };

static int next_input(inputs *it)
{
	if (!range) {
		if (!cli_next_input(&it->in))
			return 0;
		it->fp = it->in.fp;
		it->name = it->in.name;
		return 1;
	}
	if (it->fp) {
		fclose(it->fp);
		it->fp = NULL;
	}
	docs_span_free(&it->span);
	if (it->done++)
		return 0;
	lm_err e;
	if (docs_span_open(&range_docs, it->in.files[0], &it->span, &e))
		die_err(&e);
	static const unsigned char none[1]; /* an empty span: a stream of nothing */
	it->fp = fmemopen((void *)(it->span.n ? it->span.p : none), it->span.n, "rb");
	if (!it->fp)
		die(EXIT_RUNTIME, "%s: fmemopen: out of memory", io_name(it->in.files[0]));
	it->name = io_name(it->in.files[0]);
	return 1;
}

static progress prog_bar;
static bpe_stream *stream;

static int sink(void *ctx, const uint32_t *ids, size_t n, lm_err *e)
{
	progress_update(&prog_bar, bpe_stream_bytes(stream), NULL);
	return bpe_output_ids(ctx, ids, n, e);
}

/* The 256 bytes and --special's tokens: all --pretokenize needs. */
static void pretokenize_alone(bpe_tokenizer *t)
{
	lm_err e;
	if (bpe_pre_tokenizer(t, &e))
		die_err(&e);
	for (size_t i = 0; i < src.special.n; i++) {
		uint32_t id;
		if (bpe_add_special(t, src.special.v[i], strlen(src.special.v[i]), &id, &e))
			die_err(&e);
	}
}

static int add_count(void *ctx, const uint8_t *s, size_t n, uint64_t count, lm_err *e)
{
	return bpe_counts_add(ctx, s, n, count, e);
}

/* --counts-out: the pre-tokens' counts, with the tokenizer's specials. */
static void write_counts(const bpe_tokenizer *t, const bpe_pre *pre)
{
	lm_err e;
	bpe_counts *c = bpe_counts_new(&e);
	const uint8_t **s = calloc(t->n_special + 1, sizeof *s);
	size_t *len = calloc(t->n_special + 1, sizeof *len);
	if (!c || !s || !len)
		die(EXIT_RUNTIME, "out of memory");
	for (uint32_t i = 0; i < t->n_special; i++) {
		s[i] = bpe_token_bytes(t, t->special[i]);
		len[i] = bpe_token_len(t, t->special[i]);
	}
	bpe_specials sp = { t->n_special, s, len };
	if (bpe_pre_each(pre, add_count, c, &e) || bpe_counts_save(c, &sp, counts_out, &e))
		die_err(&e);
	bpe_counts_free(c);
	free(s);
	free(len);
}

/* --pretokenize: the FILEs' (or stdin's) pre-tokens to the output. */
static int write_pretok(bpe_tokenizer *t, bpe_encoder *enc, char **files, int n_files)
{
	lm_err e;
	cli_output dst;
	cli_output_open(&dst, output);
	bpe_pre *pre = bpe_pre_open(enc, dst.fp, dst.name, &e);
	if (!pre)
		die_err(&e);
	bpe_stream_opts so = { 1, chunk, 0, 0, pre };
	if (!(stream = bpe_stream_new(enc, &so, &e)))
		die_err(&e);
	progress_start(&prog_bar, show_progress, "pre-tokenizing", "B", 0);
	inputs in = { .in = { .files = files, .n = n_files } };
	while (next_input(&in)) {
		progress_update(&prog_bar, bpe_stream_bytes(stream), NULL);
		if (bpe_stream_file(stream, in.fp, in.name, bpe_pre_sink, pre, &e))
			die_err(&e);
	}
	if (bpe_pre_close(pre, &e))
		die_err(&e);
	if (counts_out)
		write_counts(t, pre);
	cli_output_commit(&dst);
	progress_end(&prog_bar, bpe_stream_bytes(stream), NULL);
	bpe_pre_free(pre);
	bpe_stream_free(stream);
	bpe_encoder_free(enc);
	bpe_free(t);
	free(files);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	char **files;
	lm_err e;
	bpe_tokenizer t;
	bpe_output out;
	lm_init(argv[0]);
	int n_files = opt_parse_or_exit(&prog, argc, argv, &files);
	if (pretokenize && (from_pretok || text || doc_per_line || eot_per_file || save_tokenizer ||
			    no_specials))
		die(EXIT_USAGE, "--pretokenize goes with --special, --counts-out, -o and text FILEs only");
	if (range && (n_files != 1 || from_pretok || doc_per_line))
		die(EXIT_USAGE, "--range needs exactly one text FILE, without --from-pretok and --doc-per-line");
	if (range && opt_parse_range(range, &range_docs.start, &range_docs.end, DOCS_TO_END, &e))
		die_err(&e);
	if (counts_out && !pretokenize)
		die(EXIT_USAGE, "--counts-out goes with --pretokenize");
	if (from_pretok && (doc_per_line || n_files == 0))
		die(EXIT_USAGE, "--from-pretok needs FILEs and excludes --doc-per-line");
	if (pretokenize && !src.tokenizer && !src.gpt2_dir && !src.vocab && !src.merges)
		pretokenize_alone(&t);
	else if (bpe_open(&t, &src, &e))
		die_err(&e);
	if ((doc_per_line || eot_per_file) && t.eot == BPE_NO_TOKEN)
		die(EXIT_USAGE, "--doc-per-line and --eot-per-file need an <|endoftext|> token "
				"(add --special '<|endoftext|>')");
	if (save_tokenizer && bpe_save(&t, save_tokenizer, &e))
		die_err(&e);
	bpe_encoder *enc = bpe_encoder_new(&t, !no_specials, &e);
	if (!enc)
		die_err(&e);
	for (int i = 0; !from_pretok && !range && i < n_files; i++)
		if (docs_refuse_compressed(files[i], "bpe-encode", &e))
			die_err(&e);
	if (pretokenize)
		return write_pretok(&t, enc, files, n_files);
	bpe_stream_opts so = { cli_threads(threads), chunk,
			       doc_per_line, t.eot, NULL };
	if (!from_pretok && !(stream = bpe_stream_new(enc, &so, &e)))
		die_err(&e);
	cli_output dst;
	cli_output_open(&dst, output);
	/* the stream names its tokenizer, as used (with --special's tokens), so
	 * that shards and the checkpoints trained on them know it */
	uint32_t identity = bpe_identity_crc(&t);
	if (bpe_output_open(&out, dst.fp, dst.name, text, t.n_vocab, t.eot, &identity, &e))
		die_err(&e);
	progress_start(&prog_bar, show_progress, "encoding", "B", 0);
	inputs in = { .in = { .files = files, .n = n_files } };
	for (int i = 0; from_pretok && i < n_files; i++) {
		if (bpe_pre_encode(enc, files[i], bpe_output_ids, &out, &e))
			die_err(&e);
		if (eot_per_file && bpe_output_ids(&out, &t.eot, 1, &e))
			die_err(&e);
	}
	while (!from_pretok && next_input(&in)) {
		if (bpe_stream_file(stream, in.fp, in.name, sink, &out, &e))
			die_err(&e);
		if (eot_per_file && bpe_output_ids(&out, &t.eot, 1, &e))
			die_err(&e);
	}
	if (bpe_output_close(&out, &e))
		die_err(&e);
	cli_output_commit(&dst);
	progress_end(&prog_bar, stream ? bpe_stream_bytes(stream) : 0, NULL);
	bpe_stream_free(stream);
	bpe_encoder_free(enc);
	bpe_free(&t);
	free(files);
	return EXIT_OK;
}
