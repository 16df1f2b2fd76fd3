/* ckpt.c: checkpoints and the Hugging Face export, on safetensors.c (see
 * ckpt.h). */
#define _POSIX_C_SOURCE 200809L
#include "model/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/io.h"
#include "base/version.h"
#include "model/safetensors.h"

enum { META_MAX = 48, VAL_LEN = 40, DESCRIBE_LEN = 192 };

typedef struct meta_buf {
	const char *kv[2 * META_MAX];
	char val[META_MAX][VAL_LEN];
	size_t n;
} meta_buf;

static void put(meta_buf *b, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void put(meta_buf *b, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->val[b->n], VAL_LEN, fmt, ap);
	va_end(ap);
	b->kv[2 * b->n] = key;
	b->kv[2 * b->n + 1] = b->val[b->n];
	b->n++;
}

static void put_config(meta_buf *b, const model_config *c)
{
	put(b, "vocab_size", "%d", c->vocab);
	put(b, "context_length", "%d", c->ctx);
	put(b, "d_model", "%d", c->d_model);
	put(b, "num_layers", "%d", c->n_layers);
	put(b, "num_heads", "%d", c->n_heads);
	put(b, "d_ff", "%d", c->d_ff);
	put(b, "rope_theta", "%.17g", c->rope_theta);
	put(b, "tie_embeddings", "%d", c->tie_embeddings);
	put(b, "rope_pairing", "rotate_half");
	put(b, "num_kv_heads", "%d", model_kv_heads(c));
	put(b, "qk_norm", "%d", c->qk_norm);
	put(b, "mlp", "%s", model_mlp_name(c->mlp));
	put(b, "logit_softcap", "%.17g", c->softcap);
	put(b, "z_loss", "%.17g", c->z_loss);
	put(b, "norm_eps", "%.17g", model_norm_eps(c));
}

/* The model's named tensors over a copy of the parameters (host memory,
 * or the backend's for sft_write_ex's fetch). */
static sft_tensor *model_entries(const model *m, const float *host, size_t extra, size_t *n,
				 model_tensor **tt)
{
	int nt = model_tensors(&m->cfg, tt);
	sft_tensor *t = nt < 0 ? NULL : calloc(nt + extra, sizeof *t);
	if (!t)
		return NULL;
	for (int i = 0; i < nt; i++) {
		model_tensor *x = &(*tt)[i];
		t[i].name = x->name;
		t[i].dtype = SFT_F32;
		t[i].ndim = x->cols ? 2 : 1;
		t[i].shape[0] = x->rows;
		t[i].shape[1] = x->cols;
		t[i].data = host + x->offset;
		t[i].nbytes = x->numel * sizeof(float);
	}
	*n = nt;
	return t;
}

/* sft_write_ex's source: the first n_dev tensors in the backend's memory,
 * the rest (the caller's extras) in host memory. */
typedef struct fetch_src {
	lm_backend *be;
	size_t n_dev;
} fetch_src;

static int fetch(void *arg, size_t i, void *dst, const void *src, size_t n, lm_err *e)
{
	const fetch_src *f = arg;
	if (i >= f->n_dev) {
		memcpy(dst, src, n);
		return 0;
	}
	f->be->download(f->be, dst, src, n);
	return f->be->sync(f->be, e);
}

static float *download(const model *m, const float *dev)
{
	float *h = malloc(m->n_params * sizeof *h);
	if (h)
		m->be->download(m->be, h, dev, m->n_params * sizeof *h);
	return h;
}

int ckpt_save(const char *path, const model *m, const optim *o, const train_state *s,
	      lm_err *e)
{
	return ckpt_save_extra(path, m, o, s, NULL, 0, e);
}

