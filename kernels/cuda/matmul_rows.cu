// matmul_rows.cu: the forward product for a few tens of rows (a decoding
// step of MATMUL_SMALL_N + 1 to MATMUL_ROWS_N sequences) on tensor cores,
// with what the decoder puts around it fused in: RMSNorm on the input,
// the residual addend, or SwiGLU on the output (kernels/matmul.h).
//
// At 64 rows a product is a few megabytes of weights and a few hundred
// kilobytes of input: cuBLASLt's kernels took 4.7-6.4 us each on the H200
// (the ts shape, ncu) for what HBM streams in under one, and the RMSNorm
// and SwiGLU passes around them 2.7-2.9 us more each.  Here block (x, y)
// takes FT output features (NB weight rows: FT, or FT gate and FT up rows)
// of 16 rows: it copies its weight rows into shared memory first, before
// waiting for the kernel ahead of it (programmatic launch: the weights are
// not written by the decoder's kernels), then its input rows (normalised
// on the way for RMSNorm), and its 8 warps split the reduction dimension;
// their partial sums meet in shared memory and are added in warp order
// (the same bits every run).  Blocks of all 64 rows (a first version) were
// slower than cuBLASLt: each read every input row from L2, 80-344 KB a
// block at about 40 GB/s a multiprocessor.
//
// SwiGLU: gate and up sums are rounded to bf16 (as the product's output
// would be) before silu(gate) up.
#include "kernels/matmul.h"
#include "decode_dev.cuh"
#include "mma.cuh"

#include <stdlib.h>

using namespace ops;

namespace {

enum { WARPS = 8, THREADS = WARPS * WARP, SMEM_LIMIT = 227 * 1024 };

enum in_kind { IN_BF16, IN_NORM };
enum out_kind { OUT_BF16, OUT_ADD, OUT_GLU };

struct rows_args {
	void *out;            // [N][OUT]: bf16 (OUT_BF16, OUT_GLU) or fp32 (OUT_ADD)
	const float *addend;  // OUT_ADD: [N][OUT] fp32 (may be out itself)
	const void *in;       // [N][K]: bf16, or fp32 (IN_NORM)
	const float *g;       // IN_NORM: the gains [K]
	const bf16 *w;        // [OUT][K]; OUT_GLU: [2 OUT][K], gate rows then up rows
	int N, K, OUT;
	float eps;
};

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(to_bf16(x)); }

__device__ __forceinline__ float sumsq4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }

// Piece c (4 values) of a normalised row: x rstd g as bf16.
__device__ __forceinline__ void put_norm(bf16 *row, int c, float4 x, float4 g, float rs)
{
	__nv_bfloat162 p0 = __floats2bfloat162_rn(x.x * rs * g.x, x.y * rs * g.y);
	__nv_bfloat162 p1 = __floats2bfloat162_rn(x.z * rs * g.z, x.w * rs * g.w);
	uint2 u;
	u.x = *(uint32_t *)&p0;
	u.y = *(uint32_t *)&p1;
	*(uint2 *)(row + c * 4) = u;
}

// Row r0 + (thread / 16) of fp32 x, normalised (RMSNorm, the arithmetic
// of rmsnorm_fwd: x rstd g, rounded to bf16) into row thread / 16 of Xs:
// the 16 threads of a row each hold up to 8 of its 16-byte pieces, issued
// together, and sum their squares by shuffles in a fixed order.
__device__ __forceinline__ void norm_rows(bf16 *Xs, const rows_args &a, int r0)
{
	constexpr int HOLD = 8;
	const int K = a.K, S = K + 8, r = threadIdx.x / 16, sub = threadIdx.x % 16, n4 = K / 4;
	const bool live = r0 + r < a.N;
	const float4 *xr = (const float4 *)((const float *)a.in + (size_t)(live ? r0 + r : 0) * K);
	const float4 *g4 = (const float4 *)a.g;
	float4 v[HOLD];
	float ss = 0;
#pragma unroll
	for (int i = 0; i < HOLD; i++) {
		int c = sub + 16 * i;
		v[i] = live && c < n4 ? xr[c] : make_float4(0, 0, 0, 0);
		ss += sumsq4(v[i]);
	}
	for (int c = sub + 16 * HOLD; live && c < n4; c += 16)
		ss += sumsq4(xr[c]);
#pragma unroll
	for (int o = 1; o < 16; o *= 2)
		ss += __shfl_xor_sync(0xffffffffu, ss, o);
	float rs = rsqrtf(ss / K + a.eps);
	bf16 *dst = Xs + r * S;
#pragma unroll
	for (int i = 0; i < HOLD; i++)
		if (sub + 16 * i < n4)
			put_norm(dst, sub + 16 * i, v[i], g4[sub + 16 * i], rs);
	for (int c = sub + 16 * HOLD; c < n4; c += 16)
		put_norm(dst, c, live ? xr[c] : make_float4(0, 0, 0, 0), g4[c], rs);
}

