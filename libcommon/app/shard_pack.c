/* shard_pack.c: token streams in, train and validation shards out (see
 * shard_pack.h).  Documents end at the end-of-text id.  --val-fraction
 * decides each document on its own as it starts; --val-docs keeps the N
 * documents with the smallest keys (bottom-N sampling: a max-heap of the
 * candidates, held in memory, the evicted ones going to training).  The key
 * of document i is lm_draw(seed, i) (rng.h); with val_by_content it is
 * lm_draw(seed, h), h an FNV-1a hash of the document's ids, so that the
 * split of a document depends on nothing but its tokens (and equal
 * documents go the same way): each document is then held until it ends. */
#define _POSIX_C_SOURCE 200809L
#include "app/shard_pack.h"
#include "app/shard_pack_internal.h"

#include <signal.h> /* sig_atomic_t */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/dirs.h"
#include "base/io.h"
#include "base/rng.h"
#include "cli/progress.h"
#include "data/shard.h"
#include "data/shard_set.h"
#include "data/tokstream.h"

enum {
	READ_IDS = 1 << 16,    /* ids per read from the input */
	NAME_MAX_LEN = 4096,
	MAX_HELD_DOCS = 1 << 24, /* --val-docs limit: documents held in memory */
	MAX_HELD_DOC_TOKENS = 1 << 28, /* --val-by-content: the longest document held */
	SEQ_TRAIN = 0, SEQ_VAL = 1,
	ROUTE_TRAIN = 0, ROUTE_VAL = 1, ROUTE_HOLD = 2,
};

/* ---- a numbered sequence of shards: BASE-000000.lms, ... ---- */

typedef struct shard_seq {
	char base[NAME_MAX_LEN];
	shard_writer_config cfg;
	uint64_t shard_tokens;
	shard_writer *w;
	unsigned n_done;       /* committed shards */
	uint64_t tokens, bytes;
	shard_set *set;        /* the manifest being built: each committed shard */
} shard_seq;

/* What the abort hook removes: the committed shards of both sequences of
 * the run in progress. */
static char sig_base[2][NAME_MAX_LEN];
static volatile sig_atomic_t sig_count[2];

static void seq_name(char *out, size_t n, const char *base, unsigned i)
{
	snprintf(out, n, "%s-%06u%s", base, i, SHARD_EXT);
}

/* seq_name with async-signal-safe calls only. */
static void seq_name_signal_safe(char *out, const char *base, unsigned i)
{
	size_t n = strlen(base);
	char digits[16];
	int d = 0;
	memcpy(out, base, n);
	out[n++] = '-';
	do {
		digits[d++] = (char)('0' + i % 10);
		i /= 10;
	} while (i || d < 6);
	while (d)
		out[n++] = digits[--d];
	memcpy(out + n, SHARD_EXT, sizeof SHARD_EXT);
}

/* The abort hook (atomic.h): a signal, die() or exit during the run
 * removes the shards it has committed, with the unfinished one. */
static void remove_committed(void)
{
	char name[NAME_MAX_LEN + 32];
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < sig_count[s]; i++) {
			seq_name_signal_safe(name, sig_base[s], (unsigned)i);
			unlink(name);
		}
}

/* Commit the open shard.  The abort hook learns of it before the rename,
 * so that no moment exists when it is in place but unknown. */
static int seq_commit(shard_seq *s, int which, lm_err *e)
{
	s->bytes += shard_writer_bytes(s->w);
	shard_writer *w = s->w;
	s->w = NULL;
	sig_count[which] = (sig_atomic_t)(s->n_done + 1);
	if (shard_writer_commit(w, e)) {
		sig_count[which] = (sig_atomic_t)s->n_done;
		return -1;
	}
	s->n_done++;
	/* what the manifest says of it, read back from the file itself */
	char name[NAME_MAX_LEN + 32];
	shard_file f;
	seq_name(name, sizeof name, s->base, s->n_done - 1);
	if (shard_file_open(&f, name, e))
		return -1;
	int rc = shard_set_add(s->set, which, name, f.m.n_tokens, f.m.n_docs, f.header_crc, e);
	shard_file_close(&f);
	return rc;
}

