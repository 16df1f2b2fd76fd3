/* decode_gemm.c: matrix product against weights packed in column panels
 * (see decode_gemm.h). */
#pragma GCC optimize("fp-contract=fast") /* acc += x * w as one fused multiply-add */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/decode_gemm.h"

#include <string.h>

#include "vexp.h"

/* A register tile is MR rows x NP panels of accumulators, plus NP weight
 * vectors and one broadcast input: 6 x 4 fills AVX-512's 32 registers, 6 x 1
 * (two 8-lane halves a panel) AVX2's 16, 2 x 1 SSE's 16. */
enum { MAX_MR = 6, MAX_NP = 4 };

typedef float v16 __attribute__((vector_size(DEC_PANEL * sizeof(float))));
typedef float v16u __attribute__((vector_size(DEC_PANEL * sizeof(float)), aligned(sizeof(float)), may_alias));

#define AI static inline __attribute__((always_inline))

size_t dec_packed_floats(int IN, int OUT)
{
	return (size_t)(OUT + DEC_PANEL - 1) / DEC_PANEL * DEC_PANEL * (size_t)IN;
}

void dec_pack(float *dst, const float *w, int IN, int OUT)
{
	int panels = (OUT + DEC_PANEL - 1) / DEC_PANEL;
#pragma omp parallel for schedule(static)
	for (int p = 0; p < panels; p++) {
		float *panel = dst + (size_t)p * DEC_PANEL * IN;
		for (int j = 0; j < DEC_PANEL; j++) {
			int o = p * DEC_PANEL + j;
			for (int k = 0; k < IN; k++)
				panel[(size_t)k * DEC_PANEL + j] = o < OUT ? w[(size_t)o * IN + k] : 0.0f;
		}
	}
}

size_t dec_packed_glu_floats(int IN, int F)
{
	return 2 * dec_packed_floats(IN, F);
}

void dec_pack_glu(float *dst, const float *w, int IN, int F)
{
	int panels = (F + DEC_PANEL - 1) / DEC_PANEL;
#pragma omp parallel for schedule(static)
	for (int p = 0; p < 2 * panels; p++) {
		float *panel = dst + (size_t)p * DEC_PANEL * IN;
		const float *half = w + (size_t)(p % 2) * F * IN; /* gate rows, then up rows */
		for (int j = 0; j < DEC_PANEL; j++) {
			int o = p / 2 * DEC_PANEL + j;
			for (int k = 0; k < IN; k++)
				panel[(size_t)k * DEC_PANEL + j] = o < F ? half[(size_t)o * IN + k] : 0.0f;
		}
	}
}

/* What a tile does with its sums: store them, add them to the output, or
 * (panels in gate, up pairs) store silu(gate) up. */
enum { STORE, ACCUMULATE, GLU };

/* The outputs of one panel (the n <= DEC_PANEL first columns) at cr. */
AI void put(float *cr, v16 t, int n, int mode)
{
	if (n >= DEC_PANEL) {
		if (mode == ACCUMULATE)
			t += *(v16u *)cr;
		*(v16u *)cr = t;
	} else if (n > 0) {
		float f[DEC_PANEL];
		memcpy(f, &t, sizeof f);
		for (int i = 0; i < n; i++)
			cr[i] = mode == ACCUMULATE ? cr[i] + f[i] : f[i];
	}
}

/* *o = swiglu_fwd_cpu's arithmetic on one panel of gate and up sums. */
AI void glu(v16 *o, const v16 *gv, const v16 *uv)
{
	float g[DEC_PANEL], u[DEC_PANEL], r[DEC_PANEL];
	memcpy(g, gv, sizeof g);
	memcpy(u, uv, sizeof u);
#pragma omp simd
	for (int i = 0; i < DEC_PANEL; i++) {
		float sig = 1.0f / (1.0f + vexpf(-g[i]));
		r[i] = g[i] * sig * u[i];
	}
	memcpy(o, r, sizeof r);
}

/* c[mr][ncols] (+)= a[mr][K] . the np panels at b; ncols <= np panels
 * (GLU: ncols <= np / 2 panels of output, from np / 2 panel pairs). */
AI void tile(int mr, int np, float *c, int ldc, const float *a, int lda, const float *b, int K,
	     int ncols, int mode)
{
	v16 s[MAX_MR][MAX_NP];
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
		for (int j = 0; j < np; j++)
			s[r][j] = (v16){ 0 };
	for (int k = 0; k < K; k++) {
		v16 w[MAX_NP];
#pragma GCC unroll 8
		for (int j = 0; j < np; j++)
			w[j] = *(const v16 *)(b + ((size_t)j * K + k) * DEC_PANEL);
#pragma GCC unroll 8
		for (int r = 0; r < mr; r++) {
			v16 x = a[(size_t)r * lda + k] - (v16){ 0 }; /* a splat: x - 0 folds, 0 + x does not (-0) */
#pragma GCC unroll 8
			for (int j = 0; j < np; j++)
				s[r][j] += x * w[j];
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++) {
		float *cr = c + (size_t)r * ldc;
		if (mode == GLU) {
#pragma GCC unroll 8
			for (int j = 0; j < np / 2; j++) {
				v16 o;
				glu(&o, &s[r][2 * j], &s[r][2 * j + 1]);
				put(cr + j * DEC_PANEL, o, ncols - j * DEC_PANEL, STORE);
			}
		} else {
#pragma GCC unroll 8
			for (int j = 0; j < np; j++)
				put(cr + j * DEC_PANEL, s[r][j], ncols - j * DEC_PANEL, mode);
		}
	}
}

/* tile() with mr and np as constants (1 <= mr <= MR, 1 <= np <= NP). */
#define TILE(m, n) tile(m, n, c, ldo, a, IN, b, IN, ncols, mode)
#define ROWS(m) do { switch (np) { \
	case 1: TILE(m, 1); break; \
	case 2: if (NP >= 2) TILE(m, 2); break; \
	case 3: if (NP >= 3) TILE(m, 3); break; \
	default: if (NP >= 4) TILE(m, 4); break; } } while (0)

