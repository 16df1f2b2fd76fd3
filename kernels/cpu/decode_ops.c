/* decode_ops.c: CPU pieces of one decoding step, each on a slice (see
 * decode_ops.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/decode_ops.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "vexp.h"
#include "wide.h"

/* Pause-spins before a waiting thread starts yielding its core: a few tens
 * of microseconds, longer than any one op of a decoding step. */
enum { SPINS_BEFORE_YIELD = 1 << 14 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

enum { CACHE_LINE = 64 };

struct dec_mark {
	_Alignas(CACHE_LINE) atomic_uint v;
};

int dec_barrier_init(dec_barrier *b, int max_threads)
{
	b->max_threads = max_threads;
	b->mark = aligned_alloc(CACHE_LINE, (size_t)(max_threads + 1) * sizeof *b->mark);
	if (!b->mark)
		return -1;
	for (int i = 0; i <= max_threads; i++)
		atomic_init(&b->mark[i].v, 0);
	b->gen = &b->mark[max_threads];
	return 0;
}

void dec_barrier_free(dec_barrier *b)
{
	free(b->mark);
	b->mark = b->gen = NULL;
}

/* Spin until *v differs from x (until_equal 0) or equals it (1). */
static void wait_while(atomic_uint *v, unsigned x, int until_equal)
{
	for (unsigned spins = 0;; spins++) {
		unsigned now = atomic_load_explicit(v, memory_order_acquire);
		if (until_equal ? now == x : now != x)
			return;
		if (spins < SPINS_BEFORE_YIELD)
			cpu_relax();
		else
			sched_yield();
	}
}

void dec_barrier_wait(dec_barrier *b, int t, int nt)
{
	/* gen cannot move on before this thread arrives */
	unsigned g = atomic_load_explicit(&b->gen->v, memory_order_acquire);
	if (t) {
		atomic_store_explicit(&b->mark[t].v, g + 1, memory_order_release);
		wait_while(&b->gen->v, g, 0);
		return;
	}
	for (int i = 1; i < nt; i++)
		wait_while(&b->mark[i].v, g + 1, 1);
	atomic_store_explicit(&b->gen->v, g + 1, memory_order_release);
}

void dec_split(int n, int t, int nt, int align, int *lo, int *hi)
{
	int per = ((n + nt - 1) / nt + align - 1) / align * align;
	*lo = t * per < n ? t * per : n;
	*hi = *lo + per < n ? *lo + per : n;
}

/* Partial sums of a row's squares, each over every NORM_LANES-th column,
 * added pairwise at the end: a fixed order that vectorises (one sum in
 * column order is a chain of dependent adds, ~4 cycles a column). */
enum { NORM_LANES = 16 };

WIDE void dec_rmsnorm_row(float *restrict y, const float *restrict x, const float *restrict w,
			  int C, float eps)
{
	float acc[NORM_LANES] = { 0 };
	int c = 0;
	for (; c + NORM_LANES <= C; c += NORM_LANES)
#pragma omp simd
		for (int i = 0; i < NORM_LANES; i++)
			acc[i] += x[c + i] * x[c + i];
	for (int i = 0; c + i < C; i++)
		acc[i] += x[c + i] * x[c + i];
	for (int h = NORM_LANES / 2; h > 0; h /= 2)
		for (int i = 0; i < h; i++)
			acc[i] += acc[i + h];
	float r = 1.0f / sqrtf(acc[0] / C + eps);
#pragma omp simd
	for (c = 0; c < C; c++)
		y[c] = x[c] * r * w[c];
}

WIDE void dec_rope_row(float *x, const float *cs, int D)
{
	int half = D / 2;
	float *restrict lo = x, *restrict hi = x + half;
#pragma omp simd
	for (int i = 0; i < half; i++) {
		float c = cs[2 * i], s = cs[2 * i + 1];
		float x0 = lo[i], x1 = hi[i];
		lo[i] = x0 * c - x1 * s;
		hi[i] = x1 * c + x0 * s;
	}
}

/* Dot products of q with keys j .. j+KEYS_AT_ONCE-1: independent sums, so
 * their horizontal reductions overlap instead of queueing one per key. */
enum { KEYS_AT_ONCE = 8 };

static inline __attribute__((always_inline)) void dot8(float *s, const float *q,
							 const float *k, int D, float scale)
{
	const float *k0 = k, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
	const float *k4 = k3 + D, *k5 = k4 + D, *k6 = k5 + D, *k7 = k6 + D;
	float d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0, d6 = 0, d7 = 0;
#pragma omp simd reduction(+ : d0, d1, d2, d3, d4, d5, d6, d7)
	for (int d = 0; d < D; d++) {
		d0 += q[d] * k0[d];
		d1 += q[d] * k1[d];
		d2 += q[d] * k2[d];
		d3 += q[d] * k3[d];
		d4 += q[d] * k4[d];
		d5 += q[d] * k5[d];
		d6 += q[d] * k6[d];
		d7 += q[d] * k7[d];
	}
	s[0] = scale * d0;
	s[1] = scale * d1;
	s[2] = scale * d2;
	s[3] = scale * d3;
	s[4] = scale * d4;
	s[5] = scale * d5;
	s[6] = scale * d6;
	s[7] = scale * d7;
}

/* Head sizes with a compiled-in copy of the row (attn_row16: registers
 * for the whole output row, loops unrolled); others take attn_row. */
enum { HEAD_SMALL = 32, HEAD_LARGE = 64, HEAD_MAX_FIXED = HEAD_LARGE };

/* s[j] = exp(s[j] - max s), j < n, vectorised (vexp.h); returns their sum. */
static inline __attribute__((always_inline)) float softmax_exp(float *s, int n)
{
	float m = -INFINITY, sum = 0;
#pragma omp simd reduction(max : m)
	for (int j = 0; j < n; j++)
		m = s[j] > m ? s[j] : m;
#pragma omp simd reduction(+ : sum)
	for (int j = 0; j < n; j++) {
		s[j] = vexpf(s[j] - m);
		sum += s[j];
	}
	return sum;
}

static inline __attribute__((always_inline)) void softmax_v(float *o, const float *v, int n,
							      int D, float *s)
{
	float sum = softmax_exp(s, n);
	float acc[HEAD_MAX_FIXED];
	for (int d0 = 0; d0 < D; d0 += HEAD_MAX_FIXED) {
		int w = D - d0 < HEAD_MAX_FIXED ? D - d0 : HEAD_MAX_FIXED;
		for (int d = 0; d < w; d++)
			acc[d] = 0;
		for (int j = 0; j < n; j++) {
			const float *vj = v + (size_t)j * D + d0;
			float p = s[j];
#pragma omp simd
			for (int d = 0; d < w; d++)
				acc[d] += p * vj[d];
		}
		float r = 1.0f / sum;
		for (int d = 0; d < w; d++)
			o[d0 + d] = acc[d] * r;
	}
}

static inline __attribute__((always_inline)) void attn_row(float *o, const float *q,
							     const float *k, const float *v,
							     int n, int D, float scale, float *s)
{
	int j = 0;
	for (; j + KEYS_AT_ONCE <= n; j += KEYS_AT_ONCE)
		dot8(s + j, q, k + (size_t)j * D, D, scale);
	for (; j < n; j++) {
		const float *kj = k + (size_t)j * D;
		float dot = 0;
#pragma omp simd reduction(+ : dot)
		for (int d = 0; d < D; d++)
			dot += q[d] * kj[d];
		s[j] = scale * dot;
	}
	softmax_v(o, v, n, D, s);
}

/* Scores of 16 keys at once for head sizes that are multiples of 16: one
 * 16-lane product sum per key, then the 16 sums reduced together, halving
 * the lanes per key at each of four steps (15 shuffle-adds for 16 keys, not
 * four each).  Keys stay in order: lane i of the result is key i. */
enum { LANES = 16, MAX_CHUNKS = HEAD_MAX_FIXED / LANES, V_CHAINS = 4 };
typedef float v16f __attribute__((vector_size(LANES * sizeof(float))));
typedef int v16i __attribute__((vector_size(LANES * sizeof(int))));

/* (a, b) -> the sums of their lanes in groups of g, a's groups then b's. */
#define FOLD(g, a, b) (__builtin_shuffle(a, b, (v16i){ HALF_IDX(g, 0) }) + \
		       __builtin_shuffle(a, b, (v16i){ HALF_IDX(g, 1) }))
