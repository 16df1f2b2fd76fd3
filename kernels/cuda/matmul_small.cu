// matmul_small.cu: the forward product for a few rows (a decoding step:
// N of 1 to MATMUL_SMALL_N tokens), where cuBLASLt's tiled kernels spend
// their time starting up: one warp per output feature reads its weight row
// once, in 16-byte pieces, and takes its dot product with every input row
// (8 at a time, kept in registers; more rows re-read the weight row from
// L2), fp32 accumulation, the warp's lanes summed by shuffles.  Two fused
// variants serve the decoder: RMSNorm on the product's input, and SwiGLU
// on it.  The SwiGLU one, whose rows are long (the down product's d_ff),
// splits each row over a group of up to 8 warps, summed through shared
// memory in warp order: a 1344-long row then costs a lane one load, not
// five in a row (batch-1 step 0.090 -> 0.085 ms on the H200; the same
// split in the other two, whose rows are d_model long, made the step
// slower).  Launched with programmatic dependent launch (ops_cuda.cuh).
#include "kernels/matmul.h"
#include "decode_dev.cuh"

using namespace ops;

namespace {

enum { ROWS = 8, WARPS_PER_BLOCK = 8 };

// RMSNorm folded into the weights: wf = 8 bf16 weights times their fp32
// gains g8 (16-byte aligned).
__device__ __forceinline__ void norm_weights(float *wf, uint4 wv, const float *g8)
{
	const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&wv;
	const float4 *g4 = (const float4 *)g8;
	float4 ga = g4[0], gb = g4[1];
	float gf[8] = { ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w };
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float2 f = __bfloat1622float2(w2[e]);
		wf[2 * e] = f.x * gf[2 * e];
		wf[2 * e + 1] = f.y * gf[2 * e + 1];
	}
}

// One piece of a normalised row's dot product: wf . (xa, xb).
__device__ __forceinline__ float norm_dot8(const float *wf, float4 xa, float4 xb)
{
	return wf[0] * xa.x + wf[1] * xa.y + wf[2] * xa.z + wf[3] * xa.w + wf[4] * xb.x +
	       wf[5] * xb.y + wf[6] * xb.z + wf[7] * xb.w;
}

// A row's sum of squares by one warp (every lane gets it): the RMSNorm's
// statistic as the few-row products take it.
__device__ __forceinline__ float row_sumsq(const float *xr, int C)
{
	int lane = threadIdx.x % WARP;
	float ss = 0;
	for (int k = lane; k < C; k += WARP)
		ss += xr[k] * xr[k];
	return warp_sum(ss);
}

// 8 bf16 weights against 8 SwiGLU outputs s (bf16): the piece's sum.
__device__ __forceinline__ float glu_dot8(uint4 wv, const bf16 *s)
{
	const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&wv;
	float a = 0;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float2 ww = __bfloat1622float2(w2[e]);
		a += ww.x * __bfloat162float(s[2 * e]) + ww.y * __bfloat162float(s[2 * e + 1]);
	}
	return a;
}

// The 8 SwiGLU outputs of a piece of gate values gv and up values uv.
__device__ __forceinline__ void glu_act8(bf16 *s, uint4 gv, uint4 uv)
{
	const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)&gv, *u2 = (const __nv_bfloat162 *)&uv;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float2 gg = __bfloat1622float2(g2[e]), uu = __bfloat1622float2(u2[e]);
		s[2 * e] = glu_act(gg.x, uu.x);
		s[2 * e + 1] = glu_act(gg.y, uu.y);
	}
}

// Warps per output feature for rows of `chunks` 16-byte pieces: the
// fewest (a power of two, at most a block) that leave a lane at most one
// piece.
static int group_of(int chunks)
{
	int ks = 1;
	while (ks < WARPS_PER_BLOCK && (chunks + ks - 1) / ks > WARP)
		ks *= 2;
	return ks;
}

// A warp's output feature o and slice [c0, c1) of the row's pieces; g is
// its group's first warp in the block, s its place in the group.
struct slice {
	int o, c0, c1, g, s;
};

