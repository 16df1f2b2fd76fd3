/* shard-pack: pack a token stream into compressed, checksummed, seekable
 * shards with a validation split; list, test and decompress shards
 * (man 1 shard-pack).  The level is --level, not -l: as in zstd, -l lists. */
#include <stdio.h>
#include <stdlib.h>

#include "app/shard_pack.h"
#include "cli/die.h"
#include "cli/options.h"
#include "data/shard.h"

enum { MAX_LEVEL = 22, MAX_THREADS = 256 };

/* -v: the summary of a packing run, on stderr. */
static void report(const char *prefix, const shard_pack_summary *s)
{
	double raw = 2.0 * (double)(s->train_tokens + s->val_tokens);
	double comp = (double)s->bytes;
	fprintf(stderr, "%s: %llu tokens, %llu documents: %u train shards (%llu tokens), "
		"%u validation shards (%llu tokens), %.3f x smaller than raw u16\n",
		prefix, (unsigned long long)s->in_tokens, (unsigned long long)s->docs,
		s->train_shards, (unsigned long long)s->train_tokens, s->val_shards,
		(unsigned long long)s->val_tokens, comp > 0 ? raw / comp : 0.0);
}

int main(int argc, char **argv)
{
	const char *output = NULL;
	uint64_t shard_tokens = SHARD_DEFAULT_SHARD_TOKENS, frame_tokens = SHARD_DEFAULT_FRAME_TOKENS;
	uint64_t val_docs = 0;
	double val_fraction = 0;
	long long seed = 0, level = SHARD_DEFAULT_LEVEL, threads = 1;
	int val_by_content = 0, allow_empty = 0;
	int force = 0, list = 0, test = 0, decompress = 0, seal = 0, verbose = 0, show_progress = 0;
	const opt_def opts[] = {
		{ 'o', "output", OPT_STR, &output, "PREFIX",
		  "write PREFIX-000000.lms ... and PREFIX-val-000000.lms ...", 0, 0, NULL },
		{ 0, "shard-tokens", OPT_SIZE, &shard_tokens, "N", "tokens per shard",
		  1, 1e15, NULL },
		{ 0, "frame-tokens", OPT_SIZE, &frame_tokens, "N",
		  "tokens per independently compressed frame", 1, SHARD_MAX_FRAME_TOKENS, NULL },
		{ 0, "val-docs", OPT_SIZE, &val_docs, "N",
		  "split off N whole documents for validation", 0, 0, NULL },
		{ 0, "val-fraction", OPT_DOUBLE, &val_fraction, "F",
		  "split off each document with probability F for validation", 0, 1, NULL },
		{ 0, "seed", OPT_INT, &seed, "S", "seed of the validation split", 0, 9e18, NULL },
		{ 0, "val-by-content", OPT_FLAG, &val_by_content, NULL,
		  "split each document by a hash of its tokens, not its position", 0, 0, NULL },
		{ 0, "allow-empty", OPT_FLAG, &allow_empty, NULL,
		  "no tokens, or no training documents, is not an error", 0, 0, NULL },
		{ 0, "level", OPT_INT, &level, "N", "zstd compression level", 1, MAX_LEVEL, NULL },
		{ 'j', "threads", OPT_INT, &threads, "N", "compress frames on N threads",
		  1, MAX_THREADS, NULL },
		{ 'f', "force", OPT_FLAG, &force, NULL, "replace existing shards of PREFIX",
		  0, 0, NULL },
		{ 'l', "list", OPT_FLAG, &list, NULL,
		  "list shards: tokens, documents, frames, bytes, ratio", 0, 0, NULL },
		{ 't', "test", OPT_FLAG, &test, NULL, "verify every checksum of the shards",
		  0, 0, NULL },
		{ 'd', "decompress", OPT_FLAG, &decompress, NULL,
		  "write the shards' tokens as one token stream on stdout", 0, 0, NULL },
		{ 0, "seal", OPT_FLAG, &seal, NULL,
		  "write the manifest of each PREFIX written before manifests", 0, 0, NULL },
		{ 'v', "verbose", OPT_FLAG, &verbose, NULL, "print a summary when packing",
		  0, 0, NULL },
		{ 0, "progress", OPT_FLAG, &show_progress, NULL,
		  "show progress even when stderr is not a terminal", 0, 0, NULL },
		OPT_END,
	};
	const opt_prog prog = {
		"-o PREFIX [OPTION]... [FILE]...\n"
		"  or:  shard-pack -l|-t|-d SHARD...\n"
		"  or:  shard-pack --seal PREFIX...",
		"Pack token streams (FILE, or stdin) into zstd-compressed, checksummed shards\n"
		"with a validation set of whole documents; list, test or decompress shards.",
		opts,
		"The zstd level is --level (-l lists, as in zstd).  See shard-pack(1).\n",
	};
	lm_init(argv[0]);
	char **files;
	int n = opt_parse_or_exit(&prog, argc, argv, &files);
	lm_err e;
	int modes = list + test + decompress;
	if (modes > 1)
		die(EXIT_USAGE, "-l, -t and -d exclude each other");
	if (seal && modes)
		die(EXIT_USAGE, "--seal excludes -l, -t and -d");
	if (val_docs && val_fraction > 0)
		die(EXIT_USAGE, "--val-docs and --val-fraction exclude each other");
	if (seal && (n == 0 || output))
		die(EXIT_USAGE, "--seal needs the prefixes of shard sets, and no -o");
	modes += seal;
	if (modes && n == 0)
		die(EXIT_USAGE, "-%c needs shard files", list ? 'l' : test ? 't' : 'd');
	if (modes && output)
		die(EXIT_USAGE, "-o is for packing; -l, -t and -d write to stdout");
	if (!modes && !output)
		die(EXIT_USAGE, "missing -o PREFIX (try --help)");

	const char *const *paths = (const char *const *)files;
	int status = EXIT_OK;
	if (list) {
		shard_list_total t = { 0 };
		shard_list_header(stdout);
		for (int i = 0; i < n; i++)
			if (shard_list_one(paths[i], &t, stdout, &e)) {
				warnmsg("%s", e.msg);
				status = EXIT_RUNTIME;
			}
		shard_list_footer(&t, stdout);
	} else if (test) {
		for (int i = 0; i < n; i++)
			if (shard_test(paths[i], &e)) {
				warnmsg("%s", e.msg);
				status = EXIT_RUNTIME;
			}
	} else if (seal) {
		for (int i = 0; i < n; i++)
			if (shard_seal(paths[i], &e)) {
				warnmsg("%s", e.msg);
				status = EXIT_RUNTIME;
			}
	} else if (decompress) {
		if (shard_decompress(paths, n, stdout, &e))
			die_err(&e);
	} else {
		shard_pack_opts o = {
			.prefix = output, .shard_tokens = shard_tokens,
			.frame_tokens = (uint32_t)frame_tokens, .val_docs = val_docs,
			.val_fraction = val_fraction, .seed = (uint64_t)seed, .level = (int)level,
			.threads = (int)threads, .force = force, .progress = show_progress,
			.val_by_content = val_by_content, .allow_empty = allow_empty,
		};
		shard_pack_summary s;
		if (shard_pack(&o, paths, n, &s, &e))
			die_err(&e);
		if (verbose)
			report(output, &s);
	}
	free(files);
	return status;
}
