/* decode_gemm.c: matrix product against weights packed in column panels
 * (see decode_gemm.h). */
#pragma GCC optimize("fp-contract=fast") /* acc += x * w as one fused multiply-add */

#include "decode_gemm.h"

#include <string.h>

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

/* c[mr][ncols] (+)= a[mr][K] . the np panels at b; ncols <= np panels. */
AI void tile(int mr, int np, float *c, int ldc, const float *a, int lda, const float *b, int K,
	     int ncols, int accumulate)
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
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
		for (int j = 0; j < np; j++) {
			float *cr = c + (size_t)r * ldc + j * DEC_PANEL;
			int n = ncols - j * DEC_PANEL;
			if (n >= DEC_PANEL) {
				v16 t = s[r][j];
				if (accumulate)
					t += *(v16u *)cr;
				*(v16u *)cr = t;
			} else if (n > 0) {
				float t[DEC_PANEL];
				memcpy(t, &s[r][j], sizeof t);
				for (int i = 0; i < n; i++)
					cr[i] = accumulate ? cr[i] + t[i] : t[i];
			}
		}
}

/* tile() with mr and np as constants (1 <= mr <= MR, 1 <= np <= NP). */
#define TILE(m, n) tile(m, n, c, ldo, a, IN, b, IN, ncols, accumulate)
#define ROWS(m) do { switch (np) { \
	case 1: TILE(m, 1); break; \
	case 2: if (NP >= 2) TILE(m, 2); break; \
	case 3: if (NP >= 3) TILE(m, 3); break; \
	default: if (NP >= 4) TILE(m, 4); break; } } while (0)

AI void gemm(int MR, int NP, float *out, int ldo, const float *inp, int N, int IN,
	     const float *packed, int lo, int hi, int accumulate)
{
	for (int c0 = lo; c0 < hi; c0 += NP * DEC_PANEL) {
		int ncols = hi - c0 < NP * DEC_PANEL ? hi - c0 : NP * DEC_PANEL;
		int np = (ncols + DEC_PANEL - 1) / DEC_PANEL;
		const float *b = packed + (size_t)c0 * IN;
		for (int r0 = 0; r0 < N; r0 += MR) {
			float *c = out + (size_t)r0 * ldo + c0;
			const float *a = inp + (size_t)r0 * IN;
			switch (N - r0 < MR ? N - r0 : MR) {
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
	int lo, int hi, int accumulate
#define GEMM_PASS out, ldo, inp, N, IN, packed, lo, hi, accumulate

static void gemm_base(GEMM_ARGS)
{
	gemm(2, 1, GEMM_PASS);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("arch=x86-64-v4"))) static void gemm_avx512(GEMM_ARGS)
{
	gemm(6, 4, GEMM_PASS);
}

__attribute__((target("arch=x86-64-v3"))) static void gemm_avx2(GEMM_ARGS)
{
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

void dec_gemm_cols_on(int path, GEMM_ARGS)
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

void dec_gemm_cols(GEMM_ARGS)
{
	dec_gemm_cols_on(dec_gemm_best(), GEMM_PASS);
}
