/* pretoken_count.c: counting the pre-tokens of a text, in parallel and streaming
 * (see bpe_learn.h).
 *
 * The input is read into a bounded buffer, which is cut into pieces that the
 * threads pre-tokenize independently into their own count tables (merged at
 * the end).  A piece may only end where the pre-tokenization of the whole
 * text has a boundary that does not depend on what follows:
 *   - a "safe cut": an ASCII whitespace byte right after a printable ASCII
 *     non-space byte, not inside a special token.  No pre-token can join a
 *     non-space to the whitespace after it, and none looks behind;
 *   - the end of the input.
 * The last piece of a buffer is different: the text goes on past it, so only
 * pre-tokens that end at least MARGIN bytes before the buffer's end are
 * counted (a pre-token is decided by at most one more character, four bytes,
 * and by a special token starting there, at most the longest special long);
 * the rest is carried to the next buffer.  The result is exactly that of
 * pre-tokenizing the whole text at once. */
#include "learn/bpe_learn_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretok.h"
#include "text/unicode.h"

enum {
	DEFAULT_CHUNK = 1 << 20,  /* bytes per piece */
	PIECES_PER_THREAD = 4,    /* for load balance */
	MIN_PIECES = 8,
};

static const size_t NOT_SEARCHED = (size_t)-1;

typedef struct counter {
	const bpe_specials *sp;
	size_t max_special;
	bpe_counts **tab;   /* one per thread */
	int threads;
} counter;

/* First special occurrence in s[from, n): its start (n if none) and length;
 * at one position the longest special wins.  next[i] caches where special i
 * occurs next (n: nowhere), so each special is searched for once per byte. */
static size_t find_special(const counter *k, size_t *next, const uint8_t *s, size_t from,
			   size_t n, size_t *len)
{
	size_t best = n;
	*len = 0;
	for (size_t i = 0; i < k->sp->n; i++) {
		size_t m = k->sp->len[i];
		if (next[i] == NOT_SEARCHED || next[i] < from) {
			const uint8_t *p = n - from >= m ? memmem(s + from, n - from, k->sp->s[i], m) : NULL;
			next[i] = p ? (size_t)(p - s) : n;
		}
		if (next[i] < best || (next[i] == best && best < n && m > *len)) {
			best = next[i];
			*len = m;
		}
	}
	return best;
}

/* Whether some special occurrence covers both s[p - 1] and s[p]. */
static int inside_special(const counter *k, const uint8_t *s, size_t n, size_t p)
{
	for (size_t i = 0; i < k->sp->n; i++) {
		size_t m = k->sp->len[i];
		size_t lo = p >= m - 1 ? p - (m - 1) : 0, hi = p + m - 1 < n ? p + m - 1 : n;
		if (hi - lo >= m && memmem(s + lo, hi - lo, k->sp->s[i], m))
			return 1;
	}
	return 0;
}

static int is_ascii_space(uint8_t b)
{
	return b < 0x80 && uni_byte_class[b] == UNI_SPACE;
}

/* The first safe cut in s[from, n), or 0 if none. */
static size_t safe_cut(const counter *k, const uint8_t *s, size_t from, size_t n)
{
	for (size_t p = from > 0 ? from : 1; p < n; p++)
		if (is_ascii_space(s[p]) && s[p - 1] > ' ' && s[p - 1] < 0x7F &&
		    !inside_special(k, s, n, p))
			return p;
	return 0;
}

/* Pre-tokens waiting to be counted: a batch is hashed and its hash slots
 * prefetched before any is looked up, so that the cache misses of a large
 * table overlap instead of following one another. */
enum { BATCH = 16 };

typedef struct batch {
	const uint8_t *s[BATCH];
	size_t len[BATCH];
	uint64_t h[BATCH];
	int n;
} batch;

static int flush(bpe_counts *t, batch *b, lm_err *e)
{
	for (int i = 0; i < b->n; i++)
		__builtin_prefetch(&t->slot[b->h[i] & t->mask]);
	for (int i = 0; i < b->n; i++) {
		uint32_t id = t->slot[b->h[i] & t->mask];
		if (id)
			__builtin_prefetch(&t->ent[id - 1]);
	}
	for (int i = 0; i < b->n; i++)
		if (bpe_counts_add_hashed(t, b->s[i], b->len[i], b->h[i], 1, e))
			return -1;
	b->n = 0;
	return 0;
}

static int add(bpe_counts *t, batch *b, const uint8_t *s, size_t len, lm_err *e)
{
	b->s[b->n] = s;
	b->len[b->n] = len;
	b->h[b->n++] = bpe_hash(s, len);
	return b->n == BATCH ? flush(t, b, e) : 0;
}

/* Count the pre-tokens of s[0, n) into t.  final: the text ends at n;
 * otherwise stop before the first pre-token that more text could change.
 * Returns the bytes consumed (n when final), or (size_t)-1 on error. */
static size_t count_piece(const counter *k, bpe_counts *t, const uint8_t *s, size_t n,
			  int final, lm_err *e)
{
	size_t margin = UNI_MAX_SEQ + k->max_special;
	size_t limit = final ? n : n > margin ? n - margin : 0;
	size_t pos = 0, done = n, *next = malloc((k->sp->n + 1) * sizeof *next);
	batch b;
	b.n = 0;
	if (!next) {
		lm_seterr(e, "out of memory");
		return (size_t)-1;
	}
	for (size_t i = 0; i < k->sp->n; i++)
		next[i] = NOT_SEARCHED;
	while (pos < n && done == n) {
		size_t m, q = find_special(k, next, s, pos, n, &m);
		int hard = q < n && (final || q + k->max_special <= n);
		size_t i = pos;
		while (i < q) {
			size_t len = pretok_next(s + i, q - i);
			if (!hard && i + len > limit) {
				done = i;
				break;
			}
			if (add(t, &b, s + i, len, e)) {
				done = (size_t)-1;
				break;
			}
			i += len;
		}
		if (i == q && !hard && !final)
			done = q;
		pos = q + m;
	}
	if (done != (size_t)-1 && flush(t, &b, e))
		done = (size_t)-1;
	free(next);
	return done;
}