int ckpt_save_extra(const char *path, const model *m, const optim *o, const train_state *s,
		    const sft_tensor *extra, size_t n_extra, lm_err *e)
{
	meta_buf b = { .n = 0 };
	put(&b, "format", "pt");
	put(&b, "lmpipe.format", "checkpoint");
	put(&b, "lmpipe.version", "%d", model_config_is_plain(&m->cfg) ? CKPT_VERSION_PLAIN : CKPT_VERSION);
	put(&b, "lmpipe.build", "lmpipe %s", lmpipe_build());
	put_config(&b, &m->cfg);
	if (s) {
		put(&b, "step", "%lld", s->step);
		put(&b, "tokens", "%" PRIu64, s->tokens);
		put(&b, "data_pos", "%" PRIu64, s->data_pos);
		put(&b, "data_seed", "%" PRIu64, s->data_seed);
		put(&b, "rng_seed", "%" PRIu64, s->rng.seed);
		put(&b, "rng_k", "%" PRIu64, s->rng.k);
		for (size_t i = 0; i < s->n_meta && b.n < META_MAX; i++, b.n++) {
			b.kv[2 * b.n] = s->meta[2 * i];
			b.kv[2 * b.n + 1] = s->meta[2 * i + 1];
		}
	}
	if (o) {
		put(&b, "adamw_t", "%lld", o->t);
		put(&b, "optimizer", "%s", optim_kind_names[o->cfg.kind]);
	}
	/* the tensors straight from the backend's memory, a chunk at a time */
	model_tensor *tt = NULL;
	size_t n = 0;
	sft_tensor *t = model_entries(m, m->params, 2 + n_extra, &n, &tt);
	int rc = -1;
	if (!t) {
		lm_seterr(e, "%s: out of memory", path);
	} else {
		if (o) {
			sft_tensor om = { "optimizer.m", SFT_F32, 1, { (int64_t)m->n_params }, o->m,
					  m->n_params * sizeof(float) };
			t[n++] = om;
			om.name = "optimizer.v";
			om.data = o->v;
			t[n++] = om;
		}
		fetch_src src = { m->be, n };
		for (size_t i = 0; i < n_extra; i++)
			t[n++] = extra[i];
		rc = sft_write_ex(path, t, n, b.kv, b.n, fetch, &src, e);
	}
	free(t);
	free(tt);
	return rc;
}

static int meta_ll(const sft_file *f, const char *key, long long lo, long long hi,
		   long long *out, lm_err *e)
{
	const char *v = sft_meta(f, key);
	char *end;
	if (!v)
		return lm_seterr(e, "%s: metadata '%s' missing", f->path, key);
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (*end || errno || x < lo || x > hi)
		return lm_seterr(e, "%s: metadata '%s' = '%s' is not valid", f->path, key, v);
	*out = x;
	return 0;
}

static int meta_u64(const sft_file *f, const char *key, uint64_t *out, lm_err *e)
{
	const char *v = sft_meta(f, key);
	char *end;
	if (!v)
		return lm_seterr(e, "%s: metadata '%s' missing", f->path, key);
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (*end || errno || *v == '-')
		return lm_seterr(e, "%s: metadata '%s' = '%s' is not valid", f->path, key, v);
	*out = x;
	return 0;
}

/* Every tensor the shape c implies is in the file with its shape, so that a
 * model allocated from c is no larger than the file (whose tensors cover its
 * data exactly): a small file cannot make a program allocate from a claim. */
static int check_tensors(const sft_file *f, const model_config *c, lm_err *e)
{
	if ((size_t)c->n_layers > f->n)
		return lm_seterr(e, "%s: %d layers claimed, %zu tensors present", f->path,
				 c->n_layers, f->n);
	model_tensor *tt = NULL;
	int nt = model_tensors(c, &tt);
	if (nt < 0)
		return lm_seterr(e, "%s: out of memory", f->path);
	int rc = 0;
	for (int i = 0; !rc && i < nt; i++) {
		const sft_tensor *t;
		int64_t shape[2] = { tt[i].rows, tt[i].cols };
		rc = sft_expect_shape(f, tt[i].name, SFT_F32, tt[i].cols ? 2 : 1, shape, &t, e);
	}
	free(tt);
	return rc;
}

/* A real metadata value; absent: *out stays (a checkpoint from before the
 * variants). */
static int meta_real(const sft_file *f, const char *key, double *out, lm_err *e)
{
	const char *v = sft_meta(f, key);
	char *end;
	if (!v)
		return 0;
	errno = 0;
	double x = strtod(v, &end);
	if (!*v || *end || errno)
		return lm_seterr(e, "%s: metadata '%s' = '%s' is not valid", f->path, key, v);
	*out = x;
	return 0;
}

/* The variants' fields, each optional: a file written before them holds
 * the plain model. */
