/* lm_train_hparams.c: the hyper-parameters of a run, recorded in each of its
 * checkpoints (JSON under TRAIN_META_KEY) so that --resume continues the
 * run that was started, not whatever the command line says now (see
 * lm_train_internal.h).  An option given on the resuming command line with
 * another value wins, with a note; a longer -n extends the run with the
 * schedule it had (the schedule still ends at the recorded cycle, then the
 * learning rate stays at its floor). */
#include "app/lm_train_internal.h"

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ckpt.h"
#include "tok/bpe_identity.h"

/* HP_CHOICE: an int indexing names, recorded as the name. */
typedef enum hp_type { HP_INT, HP_LL, HP_U64, HP_DBL, HP_CHOICE } hp_type;

typedef struct hparam {
	const char *key;      /* JSON key */
	const char *option;   /* lm-train's long option */
	hp_type type;
	size_t off;           /* in train_config */
	const char *const *names;
} hparam;

#define HP(key, opt, type, field) { key, opt, type, offsetof(train_config, field), NULL }
#define HPC(key, opt, field, names) { key, opt, HP_CHOICE, offsetof(train_config, field), names }
const char *const train_residual_names[] = { "f32", "bf16", NULL };

/* steps comes last: a --tokens budget is counted in the merged batch shape. */
static const hparam HPARAMS[] = {
	HP("batch", "batch", HP_INT, batch),
	HP("accum", "accum", HP_INT, accum),
	HP("context", "context", HP_INT, context),
	HP("lr", "lr", HP_DBL, opt.lr_max),
	HP("lr_min_ratio", "lr-min-ratio", HP_DBL, lr_min_ratio),
	HP("warmup", "warmup", HP_LL, opt.warmup),
	HP("cycle", "cycle", HP_LL, opt.cycle),
	HP("beta1", "beta1", HP_DBL, opt.beta1),
	HP("beta2", "beta2", HP_DBL, opt.beta2),
	HP("eps", "eps", HP_DBL, opt.eps),
	HP("weight_decay", "weight-decay", HP_DBL, opt.weight_decay),
	HP("clip", "clip", HP_DBL, opt.clip),
	HPC("optimizer", "optimizer", opt.kind, optim_kind_names),
	HPC("schedule", "schedule", opt.schedule, lr_schedule_names),
	HP("decay_frac", "decay-frac", HP_DBL, opt.decay_frac),
	HPC("decay_shape", "decay-shape", opt.decay_shape, decay_shape_names),
	HP("muon_lr", "muon-lr", HP_DBL, opt.muon.lr),
	HP("muon_momentum", "muon-momentum", HP_DBL, opt.muon.momentum),
	HP("muon_momentum_start", "muon-momentum-start", HP_DBL, opt.muon.momentum_start),
	HP("muon_momentum_warmup", "muon-momentum-warmup", HP_LL, opt.muon.momentum_warmup),
	HP("muon_weight_decay", "muon-weight-decay", HP_DBL, opt.muon.weight_decay),
	HPC("muon_scale", "muon-scale", opt.muon.scale, muon_scale_names),
	HP("muon_ns_steps", "muon-ns-steps", HP_INT, opt.muon.ns_steps),
	HP("seed", "seed", HP_U64, seed),
	HP("eval_every", "eval-every", HP_LL, eval_every),
	HP("eval_batches", "eval-batches", HP_LL, eval_batches),
	HP("eval_stride", "eval-stride", HP_INT, eval_stride),
	HP("ckpt_every", "ckpt-every", HP_LL, ckpt_every),
	HPC("residual", "residual", residual, train_residual_names),
	HPC("residual_grad", "residual-grad", residual_grad, train_residual_names),
	HP("steps", "steps", HP_LL, steps),
};
enum { N_HPARAMS = sizeof HPARAMS / sizeof HPARAMS[0], NOTE_MAX = 512, NUM_LEN = 32 };