static int seq_put(shard_seq *s, int which, const uint32_t *ids, size_t n, lm_err *e)
{
	while (n > 0) {
		if (!s->w) {
			char name[NAME_MAX_LEN + 32];
			seq_name(name, sizeof name, s->base, s->n_done);
			if (shard_writer_open(&s->w, name, &s->cfg, e))
				return -1;
		}
		uint64_t room = s->shard_tokens - shard_writer_tokens(s->w);
		size_t k = n < room ? n : (size_t)room;
		if (shard_writer_put(s->w, ids, k, e))
			return -1;
		ids += k;
		n -= k;
		s->tokens += k;
		if (shard_writer_tokens(s->w) == s->shard_tokens && seq_commit(s, which, e))
			return -1;
	}
	return 0;
}

static int seq_finish(shard_seq *s, int which, lm_err *e)
{
	return s->w ? seq_commit(s, which, e) : 0;
}

/* Remove this run's shards (on failure). */
static void seq_remove(shard_seq *s, int which)
{
	char name[NAME_MAX_LEN + 32];
	shard_writer_abort(s->w);
	s->w = NULL;
	for (unsigned i = 0; i < s->n_done; i++) {
		seq_name(name, sizeof name, s->base, i);
		unlink(name);
	}
	s->n_done = 0;
	sig_count[which] = 0;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* ---- documents held for --val-docs ---- */

typedef struct held_doc {
	uint64_t key, index;
	uint32_t *ids;
	size_t n, cap;
} held_doc;

typedef struct packer {
	const shard_pack_opts *o;
	shard_seq seq[2];
	uint32_t eot;
	uint64_t doc_index;     /* of the current document */
	int doc_open, route;
	held_doc cur;           /* the current document when ROUTE_HOLD */
	held_doc *heap;         /* max-heap on key, at most val_docs */
	size_t heap_n;
	uint64_t in_tokens, in_docs;
	progress prog;
} packer;

static int held_append(held_doc *d, const uint32_t *ids, size_t n, lm_err *e)
{
	if (d->n + n > d->cap) {
		size_t cap = d->cap ? d->cap : 1024;
		while (cap < d->n + n)
			cap *= 2;
		uint32_t *p = realloc(d->ids, cap * sizeof *p);
		if (!p)
			return lm_seterr(e, "out of memory holding validation documents");
		d->ids = p;
		d->cap = cap;
	}
	memcpy(d->ids + d->n, ids, n * sizeof *ids);
	d->n += n;
	return 0;
}

static void heap_swap(held_doc *a, held_doc *b)
{
	held_doc t = *a;
	*a = *b;
	*b = t;
}

static void heap_push(packer *p, held_doc d)
{
	size_t i = p->heap_n++;
	p->heap[i] = d;
	while (i > 0 && p->heap[(i - 1) / 2].key < p->heap[i].key) {
		heap_swap(&p->heap[(i - 1) / 2], &p->heap[i]);
		i = (i - 1) / 2;
	}
}

static held_doc heap_pop(packer *p)
{
	held_doc top = p->heap[0];
	p->heap[0] = p->heap[--p->heap_n];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < p->heap_n && p->heap[l].key > p->heap[m].key)
			m = l;
		if (r < p->heap_n && p->heap[r].key > p->heap[m].key)
			m = r;
		if (m == i)
			break;
		heap_swap(&p->heap[i], &p->heap[m]);
		i = m;
	}
	return top;
}

static const uint64_t FNV_OFFSET = 0xCBF29CE484222325ull, FNV_PRIME = 0x100000001B3ull;

static uint64_t content_key(uint64_t seed, const uint32_t *ids, size_t n)
{
	uint64_t h = FNV_OFFSET;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ids[i]) * FNV_PRIME;
	return lm_draw(seed, h);
}

/* A key mapped to [0, 1) as lm_draw_unit does. */
static double key_unit(uint64_t key)
{
	return (double)(key >> 11) * 0x1.0p-53;
}