/* Columns [lo, hi) of the output, NP panels (GLU: NP / 2 pairs) at a time;
 * the rows in tiles of at most MR, as even as they go, so that no tile is
 * left with a row or two (too few sums to hide the multiply-add latency). */
AI void gemm(int MR, int NP, float *out, int ldo, const float *inp, int N, int IN,
	     const float *packed, int lo, int hi, int mode)
{
	int per = mode == GLU ? NP / 2 : NP, tiles = (N + MR - 1) / MR;
	for (int c0 = lo; c0 < hi; c0 += per * DEC_PANEL) {
		int ncols = hi - c0 < per * DEC_PANEL ? hi - c0 : per * DEC_PANEL;
		int np = (ncols + DEC_PANEL - 1) / DEC_PANEL * (mode == GLU ? 2 : 1);
		const float *b = packed + (size_t)c0 * IN * (mode == GLU ? 2 : 1);
		for (int t = 0, r0 = 0; t < tiles; t++) {
			int mr = (N - r0 + tiles - t - 1) / (tiles - t);
			float *c = out + (size_t)r0 * ldo + c0;
			const float *a = inp + (size_t)r0 * IN;
			r0 += mr;
			switch (mr) {
			case 1: ROWS(1); break;
			case 2: if (MR >= 2) ROWS(2); break;
			case 3: if (MR >= 3) ROWS(3); break;
			case 4: if (MR >= 4) ROWS(4); break;
			case 5: if (MR >= 5) ROWS(5); break;
			default: if (MR >= 6) ROWS(6); break;
			}
		}
	}
}

#define GEMM_ARGS float *out, int ldo, const float *inp, int N, int IN, const float *packed, \
	int lo, int hi, int mode
#define GEMM_PASS out, ldo, inp, N, IN, packed, lo, hi, mode

/* The GLU tiles take panel pairs: 2 x 2 panels on AVX-512, one pair on the
 * narrower paths (fewer rows on AVX2 so that the pair's sums fit its 16
 * registers). */
static void gemm_base(GEMM_ARGS)
{
	if (mode == GLU)
		gemm(1, 2, GEMM_PASS);
	else
		gemm(2, 1, GEMM_PASS);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("arch=x86-64-v4"))) static void gemm_avx512(GEMM_ARGS)
{
	gemm(6, 4, GEMM_PASS);
}

__attribute__((target("arch=x86-64-v3"))) static void gemm_avx2(GEMM_ARGS)
{
	if (mode == GLU)
		gemm(3, 2, GEMM_PASS);
	else
		gemm(6, 1, GEMM_PASS);
}
#endif

int dec_gemm_best(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		return DEC_GEMM_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return DEC_GEMM_AVX2;
#endif
	return DEC_GEMM_BASE;
}

static void run_path(int path, GEMM_ARGS)
{
	if (hi <= lo)
		return;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (path == DEC_GEMM_AVX512) {
		gemm_avx512(GEMM_PASS);
		return;
	}
	if (path == DEC_GEMM_AVX2) {
		gemm_avx2(GEMM_PASS);
		return;
	}
#endif
	gemm_base(GEMM_PASS);
}

void dec_gemm_cols_on(int path, float *out, int ldo, const float *inp, int N, int IN,
		      const float *packed, int lo, int hi, int accumulate)
{
	run_path(path, out, ldo, inp, N, IN, packed, lo, hi, accumulate ? ACCUMULATE : STORE);
}

void dec_gemm_cols(float *out, int ldo, const float *inp, int N, int IN, const float *packed,
		   int lo, int hi, int accumulate)
{
	dec_gemm_cols_on(dec_gemm_best(), out, ldo, inp, N, IN, packed, lo, hi, accumulate);
}

void dec_gemm_glu_cols_on(int path, float *out, int ldo, const float *inp, int N, int IN,
			  const float *packed, int lo, int hi)
{
	run_path(path, out, ldo, inp, N, IN, packed, lo, hi, GLU);
}

void dec_gemm_glu_cols(float *out, int ldo, const float *inp, int N, int IN, const float *packed,
		       int lo, int hi)
{
	dec_gemm_glu_cols_on(dec_gemm_best(), out, ldo, inp, N, IN, packed, lo, hi);
}