__device__ __forceinline__ slice slice_of(int ks, int chunks)
{
	int warp = threadIdx.x / WARP;
	slice sl;
	sl.s = warp % ks;
	sl.g = warp - sl.s;
	sl.o = blockIdx.x * (WARPS_PER_BLOCK / ks) + warp / ks;
	int per = (chunks + ks - 1) / ks;
	sl.c0 = min(chunks, sl.s * per);
	sl.c1 = min(chunks, sl.c0 + per);
	return sl;
}

// The group's sum for each row r < n of its warps' sums acc[r] (lane 0's,
// after warp_sum), added in warp order: lane r of the group's first warp
// gets row r's (0 elsewhere).  Every thread of the block calls it (it
// holds a barrier).
__device__ __forceinline__ float group_sum(float (*part)[MATMUL_SMALL_N], const float *acc, int n,
					   const slice &sl, int ks)
{
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	if (lane == 0)
#pragma unroll
		for (int r = 0; r < MATMUL_SMALL_N; r++)
			if (r < n)
				part[warp][r] = acc[r];
	__syncthreads();
	float t = 0;
	if (sl.s == 0 && lane < n)
		for (int k = 0; k < ks; k++)
			t += part[sl.g + k][lane];
	return t;
}

__global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP) small_kernel(void *out, const float *addend,
								      const bf16 *inp, const bf16 *w,
								      int N, int IN, int OUT)
{
	pdl_begin();
	int o = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
	if (o >= OUT)
		return;
	const uint4 *wr = (const uint4 *)(w + (size_t)o * IN);
	int chunks = IN / 8;
	for (int r0 = 0; r0 < N; r0 += ROWS) {
		float acc[ROWS] = { 0 };
		int nr = min(ROWS, N - r0);
		for (int c = lane; c < chunks; c += WARP) {
			uint4 wv = wr[c];
#pragma unroll
			for (int r = 0; r < ROWS; r++)
				if (r < nr)
					fma8(&acc[r], wv, ((const uint4 *)(inp + (size_t)(r0 + r) * IN))[c]);
		}
#pragma unroll
		for (int r = 0; r < ROWS; r++) {
			float s = warp_sum(acc[r]);
			if (lane == 0 && r < nr) {
				size_t at = (size_t)(r0 + r) * OUT + o;
				if (addend)
					((float *)out)[at] = addend[at] + s;
				else
					((bf16 *)out)[at] = to_bf16(s);
			}
		}
	}
}

// Rows of fp32 x normalised on the way in (RMSNorm with gains g): each
// block first finds its rows' rstd (a warp a row), then its warps take
// output features as small_kernel does, reading x in 16-byte pieces.
__global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP) norm_kernel(bf16 *out, const float *x,
								     const float *g, const bf16 *w,
								     int N, int C, int OUT, float eps)
{
	pdl_begin();
	__shared__ float rstd[MATMUL_SMALL_N];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	for (int r = warp; r < N; r += WARPS_PER_BLOCK) {
		float ss = row_sumsq(x + (size_t)r * C, C);
		if (lane == 0)
			rstd[r] = rsqrtf(ss / C + eps);
	}
	__syncthreads();
	int o = blockIdx.x * WARPS_PER_BLOCK + warp;
	if (o >= OUT)
		return;
	const uint4 *wr = (const uint4 *)(w + (size_t)o * C);
	float acc[MATMUL_SMALL_N] = { 0 };
	for (int c = lane; c < C / 8; c += WARP) {
		float wf[8];
		norm_weights(wf, wr[c], g + c * 8);
#pragma unroll
		for (int r = 0; r < MATMUL_SMALL_N; r++) {
			if (r >= N)
				break;
			const float4 *x4 = (const float4 *)(x + (size_t)r * C + c * 8);
			acc[r] += norm_dot8(wf, x4[0], x4[1]);
		}
	}
#pragma unroll
	for (int r = 0; r < MATMUL_SMALL_N; r++) {
		if (r >= N)
			break;
		float sum = warp_sum(acc[r]);
		if (lane == 0)
			out[(size_t)r * OUT + o] = to_bf16(sum * rstd[r]);
	}
}