static int read_variants(const sft_file *f, model_config *c, lm_err *e)
{
	long long kv = c->n_heads, qk = 0;
	if ((sft_meta(f, "num_kv_heads") && meta_ll(f, "num_kv_heads", 1, 1 << 30, &kv, e)) ||
	    (sft_meta(f, "qk_norm") && meta_ll(f, "qk_norm", 0, 1, &qk, e)))
		return -1;
	c->n_kv_heads = (int)kv;
	c->qk_norm = (int)qk;
	const char *mlp = sft_meta(f, "mlp");
	c->mlp = mlp ? model_mlp_parse(mlp) : MODEL_MLP_SWIGLU;
	if (c->mlp < 0)
		return lm_seterr(e, "%s: unknown mlp variant '%s'", f->path, mlp);
	c->softcap = c->z_loss = 0;
	c->norm_eps = MODEL_NORM_EPS_DEFAULT;
	return meta_real(f, "logit_softcap", &c->softcap, e) || meta_real(f, "z_loss", &c->z_loss, e) ||
	       meta_real(f, "norm_eps", &c->norm_eps, e) ? -1 : 0;
}

static int read_config(const sft_file *f, model_config *c, lm_err *e)
{
	const char *fmt = sft_meta(f, "lmpipe.format");
	long long ver, v[7];
	if (!fmt || strcmp(fmt, "checkpoint"))
		return lm_seterr(e, "%s: not an lmpipe checkpoint (no lmpipe.format=checkpoint)", f->path);
	if (meta_ll(f, "lmpipe.version", 0, 1 << 30, &ver, e))
		return -1;
	if (ver < CKPT_VERSION_PLAIN || ver > CKPT_VERSION)
		return lm_seterr(e, "%s: checkpoint version %lld; this program reads versions %d to %d",
				 f->path, ver, CKPT_VERSION_PLAIN, CKPT_VERSION);
	static const char *const keys[] = { "vocab_size", "context_length", "d_model", "num_layers",
					    "num_heads", "d_ff", "tie_embeddings" };
	for (int i = 0; i < 7; i++)
		if (meta_ll(f, keys[i], 0, 1 << 30, &v[i], e))
			return -1;
	const char *th = sft_meta(f, "rope_theta"), *pair = sft_meta(f, "rope_pairing");
	char *end;
	if (!th || (c->rope_theta = strtod(th, &end), *end))
		return lm_seterr(e, "%s: metadata 'rope_theta' missing or invalid", f->path);
	if (!pair || strcmp(pair, "rotate_half"))
		return lm_seterr(e, "%s: unsupported rope_pairing '%s'", f->path, pair ? pair : "");
	c->vocab = (int)v[0];
	c->ctx = (int)v[1];
	c->d_model = (int)v[2];
	c->n_layers = (int)v[3];
	c->n_heads = (int)v[4];
	c->d_ff = (int)v[5];
	c->tie_embeddings = v[6] != 0;
	if (read_variants(f, c, e))
		return -1;
	if (model_config_check(c, e))
		return lm_err_prefix(e, "%s", f->path);
	return check_tensors(f, c, e);
}

int ckpt_read_meta(const char *path, const char *key, char **value, lm_err *e)
{
	sft_file f;
	if (sft_open(&f, path, e))
		return -1;
	const char *v = sft_meta(&f, key);
	*value = v ? strdup(v) : NULL;
	sft_close(&f);
	return v && !*value ? lm_seterr(e, "out of memory") : 0;
}

int ckpt_read_config(const char *path, model_config *c, lm_err *e)
{
	sft_file f;
	if (sft_open(&f, path, e))
		return -1;
	int rc = read_config(&f, c, e);
	sft_close(&f);
	return rc;
}

/* A model's shape and variants in a few words, for messages. */
static void describe(const model_config *c, char *buf, size_t n)
{
	snprintf(buf, n, "V=%d T=%d d=%d L=%d H=%d kv=%d d_ff=%d%s%s mlp=%s softcap=%g z_loss=%g "
		 "eps=%g theta=%g", c->vocab, c->ctx, c->d_model, c->n_layers, c->n_heads,
		 model_kv_heads(c), c->d_ff, c->tie_embeddings ? " tied" : "",
		 c->qk_norm ? " qk_norm" : "", model_mlp_name(c->mlp), c->softcap, c->z_loss,
		 model_norm_eps(c), c->rope_theta);
}

