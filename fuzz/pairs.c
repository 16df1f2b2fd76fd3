/* pairs.c: fuzz rl-update's records with text fields, encoded with a
 * tokenizer: DPO's preference pairs {prompt, chosen, rejected} and SFT's
 * {prompt, response}.  The tokenizer is learned once from a fixed text. */
#include <string.h>

#include "fuzz.h"
#include "app/rl_update_internal.h"
#include "learn/bpe_learn.h"

enum { VOCAB = 300, CTX = 64 };

static const char EOT[] = "<|endoftext|>";
static const char *const WORDS[] = { "The", " cat", " sat", " on", " the", " mat", ".", " 2+3=5" };

static bpe_tokenizer tok;
static bpe_encoder *enc;
static bpe_worker *worker;

static int setup(void)
{
	static int done, ok;
	if (done)
		return ok;
	done = 1;
	lm_err e;
	const uint8_t *sp_s[] = { (const uint8_t *)EOT };
	size_t sp_len[] = { sizeof EOT - 1 };
	bpe_specials sp = { 1, sp_s, sp_len };
	bpe_counts *c = bpe_counts_new(&e);
	for (size_t i = 0; c && i < sizeof WORDS / sizeof *WORDS; i++)
		bpe_counts_add(c, (const uint8_t *)WORDS[i], strlen(WORDS[i]), 10 + i, &e);
	ok = c && !bpe_learn(c, VOCAB, &sp, NULL, NULL, &tok, &e) &&
	     (enc = bpe_encoder_new(&tok, 1, &e)) && (worker = bpe_worker_new(enc, &e));
	bpe_counts_free(c);
	return ok;
}

static void run(rlu_algo algo, const uint8_t *data, size_t size)
{
	FILE *in = fuzz_stream(data, size);
	if (!in)
		return;
	rlu_opts o = { .algo = algo };
	seqs v = { .tok = &tok, .w = worker };
	lm_err e;
	read_seqs(&o, &v, in, "in", VOCAB, CTX, &e);
	seqs_free(&v);
	fclose(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!setup())
		return 0;
	run(RLU_DPO, data, size);
	run(RLU_SFT, data, size);
	return 0;
}
