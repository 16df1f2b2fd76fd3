/* decode_phases.c: where a CPU decoding step's time goes, for
 * bench/lm-sample-phases.sh.  A model of a preset's shape with random
 * weights; BATCH sequences of PROMPT tokens prefilled, then NEW - 1 steps
 * of one token each, ROUNDS times over (a cache of the model's whole
 * context, as lm-sample makes by default).  Prints one JSON line: the
 * milliseconds of a whole step (the decoder's feed, no sampling) and of
 * each of its phases (model_decode.h's DECODE_PHASE_*, as thread 0 sees
 * them: a phase ends when every thread is done with it).
 *
 * usage: decode_phases PRESET BATCH PROMPT NEW ROUNDS   (threads: OMP_NUM_THREADS) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gen/model_decode.h"
#include "model/backend.h"

static const char *const phase_names[DECODE_PHASES] = {
	"qkv_ms", "rope_store_ms", "attention_ms", "out_proj_ms", "gate_up_ms", "down_ms", "head_ms"
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, const lm_err *e)
{
	fprintf(stderr, "decode_phases: %s: %s\n", what, e->msg);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: decode_phases PRESET BATCH PROMPT NEW ROUNDS\n");
		return 2;
	}
	const model_preset *pre = model_preset_find(argv[1]);
	int B = atoi(argv[2]), P = atoi(argv[3]), NEW = atoi(argv[4]), R = atoi(argv[5]);
	if (!pre || B < 1 || P < 1 || NEW < 2 || R < 1 || P + NEW > pre->cfg.ctx) {
		fprintf(stderr, "decode_phases: bad arguments\n");
		return 2;
	}
	lm_err e;
	lm_backend *be = backend_open("cpu", &e);
	model m;
	lm_rng rng;
	model_decoder md;
	if (!be || model_init(&m, &pre->cfg, be, 1, 1, &e) < 0)
		return fail("model", &e);
	rng_seed(&rng, 1);
	if (model_init_weights(&m, &rng, &e) < 0 ||
	    model_decoder_init(&md, &m, (uint32_t)B, (uint32_t)pre->cfg.ctx, &e) < 0)
		return fail("decoder", &e);
	int V = pre->cfg.vocab;
	float *logits = malloc((size_t)B * V * sizeof *logits);
	float **rows = malloc((size_t)B * sizeof *rows);
	uint32_t *ids = malloc((size_t)B * P * sizeof *ids), *slot = malloc((size_t)B * sizeof *slot);
	uint32_t *n = malloc((size_t)B * sizeof *n);
	const uint32_t **tok = malloc((size_t)B * sizeof *tok);
	if (!logits || !rows || !ids || !slot || !n || !tok) {
		fprintf(stderr, "decode_phases: out of memory\n");
		return 1;
	}
	double phase[DECODE_PHASES] = { 0 }, steps_s = 0;
	long steps = 0;
	for (int r = 0; r < R; r++) {
		for (int b = 0; b < B; b++) {
			if (md.dec.reset(md.dec.ctx, (uint32_t)b, &e) < 0)
				return fail("reset", &e);
			for (int i = 0; i < P; i++)
				ids[b * P + i] = (uint32_t)(97 + (b * 7 + i * 3) % 26);
			slot[b] = (uint32_t)b;
			tok[b] = ids + (size_t)b * P;
			n[b] = (uint32_t)P;
			rows[b] = logits + (size_t)b * V;
		}
		md.phase_s = NULL; /* the prefill is not a step */
		if (md.dec.feed(md.dec.ctx, (uint32_t)B, slot, tok, n, rows, &e) < 0)
			return fail("prefill", &e);
		md.phase_s = phase;
		for (int step = 1; step < NEW; step++) {
			for (int b = 0; b < B; b++) {
				ids[b * P] = (uint32_t)((step * 5 + b) % V);
				tok[b] = ids + (size_t)b * P;
				n[b] = 1;
			}
			double t0 = now_s();
			if (md.dec.feed(md.dec.ctx, (uint32_t)B, slot, tok, n, rows, &e) < 0)
				return fail("step", &e);
			steps_s += now_s() - t0;
			steps++;
		}
	}
	printf("{\"impl\":\"lm-sample-phases\",\"model\":\"%s\",\"batch\":%d,\"prompt\":%d,\"new\":%d,"
	       "\"rounds\":%d,\"threads\":%d,\"step_ms\":%.4f", argv[1], B, P, NEW, R,
	       omp_get_max_threads(), 1e3 * steps_s / steps);
	for (int i = 0; i < DECODE_PHASES; i++)
		printf(",\"%s\":%.4f", phase_names[i], 1e3 * phase[i] / steps);
	printf("}\n");
	model_decoder_free(&md);
	model_free(&m);
	be->close(be);
	free(logits);
	free(rows);
	free(ids);
	free(slot);
	free(n);
	free(tok);
	return 0;
}