static int load_flat(const sft_file *f, const char *name, const model *m, float *dst, lm_err *e)
{
	const sft_tensor *t;
	int64_t shape[1] = { (int64_t)m->n_params };
	if (sft_expect(f, name, SFT_F32, 1, shape, &t, e))
		return -1;
	m->be->upload(m->be, dst, t->data, t->nbytes);
	return 0;
}

static int load_state(const sft_file *f, train_state *s, lm_err *e)
{
	long long step;
	if (meta_ll(f, "step", 0, INT64_MAX, &step, e) || meta_u64(f, "tokens", &s->tokens, e) ||
	    meta_u64(f, "data_pos", &s->data_pos, e) || meta_u64(f, "data_seed", &s->data_seed, e) ||
	    meta_u64(f, "rng_seed", &s->rng.seed, e) || meta_u64(f, "rng_k", &s->rng.k, e))
		return -1;
	s->step = step;
	return 0;
}

int ckpt_load(const char *path, model *m, optim *o, train_state *s, lm_err *e)
{
	sft_file f;
	model_config c;
	model_tensor *tt = NULL;
	if (sft_open(&f, path, e))
		return -1;
	int rc = -1;
	if (read_config(&f, &c, e))
		goto out;
	if (!model_config_same(&c, &m->cfg)) {
		char have[DESCRIBE_LEN], want[DESCRIBE_LEN];
		describe(&c, have, sizeof have);
		describe(&m->cfg, want, sizeof want);
		lm_seterr(e, "%s: the checkpoint's model (%s) differs from the one requested (%s)",
			  path, have, want);
		goto out;
	}
	int nt = model_tensors(&m->cfg, &tt);
	if (nt < 0) {
		lm_seterr(e, "out of memory");
		goto out;
	}
	for (int i = 0; i < nt; i++) {
		const sft_tensor *t;
		int64_t shape[2] = { tt[i].rows, tt[i].cols };
		if (sft_expect(&f, tt[i].name, SFT_F32, tt[i].cols ? 2 : 1, shape, &t, e))
			goto out;
		m->be->upload(m->be, m->params + tt[i].offset, t->data, t->nbytes);
	}
	/* the compute copy (bf16 on CUDA) follows the loaded weights */
	model_params_changed(m);
	if (o) {
		long long t;
		const char *kind = sft_meta(&f, "optimizer");
		int k = kind ? optim_name_index(optim_kind_names, kind) : OPTIM_ADAMW;
		if (k != o->cfg.kind) {
			lm_seterr(e, "%s: the optimizer state is %s's, not %s's", path,
				  k < 0 ? kind : optim_kind_names[k], optim_kind_names[o->cfg.kind]);
			goto out;
		}
		if (load_flat(&f, "optimizer.m", m, o->m, e) || load_flat(&f, "optimizer.v", m, o->v, e) ||
		    meta_ll(&f, "adamw_t", 0, INT64_MAX, &t, e))
			goto out;
		o->t = t;
	}
	if (s && load_state(&f, s, e))
		goto out;
	rc = 0;
out:
	free(tt);
	sft_close(&f);
	return rc;
}

int ckpt_hf_class(const model_config *c, const char **arch, lm_err *e)
{
	if (c->mlp == MODEL_MLP_RELU2)
		return lm_usage_err(e, "the variant mlp=relu2 (the squared-ReLU MLP) has no Hugging Face "
				    "class: only SwiGLU models export");
	if (c->softcap > 0)
		return lm_usage_err(e, "the variant logit_softcap=%g has no Hugging Face class "
				    "(LlamaForCausalLM and Qwen3ForCausalLM do not cap logits)", c->softcap);
	*arch = c->qk_norm ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
	return 0;
}

/* config.json for LlamaForCausalLM, or Qwen3ForCausalLM with QK-norm (its
 * q_norm/k_norm; no sliding window).  The z-loss only shapes training and
 * is not written. */
