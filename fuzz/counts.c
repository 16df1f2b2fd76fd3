/* counts.c: fuzz a pre-token counts file (man 5 lmpipe-bpe-counts), and
 * learn a few merges from what loads (the pair counts' arithmetic); then the
 * same file twice through the threaded loader (merged by hash partition)
 * and the threaded learner. */
#include "fuzz.h"
#include "learn/bpe_learn.h"
#include "tok/bpe.h"

enum { VOCAB = 256 + 40, THREADS = 2 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path("x.counts");
	if (fuzz_write_file(path, data, size))
		return 0;
	lm_err e;
	bpe_specials none = { 0, NULL, NULL };
	bpe_counts *c = bpe_counts_new(&e);
	if (!c)
		return 0;
	bpe_tokenizer t;
	if (bpe_counts_load(c, &none, path, &e) == 0 &&
	    bpe_learn(c, VOCAB, &none, NULL, NULL, &t, &e) == 0)
		bpe_free(&t);
	bpe_counts_free(c);
	const char *const twice[] = { path, path };
	if (!(c = bpe_counts_new(&e)))
		return 0;
	if (bpe_counts_load_many(c, &none, twice, 2, THREADS, &e) == 0 &&
	    bpe_learn_threads(c, VOCAB, &none, THREADS, NULL, NULL, &t, &e) == 0)
		bpe_free(&t);
	bpe_counts_free(c);
	return 0;
}
