/* bpe_pre_read.c: a pre-token file (bpe_pre_internal.h) read and encoded
 * with a tokenizer: each distinct pre-token encoded once, when first met,
 * so that ids flow out at once (see bpe_pre.h). */
#include "tok/bpe_pre_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/io.h"
#include "base/le.h"
#include "tok/bpe_encode_internal.h"

enum { OUT_IDS = 1 << 16 };  /* ids handed to the sink at a time */
enum { HEADER_LEN = BPE_PRE_HEADER_LEN, TRAILER_LEN = BPE_PRE_TRAILER_LEN };

/* The string at *pos of the file's n bytes (its end: lim), or -1. */
static int get_string(const uint8_t *b, size_t lim, size_t *pos, const uint8_t **s, size_t *n)
{
	if (lim - *pos < 4)
		return -1;
	*n = le_get32(b + *pos);
	if (lim - *pos - 4 < *n)
		return -1;
	*s = b + *pos + 4;
	*pos += 4 + *n;
	return 0;
}

static int parse(const uint8_t *b, size_t n, const char *path, uint64_t *n_seq, uint64_t *n_words,
		 uint32_t *n_spec, lm_err *e)
{
	if (n < HEADER_LEN + TRAILER_LEN || memcmp(b, BPE_PRE_MAGIC, sizeof BPE_PRE_MAGIC))
		return lm_seterr(e, "%s: not a pre-token file (man 5 lmpipe-pretok)", path);
	if (le_get32(b + 8) != BPE_PRE_VERSION)
		return lm_seterr(e, "%s: pre-token file version %u, this program reads %d", path,
				 le_get32(b + 8), BPE_PRE_VERSION);
	if (le_get32(b + 12) != HEADER_LEN)
		return lm_seterr(e, "%s: header length %u, expected %d", path, le_get32(b + 12),
				 HEADER_LEN);
	const uint8_t *t = b + n - TRAILER_LEN;
	if (crc32c(0, b, n - 4) != le_get32(t + 20))
		return lm_seterr(e, "%s: checksum mismatch (a damaged or truncated file)", path);
	*n_seq = le_get64(t);
	*n_words = le_get64(t + 8);
	*n_spec = le_get32(t + 16);
	if (*n_seq > (n - HEADER_LEN - TRAILER_LEN) / 4 || *n_words >= BPE_PRE_SPECIAL)
		return lm_seterr(e, "%s: counts larger than the file", path);
	return 0;
}

/* The pre-tokens of a file, encoded when first met in the sequence, so that
 * ids flow out (and the next program in a pipe starts) at once. */
typedef struct word_ids {
	const uint8_t **s;       /* word i: s[i][0 .. len[i]) in the file */
	uint32_t *len;
	size_t *at;              /* its ids: ids.v[at[i] .. at[i] + n[i]); NOT_YET */
	uint32_t *n;
	bpe_ids ids;
	bpe_worker *w;
	uint32_t *spec_id;       /* the file's specials as ids of the tokenizer */
} word_ids;

#define NOT_YET SIZE_MAX

static void words_free(word_ids *wi)
{
	free(wi->s);
	free(wi->len);
	free(wi->at);
	free(wi->n);
	free(wi->spec_id);
	bpe_ids_free(&wi->ids);
	bpe_worker_free(wi->w);
}

