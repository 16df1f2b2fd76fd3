/* tok_options.c: load the tokenizer named by the shared command-line options
 * (see tok_options.h). */
#include "cli/tok_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The names a tokenizer directory may hold, tried in this order: Hugging
 * Face's tokenizer.json, then vocab + merges pairs as GPT-2 (and
 * transformers' save_pretrained), Megatron and OpenAI's encoder.py name
 * them. */
static const char *const DIR_TOKENIZER_JSON = "tokenizer.json";
static const char *const DIR_PAIRS[][2] = {
	{ "vocab.json", "merges.txt" },
	{ "gpt2-vocab.json", "gpt2-merges.txt" },
	{ "encoder.json", "vocab.bpe" },
};
enum { N_DIR_PAIRS = sizeof DIR_PAIRS / sizeof DIR_PAIRS[0], NAMES_LEN = 256 };

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

static int readable(const char *path)
{
	return path && access(path, R_OK) == 0;
}

static int open_dir(bpe_tokenizer *t, const char *dir, lm_err *e)
{
	char *p = join(dir, DIR_TOKENIZER_JSON);
	if (!p)
		return lm_seterr(e, "out of memory");
	if (readable(p)) {
		int rc = bpe_load_hf(t, p, e);
		free(p);
		return rc;
	}
	free(p);
	char tried[NAMES_LEN];
	int n = snprintf(tried, sizeof tried, "%s", DIR_TOKENIZER_JSON);
	for (int i = 0; i < N_DIR_PAIRS; i++) {
		char *v = join(dir, DIR_PAIRS[i][0]), *m = join(dir, DIR_PAIRS[i][1]);
		int found = readable(v) && readable(m);
		int rc = found ? bpe_load_gpt2(t, v, m, e) : 0;
		free(v);
		free(m);
		if (!v || !m)
			return lm_seterr(e, "out of memory");
		if (found)
			return rc;
		if (n > 0 && (size_t)n < sizeof tried)
			n += snprintf(tried + n, sizeof tried - (size_t)n, ", %s + %s", DIR_PAIRS[i][0],
				      DIR_PAIRS[i][1]);
	}
	return lm_seterr(e, "%s: no tokenizer files (tried %s)", dir, tried);
}

int bpe_open(bpe_tokenizer *t, const bpe_source *src, lm_err *e)
{
	int n = (src->tokenizer != NULL) + (src->gpt2_dir != NULL) + (src->vocab || src->merges);
	if (n != 1)
		return lm_usage_err(e, n ? "give only one of -t, --gpt2 and --vocab/--merges"
					 : "no tokenizer: give -t FILE, --gpt2 DIR or --vocab F --merges F");
	if ((src->vocab != NULL) != (src->merges != NULL))
		return lm_usage_err(e, "--vocab and --merges go together");
	int rc;
	if (src->tokenizer)
		rc = bpe_load_any(t, src->tokenizer, e);
	else if (src->vocab)
		rc = bpe_load_gpt2(t, src->vocab, src->merges, e);
	else
		rc = open_dir(t, src->gpt2_dir, e);
	if (rc)
		return -1;
	for (size_t i = 0; i < src->special.n; i++) {
		uint32_t id;
		if (bpe_add_special(t, src->special.v[i], strlen(src->special.v[i]), &id, e)) {
			bpe_free(t);
			return -1;
		}
	}
	return 0;
}