void train_note(const train_config *c, const char *fmt, ...)
{
	if (!c->note)
		return;
	char msg[NOTE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->note(msg);
}

static void *field(train_config *c, const hparam *h)
{
	return (char *)c + h->off;
}

static json_t *to_json(train_config *c, const hparam *h)
{
	void *p = field(c, h);
	switch (h->type) {
	case HP_INT: return json_integer(*(int *)p);
	case HP_LL: return json_integer(*(long long *)p);
	case HP_U64: return json_integer((json_int_t)*(uint64_t *)p);
	case HP_DBL: return json_real(*(double *)p);
	case HP_CHOICE: return json_string(h->names[*(int *)p]);
	}
	return NULL;
}

static void format(train_config *c, const hparam *h, char *buf, size_t n)
{
	void *p = field(c, h);
	switch (h->type) {
	case HP_INT: snprintf(buf, n, "%d", *(int *)p); break;
	case HP_LL: snprintf(buf, n, "%lld", *(long long *)p); break;
	case HP_U64: snprintf(buf, n, "%llu", (unsigned long long)*(uint64_t *)p); break;
	case HP_DBL: snprintf(buf, n, "%g", *(double *)p); break;
	case HP_CHOICE: snprintf(buf, n, "%s", h->names[*(int *)p]); break;
	}
}

/* Store a JSON number into the field; 0 if it is not one of the right kind. */
static int from_json(train_config *c, const hparam *h, const json_t *v)
{
	void *p = field(c, h);
	if (h->type == HP_CHOICE) {
		int i = json_is_string(v) ? optim_name_index(h->names, json_string_value(v)) : -1;
		if (i < 0)
			return 0;
		*(int *)p = i;
		return 1;
	}
	if (h->type == HP_DBL) {
		if (!json_is_number(v))
			return 0;
		*(double *)p = json_number_value(v);
		return 1;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return 0;
	json_int_t x = json_integer_value(v);
	if (h->type == HP_INT && x > INT_MAX)
		return 0; /* (an int field: a larger value was never written) */
	if (h->type == HP_INT)
		*(int *)p = (int)x;
	else if (h->type == HP_LL)
		*(long long *)p = x;
	else
		*(uint64_t *)p = (uint64_t)x;
	return 1;
}

static json_t *str_array(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

char *train_hparams_json(const train_config *c0)
{
	train_config c = *c0;
	json_t *j = json_object();
	for (size_t i = 0; j && i < N_HPARAMS; i++)
		json_object_set_new(j, HPARAMS[i].key, to_json(&c, &HPARAMS[i]));
	if (j) {
		json_object_set_new(j, "data", str_array(c.data, c.n_data));
		json_object_set_new(j, "val", str_array(c.val, c.n_val));
		json_object_set_new(j, "world", json_integer(c.world > 0 ? c.world : 1));
	}
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(j);
	return s;
}

static int given(const train_config *c, const char *option)
{
	return c->given && c->given(option);
}

/* The run continues on another number of ranks: without --batch or
 * --accum given, the accumulation keeps the global batch (world x batch x
 * accum windows a step); with them, a changed global batch is noted. */
static int rescale_world(train_config *c, json_t *j, const char *ckpt, lm_err *e)
{
	json_t *w = json_object_get(j, "world"), *b = json_object_get(j, "batch"),
	       *a = json_object_get(j, "accum");
	long long was = json_is_integer(w) && json_integer_value(w) > 0 ? json_integer_value(w) : 1;
	int world = c->world > 0 ? c->world : 1;
	if (was == world || !json_is_integer(b) || !json_is_integer(a))
		return 0;
	long long global = was * json_integer_value(b) * json_integer_value(a);
	long long per = (long long)c->batch * world;
	if (!given(c, "accum")) {
		if (global % per)
			return lm_usage_err(e, "%s: a global batch of %lld windows (%lld ranks) does not "
					    "split into %d ranks x --batch %d: give --batch and --accum",
					    ckpt, global, was, world, c->batch);
		c->accum = (int)(global / per);
		train_note(c, "the run of %lld rank%s (%s) continues on %d: --accum %d keeps its global "
			   "batch of %lld windows", was, was == 1 ? "" : "s", ckpt, world, c->accum, global);
	} else if (per * c->accum != global) {
		train_note(c, "the global batch changes from %lld windows (%lld ranks) to %lld (%d ranks x "
			   "--batch %d x --accum %d)", global, was, per * c->accum, world, c->batch,
			   c->accum);
	}
	return 0;
}

int train_hparams_resume(train_config *c, const char *text, const char *ckpt, lm_err *e)
{
	if (!text) {
		train_note(c, "%s records no hyper-parameters (an older checkpoint): the command "
			   "line's are used", ckpt);
		return 0;
	}
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return lm_seterr(e, "%s: metadata '%s' is not a JSON object", ckpt, TRAIN_META_KEY);
	}
	int rc = 0;
	for (size_t i = 0; i < N_HPARAMS && !rc; i++) {
		const hparam *h = &HPARAMS[i];
		json_t *v = json_object_get(j, h->key);
		if (!v)
			continue;
		train_config stored = *c;
		if (!from_json(&stored, h, v)) {
			rc = lm_seterr(e, "%s: metadata '%s': '%s' is not valid", ckpt, TRAIN_META_KEY,
				       h->key);
			break;
		}
		int is_steps = !strcmp(h->key, "steps");
		int asked = given(c, h->option) || (is_steps && given(c, "tokens"));
		if (is_steps && asked && !c->steps) {
			uint64_t per = (uint64_t)c->batch * c->context * c->accum *
				       (uint64_t)(c->world > 0 ? c->world : 1);
			c->steps = (long long)((c->tokens + per - 1) / per);
		}
		size_t size = h->type == HP_INT || h->type == HP_CHOICE ? sizeof(int) : sizeof(long long);
		if (!asked || !memcmp(field(c, h), field(&stored, h), size)) {
			memcpy(field(c, h), field(&stored, h), size);
			continue;
		}
		char was[NUM_LEN], now[NUM_LEN];
		format(&stored, h, was, sizeof was);
		format(c, h, now, sizeof now);
		if (!strcmp(h->key, "seed") || !strcmp(h->key, "optimizer")) {
			rc = lm_usage_err(e, "--%s %s: %s continues a run with %s %s, which cannot "
					  "change", h->option, now, ckpt, h->key, was);
		} else if (is_steps && c->steps > stored.steps && c->opt.schedule == SCHED_CONSTANT) {
			train_note(c, "-n %s extends the run of %s steps (%s) at its constant learning "
				   "rate", now, was, ckpt);
		} else if (is_steps && c->steps > stored.steps) {
			train_note(c, "-n %s extends the run of %s steps (%s): the %s schedule still ends "
				   "at step %lld, then the learning rate stays at %g", now, was, ckpt,
				   lr_schedule_names[c->opt.schedule], c->opt.cycle,
				   c->opt.lr_max * c->lr_min_ratio);
		} else {
			train_note(c, "--%s %s replaces the run's %s (%s)", h->option, now, was, ckpt);
		}
	}
	if (!rc)
		rc = rescale_world(c, j, ckpt, e);
	json_decref(j);
	return rc;
}

int train_tokenizer_record(const train_config *c, const shard_reader *data, const shard_reader *val,
			   const char *resume_ckpt, char **json, lm_err *e)
{
	uint32_t shard_vocab = sr_vocab_size(data), crc, val_crc;
	int named = sr_tokenizer(data, &crc);
	if (val && sr_tokenizer(val, &val_crc)) {
		if (named && val_crc != crc)
			return lm_seterr(e, "the validation shards %s were made by another tokenizer "
					 "(identity %08x) than the training shards %s (identity %08x)",
					 c->val[0], val_crc, c->data[0], crc);
		named = 1;
		crc = val_crc;
	}
	char what[4200];
	snprintf(what, sizeof what, "the shards %s", c->data[0]);
	char *stored = NULL;
	*json = NULL;
	if (resume_ckpt && ckpt_read_meta(resume_ckpt, TOKENIZER_META_KEY, &stored, e))
		return -1;
	int rc = 0;
	if (c->tokenizer) {
		bpe_tokenizer t;
		if (bpe_load_any(&t, c->tokenizer, e)) {
			free(stored);
			return -1;
		}
		if (t.n_vocab != shard_vocab)
			rc = lm_seterr(e, "%s (%u tokens) is not the tokenizer of the shards %s "
				       "(vocabulary %u)", c->tokenizer, t.n_vocab, c->data[0], shard_vocab);
		else if (named && bpe_identity_crc(&t) != crc)
			rc = lm_seterr(e, "%s (identity %08x) is not the tokenizer of the shards %s "
				       "(identity %08x)", c->tokenizer, bpe_identity_crc(&t), c->data[0], crc);
		else if (stored)
			rc = bpe_identity_check(&t, c->tokenizer, stored, resume_ckpt, e);
		if (!rc && !(*json = bpe_identity_json(&t, 0, 0, NULL)))
			rc = lm_seterr(e, "out of memory");
		bpe_free(&t);
	} else if (stored && named && bpe_identity_check_crc(crc, what, stored, resume_ckpt, e)) {
		rc = -1;
	} else if (stored && (!named || strstr(stored, "\"crc32c\""))) {
		*json = stored;
		stored = NULL;
	} else if (!(*json = bpe_identity_json(NULL, shard_vocab, sr_eot(data), named ? &crc : NULL))) {
		rc = lm_seterr(e, "out of memory");
	}
	free(stored);
	return rc;
}
