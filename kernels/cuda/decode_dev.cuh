// decode_dev.cuh: the arithmetic of a decoding step's pieces that both the
// kernels running a step one op at a time (matmul_small.cu, decode.cu) and
// the kernel running it whole (decode_step.cu) use: a piece of a bf16 dot
// product, SwiGLU of one value pair, RoPE of one pair, and one query's
// attention over its sequence's cache by 128 threads (attn_row: the
// one-token step kernel's; decode.cu's kernels for many sequences take one
// pass over the cache instead, attn_pass).
#ifndef LMPIPE_DECODE_DEV_CUH
#define LMPIPE_DECODE_DEV_CUH

#include "ops_cuda.cuh"

namespace ops {

// acc += the dot product of 8 bf16 weights and 8 bf16 inputs.
__device__ __forceinline__ void fma8(float *acc, uint4 w, uint4 x)
{
	const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&w, *x2 = (const __nv_bfloat162 *)&x;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float2 a = __bfloat1622float2(w2[i]), b = __bfloat1622float2(x2[i]);
		*acc += a.x * b.x + a.y * b.y;
	}
}

// SwiGLU of one gate and up value as the product's input: silu(g) u,
// rounded to bf16 (as swiglu_fwd stores it).
__device__ __forceinline__ bf16 glu_act(float g, float u)
{
	return to_bf16(g / (1.0f + __expf(-g)) * u);
}

// RoPE of the pair (x0, x1) by (c, sn), rounded to bf16: each product and
// sum rounded on its own (no multiply-add contracted, which ptxas may do
// or not by the code around it), so every kernel that rotates a pair gets
// the same bits, and the C twin's.
__device__ __forceinline__ void rope_pair(bf16 *o0, bf16 *o1, float x0, float x1, float c, float sn)
{
	*o0 = to_bf16(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn)));
	*o1 = to_bf16(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, sn)));
}

enum { ATTN_THREADS = 128, ATTN_WARPS = ATTN_THREADS / WARP };

// The shared memory of one attn_row: the scores of n_ctx positions follow.
template <int D> struct attn_smem {
	float qs[D], red[ATTN_WARPS], part[ATTN_WARPS][D];
};

// A barrier of the ATTN_THREADS threads of named barrier `id` (0: the
// whole block, when it is ATTN_THREADS threads).
__device__ __forceinline__ void attn_bar(int id)
{
	asm volatile("bar.sync %0, %1;" ::"r"(id), "r"((int)ATTN_THREADS) : "memory");
}

// One query q [D] (bf16) against positions 0 .. n-1 of K and V ([n][D]
// bf16) by ATTN_THREADS threads (t = 0 .. ATTN_THREADS-1, meeting at
// named barrier bar): o [D] = softmax(scale q . K^T) V in bf16.  The
// scores sit in sc [n]; a key row is read whole in 16-byte pieces issued
// together and the weighted sum of values is unrolled over positions, so
// that a thread waits for memory once per row or per 8 rows.
template <int D>
__device__ __forceinline__ void attn_row(bf16 *o, const bf16 *q, const bf16 *K, const bf16 *Vc, int n,
					 float scale, attn_smem<D> &sm, float *sc, int t, int bar)
{
	int w = t / WARP, lane = t % WARP;
	for (int d = t; d < D; d += ATTN_THREADS)
		sm.qs[d] = ld(q + d) * scale;
	attn_bar(bar);
	float mx = -INFINITY;
	for (int j = t; j < n; j += ATTN_THREADS) {
		const uint4 *k4 = (const uint4 *)(K + (size_t)j * D);
		uint4 kv[D / 8];
#pragma unroll
		for (int c = 0; c < D / 8; c++)
			kv[c] = k4[c];
		float acc = 0;
#pragma unroll
		for (int c = 0; c < D / 8; c++) {
			const __nv_bfloat162 *k2 = (const __nv_bfloat162 *)&kv[c];
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 f = __bfloat1622float2(k2[e]);
				acc += sm.qs[c * 8 + 2 * e] * f.x + sm.qs[c * 8 + 2 * e + 1] * f.y;
			}
		}
		sc[j] = acc;
		mx = fmaxf(mx, acc);
	}
	mx = warp_max(mx);
	if (lane == 0)
		sm.red[w] = mx;
	attn_bar(bar);
	mx = sm.red[0];
	for (int k = 1; k < ATTN_WARPS; k++)
		mx = fmaxf(mx, sm.red[k]);
	attn_bar(bar);
	float sum = 0;
	for (int j = t; j < n; j += ATTN_THREADS) {
		float e = __expf(sc[j] - mx);
		sc[j] = e;
		sum += e;
	}
	sum = warp_sum(sum);
	if (lane == 0)
		sm.red[w] = sum;
	attn_bar(bar);
	sum = 0;
	for (int k = 0; k < ATTN_WARPS; k++)
		sum += sm.red[k];
	// warp w takes positions w, w + 4, ...; lane l the dimensions l * E ..
	constexpr int E = D / WARP;            // 1, 2 or 4 values a lane
	float acc[E] = {};
	int j = w;
	for (; j + 7 * ATTN_WARPS < n; j += 8 * ATTN_WARPS) {
		float v[8][E];
#pragma unroll
		for (int u = 0; u < 8; u++) {
			const bf16 *vr = Vc + (size_t)(j + u * ATTN_WARPS) * D + lane * E;
#pragma unroll
			for (int e = 0; e < E; e++)
				v[u][e] = ld(vr + e);
		}
#pragma unroll
		for (int u = 0; u < 8; u++)
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[e] += sc[j + u * ATTN_WARPS] * v[u][e];
	}
	for (; j < n; j += ATTN_WARPS)
#pragma unroll
		for (int e = 0; e < E; e++)
			acc[e] += sc[j] * ld(Vc + (size_t)j * D + lane * E + e);
#pragma unroll
	for (int e = 0; e < E; e++)
		sm.part[w][lane * E + e] = acc[e];
	attn_bar(bar);
	for (int d = t; d < D; d += ATTN_THREADS) {
		float s = 0;
		for (int k = 0; k < ATTN_WARPS; k++)
			s += sm.part[k][d];
		o[d] = to_bf16(s / sum);
	}
}

}  // namespace ops

#endif