// Block (x, y): features [x FT, (x + 1) FT) of rows [16 y, 16 y + 16).
template <int NB, int IN, int OUTK>
__global__ void __launch_bounds__(THREADS) rows_kernel(rows_args a)
{
	constexpr int FT = OUTK == OUT_GLU ? NB / 2 : NB;
	extern __shared__ __align__(16) unsigned char smem[];
	const int K = a.K, S = K + 8, chunks = K / 8;
	bf16 *Ws = (bf16 *)smem;                    // [NB][S]
	bf16 *Xs = Ws + NB * S;                     // [16][S]
	float *part = (float *)(Xs + 16 * S);       // [WARPS][16][NB]
	const int f0 = blockIdx.x * FT, r0 = blockIdx.y * 16, rows = min(16, a.N - r0);
	// the weight rows, before the wait for the kernel ahead
	for (int c = threadIdx.x; c < NB * chunks; c += THREADS) {
		int r = c / chunks, col = (c % chunks) * 8;
		bool up = OUTK == OUT_GLU && r >= FT;
		int f = f0 + (up ? r - FT : r);
		bool v = f < a.OUT;
		size_t row = up ? (size_t)a.OUT + f : (size_t)f;
		cp_async16(Ws + r * S + col, v ? a.w + row * K + col : a.w, v);
	}
	cp_async_commit();
	pdl_begin();
	if constexpr (IN == IN_BF16) {
		const bf16 *x = (const bf16 *)a.in;
		for (int c = threadIdx.x; c < 16 * chunks; c += THREADS) {
			int r = c / chunks, col = (c % chunks) * 8;
			bool v = r < rows;
			cp_async16(Xs + r * S + col, v ? x + (size_t)(r0 + r) * K + col : x, v);
		}
		cp_async_commit();
	} else {
		norm_rows(Xs, a, r0);
	}
	cp_async_wait_all();
	__syncthreads();
	// warp w: k-steps [w KS / 8, (w + 1) KS / 8) of the block's 16 x NB tile
	const int w = threadIdx.x / WARP, lane = threadIdx.x % WARP, gr = lane >> 2, t = lane & 3;
	const int KS = K / 16, ks0 = w * KS / WARPS, ks1 = (w + 1) * KS / WARPS;
	float acc[NB / 8][4] = {};
	for (int ks = ks0; ks < ks1; ks++) {
		uint32_t af[4];
		lda(af, Xs, S, 0, ks * 16); // (S = K + 8: mma.cuh)
#pragma unroll
		for (int np = 0; np < NB / 16; np++) {
			uint32_t b[4];
			ldbt(b, Ws, S, np * 16, ks * 16);
			mma16816(acc[2 * np], af, b[0], b[1]);
			mma16816(acc[2 * np + 1], af, b[2], b[3]);
		}
	}
	float *pw = part + w * 16 * NB;
#pragma unroll
	for (int nt = 0; nt < NB / 8; nt++) {
		*(float2 *)(pw + gr * NB + nt * 8 + 2 * t) = make_float2(acc[nt][0], acc[nt][1]);
		*(float2 *)(pw + (gr + 8) * NB + nt * 8 + 2 * t) = make_float2(acc[nt][2], acc[nt][3]);
	}
	__syncthreads();
	// each output: the warps' partial sums in warp order
	for (int i = threadIdx.x; i < rows * FT; i += THREADS) {
		int r = i / FT, j = i % FT, f = f0 + j;
		if (f >= a.OUT)
			continue;
		float v = 0, u = 0;
#pragma unroll
		for (int k = 0; k < WARPS; k++) {
			const float *p = part + (k * 16 + r) * NB;
			v += p[j];
			if constexpr (OUTK == OUT_GLU)
				u += p[FT + j];
		}
		size_t at = (size_t)(r0 + r) * a.OUT + f;
		if constexpr (OUTK == OUT_BF16)
			((bf16 *)a.out)[at] = to_bf16(v);
		else if constexpr (OUTK == OUT_ADD)
			((float *)a.out)[at] = a.addend[at] + v;
		else
			((bf16 *)a.out)[at] = glu_act(round_bf16(v), round_bf16(u));
	}
}