static int write_hf_config(const char *path, const model_config *c, lm_err *e)
{
	const char *arch = NULL;
	if (ckpt_hf_class(c, &arch, e))
		return -1;
	int qwen = c->qk_norm;
	json_t *j = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, "
			      "s:b, s:s, s:b, s:s, s:s, s:f, s:f}",
			      "architectures", arch, "model_type", qwen ? "qwen3" : "llama",
			      "vocab_size", c->vocab, "hidden_size", c->d_model,
			      "intermediate_size", c->d_ff, "num_hidden_layers", c->n_layers,
			      "num_attention_heads", c->n_heads, "num_key_value_heads", model_kv_heads(c),
			      "head_dim", c->d_model / c->n_heads, "max_position_embeddings", c->ctx,
			      "rms_norm_eps", model_norm_eps(c), "rope_theta", c->rope_theta,
			      "tie_word_embeddings", c->tie_embeddings, "hidden_act", "silu",
			      "attention_bias", 0, "torch_dtype", "float32", "dtype", "float32",
			      "attention_dropout", 0.0, "initializer_range", 0.02);
	if (j && qwen) {
		json_object_set_new(j, "use_sliding_window", json_false());
		json_object_set_new(j, "sliding_window", json_null());
		json_object_set_new(j, "max_window_layers", json_integer(c->n_layers));
	} else if (j) {
		json_object_set_new(j, "mlp_bias", json_false());
	}
	/* transformers 5 reads the RoPE base from rope_parameters, 4.x from
	 * rope_theta: write both. */
	if (j)
		json_object_set_new(j, "rope_parameters", json_pack("{s:s, s:f}", "rope_type",
								      "default", "rope_theta",
								      c->rope_theta));
	if (!j)
		return lm_seterr(e, "%s: out of memory", path);
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	atomic_file af;
	int rc = -1;
	if (s && !atomic_open(&af, path, e)) {
		if (io_write_all(af.fp, s, strlen(s), path, e) || io_write_all(af.fp, "\n", 1, path, e))
			atomic_abort(&af);
		else
			rc = atomic_commit(&af, e);
	}
	free(s);
	return rc;
}

int ckpt_export_hf(const char *dir, const model *m, lm_err *e)
{
	const char *arch = NULL;
	if (ckpt_hf_class(&m->cfg, &arch, e))
		return -1;
	if (mkdir(dir, 0777) && errno != EEXIST)
		return lm_seterr(e, "%s:", dir);
	size_t len = strlen(dir) + sizeof "/model.safetensors";
	char *path = malloc(len);
	if (!path)
		return lm_seterr(e, "out of memory");
	/* the weights first, the small config last: a full disk fails on the
	 * weights, and a config that cannot be written takes the weights with
	 * it, so DIR never holds one without the other from this export */
	snprintf(path, len, "%s/model.safetensors", dir);
	meta_buf b = { .n = 0 };
	put(&b, "format", "pt");
	float *p = download(m, m->params);
	model_tensor *tt = NULL;
	size_t n;
	sft_tensor *t = p ? model_entries(m, p, 0, &n, &tt) : NULL;
	int rc = t ? sft_write(path, t, n, b.kv, b.n, e) : lm_seterr(e, "out of memory");
	free(t);
	free(tt);
	free(p);
	if (!rc) {
		snprintf(path, len, "%s/config.json", dir);
		if ((rc = write_hf_config(path, &m->cfg, e))) {
			snprintf(path, len, "%s/model.safetensors", dir);
			unlink(path);
		}
	}
	free(path);
	return rc;
}

const char *ckpt_resolve(const char *path, char *buf, size_t n)
{
	struct stat sb;
	if (!path || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return path;
	int k = snprintf(buf, n, "%s%slatest", path, path[0] && path[strlen(path) - 1] == '/' ? "" : "/");
	if (k < 0 || (size_t)k >= n || stat(buf, &sb) != 0)
		return path;
	return buf;
}

int ckpt_set_latest(const char *dir, const char *name, lm_err *e)
{
	size_t len = strlen(dir) + sizeof "/.latest.tmp";
	char *tmp = malloc(len), *dst = malloc(len);
	int rc = 0;
	if (!tmp || !dst) {
		rc = lm_seterr(e, "out of memory");
	} else {
		snprintf(tmp, len, "%s/.latest.tmp", dir);
		snprintf(dst, len, "%s/latest", dir);
		unlink(tmp);
		if (symlink(name, tmp) || rename(tmp, dst))
			rc = lm_seterr(e, "%s:", dst);
	}
	free(tmp);
	free(dst);
	return rc;
}