// SwiGLU on the way in: h [N, 2F] (gate, then up) to silu(gate) * up, then
// the product, added onto the fp32 addend, each row split over ks warps.
__global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP) glu_kernel(float *out, const float *addend,
								    const bf16 *h, const bf16 *w,
								    int N, int F, int OUT, int ks)
{
	pdl_begin();
	__shared__ float part[WARPS_PER_BLOCK][MATMUL_SMALL_N];
	int lane = threadIdx.x % WARP;
	slice sl = slice_of(ks, F / 8);
	bool live = sl.o < OUT;
	const uint4 *wr = (const uint4 *)(w + (size_t)(live ? sl.o : 0) * F);
	float acc[MATMUL_SMALL_N] = { 0 };
	for (int c = sl.c0 + lane; live && c < sl.c1; c += WARP) {
		uint4 wv = wr[c];
#pragma unroll
		for (int r = 0; r < MATMUL_SMALL_N; r++) {
			if (r >= N)
				break;
			const uint4 *hr = (const uint4 *)(h + (size_t)r * 2 * F);
			bf16 sv[8];
			glu_act8(sv, hr[c], hr[F / 8 + c]);
			acc[r] += glu_dot8(wv, sv);
		}
	}
#pragma unroll
	for (int r = 0; r < MATMUL_SMALL_N; r++)
		if (r < N)
			acc[r] = warp_sum(acc[r]);
	float t = group_sum(part, acc, N, sl, ks);
	if (live && sl.s == 0 && lane < N) {
		size_t at = (size_t)lane * OUT + sl.o;
		out[at] = addend[at] + t;
	}
}

}  // namespace

extern "C" int matmul_small_applies(const void *inp, const void *w, int N, int IN)
{
	return N >= 1 && N <= MATMUL_SMALL_N && IN % 8 == 0 && !((uintptr_t)inp % 16) &&
	       !((uintptr_t)w % 16);
}

extern "C" int matmul_fwd_small_cuda(void *out, const float *addend, const uint16_t *inp,
				     const uint16_t *w, int N, int IN, int OUT, void *stream)
{
	unsigned blocks = (unsigned)((OUT + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
	return launch_pdl(small_kernel, blocks, WARPS_PER_BLOCK * WARP, 0, stream, out, addend,
			  (const bf16 *)inp, (const bf16 *)w, N, IN, OUT);
}

extern "C" int norm_matmul_small_cuda(uint16_t *out, const float *x, const float *g,
				      const uint16_t *w, int N, int C, int OUT, float eps, void *stream)
{
	if (N < 1 || N > MATMUL_SMALL_N || C % 8 || (uintptr_t)x % 16 || (uintptr_t)g % 16 ||
	    (uintptr_t)w % 16)
		return -1;
	unsigned blocks = (unsigned)((OUT + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
	return launch_pdl(norm_kernel, blocks, WARPS_PER_BLOCK * WARP, 0, stream, (bf16 *)out, x, g,
			  (const bf16 *)w, N, C, OUT, eps);
}

extern "C" int glu_matmul_small_cuda(float *out, const float *addend, const uint16_t *h,
				     const uint16_t *w, int N, int F, int OUT, void *stream)
{
	if (N < 1 || N > MATMUL_SMALL_N || F % 8 || (uintptr_t)h % 16 || (uintptr_t)w % 16)
		return -1;
	int ks = group_of(F / 8), per = WARPS_PER_BLOCK / ks;
	unsigned blocks = (unsigned)((OUT + per - 1) / per);
	return launch_pdl(glu_kernel, blocks, WARPS_PER_BLOCK * WARP, 0, stream, out, addend,
			  (const bf16 *)h, (const bf16 *)w, N, F, OUT, ks);
}