static void doc_start(packer *p)
{
	const shard_pack_opts *o = p->o;
	uint64_t key = lm_draw(o->seed, p->doc_index);
	p->doc_open = 1;
	if (o->val_by_content && (o->val_fraction > 0 || o->val_docs > 0)) {
		p->route = ROUTE_HOLD; /* decided at its end (doc_end) */
		p->cur.index = p->doc_index;
		p->cur.n = 0;
	} else if (o->val_fraction > 0) {
		p->route = lm_draw_unit(o->seed, p->doc_index) < o->val_fraction ?
			   ROUTE_VAL : ROUTE_TRAIN;
	} else if (o->val_docs > 0 &&
		   (p->heap_n < o->val_docs || key < p->heap[0].key)) {
		p->route = ROUTE_HOLD;
		p->cur.key = key;
		p->cur.index = p->doc_index;
		p->cur.n = 0;
	} else {
		p->route = ROUTE_TRAIN;
	}
}

static int doc_end(packer *p, lm_err *e)
{
	p->doc_open = 0;
	p->doc_index++;
	if (p->route != ROUTE_HOLD)
		return 0;
	if (p->o->val_by_content) {
		p->cur.key = content_key(p->o->seed, p->cur.ids, p->cur.n);
		int val = p->o->val_fraction > 0 ? key_unit(p->cur.key) < p->o->val_fraction :
			  p->heap_n < p->o->val_docs || p->cur.key < p->heap[0].key;
		if (!val || p->o->val_fraction > 0) {
			int s = val ? SEQ_VAL : SEQ_TRAIN;
			size_t n = p->cur.n;
			p->cur.n = 0;
			return seq_put(&p->seq[s], s, p->cur.ids, n, e);
		}
	}
	held_doc d = p->cur;
	memset(&p->cur, 0, sizeof p->cur);
	if (p->heap_n == p->o->val_docs) {
		held_doc out = heap_pop(p);
		int rc = seq_put(&p->seq[SEQ_TRAIN], SEQ_TRAIN, out.ids, out.n, e);
		free(out.ids);
		if (rc) {
			free(d.ids);
			return -1;
		}
	}
	heap_push(p, d);
	return 0;
}

static int route_ids(packer *p, const uint32_t *ids, size_t n, lm_err *e)
{
	if (p->route == ROUTE_HOLD) {
		if (p->o->val_by_content && p->cur.n + n > MAX_HELD_DOC_TOKENS)
			return lm_seterr(e, "document %llu: over %d tokens to hold for "
					 "--val-by-content", (unsigned long long)p->doc_index,
					 MAX_HELD_DOC_TOKENS);
		return held_append(&p->cur, ids, n, e);
	}
	int s = p->route == ROUTE_VAL ? SEQ_VAL : SEQ_TRAIN;
	return seq_put(&p->seq[s], s, ids, n, e);
}

/* Split a chunk of ids into document pieces and route each. */
static int pack_chunk(packer *p, const uint32_t *ids, size_t n, lm_err *e)
{
	size_t i = 0;
	while (i < n) {
		if (!p->doc_open)
			doc_start(p);
		size_t j = i;
		while (j < n && ids[j] != p->eot)
			j++;
		int ends = j < n;
		if (ends)
			j++; /* the end-of-text id belongs to its document */
		if (route_ids(p, ids + i, j - i, e))
			return -1;
		if (ends && doc_end(p, e))
			return -1;
		i = j;
	}
	return 0;
}

