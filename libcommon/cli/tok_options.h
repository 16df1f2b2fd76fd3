/* tok_options.h: the tokenizer options every program that loads a tokenizer
 * shares (bpe-encode, bpe-decode, lm-sample): -t FILE, --gpt2 DIR,
 * --vocab F --merges F, --special TOKEN... */
#ifndef LMPIPE_TOK_OPTIONS_H
#define LMPIPE_TOK_OPTIONS_H

#include "cli/options.h"
#include "tok/bpe.h"

typedef struct bpe_source {
	const char *tokenizer;   /* lmpipe tokenizer file */
	const char *gpt2_dir;    /* DIR/vocab.json + DIR/merges.txt */
	const char *vocab, *merges;
	opt_strlist special;     /* extra special tokens */
} bpe_source;

/* The five option-table entries of those options, filling the bpe_source
 * src; put it among a program's opt_def entries. */
#define BPE_SOURCE_OPTIONS(src) \
	{ 't', "tokenizer", OPT_STR, &(src).tokenizer, "FILE", \
	  "lmpipe tokenizer file (man 5 lmpipe-tokenizer), or Hugging Face tokenizer.json", 0, 0, NULL }, \
	{ 0, "gpt2", OPT_STR, &(src).gpt2_dir, "DIR", \
	  "tokenizer.json, vocab.json + merges.txt (or gpt2-vocab.json, encoder.json ...) in DIR", 0, 0, NULL }, \
	{ 0, "vocab", OPT_STR, &(src).vocab, "FILE", "GPT-2 style vocab.json (with --merges)", 0, 0, NULL }, \
	{ 0, "merges", OPT_STR, &(src).merges, "FILE", "GPT-2 style merges.txt (with --vocab)", 0, 0, NULL }, \
	{ 0, "special", OPT_STRLIST, &(src).special, "TOKEN", "add a special token (repeatable)", 0, 0, NULL }

/* Load the one tokenizer the options name (exactly one source, else a
 * usage error) and add the extra special tokens.  -t FILE takes an lmpipe
 * tokenizer or a Hugging Face tokenizer.json; --gpt2 DIR takes the first of
 * DIR/tokenizer.json, vocab.json + merges.txt, gpt2-vocab.json +
 * gpt2-merges.txt, encoder.json + vocab.bpe, and names them all when none
 * is there. */
int bpe_open(bpe_tokenizer *t, const bpe_source *src, lm_err *e);

#endif
