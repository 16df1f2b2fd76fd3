/* decode_phases.c: where a CPU decoding step's time goes, for
 * bench/lm-sample-phases.sh.  A model of a preset's shape with random
 * weights; BATCH sequences of PROMPT tokens prefilled, then NEW - 1 steps
 * of one token each, ROUNDS times over (a cache of the model's whole
 * context, as lm-sample makes by default).  Prints one JSON line: the
 * milliseconds of a whole step (the decoder's feed, no sampling) and of
 * each of its phases (model_decode.h's DECODE_PHASE_*, as thread 0 sees
 * them: a phase ends when every thread is done with it).
 *
 * On a backend that samples (DEVICE cuda), the phases are the decoder's
 * calls instead: "step_ms" is a step of the decoder's feed alone, queued
 * back to back and synchronised once per round (what the device needs per
 * step), "choose_ms" one choose() of the batch's next tokens (top-p 0.95,
 * synchronised: the sampler's round trip), "both_ms" a feed and a choose
 * (what lm-sample paid per token with one round a call), "ahead_ms" a
 * token of feeds and choose_ahead()s of the decoder's rounds (after the
 * prompts again: what lm-sample pays now; "ahead" rounds a call), and
 * "sample_ms" the sampler's kernel alone, queued 200 times between two
 * device events.  Of several rounds
 * the first is a warm-up, not counted.
 *
 * usage: decode_phases PRESET BATCH PROMPT NEW ROUNDS [DEVICE]
 * (threads: OMP_NUM_THREADS) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The device mode's four figures (see the top), added over a round that
 * starts after the prefill: feeds, chooses, then both. */
struct dev_times {
	double step, choose, both, sample, ahead;
	long steps, samples, ahead_tokens;
};

static int one_feed(model_decoder *md, int B, int step, uint32_t *ids, uint32_t *slot,
		    const uint32_t **tok, uint32_t *n, float **rows, lm_err *e)
{
	for (int b = 0; b < B; b++) {
		ids[b] = (uint32_t)((step * 5 + b) % md->dec.n_vocab);
		tok[b] = ids + b;
		n[b] = 1;
	}
	return md->dec.feed(md->dec.ctx, (uint32_t)B, slot, tok, n, rows, e);
}

