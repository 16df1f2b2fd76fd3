/* bpe_merge.c: merging one pre-token by rank: a scan for short pieces, a
 * binary heap for long ones, and for huge ones (when the merges are ordered,
 * as learned merges are) a sweep over rank buckets with good locality. */
#include <stdlib.h>
#include <string.h>

#include "tok/bpe_encode_internal.h"

void bpe_merge_free(bpe_worker *w)
{
	free(w->tok);
	free(w->prev);
	free(w->heap);
	free(w->head);
	free(w->tail);
	free(w->pool_pos);
	free(w->pool_next);
	free(w->gather);
	w->tok = w->prev = w->head = w->tail = w->pool_pos = w->pool_next = w->gather = NULL;
	w->heap = NULL;
	w->scratch_cap = w->heap_cap = w->pool_cap = w->gather_cap = 0;
}

/* ---- merging one pre-token ---- */

/* Scan merge for n <= SMALL_PIECE: ids into out, returns their count. */
size_t bpe_merge_small(const bpe_encoder *E, const uint8_t *s, size_t n, uint32_t *out)
{
	uint32_t rank[SMALL_PIECE], res[SMALL_PIECE];
	const uint32_t *byte_id = E->t->byte_id;
	for (size_t i = 0; i < n; i++)
		out[i] = byte_id[s[i]];
	for (size_t i = 0; i + 1 < n; i++)
		rank[i] = pair_rank(E, out[i], out[i + 1], &res[i]);
	size_t m = n;
	while (m > 1) {
		uint32_t best = NO_RANK;
		size_t bi = 0;
		for (size_t i = 0; i + 1 < m; i++)
			if (rank[i] < best) {
				best = rank[i];
				bi = i;
			}
		if (best == NO_RANK)
			break;
		out[bi] = res[bi];
		/* drop symbol bi+1 and pair bi+1 */
		memmove(out + bi + 1, out + bi + 2, (m - bi - 2) * sizeof *out);
		if (m >= bi + 3) {
			memmove(rank + bi + 1, rank + bi + 2, (m - bi - 3) * sizeof *rank);
			memmove(res + bi + 1, res + bi + 2, (m - bi - 3) * sizeof *res);
		}
		m--;
		if (bi > 0)
			rank[bi - 1] = pair_rank(E, out[bi - 1], out[bi], &res[bi - 1]);
		if (bi + 1 < m)
			rank[bi] = pair_rank(E, out[bi], out[bi + 1], &res[bi]);
	}
	return m;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= v)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], v = h[--*n];
	size_t i = 0, len = *n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= len)
			break;
		if (c + 1 < len && h[c + 1] < h[c])
			c++;
		if (h[c] >= v)
			break;
		h[i] = h[c];
		i = c;
	}
	if (len)
		h[i] = v;
	return top;
}

/* Heap merge for long pieces: symbols are identified by their first byte;
 * the next symbol starts where this one's bytes end.  Each merge costs
 * O(log n), stale heap entries are skipped when popped. */
static int merge_heap(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	const bpe_encoder *E = w->enc;
	const bpe_tokenizer *t = E->t;
	if (w->scratch_cap < n) {
		bpe_merge_free(w);
		w->tok = malloc(n * sizeof *w->tok);
		w->prev = malloc(n * sizeof *w->prev);
		w->heap_cap = n;
		w->heap = malloc(n * sizeof *w->heap);
		if (!w->tok || !w->prev || !w->heap) {
			bpe_merge_free(w);
			return lm_seterr(e, "out of memory (pre-token of %zu bytes)", n);
		}
		w->scratch_cap = n;
	}
	uint32_t *tok = w->tok, *prev = w->prev, res = 0;
	size_t hn = 0;
	for (size_t i = 0; i < n; i++) {
		tok[i] = t->byte_id[s[i]];
		prev[i] = (uint32_t)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t r = pair_rank(E, tok[i], tok[i + 1], &res);
		if (r != NO_RANK)
			w->heap[hn++] = (uint64_t)r << 32 | i;
	}
	for (size_t i = hn / 2; i-- > 0;) {   /* heapify */
		size_t k = hn;
		uint64_t v = w->heap[i];
		size_t j = i;
		for (;;) {
			size_t c = 2 * j + 1;
			if (c >= k)
				break;
			if (c + 1 < k && w->heap[c + 1] < w->heap[c])
				c++;
			if (w->heap[c] >= v)
				break;
			w->heap[j] = w->heap[c];
			j = c;
		}
		w->heap[j] = v;
	}
	while (hn > 0) {
		uint64_t top = heap_pop(w->heap, &hn);
		uint32_t rank = (uint32_t)(top >> 32), pos = (uint32_t)top;
		if (tok[pos] == BPE_NO_TOKEN)
			continue;
		size_t nx = pos + bpe_token_len(t, tok[pos]);
		if (nx >= n || pair_rank(E, tok[pos], tok[nx], &res) != rank)
			continue;
		tok[pos] = res;
		tok[nx] = BPE_NO_TOKEN;
		size_t nn = pos + bpe_token_len(t, res);
		if (hn + 2 > w->heap_cap) {
			uint64_t *h = realloc(w->heap, 2 * w->heap_cap * sizeof *h);
			if (!h)
				return lm_seterr(e, "out of memory (pre-token of %zu bytes)", n);
			w->heap = h;
			w->heap_cap *= 2;
		}
		if (nn < n)
			prev[nn] = pos;
		if (prev[pos] != BPE_NO_TOKEN) {
			uint32_t r = pair_rank(E, tok[prev[pos]], tok[pos], &res);
			if (r != NO_RANK)
				heap_push(w->heap, &hn, (uint64_t)r << 32 | prev[pos]);
		}
		if (nn < n) {
			uint32_t r = pair_rank(E, tok[pos], tok[nn], &res);
			if (r != NO_RANK)
				heap_push(w->heap, &hn, (uint64_t)r << 32 | pos);
		}
	}
	for (size_t i = 0; i < n; i += bpe_token_len(t, tok[i]))
		out->v[out->n++] = tok[i];
	return 0;
}