#define IDX(g, h, i) (((i) / (g)) * 2 * (g) + (h) * (g) + (i) % (g))
#define HALF_IDX(g, h) IDX(g, h, 0), IDX(g, h, 1), IDX(g, h, 2), IDX(g, h, 3), IDX(g, h, 4), \
	IDX(g, h, 5), IDX(g, h, 6), IDX(g, h, 7), IDX(g, h, 8), IDX(g, h, 9), IDX(g, h, 10), \
	IDX(g, h, 11), IDX(g, h, 12), IDX(g, h, 13), IDX(g, h, 14), IDX(g, h, 15)

/* an unaligned 16-float load */
typedef float v16u __attribute__((vector_size(LANES * sizeof(float)), aligned(sizeof(float)), may_alias));
#define LOAD16(p) (*(const v16u *)(p))

static inline __attribute__((always_inline)) void dot16(float *s, const v16f *q, int nc,
							  const float *k, int D, float scale)
{
	v16f a[LANES];
	for (int j = 0; j < LANES; j++) {
		const float *kj = k + (size_t)j * D;
		v16f t = q[0] * LOAD16(kj);
		for (int c = 1; c < nc; c++)
			t += q[c] * LOAD16(kj + c * LANES);
		a[j] = t;
	}
	for (int j = 0; j < LANES / 2; j++)
		a[j] = FOLD(8, a[2 * j], a[2 * j + 1]);
	for (int j = 0; j < LANES / 4; j++)
		a[j] = FOLD(4, a[2 * j], a[2 * j + 1]);
	for (int j = 0; j < LANES / 8; j++)
		a[j] = FOLD(2, a[2 * j], a[2 * j + 1]);
	v16f r = FOLD(1, a[0], a[1]) * scale;
	memcpy(s, &r, sizeof r);
}

