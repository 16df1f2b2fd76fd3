/* lm_sample.c: lm-sample's work between the option table and the generation
 * driver (see lm_sample.h): prompts in, encoded, generated, written out. */
#include "app/lm_sample.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/io.h"
#include "cli/progress.h"
#include "gen/model_decode.h"
#include "gen/prompts.h"
#include "gen/rollout.h"
#include "model/backend.h"
#include "model/ckpt.h"
#include "tok/bpe_encode.h"
#include "tok/bpe_identity.h"

/* Sequences in flight by default: a GPU wants more to fill it. */
enum { DEFAULT_BATCH = 16, DEFAULT_BATCH_GPU = 64 };

typedef struct run_ctx {
	const lmsample_opts *o;
	prompt_reader rd;
	bpe_worker *w;
	uint32_t n_ctx;
	uint64_t next_index;
	int write_failed;
	int headed;                  /* plain text: the current sample's header is out */
	int looked;                  /* plain text: the first line looked at for JSON */
	lmsample_stats st;
} run_ctx;

/* One prompt in flight: its record and its tokens. */
typedef struct prompt_item {
	prompt_rec rec;
	bpe_ids ids;
} prompt_item;

static void item_free(prompt_item *it)
{
	prompt_rec_free(&it->rec);
	bpe_ids_free(&it->ids);
	free(it);
}

/* Encode a record; fit it to the context.  PROMPT_OK, PROMPT_BAD or -1. */
static int encode(run_ctx *c, prompt_item *it, size_t *start, lm_err *e)
{
	const lmsample_opts *o = c->o;
	if (bpe_encode(c->w, (const uint8_t *)it->rec.text, it->rec.len, &it->ids, e) < 0)
		return -1;
	size_t n = it->ids.n;
	*start = 0;
	if (o->truncate) {
		size_t keep = c->n_ctx > o->max_tokens ? c->n_ctx - o->max_tokens : 1;
		if (n > keep)
			*start = n - keep;
		return PROMPT_OK;
	}
	if (n <= c->n_ctx)
		return PROMPT_OK;
	char where[LM_ERR_MSG_MAX / 2];
	if (it->rec.line)
		snprintf(where, sizeof where, "%s:%llu", c->rd.name, (unsigned long long)it->rec.line);
	else
		snprintf(where, sizeof where, "argument %d", c->rd.next_arg);
	lm_seterr(e, "%s: the prompt has %zu tokens, more than the context of %u "
		  "(--truncate keeps its end)", where, n, c->n_ctx);
	return PROMPT_BAD;
}

/* A plain-text line that is a JSON record with a "prompt" (lm-task's, or
 * rollouts) was most likely meant for --jsonl: said once, then taken as
 * the text it is. */
static void look_for_json(run_ctx *c, const prompt_rec *rec)
{
	if (c->looked || c->o->jsonl || !rec->line || !c->o->note)
		return;
	c->looked = 1;
	const char *t = rec->text;
	while (*t == ' ' || *t == '\t')
		t++;
	if (*t == '{' && strstr(t, "\"prompt\"")) {
		char msg[LM_ERR_MSG_MAX];
		snprintf(msg, sizeof msg, "%s:%llu: a JSON record with a \"prompt\", taken as plain text: "
			 "give --jsonl to read its prompt", c->rd.name, (unsigned long long)rec->line);
		c->o->note(msg);
	}
}

static int next_prompt(void *user, gen_prompt *gp, lm_err *e)
{
	run_ctx *c = user;
	for (;;) {
		prompt_item *it = calloc(1, sizeof *it);
		if (!it)
			return lm_seterr(e, "prompt record:");
		size_t start = 0;
		int rc = prompt_next(&c->rd, &it->rec, e);
		if (rc == PROMPT_OK)
			look_for_json(c, &it->rec);
		if (rc == PROMPT_OK)
			rc = encode(c, it, &start, e);
		if (rc == PROMPT_OK) {
			*gp = (gen_prompt){ it->ids.v + start, it->ids.n - start, it->rec.text, it->rec.len,
					    c->next_index++, it };
			c->st.prompts++;
			c->st.prompt_tokens += it->ids.n - start;
			return 1;
		}
		item_free(it);
		if (rc != PROMPT_BAD)
			return rc < 0 ? -1 : 0;
		if (!c->o->skip_bad)
			return -1;
		if (c->o->warn)
			c->o->warn(e->msg);
	}
}

/* Plain text: each sample opens with a header line naming its prompt and
 * number, then the prompt's text, which the completion continues. */
static void header(run_ctx *c, const gen_sample *s)
{
	if (c->headed)
		return;
	c->headed = 1;
	if (fprintf(c->o->out, "=== prompt %llu, sample %u ===\n",
		    (unsigned long long)s->prompt->index + 1, s->index + 1) < 0 ||
	    fwrite(s->prompt->text, 1, s->prompt->len, c->o->out) != s->prompt->len)
		c->write_failed = 1;
}

static void stream_text(void *user, const gen_sample *s, const uint8_t *b, size_t n)
{
	run_ctx *c = user;
	header(c, s);
	if (fwrite(b, 1, n, c->o->out) != n || fflush(c->o->out) != 0)
		c->write_failed = 1;
}