size_t smem_of(int NB, int K)
{
	return ((size_t)NB + 16) * (K + 8) * sizeof(bf16) + (size_t)WARPS * 16 * NB * sizeof(float);
}

template <int NB, int IN, int OUTK> int launch(const rows_args &a, void *stream)
{
	constexpr int FT = OUTK == OUT_GLU ? NB / 2 : NB;
	size_t bytes = smem_of(NB, a.K);
	if (bytes > SMEM_LIMIT)
		return -1;
	static bool sized = false; // one instantiation's attribute, set once (before any capture)
	if (!sized) {
		if (cudaFuncSetAttribute(rows_kernel<NB, IN, OUTK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					 SMEM_LIMIT) != cudaSuccess)
			return -1;
		sized = true;
	}
	dim3 grid((unsigned)((a.OUT + FT - 1) / FT), (unsigned)((a.N + 15) / 16));
	return launch_pdl(rows_kernel<NB, IN, OUTK>, grid, dim3(THREADS), bytes, stream, a);
}

bool aligned(const void *p) { return !((uintptr_t)p % 16); }

// An output head's vocabulary: every block of a row group reads its rows
// again, which costs more there than cuBLASLt's tiles (measured: 27 us
// against 6.4 at 64 rows of 10000 features, in blocks of all 64 rows).
bool wide(int OUT) { return OUT > 4096; }

}  // namespace

extern "C" int matmul_rows_applies(const void *inp, const void *w, int N, int IN)
{
	static int off = -1;
	if (off < 0) {
		const char *v = getenv("LMPIPE_NO_ROWS");
		off = v && *v && *v != '0';
	}
	return !off && N > MATMUL_SMALL_N && N <= MATMUL_ROWS_N && IN % 16 == 0 && aligned(inp) &&
	       aligned(w);
}

// Blocks of 16 features where those of 32 would not fill the device
// twice (LMPIPE_ROWS_NARROW=1, for measuring).
static bool narrow(int N, int OUT)
{
	static int on = -1;
	if (on < 0) {
		const char *v = getenv("LMPIPE_ROWS_NARROW");
		on = v && *v && *v != '0';
	}
	return on && (size_t)((OUT + 31) / 32) * ((N + 15) / 16) < 264;
}

extern "C" int matmul_fwd_rows_cuda(void *out, const float *addend, const uint16_t *inp,
				    const uint16_t *w, int N, int IN, int OUT, void *stream)
{
	rows_args a = { out, addend, inp, nullptr, (const bf16 *)w, N, IN, OUT, 0.0f };
	if (wide(OUT))
		return -1;
	if (addend && !(aligned(out) && aligned(addend)))
		return -1;
	if (narrow(N, OUT))
		return addend ? launch<16, IN_BF16, OUT_ADD>(a, stream) : launch<16, IN_BF16, OUT_BF16>(a, stream);
	return addend ? launch<32, IN_BF16, OUT_ADD>(a, stream) : launch<32, IN_BF16, OUT_BF16>(a, stream);
}

extern "C" int norm_matmul_rows_cuda(uint16_t *out, const float *x, const float *g, const uint16_t *w,
				     int N, int C, int OUT, float eps, void *stream)
{
	if (!matmul_rows_applies(x, w, N, C) || !aligned(g))
		return -1;
	rows_args a = { out, nullptr, x, g, (const bf16 *)w, N, C, OUT, eps };
	return wide(OUT) ? -1 : launch<32, IN_NORM, OUT_BF16>(a, stream);
}

extern "C" int norm_glu_rows_cuda(uint16_t *sw, const float *x, const float *g, const uint16_t *wgu,
				  int N, int C, int F, float eps, void *stream)
{
	if (!matmul_rows_applies(x, wgu, N, C) || !aligned(g))
		return -1;
	rows_args a = { sw, nullptr, x, g, (const bf16 *)wgu, N, C, F, eps };
	return launch<32, IN_NORM, OUT_GLU>(a, stream);
}