static int grow_u32(uint32_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	uint32_t *q = realloc(*p, c * sizeof *q);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Append pos to the bucket of rank r (pool_next of the new entry is set
 * when the next one is linked). */
static inline int bucket_push(bpe_worker *w, size_t *pool_n, uint32_t r, uint32_t pos)
{
	size_t i = *pool_n;
	if (i >= w->pool_cap) {
		size_t cap = w->pool_cap;
		if (grow_u32(&w->pool_pos, &cap, i + 1) || grow_u32(&w->pool_next, &w->pool_cap, i + 1))
			return -1;
	}
	w->pool_pos[i] = pos;
	w->pool_next[i] = NO_RANK;
	if (w->head[r] == NO_RANK)
		w->head[r] = (uint32_t)i;
	else
		w->pool_next[w->tail[r]] = (uint32_t)i;
	w->tail[r] = (uint32_t)i;
	*pool_n = i + 1;
	return 0;
}

/* Huge pieces with ordered merges.  Merging a pair of rank r only makes
 * pairs of higher rank, so the ranks can be swept in increasing order; in
 * one rank's bucket the pairs are merged left to right (the leftmost first,
 * as the heap would), and the new pairs go to later buckets.  Memory is
 * touched mostly in order. */
static int merge_buckets(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	const bpe_encoder *E = w->enc;
	const bpe_tokenizer *t = E->t;
	size_t pool_n = 0, nm = t->n_merges;
	uint32_t res = 0;
	if (!w->head) {
		w->head = malloc(nm * sizeof *w->head);
		w->tail = malloc(nm * sizeof *w->tail);
		if (!w->head || !w->tail)
			goto oom;
		memset(w->head, 0xFF, nm * sizeof *w->head);
	}
	if (w->scratch_cap < n) {
		free(w->tok);
		free(w->prev);
		w->tok = malloc(n * sizeof *w->tok);
		w->prev = malloc(n * sizeof *w->prev);
		w->scratch_cap = w->tok && w->prev ? n : 0;
		if (!w->scratch_cap)
			goto oom;
	}
	uint32_t *tok = w->tok, *prev = w->prev;
	for (size_t i = 0; i < n; i++) {
		tok[i] = t->byte_id[s[i]];
		prev[i] = (uint32_t)i - 1;
	}
	uint32_t lo = NO_RANK, hi = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t r = pair_rank(E, tok[i], tok[i + 1], &res);
		if (r == NO_RANK)
			continue;
		if (bucket_push(w, &pool_n, r, (uint32_t)i))
			goto oom;
		lo = r < lo ? r : lo;
		hi = r > hi ? r : hi;
	}
	for (uint32_t r = lo; lo != NO_RANK && r <= hi; r++) {
		size_t k = 0;
		int sorted = 1;
		for (uint32_t i = w->head[r]; i != NO_RANK; i = w->pool_next[i]) {
			if (grow_u32(&w->gather, &w->gather_cap, k + 1))
				goto oom;
			w->gather[k] = w->pool_pos[i];
			sorted &= k == 0 || w->gather[k - 1] <= w->gather[k];
			k++;
		}
		w->head[r] = NO_RANK;
		if (!sorted)
			qsort(w->gather, k, sizeof *w->gather, cmp_u32);
		for (size_t j = 0; j < k; j++) {
			uint32_t pos = w->gather[j];
			if (tok[pos] == BPE_NO_TOKEN)
				continue;
			size_t nx = pos + bpe_token_len(t, tok[pos]);
			if (nx >= n || pair_rank(E, tok[pos], tok[nx], &res) != r)
				continue;
			tok[pos] = res;
			tok[nx] = BPE_NO_TOKEN;
			size_t nn = pos + bpe_token_len(t, res);
			if (nn < n)
				prev[nn] = pos;
			uint32_t r2;
			if (prev[pos] != BPE_NO_TOKEN &&
			    (r2 = pair_rank(E, tok[prev[pos]], tok[pos], &res)) != NO_RANK) {
				if (bucket_push(w, &pool_n, r2, prev[pos]))
					goto oom;
				hi = r2 > hi ? r2 : hi;
			}
			if (nn < n && (r2 = pair_rank(E, tok[pos], tok[nn], &res)) != NO_RANK) {
				if (bucket_push(w, &pool_n, r2, pos))
					goto oom;
				hi = r2 > hi ? r2 : hi;
			}
		}
	}
	for (size_t i = 0; i < n; i += bpe_token_len(t, tok[i]))
		out->v[out->n++] = tok[i];
	bpe_merge_free(w);               /* do not keep a huge piece's memory */
	return 0;
oom:
	bpe_merge_free(w);
	return lm_seterr(e, "out of memory (pre-token of %zu bytes)", n);
}

int bpe_merge_long(bpe_worker *w, const uint8_t *s, size_t n, bpe_ids *out, lm_err *e)
{
	if (n >= NO_RANK)
		return lm_seterr(e, "a pre-token of %zu bytes is too long (limit 4 GiB)", n);
	if (n > w->enc->huge_piece && w->enc->ordered)
		return merge_buckets(w, s, n, out, e);
	return merge_heap(w, s, n, out, e);
}
