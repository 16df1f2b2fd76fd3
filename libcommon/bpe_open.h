/* bpe_open.h: the tokenizer options bpe-encode and bpe-decode share:
 * -t FILE, --gpt2 DIR, --vocab F --merges F, --special TOKEN... */
#ifndef LMPIPE_BPE_OPEN_H
#define LMPIPE_BPE_OPEN_H

#include "bpe.h"
#include "opt.h"

typedef struct bpe_source {
	const char *tokenizer;   /* lmpipe tokenizer file */
	const char *gpt2_dir;    /* DIR/vocab.json + DIR/merges.txt */
	const char *vocab, *merges;
	opt_strlist special;     /* extra special tokens */
} bpe_source;

/* Load the one tokenizer the options name (exactly one source, else a
 * usage error) and add the extra special tokens. */
int bpe_open(bpe_tokenizer *t, const bpe_source *src, lm_err *e);

#endif