static int device_round(model_decoder *md, int B, int P, int NEW, uint32_t *ids, uint32_t *slot,
			const uint32_t **tok, uint32_t *n, float **rows, struct dev_times *dt,
			lm_err *e)
{
	lm_backend *be = md->m->be;
	sample_params sp = { 1.0, 0, 0.95, 0 };
	uint32_t K = md->dec.choose_ahead ? md->dec.max_ahead : 1;
	float *u = malloc((size_t)K * B * SAMPLE_DRAWS * sizeof *u);
	int32_t *forced = malloc((size_t)B * sizeof *forced);
	uint32_t *out = malloc((size_t)K * B * sizeof *out);
	double *lp = malloc((size_t)K * B * sizeof *lp);
	uint32_t *prompt = malloc((size_t)B * P * sizeof *prompt);
	int rc = -1;
	if (!u || !forced || !out || !lp || !prompt) {
		lm_seterr(e, "out of memory");
		goto done;
	}
	for (int b = 0; b < B; b++)
		forced[b] = -1;
	for (size_t i = 0; i < (size_t)K * B * SAMPLE_DRAWS; i++)
		u[i] = (float)((i * 0.618034 + 0.3) - (int)(i * 0.618034 + 0.3));
	double t0 = now_s();
	for (int s = 1; s < NEW; s++)
		if (one_feed(md, B, s, ids, slot, tok, n, rows, e) < 0)
			goto done;
	if (be->sync(be, e) < 0)
		goto done;
	double t1 = now_s();
	for (int s = 1; s < NEW; s++)
		if (md->dec.choose(md->dec.ctx, (uint32_t)B, slot, &sp, u, forced, out, lp, e) < 0)
			goto done;
	double t2 = now_s();
	for (int s = 1; s < NEW; s++)
		if (one_feed(md, B, s, ids, slot, tok, n, rows, e) < 0 ||
		    md->dec.choose(md->dec.ctx, (uint32_t)B, slot, &sp, u, forced, out, lp, e) < 0)
			goto done;
	double t3 = now_s();
	/* the prompts again, then feeds and choose_ahead()s of K rounds: K
	 * tokens a call */
	long ahead = 0;
	for (int b = 0; K > 1 && b < B; b++) {
		if (md->dec.reset(md->dec.ctx, (uint32_t)b, e) < 0)
			goto done;
		for (int i = 0; i < P; i++)
			prompt[(size_t)b * P + i] = (uint32_t)(97 + (b * 7 + i * 3) % 26);
		tok[b] = prompt + (size_t)b * P;
		n[b] = (uint32_t)P;
	}
	if (K > 1 && (md->dec.feed(md->dec.ctx, (uint32_t)B, slot, tok, n, rows, e) < 0 ||
		      be->sync(be, e) < 0))
		goto done;
	double t3b = now_s();
	for (int s = 1; K > 1 && s + (int)K <= NEW; s += (int)K) {
		if (one_feed(md, B, s, ids, slot, tok, n, rows, e) < 0)
			goto done;
		int got = md->dec.choose_ahead(md->dec.ctx, (uint32_t)B, K, slot, &sp, u, forced, out,
					       lp, e);
		if (got < 0)
			goto done;
		ahead += got;
	}
	double t4 = now_s();
	/* the sampler's kernel alone, on the rows the last step left */
	sample_args a = { 1.0f, 0, 0.95f, 0, SAMPLE_WAY_AUTO };
	void *m0 = be->mark(be);
	for (int k = 0; k < 200; k++)
		be->sample(be, md->s_out, (float *)(md->s_out + md->n_slots), md->rows, md->s_in,
			   (const float *)(md->s_in + 2 * md->n_slots), md->s_in + md->n_slots, NULL, B,
			   md->m->cfg.vocab, a);
	void *m1 = be->mark(be);
	if (be->sync(be, e) < 0)
		goto done;
	if (m0 && m1) {
		dt->sample += be->mark_ms(be, m0, m1) / 1e3;
		dt->samples += 200;
	}
	be->mark_free(be, m0);
	be->mark_free(be, m1);
	dt->step += t1 - t0;
	dt->choose += t2 - t1;
	dt->both += t3 - t2;
	dt->steps += NEW - 1;
	dt->ahead += t4 - t3b;
	dt->ahead_tokens += ahead;
	rc = 0;
done:
	free(u);
	free(forced);
	free(out);
	free(lp);
	free(prompt);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: decode_phases PRESET BATCH PROMPT NEW ROUNDS [DEVICE]\n");
		return 2;
	}
	const model_preset *pre = model_preset_find(argv[1]);
	int B = atoi(argv[2]), P = atoi(argv[3]), NEW = atoi(argv[4]), R = atoi(argv[5]);
	int dev = argc == 7 && strcmp(argv[6], "cpu");
	if (!pre || B < 1 || P < 1 || NEW < 2 || R < 1 || P + (dev ? 2 : 1) * NEW > pre->cfg.ctx) {
		fprintf(stderr, "decode_phases: bad arguments\n");
		return 2;
	}
	lm_err e;
	const char *device = argc == 7 ? argv[6] : "cpu";
	lm_backend *be = backend_open(device, &e);
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
	struct dev_times dt = { 0 };
	if (dev && !md.dec.choose) {
		fprintf(stderr, "decode_phases: backend %s does not sample\n", argv[6]);
		return 2;
	}
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
		if (dev) {
			/* the first of several rounds warms up (graphs are
			 * recorded at a step's second occurrence) */
			struct dev_times warm = { 0 };
			if (device_round(&md, B, P, NEW, ids, slot, tok, n, rows,
					 r == 0 && R > 1 ? &warm : &dt, &e) < 0)
				return fail("device round", &e);
			continue;
		}
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
	if (dev) {
		printf("{\"impl\":\"lm-sample-phases\",\"device\":\"%s\",\"model\":\"%s\","
		       "\"batch\":%d,\"prompt\":%d,\"new\":%d,\"rounds\":%d,\"step_ms\":%.4f,"
		       "\"choose_ms\":%.4f,\"both_ms\":%.4f,\"sample_ms\":%.4f,\"tokens_per_s\":%.0f,"
		       "\"ahead\":%u,\"ahead_ms\":%.4f,\"ahead_tokens_per_s\":%.0f}\n",
		       argv[6], argv[1], B, P, NEW, R, 1e3 * dt.step / dt.steps,
		       1e3 * dt.choose / dt.steps, 1e3 * dt.both / dt.steps,
		       dt.samples ? 1e3 * dt.sample / dt.samples : -1.0, B * dt.steps / dt.both,
		       md.dec.choose_ahead ? md.dec.max_ahead : 1,
		       dt.ahead_tokens ? 1e3 * dt.ahead / dt.ahead_tokens : -1.0,
		       dt.ahead_tokens ? B * dt.ahead_tokens / dt.ahead : -1.0);
		goto out;
	}
	printf("{\"impl\":\"lm-sample-phases\",\"model\":\"%s\",\"batch\":%d,\"prompt\":%d,\"new\":%d,"
	       "\"rounds\":%d,\"threads\":%d,\"step_ms\":%.4f", argv[1], B, P, NEW, R,
	       omp_get_max_threads(), 1e3 * steps_s / steps);
	for (int i = 0; i < DECODE_PHASES; i++)
		printf(",\"%s\":%.4f", phase_names[i], 1e3 * phase[i] / steps);
	printf("}\n");
out:
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