typedef struct piece {
	size_t start, len, done;
	int final;
} piece;

/* Cut buf[0, n) into pieces and count them in parallel.  eof: the text ends
 * at n.  Returns the bytes consumed or (size_t)-1. */
static size_t count_buffer(const counter *k, const uint8_t *buf, size_t n, int eof,
			   size_t chunk, lm_err *e)
{
	size_t n_pieces = n / chunk + 1, np = 0, at = 0;
	piece *pc = malloc(n_pieces * sizeof *pc);
	if (!pc) {
		lm_seterr(e, "out of memory");
		return (size_t)-1;
	}
	while (np + 1 < n_pieces && at + chunk < n) {
		size_t p = safe_cut(k, buf, at + chunk, n);
		if (!p)
			break;
		pc[np++] = (piece){ at, p - at, 0, 1 };
		at = p;
	}
	pc[np++] = (piece){ at, n - at, 0, eof };

	int failed = 0;
	lm_err errs = { { 0 }, 0, 0 };
#pragma omp parallel for schedule(dynamic, 1) num_threads(k->threads)
	for (size_t i = 0; i < np; i++) {
		lm_err pe;
		size_t d = count_piece(k, k->tab[omp_get_thread_num()], buf + pc[i].start, pc[i].len,
				       pc[i].final, &pe);
		if (d == (size_t)-1) {
#pragma omp critical
			{
				failed = 1;
				errs = pe;
			}
		}
		pc[i].done = d;
	}
	size_t used = pc[np - 1].start + pc[np - 1].done;
	free(pc);
	if (failed) {
		if (e)
			*e = errs;
		return (size_t)-1;
	}
	return used;
}

static int counter_init(counter *k, const bpe_specials *sp, int threads, lm_err *e)
{
	memset(k, 0, sizeof *k);
	k->sp = sp;
	k->threads = threads > 0 ? threads : 1;
	for (size_t i = 0; i < sp->n; i++)
		if (sp->len[i] > k->max_special)
			k->max_special = sp->len[i];
	if (!(k->tab = calloc((size_t)k->threads, sizeof *k->tab)))
		return lm_seterr(e, "out of memory");
	for (int i = 0; i < k->threads; i++)
		if (!(k->tab[i] = bpe_counts_new(e)))
			return -1;
	return 0;
}

/* Merge the per-thread tables into c and free them. */
static int counter_finish(counter *k, bpe_counts *c, int ok, lm_err *e)
{
	for (int i = 0; k->tab && i < k->threads; i++) {
		if (ok && k->tab[i] && bpe_counts_merge(c, k->tab[i], e))
			ok = 0;
		bpe_counts_free(k->tab[i]);
	}
	free(k->tab);
	return ok ? 0 : -1;
}

static size_t chunk_of(const bpe_count_opts *o)
{
	return o->chunk ? o->chunk : DEFAULT_CHUNK;
}

int bpe_count_text(bpe_counts *c, const uint8_t *s, size_t n, const bpe_specials *sp,
		   const bpe_count_opts *o, lm_err *e)
{
	counter k;
	int ok = counter_init(&k, sp, o->threads, e) == 0 &&
		 count_buffer(&k, s, n, 1, chunk_of(o), e) != (size_t)-1;
	return counter_finish(&k, c, ok, e);
}

int bpe_count_stream(bpe_counts *c, FILE *fp, const char *name, const bpe_specials *sp,
		     const bpe_count_opts *o, uint64_t *bytes, lm_err *e)
{
	counter k;
	size_t chunk = chunk_of(o), len = 0;
	size_t cap = chunk * (size_t)(o->threads * PIECES_PER_THREAD > MIN_PIECES ?
				      o->threads * PIECES_PER_THREAD : MIN_PIECES);
	uint8_t *buf = NULL;
	int ok = counter_init(&k, sp, o->threads, e) == 0;
	if (ok && !(buf = malloc(cap)))
		ok = lm_seterr(e, "out of memory (%zu byte buffer)", cap) == 0;
	*bytes = 0;
	for (int eof = 0; ok && !eof;) {
		size_t got = fread(buf + len, 1, cap - len, fp);
		if (got < cap - len) {
			if (ferror(fp)) {
				ok = lm_seterr(e, "%s: read error:", name) == 0;
				break;
			}
			eof = 1;
		}
		len += got;
		*bytes += got;
		size_t used = count_buffer(&k, buf, len, eof, chunk, e);
		if (used == (size_t)-1) {
			ok = 0;
			break;
		}
		memmove(buf, buf + used, len - used);
		len -= used;
		if (!eof && len * 2 > cap) { /* one pre-token larger than half the buffer */
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				ok = lm_seterr(e, "out of memory (%zu byte buffer)", cap * 2) == 0;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		if (o->progress)
			o->progress(*bytes, o->progress_arg);
	}
	free(buf);
	return counter_finish(&k, c, ok, e);
}
