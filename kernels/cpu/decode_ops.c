/* decode_ops.c: CPU pieces of one decoding step, each on a slice (see
 * decode_ops.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "decode_ops.h"

#include <math.h>
#include <sched.h>

#include "blas_single.h"
#include "vexp.h"

/* The row loops run where the work is: the build targets x86-64-v2, and a
 * version for AVX2 and for AVX-512 doubles or quadruples their width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WIDE
#endif

/* Pause-spins before a waiting thread starts yielding its core: a few tens
 * of microseconds, longer than any one op of a decoding step. */
enum { SPINS_BEFORE_YIELD = 1 << 14 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void dec_barrier_wait(dec_barrier *b, unsigned n_threads)
{
	unsigned gen = atomic_load_explicit(&b->gen, memory_order_acquire);
	if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) + 1 == n_threads) {
		atomic_store_explicit(&b->count, 0, memory_order_relaxed);
		atomic_store_explicit(&b->gen, gen + 1, memory_order_release);
		return;
	}
	for (unsigned spins = 0; atomic_load_explicit(&b->gen, memory_order_acquire) == gen;)
		if (spins < SPINS_BEFORE_YIELD) {
			spins++;
			cpu_relax();
		} else {
			sched_yield();
		}
}

void dec_split(int n, int t, int nt, int align, int *lo, int *hi)
{
	int per = ((n + nt - 1) / nt + align - 1) / align * align;
	*lo = t * per < n ? t * per : n;
	*hi = *lo + per < n ? *lo + per : n;
}

WIDE void dec_rmsnorm_row(float *y, const float *x, const float *w, int C, float eps)
{
	float ss = 0;
	for (int c = 0; c < C; c++)
		ss += x[c] * x[c];
	float r = 1.0f / sqrtf(ss / C + eps);
	for (int c = 0; c < C; c++)
		y[c] = x[c] * r * w[c];
}

WIDE void dec_rope_row(float *x, const float *cs, int D)
{
	int half = D / 2;
	for (int i = 0; i < half; i++) {
		float c = cs[2 * i], s = cs[2 * i + 1];
		float x0 = x[i], x1 = x[i + half];
		x[i] = x0 * c - x1 * s;
		x[i + half] = x1 * c + x0 * s;
	}
}

void dec_blas_single(void)
{
	blas_single();
}

void dec_matmul_cols(float *out, const float *inp, const float *w, int N, int IN, int OUT,
		     int lo, int hi, int accumulate)
{
	if (hi <= lo)
		return;
	float beta = accumulate ? 1.0f : 0.0f;
	if (N == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, hi - lo, IN, 1.0f, w + (size_t)lo * IN, IN,
			    inp, 1, beta, out + lo, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, hi - lo, IN, 1.0f, inp, IN,
			    w + (size_t)lo * IN, IN, beta, out + lo, OUT);
}

WIDE void dec_swiglu_cols(float *out, const float *h, int N, int F, int lo, int hi)
{
	for (int n = 0; n < N; n++) {
		const float *g = h + (size_t)n * 2 * F, *u = g + F;
		float *o = out + (size_t)n * F;
#pragma omp simd
		for (int i = lo; i < hi; i++) {
			float sig = 1.0f / (1.0f + vexpf(-g[i]));
			o[i] = g[i] * sig * u[i];
		}
	}
}

/* Dot products of q with keys j .. j+KEYS_AT_ONCE-1: independent sums, so
 * their horizontal reductions overlap instead of queueing one per key. */
enum { KEYS_AT_ONCE = 4 };

static inline void dot4(float *s, const float *q, const float *k, int D, float scale)
{
	const float *k0 = k, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
	float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
#pragma omp simd reduction(+ : d0, d1, d2, d3)
	for (int d = 0; d < D; d++) {
		d0 += q[d] * k0[d];
		d1 += q[d] * k1[d];
		d2 += q[d] * k2[d];
		d3 += q[d] * k3[d];
	}
	s[0] = scale * d0;
	s[1] = scale * d1;
	s[2] = scale * d2;
	s[3] = scale * d3;
}

WIDE void attn_decode_row(float *o, const float *q, const float *k, const float *v, int n, int D,
			  float scale, float *s)
{
	float m = -INFINITY, sum = 0;
	int j = 0;
	for (; j + KEYS_AT_ONCE <= n; j += KEYS_AT_ONCE)
		dot4(s + j, q, k + (size_t)j * D, D, scale);
	for (; j < n; j++) {
		const float *kj = k + (size_t)j * D;
		float dot = 0;
#pragma omp simd reduction(+ : dot)
		for (int d = 0; d < D; d++)
			dot += q[d] * kj[d];
		s[j] = scale * dot;
	}
	for (j = 0; j < n; j++)
		m = s[j] > m ? s[j] : m;
	for (j = 0; j < n; j++) {
		s[j] = expf(s[j] - m);
		sum += s[j];
	}
	for (int d = 0; d < D; d++)
		o[d] = 0;
	for (j = 0; j < n; j++) {
		const float *vj = v + (size_t)j * D;
		float p = s[j] / sum;
#pragma omp simd
		for (int d = 0; d < D; d++)
			o[d] += p * vj[d];
	}
}

WIDE double dec_row_lse(const float *x, size_t n)
{
	float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
	for (size_t i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	double sum = 0;
#pragma omp simd reduction(+ : sum)
	for (size_t i = 0; i < n; i++)
		sum += vexpf(x[i] - mx);
	return mx + log(sum);
}