static int cmp_index(const void *a, const void *b)
{
	const held_doc *x = a, *y = b;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Write the held validation documents in input order. */
static int flush_held(packer *p, lm_err *e)
{
	if (p->heap_n == 0)
		return 0;
	qsort(p->heap, p->heap_n, sizeof *p->heap, cmp_index);
	for (size_t i = 0; i < p->heap_n; i++)
		if (seq_put(&p->seq[SEQ_VAL], SEQ_VAL, p->heap[i].ids, p->heap[i].n, e))
			return -1;
	return 0;
}

static int read_input(packer *p, const char *path, tokstream_info *first, uint32_t *buf,
		      lm_err *e)
{
	FILE *fp = io_open_read(path, e);
	if (!fp)
		return -1;
	tokstream_reader r;
	int rc = tsr_open(&r, fp, io_name(path), e);
	if (!rc && first->vocab_size == 0) {
		*first = r.info;
		for (int s = 0; s < 2; s++) {
			p->seq[s].cfg.vocab_size = r.info.vocab_size;
			p->seq[s].cfg.eot = r.info.eot;
			p->seq[s].cfg.has_tok = r.info.has_tok;
			p->seq[s].cfg.tok_crc = r.info.tok_crc;
		}
		p->eot = r.info.eot;
		const shard_pack_opts *o = p->o;
		if ((o->val_docs || o->val_fraction > 0) && r.info.eot == TOKSTREAM_NO_EOT)
			rc = lm_seterr(e, "%s: the stream has no end-of-text id, so it cannot be "
				       "split by documents (drop --val-docs/--val-fraction)",
				       io_name(path));
	} else if (!rc && (r.info.vocab_size != first->vocab_size || r.info.eot != first->eot)) {
		rc = lm_seterr(e, "%s: vocabulary size %u and end-of-text id %u differ from "
			       "the first input's %u and %u", io_name(path), r.info.vocab_size,
			       r.info.eot, first->vocab_size, first->eot);
	} else if (!rc && (r.info.has_tok != first->has_tok || r.info.tok_crc != first->tok_crc)) {
		rc = lm_seterr(e, "%s: made by another tokenizer than the first input", io_name(path));
	}
	while (!rc) {
		long long got = tsr_read(&r, buf, READ_IDS, e);
		if (got <= 0) {
			rc = got < 0 ? -1 : 0;
			break;
		}
		p->in_tokens += (uint64_t)got;
		rc = pack_chunk(p, buf, (size_t)got, e);
		progress_update(&p->prog, p->in_tokens, NULL);
	}
	tsr_close(&r);
	io_close_read(fp);
	return rc;
}

/* Without -f, neither a set (its manifest: the message names its first
 * shard) nor the shards of one whose run was killed may be there. */
static int check_free(const shard_pack_opts *o, shard_seq *seq, const shard_set *old,
		      lm_err *e)
{
	char name[NAME_MAX_LEN + 32];
	if (o->force)
		return 0;
	if (old) {
		char *first = old->n[0] ? shard_set_shard_path(o->prefix, old->e[0][0].name) : NULL;
		lm_seterr(e, "%s: already exists (use --force to replace)",
			  first ? first : o->prefix);
		free(first);
		return -1;
	}
	for (int s = 0; s < 2; s++) {
		seq_name(name, sizeof name, seq[s].base, 0);
		if (exists(name))
			return lm_seterr(e, "%s: already exists (use --force to replace)", name);
	}
	return 0;
}

static void summarize(const packer *p, shard_pack_summary *s)
{
	const shard_seq *t = &p->seq[SEQ_TRAIN], *v = &p->seq[SEQ_VAL];
	s->in_tokens = p->in_tokens;
	s->docs = p->doc_index;
	s->train_shards = t->n_done;
	s->val_shards = v->n_done;
	s->train_tokens = t->tokens;
	s->val_tokens = v->tokens;
	s->bytes = t->bytes + v->bytes;
}

int shard_pack(const shard_pack_opts *o, const char *const *inputs, int n,
	       shard_pack_summary *sum, lm_err *e)
{
	static const char *const stdin_only[] = { "-" };
	packer p;
	memset(&p, 0, sizeof p);
	p.o = o;
	if (strlen(o->prefix) + sizeof ".g4294967295-val" >= NAME_MAX_LEN)
		return lm_seterr(e, "%s: prefix too long", o->prefix);
	/* -f over a set with a manifest writes the next generation beside it */
	if (dirs_make_parents(o->prefix, e))
		return -1;
	shard_set old, set = { 0 };
	int have_set = shard_set_read(o->prefix, &old, e);
	if (have_set < 0)
		return -1;
	have_set = !have_set;
	if (have_set)
		set.generation = old.generation + 1;
	char gen[NAME_MAX_LEN - sizeof SHARD_SET_VAL];
	if (set.generation)
		snprintf(gen, sizeof gen, "%s.g%u", o->prefix, set.generation);
	else
		snprintf(gen, sizeof gen, "%s", o->prefix);
	shard_pack_remove_stale_tmp(o->prefix);
	for (int s = 0; s < 2; s++) {
		snprintf(p.seq[s].base, NAME_MAX_LEN, "%s%s", gen, s == SEQ_VAL ? SHARD_SET_VAL : "");
		p.seq[s].set = &set;
		memcpy(sig_base[s], p.seq[s].base, NAME_MAX_LEN);
		sig_count[s] = 0;
		p.seq[s].shard_tokens = o->shard_tokens;
		p.seq[s].cfg.frame_tokens = o->frame_tokens;
		p.seq[s].cfg.level = o->level;
		p.seq[s].cfg.threads = o->threads;
	}
	int busy = check_free(o, p.seq, have_set ? &old : NULL, e);
	if (have_set)
		shard_set_free(&old);
	if (busy)
		return -1;
	if (o->val_docs > MAX_HELD_DOCS)
		return lm_seterr(e, "--val-docs %llu is more than %d documents to hold; "
				 "use --val-fraction", (unsigned long long)o->val_docs,
				 MAX_HELD_DOCS);
	uint32_t *buf = malloc(READ_IDS * sizeof *buf);
	p.heap = o->val_docs ? calloc((size_t)o->val_docs, sizeof *p.heap) : NULL;
	if (!buf || (o->val_docs && !p.heap)) {
		free(buf);
		free(p.heap);
		return lm_seterr(e, "out of memory");
	}
	if (n == 0) {
		inputs = stdin_only;
		n = 1;
	}
	int hook = atomic_hook_add(remove_committed);
	if (hook < 0) {
		free(buf);
		free(p.heap);
		return lm_seterr(e, "too many output sets in progress at once");
	}
	progress_start(&p.prog, o->progress, "packing", "tokens", 0);
	tokstream_info first = { 0 };
	int rc = 0;
	for (int i = 0; !rc && i < n; i++)
		rc = read_input(&p, inputs[i], &first, buf, e);
	if (!rc && p.doc_open)
		rc = doc_end(&p, e);
	if (!rc && p.in_tokens == 0 && !o->allow_empty)
		rc = lm_seterr(e, "%s: no tokens in the input", io_name(inputs[0]));
	if (!rc && o->val_docs && p.heap_n >= p.doc_index)
		rc = lm_seterr(e, "the input holds %llu documents: --val-docs %llu would "
			       "leave none for training", (unsigned long long)p.doc_index,
			       (unsigned long long)o->val_docs);
	if (!rc)
		rc = flush_held(&p, e);
	for (int s = 0; !rc && s < 2; s++)
		rc = seq_finish(&p.seq[s], s, e);
	if (!rc && p.seq[SEQ_TRAIN].n_done == 0 && !o->allow_empty)
		rc = lm_seterr(e, "every document went to validation: no training data");
	progress_end(&p.prog, p.in_tokens, NULL);
	/* The set-level commit: the manifest, written last, makes the set.  The
	 * abort hook forgets the shards first, so that it can never remove shards
	 * a manifest names; a signal during the write leaves them as a kill -9
	 * would (no manifest: refused, and replaced by the next -f). */
	if (!rc) {
		sig_count[SEQ_TRAIN] = sig_count[SEQ_VAL] = 0;
		rc = shard_set_write(o->prefix, &set, e);
	}
	if (rc) {
		for (int s = 0; s < 2; s++)
			seq_remove(&p.seq[s], s);
	} else {
		shard_pack_remove_unlisted(o->prefix, &set);
		if (sum)
			summarize(&p, sum);
	}
	atomic_hook_remove(hook);
	shard_set_free(&set);
	for (size_t i = 0; i < p.heap_n; i++)
		free(p.heap[i].ids);
	free(p.cur.ids);
	free(p.heap);
	free(buf);
	return rc;
}