static int sample_done(void *user, const gen_sample *s, lm_err *e)
{
	run_ctx *c = user;
	const lmsample_opts *o = c->o;
	c->st.samples++;
	c->st.new_tokens += s->n;
	if (!o->jsonl) {
		header(c, s);
		c->headed = 0;
		if (fputc('\n', o->out) == EOF || fflush(o->out) != 0 || c->write_failed)
			return lm_seterr(e, "%s: write error:", o->out_name);
		return 0;
	}
	const prompt_item *it = s->prompt->user;
	json_t *obj = rollout_json(it->rec.obj, s, s->prompt->index, e);
	if (!obj)
		return -1;
	int rc = rollout_write(o->out, obj, o->out_name, e);
	json_decref(obj);
	if (rc == 0 && fflush(o->out) != 0)
		return lm_seterr(e, "%s: write error:", o->out_name);
	return rc;
}

static void release(void *user, gen_prompt *p)
{
	item_free(p->user);
}

/* Everything loaded before generation starts. */
typedef struct loaded {
	bpe_tokenizer t;
	int have_t;
	bpe_encoder *enc;
	bpe_worker *w;
	model m;
	int have_m;
	lm_backend *be;
	model_decoder md;
	bpe_ids close;
	FILE *in;
} loaded;

static int load(const lmsample_opts *o, loaded *L, uint32_t *n_ctx, lm_err *e)
{
	if (bpe_open(&L->t, &o->tok, e) < 0)
		return -1;
	L->have_t = 1;
	if (!(L->enc = bpe_encoder_new(&L->t, 1, e)) || !(L->w = bpe_worker_new(L->enc, e)))
		return -1;
	model_config cfg;
	if (ckpt_read_config(o->checkpoint, &cfg, e) < 0)
		return -1;
	if (L->t.n_vocab > (uint32_t)cfg.vocab)
		return lm_seterr(e, "the tokenizer has %u tokens but the checkpoint %s has a vocabulary of %d: "
				 "they do not belong together", L->t.n_vocab, o->checkpoint, cfg.vocab);
	char *id = NULL;
	int bad = ckpt_read_meta(o->checkpoint, BPE_IDENTITY_KEY, &id, e) ||
		  (id && bpe_identity_check(&L->t, o->tok.tokenizer ? o->tok.tokenizer : "the tokenizer",
					    id, o->checkpoint, e));
	free(id);
	if (bad)
		return -1;
	if (o->context > (uint32_t)cfg.ctx)
		return lm_usage_err(e, "--context %u exceeds the model's context of %d", o->context, cfg.ctx);
	*n_ctx = o->context ? o->context : (uint32_t)cfg.ctx;
	if (!(L->be = backend_open(o->device ? o->device : "cpu", e)))
		return -1;
	if (model_init(&L->m, &cfg, L->be, 1, 1, e) < 0)
		return -1;
	L->have_m = 1;
	if (ckpt_load(o->checkpoint, &L->m, NULL, NULL, e) < 0)
		return -1;
	uint32_t dflt = L->be->act == LM_F32 ? DEFAULT_BATCH : DEFAULT_BATCH_GPU;
	uint32_t batch = o->batch ? o->batch : o->n_samples > dflt ? o->n_samples : dflt;
	if (model_decoder_init(&L->md, &L->m, batch, *n_ctx, e) < 0)
		return -1;
	if (o->think_budget) {
		const char *s = o->think_close ? o->think_close : LMSAMPLE_THINK_CLOSE;
		if (bpe_encode(L->w, (const uint8_t *)s, strlen(s), &L->close, e) < 0)
			return -1;
	}
	return 0;
}

static void unload(loaded *L)
{
	if (L->md.m)
		model_decoder_free(&L->md);
	if (L->have_m)
		model_free(&L->m);
	if (L->be)
		L->be->close(L->be);
	bpe_ids_free(&L->close);
	if (L->w)
		bpe_worker_free(L->w);
	if (L->enc)
		bpe_encoder_free(L->enc);
	if (L->have_t)
		bpe_free(&L->t);
	io_close_read(L->in);
}

int lmsample_run(const lmsample_opts *o, lm_err *e)
{
	if (o->n_prompts && o->input)
		return lm_usage_err(e, "prompts come from arguments or from --input, not both");
	loaded L = { 0 };
	run_ctx c = { .o = o };
	double t0 = lm_now();
	int rc = load(o, &L, &c.n_ctx, e);
	if (rc == 0 && !o->n_prompts && !(L.in = io_open_read(o->input, e)))
		rc = -1;
	if (rc < 0) {
		unload(&L);
		return -1;
	}
	c.w = L.w;
	if (o->n_prompts)
		prompt_reader_args(&c.rd, o->prompts, o->n_prompts);
	else
		prompt_reader_stream(&c.rd, L.in, io_name(o->input), o->jsonl);
	gen_config gc = {
		.sp = o->sp, .seed = o->seed, .n_samples = o->n_samples, .max_tokens = o->max_tokens,
		.stop = o->stop ? o->stop->v : NULL, .n_stop = o->stop ? o->stop->n : 0,
		.think_budget = o->think_budget, .think_close = L.close.v, .n_think_close = L.close.n,
		.eot = L.t.eot,
		/* typed at a terminal: answer each prompt before reading the next */
		.lazy = !o->n_prompts && isatty(fileno(L.in)),
		.times = &c.st.gen,
	};
	gen_io io = { &c, next_prompt, o->jsonl ? NULL : stream_text, sample_done, release };
	double t1 = lm_now();
	rc = generate(&L.md.dec, &gc, &io, &L.t, e);
	c.st.load_s = t1 - t0;
	c.st.generate_s = lm_now() - t1;
	if (o->stats)
		*o->stats = c.st;
	prompt_reader_free(&c.rd);
	unload(&L);
	return rc;
}