/* The cache rows of keys j .. j+LANES-1 (those below n) on their way to
 * the core: a row's keys and values are short streams (a few KB each) in
 * a cache far larger than the core's, which the hardware prefetcher ramps
 * up to too late.  The values are fetched while the scores are computed. */
enum { CACHE_LINE_FLOATS = 16, PREFETCH_BLOCKS = 2 };
static inline __attribute__((always_inline)) void prefetch_keys(const float *x, int j, int n,
								  int D)
{
	int end = j + LANES < n ? j + LANES : n;
	for (const float *p = x + (size_t)j * D; p < x + (size_t)end * D; p += CACHE_LINE_FLOATS)
		__builtin_prefetch(p);
}

static inline __attribute__((always_inline)) void attn_row16(float *o, const float *q,
							       const float *k, const float *v,
							       int n, int D, float scale, float *s)
{
	int nc = D / LANES, j = 0;
	v16f qv[MAX_CHUNKS];
	for (int c = 0; c < nc; c++)
		qv[c] = LOAD16(q + c * LANES);
	for (int b = 0; b < PREFETCH_BLOCKS; b++)
		prefetch_keys(k, b * LANES, n, D);
	for (; j + LANES <= n; j += LANES) {
		prefetch_keys(k, j + LANES * PREFETCH_BLOCKS, n, D);
		prefetch_keys(v, j, n, D);
		dot16(s + j, qv, nc, k + (size_t)j * D, D, scale);
	}
	for (; j < n; j++) {
		const float *kj = k + (size_t)j * D;
		float dot = 0;
		for (int d = 0; d < D; d++)
			dot += q[d] * kj[d];
		s[j] = scale * dot;
	}
	float sum = softmax_exp(s, n);
	/* independent sums over every V_CHAINS-th key, so that the adds of
	 * consecutive keys do not wait for each other */
	v16f acc[V_CHAINS][MAX_CHUNKS] = { 0 };
	for (j = 0; j + V_CHAINS <= n; j += V_CHAINS)
		for (int u = 0; u < V_CHAINS; u++)
			for (int c = 0; c < nc; c++)
				acc[u][c] += s[j + u] * LOAD16(v + (size_t)(j + u) * D + c * LANES);
	for (; j < n; j++)
		for (int c = 0; c < nc; c++)
			acc[0][c] += s[j] * LOAD16(v + (size_t)j * D + c * LANES);
	float r = 1.0f / sum;
	for (int c = 0; c < nc; c++) {
		v16f t = acc[0][c];
		for (int u = 1; u < V_CHAINS; u++)
			t += acc[u][c];
		t *= r;
		memcpy(o + c * LANES, &t, sizeof t);
	}
}

WIDE void attn_decode_row(float *o, const float *q, const float *k, const float *v, int n, int D,
			  float scale, float *s)
{
	if (D == HEAD_SMALL)
		attn_row16(o, q, k, v, n, HEAD_SMALL, scale, s);
	else if (D == HEAD_LARGE)
		attn_row16(o, q, k, v, n, HEAD_LARGE, scale, s);
	else
		attn_row(o, q, k, v, n, D, scale, s);
}

WIDE long dec_row_bad(const float *x, size_t n)
{
	int bad = 0;
#pragma omp simd reduction(| : bad)
	for (size_t i = 0; i < n; i++)
		bad |= !(x[i] < INFINITY);
	for (size_t i = 0; bad && i < n; i++)
		if (!(x[i] < INFINITY))
			return (long)i;
	return -1;
}

/* Entries compared at once while looking for the first maximum. */
enum { ARGMAX_BLOCK = 64 };

WIDE float dec_row_argmax(const float *x, size_t n, size_t *at)
{
	float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
	for (size_t i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	for (size_t i0 = 0; i0 < n; i0 += ARGMAX_BLOCK) {
		size_t end = n - i0 < ARGMAX_BLOCK ? n : i0 + ARGMAX_BLOCK;
		int hit = 0;
#pragma omp simd reduction(| : hit)
		for (size_t i = i0; i < end; i++)
			hit |= x[i] == mx;
		for (size_t i = i0; hit && i < end; i++)
			if (x[i] == mx) {
				*at = i;
				return x[i];
			}
	}
	*at = 0; /* every entry -inf */
	return mx;
}