/* Find the distinct pre-tokens at b[*pos ..] and map the specials. */
static int read_words(const bpe_encoder *E, const uint8_t *b, size_t lim, size_t *pos,
		      uint64_t n_words, uint32_t n_spec, word_ids *wi, const char *path, lm_err *e)
{
	size_t nw = n_words ? (size_t)n_words : 1;
	wi->s = malloc(nw * sizeof *wi->s);
	wi->len = malloc(nw * sizeof *wi->len);
	wi->at = malloc(nw * sizeof *wi->at);
	wi->n = malloc(nw * sizeof *wi->n);
	wi->spec_id = malloc((n_spec ? n_spec : 1) * sizeof *wi->spec_id);
	if (!wi->s || !wi->len || !wi->at || !wi->n || !wi->spec_id)
		return lm_seterr(e, "out of memory");
	if (!(wi->w = bpe_worker_new(E, e)))
		return -1;
	for (uint64_t i = 0; i < n_words; i++) {
		size_t n;
		if (get_string(b, lim, pos, &wi->s[i], &n) || n == 0)
			return lm_seterr(e, "%s: pre-token %llu: bad length", path, (unsigned long long)i);
		wi->len[i] = (uint32_t)n;
		wi->at[i] = NOT_YET;
	}
	if (n_spec != E->n_spec)
		return lm_seterr(e, "%s: made with %u special tokens, the tokenizer has %zu", path,
				 n_spec, E->n_spec);
	for (uint32_t k = 0; k < n_spec; k++) {
		const uint8_t *s;
		size_t n, j = 0;
		if (get_string(b, lim, pos, &s, &n))
			return lm_seterr(e, "%s: special token %u: bad length", path, k);
		while (j < E->n_spec && (E->spec[j].len != n || memcmp(E->spec[j].s, s, n)))
			j++;
		if (j == E->n_spec)
			return lm_seterr(e, "%s: special token %u is not one of the tokenizer's", path, k);
		wi->spec_id[k] = E->spec[j].id;
	}
	if (*pos != lim)
		return lm_seterr(e, "%s: %zu bytes after the special tokens", path, lim - *pos);
	return 0;
}

/* The ids of word v, encoded now if not yet. */
static int word(word_ids *wi, uint32_t v, const uint32_t **ids, size_t *m, lm_err *e)
{
	if (wi->at[v] == NOT_YET) {
		size_t at = wi->ids.n;
		if (bpe_ids_reserve(&wi->ids, wi->len[v], e) ||
		    bpe_encode_piece(wi->w, wi->s[v], wi->len[v], &wi->ids, e))
			return -1;
		wi->at[v] = at;
		wi->n[v] = (uint32_t)(wi->ids.n - at);
	}
	*ids = wi->ids.v + wi->at[v];
	*m = wi->n[v];
	return 0;
}

int bpe_pre_encode(const bpe_encoder *E, const char *path, bpe_sink_fn sink, void *ctx, lm_err *e)
{
	uint8_t *b;
	size_t n;
	if (io_read_file(path, &b, &n, e))
		return -1;
	uint64_t n_seq = 0, n_words = 0;
	uint32_t n_spec = 0;
	word_ids wi = { 0 };
	uint32_t *out = NULL;
	size_t pos = HEADER_LEN;
	int rc = parse(b, n, path, &n_seq, &n_words, &n_spec, e);
	if (!rc) {
		pos = HEADER_LEN + 4 * (size_t)n_seq;
		rc = read_words(E, b, n - TRAILER_LEN, &pos, n_words, n_spec, &wi, path, e);
	}
	if (!rc && !(out = malloc(OUT_IDS * sizeof *out)))
		rc = lm_seterr(e, "out of memory");
	size_t k = 0;
	for (uint64_t i = 0; !rc && i < n_seq; i++) {
		uint32_t v = le_get32(b + HEADER_LEN + 4 * i);
		const uint32_t *ids;
		size_t m;
		if (v & BPE_PRE_SPECIAL) {
			if ((v &= ~BPE_PRE_SPECIAL) >= n_spec) {
				rc = lm_seterr(e, "%s: value %llu: special token %u of %u", path,
					       (unsigned long long)i, v, n_spec);
				break;
			}
			ids = &wi.spec_id[v];
			m = 1;
		} else if (v >= n_words) {
			rc = lm_seterr(e, "%s: value %llu: pre-token %u of %llu", path,
				       (unsigned long long)i, v, (unsigned long long)n_words);
			break;
		} else if ((rc = word(&wi, v, &ids, &m, e))) {
			break;
		}
		if (k + m > OUT_IDS) {
			if ((rc = sink(ctx, out, k, e)))
				break;
			k = 0;
		}
		if (m > OUT_IDS) {
			rc = sink(ctx, ids, m, e);
			continue;
		}
		for (size_t j = 0; j < m; j++)  /* mostly 1 or 2 ids: no memcpy call */
			out[k++] = ids[j];
	}
	if (!rc && k)
		rc = sink(ctx, out, k, e);
	free(out);
	words_free(&wi);
	free(b);
	return rc;
}
