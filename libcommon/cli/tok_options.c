/* tok_options.c: load the tokenizer named by the shared command-line options
 * (see tok_options.h). */
#include "cli/tok_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bpe_open(bpe_tokenizer *t, const bpe_source *src, lm_err *e)
{
	int n = (src->tokenizer != NULL) + (src->gpt2_dir != NULL) + (src->vocab || src->merges);
	if (n != 1)
		return lm_usage_err(e, n ? "give only one of -t, --gpt2 and --vocab/--merges"
					 : "no tokenizer: give -t FILE, --gpt2 DIR or --vocab F --merges F");
	if ((src->vocab != NULL) != (src->merges != NULL))
		return lm_usage_err(e, "--vocab and --merges go together");
	int rc;
	if (src->tokenizer) {
		rc = bpe_load(t, src->tokenizer, e);
	} else if (src->vocab) {
		rc = bpe_load_gpt2(t, src->vocab, src->merges, e);
	} else {
		size_t len = strlen(src->gpt2_dir) + sizeof "/vocab.json";
		char *v = malloc(len), *m = malloc(len + 1);
		if (!v || !m) {
			free(v);
			free(m);
			return lm_seterr(e, "out of memory");
		}
		snprintf(v, len, "%s/vocab.json", src->gpt2_dir);
		snprintf(m, len + 1, "%s/merges.txt", src->gpt2_dir);
		rc = bpe_load_gpt2(t, v, m, e);
		free(v);
		free(m);
	}
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
