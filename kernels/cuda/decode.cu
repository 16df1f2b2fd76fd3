// decode.cu: the generation step's cache ops on bf16 (see kernels/decode.h):
// the q/k/v split with RoPE and the cache store in one pass, attention of
// each new token over its sequence's cache (one block per token and head;
// head dimensions 32, 64 and 128 in one pass over the keys and values when
// a step has many blocks, see attn_pass), and the row moves around the
// output head.  All launched with
// programmatic dependent launch (ops_cuda.cuh).
#include "kernels/decode.h"
#include "decode_dev.cuh"

using namespace ops;

namespace {

__device__ __forceinline__ size_t cache_at(decode_shape s, int slot, int h, int pos)
{
	return (((size_t)slot * s.Hkv + h) * s.n_ctx + (size_t)pos) * s.D;
}

// One thread per rotated pair (i < D/2) of one head of one token; value
// heads copy their two elements.
__global__ void qkv_kernel(bf16 *q, bf16 *kc, bf16 *vc, const bf16 *qkv, const float *cs,
			   const int32_t *pos, const int32_t *slot, decode_shape s)
{
	pdl_begin();
	int half = s.D / 2, heads = s.H + 2 * s.Hkv;
	unsigned n = (unsigned)s.N * heads * half;
	for (unsigned w = blockIdx.x * blockDim.x + threadIdx.x; w < n; w += gridDim.x * blockDim.x) {
		int d = w % half, hh = (w / half) % heads, i = w / half / heads;
		const bf16 *r = qkv + (size_t)i * heads * s.D + (size_t)hh * s.D;
		float x0 = ld(r + d), x1 = ld(r + d + half);
		int p = pos[i];
		if (hh >= s.H + s.Hkv) {
			bf16 *v = vc + cache_at(s, slot[i], hh - s.H - s.Hkv, p);
			v[d] = r[d];
			v[d + half] = r[d + half];
			continue;
		}
		float c = cs[((size_t)p * half + d) * 2], sn = cs[((size_t)p * half + d) * 2 + 1];
		bf16 *o = hh < s.H ? q + ((size_t)i * s.H + hh) * s.D
				   : kc + cache_at(s, slot[i], hh - s.H, p);
		rope_pair(o + d, o + d + half, x0, x1, c, sn);
	}
}

// Token blockIdx.x / H, head blockIdx.x % H: scores in shared memory (a
// thread per cached position, the key row read whole), the softmax, then
// the weighted sum of values with threads split into groups over positions
// and, within a group, over dimensions.
__global__ void __launch_bounds__(ATTN_THREADS) attn_kernel(bf16 *o, const bf16 *q, const bf16 *kc,
							    const bf16 *vc, const int32_t *pos,
							    const int32_t *slot, decode_shape s,
							    float scale)
{
	pdl_begin();
	extern __shared__ float sm[];
	float *qs = sm, *sc = sm + s.D;        // q [D], scores [n_ctx]
	__shared__ float red[ATTN_WARPS];
	int i = blockIdx.x / s.H, h = blockIdx.x % s.H, n = pos[i] + 1;
	int kvh = h / (s.H / s.Hkv);
	const bf16 *K = kc + cache_at(s, slot[i], kvh, 0), *Vc = vc + cache_at(s, slot[i], kvh, 0);
	const bf16 *qi = q + ((size_t)i * s.H + h) * s.D;
	for (int d = threadIdx.x; d < s.D; d += blockDim.x)
		qs[d] = ld(qi + d) * scale;
	__syncthreads();
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		const __nv_bfloat162 *k2 = (const __nv_bfloat162 *)(K + (size_t)j * s.D);
		float acc = 0;
		for (int d = 0; d < s.D / 2; d++) {
			float2 kv = __bfloat1622float2(k2[d]);
			acc += qs[2 * d] * kv.x + qs[2 * d + 1] * kv.y;
		}
		sc[j] = acc;
		mx = fmaxf(mx, acc);
	}
	mx = warp_max(mx);
	if (threadIdx.x % WARP == 0)
		red[threadIdx.x / WARP] = mx;
	__syncthreads();
	mx = red[0];
	for (int w = 1; w < ATTN_WARPS; w++)
		mx = fmaxf(mx, red[w]);
	__syncthreads();
	float sum = 0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float e = __expf(sc[j] - mx);
		sc[j] = e;
		sum += e;
	}
	sum = warp_sum(sum);
	if (threadIdx.x % WARP == 0)
		red[threadIdx.x / WARP] = sum;
	__syncthreads();
	sum = 0;
	for (int w = 0; w < ATTN_WARPS; w++)
		sum += red[w];
	// groups of gs threads over positions; a group's threads over dimensions
	int groups = s.D <= ATTN_THREADS && ATTN_THREADS % s.D == 0 ? ATTN_THREADS / s.D : 1;
	int gs = ATTN_THREADS / groups, g = threadIdx.x / gs, t = threadIdx.x % gs;
	float *part = sc + s.n_ctx;            // [groups][D]
	for (int d = t; d < s.D; d += gs) {
		float acc = 0;
		for (int j = g; j < n; j += groups)
			acc += sc[j] * ld(Vc + (size_t)j * s.D + d);
		part[g * s.D + d] = acc;
	}
	__syncthreads();
	bf16 *oi = o + ((size_t)i * s.H + h) * s.D;
	for (int d = threadIdx.x; d < s.D; d += blockDim.x) {
		float acc = 0;
		for (int gg = 0; gg < groups; gg++)
			acc += part[gg * s.D + d];
		oi[d] = to_bf16(acc / sum);
	}
}

// The same for head dimensions of 32, 64 and 128 in three passes over the
// cache (decode_dev.cuh's attn_row: a key row read whole, the weighted sum
// of values unrolled over positions): where a step has few blocks, a
// block's chain of dependent steps is shorter than attn_pass's (see
// PASS_MIN_BLOCKS).
template <int D>
__global__ void __launch_bounds__(ATTN_THREADS) attn_rows_kernel(bf16 *o, const bf16 *q, const bf16 *kc,
							      const bf16 *vc, const int32_t *pos,
							      const int32_t *slot, decode_shape s,
							      float scale)
{
	pdl_begin();
	extern __shared__ float sc[];          // scores [n_ctx]
	__shared__ attn_smem<D> sm;
	int i = blockIdx.x / s.H, h = blockIdx.x % s.H;
	int kvh = h / (s.H / s.Hkv);
	attn_row<D>(o + ((size_t)i * s.H + h) * D, q + ((size_t)i * s.H + h) * D,
		    kc + cache_at(s, slot[i], kvh, 0), vc + cache_at(s, slot[i], kvh, 0), pos[i] + 1,
		    scale, sm, sc, threadIdx.x, 0);
}

// The fused kernels' stores (decode.h's attn_decode_qkv): items [0, D/2)
// of the block's threads rotate the query's pairs and hand them, rounded to
// bf16, to put_q(d, q_d, q_{d + D/2}); [D/2, D) rotate the key's pairs into
// the cache at kv; [D, 2 D) copy the value's elements to vv.  r is the
// token's q/k/v row, p its position, h and kvh its query and key/value head.
template <int D, class PutQ>
__device__ __forceinline__ void store_qkv(const bf16 *r, const float *cs, int p, int h, int kvh,
					  decode_shape s, bf16 *kv, bf16 *vv, PutQ put_q)
{
	constexpr int HALF = D / 2;
	for (int t = threadIdx.x; t < 2 * D; t += ATTN_THREADS) {
		if (t < D) {
			int d = t % HALF;
			const bf16 *src = r + (size_t)(t < HALF ? h : s.H + kvh) * D;
			float c = cs[((size_t)p * HALF + d) * 2], sn = cs[((size_t)p * HALF + d) * 2 + 1];
			if (t < HALF) {
				bf16 q0, q1;
				rope_pair(&q0, &q1, ld(src + d), ld(src + d + HALF), c, sn);
				put_q(d, q0, q1);
			} else {
				rope_pair(kv + d, kv + d + HALF, ld(src + d), ld(src + d + HALF), c, sn);
			}
		} else {
			vv[t - D] = r[(size_t)(s.H + s.Hkv + kvh) * D + t - D];
		}
	}
}

// decode_qkv and attn_rows_kernel in one (decode.h's attn_decode_qkv): the
// query's pairs rotated into shared memory as bf16 (what q would hold),
// the key/value head's rotated key and value stored at the token's position
// (by every query head of the group: the same bytes), a barrier, so that
// the block's own stores are seen by its reads, then the attention.
template <int D>
__global__ void __launch_bounds__(ATTN_THREADS) attn_qkv_rows_kernel(bf16 *o, bf16 *kc, bf16 *vc,
								  const bf16 *qkv, const float *cs,
								  const int32_t *pos,
								  const int32_t *slot,
								  decode_shape s, float scale)
{
	pdl_begin();
	extern __shared__ float sc[];          // scores [n_ctx]
	__shared__ attn_smem<D> sm;
	__shared__ bf16 qr[D];
	constexpr int HALF = D / 2;
	int i = blockIdx.x / s.H, h = blockIdx.x % s.H, heads = s.H + 2 * s.Hkv;
	int kvh = h / (s.H / s.Hkv), p = pos[i];
	const bf16 *r = qkv + (size_t)i * heads * D;
	size_t at = cache_at(s, slot[i], kvh, p);
	store_qkv<D>(r, cs, p, h, kvh, s, kc + at, vc + at, [&](int d, bf16 q0, bf16 q1) {
		qr[d] = q0;
		qr[d + HALF] = q1;
	});
	__syncthreads();
	attn_row<D>(o + ((size_t)i * s.H + h) * D, qr, kc + cache_at(s, slot[i], kvh, 0),
		    vc + cache_at(s, slot[i], kvh, 0), p + 1, scale, sm, sc, threadIdx.x, 0);
}

// One query's attention over its sequence's cache in one pass, by the
// ATTN_THREADS threads of a block (D of 32, 64 or 128).  G = D / 16 lanes
// take a position, lane g of them dimensions 16 g .. 16 g + 15; the block
// takes P = ATTN_THREADS / G positions a pass, R passes at a time with
// every key and value piece of them loaded before any arithmetic, so that
// a thread waits for memory once per R passes (at D = 32, once for the
// first 256 positions).  Each thread keeps a running maximum, sum of
// exponentials and weighted sum of values over its positions; the block
// rescales them to its maximum, a warp sums its lanes' weighted values by
// a transposing butterfly and the four warps' sums meet in shared memory.
// The kernels before (attn_row) waited for memory once per group of
// positions in each of their passes over keys and values, with five
// barriers; this has three.  sm.qs holds the scaled query, written by the
// caller before a barrier.
enum { PASS_DIMS = 16 };                 // dimensions a lane

template <int D> struct pass_smem {
	float qs[D], red[ATTN_WARPS], lsum[ATTN_WARPS], part[ATTN_WARPS][D];
};

// The transposing butterfly of attn_pass over a warp's positions (lane
// bits 4 .. log2 G): at step X (16, 8, .. G) a lane keeps the half of its
// 2 L values that its lane's bit X selects and adds its partner's copy of
// that half, so that each lane ends with G / 2 sums, of dimensions
// ((lane & ~(G - 1)) >> 1) + e of its 16.
template <int X, int L, int G> __device__ __forceinline__ void butterfly(float *acc, int lane)
{
	if constexpr (X >= G) {
		bool up = lane & X;
#pragma unroll
		for (int i = 0; i < L; i++) {
			float keep = up ? acc[i + L] : acc[i], send = up ? acc[i] : acc[i + L];
			acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, X);
		}
		butterfly<X / 2, L / 2, G>(acc, lane);
	}
}

//
// The first R passes' rows are loaded before prologue() runs (it writes
// sm.qs and ends with a barrier), so that their latency overlaps the
// query's; with own_last, the last position's row is written by the
// prologue (the fused kernel's store) and loaded after it.
template <int D, int R, class Pro>
__device__ __forceinline__ void attn_pass(bf16 *o, const bf16 *K, const bf16 *Vc, int n,
					  pass_smem<D> &sm, Pro prologue, bool own_last)
{
	constexpr int G = D / PASS_DIMS, P = ATTN_THREADS / G, U = PASS_DIMS / 8;
	int t = threadIdx.x, lane = t % WARP, w = t / WARP, g = t % G, r = t / G;
	uint4 kv[R][U], vv[R][U];
	auto load = [&](int u, int j) {
		const uint4 *k4 = (const uint4 *)(K + (size_t)j * D + g * PASS_DIMS);
		const uint4 *v4 = (const uint4 *)(Vc + (size_t)j * D + g * PASS_DIMS);
#pragma unroll
		for (int c = 0; c < U; c++)
			kv[u][c] = k4[c], vv[u][c] = v4[c];
	};
#pragma unroll
	for (int u = 0; u < R; u++) {
		int j = u * P + r;
		if (j < n && !(own_last && j == n - 1))
			load(u, j);
	}
	prologue();
	if (own_last) {
#pragma unroll
		for (int u = 0; u < R; u++)
			if (u * P + r == n - 1)
				load(u, n - 1);
	}
	float q[PASS_DIMS];
#pragma unroll
	for (int i = 0; i < PASS_DIMS; i++)
		q[i] = sm.qs[g * PASS_DIMS + i];
	float m = -INFINITY, l = 0, acc[PASS_DIMS] = {};
	for (int b = 0; b < n; b += R * P) {
		if (b) {
#pragma unroll
			for (int u = 0; u < R; u++) {
				int j = b + u * P + r;
				if (j < n)
					load(u, j);
			}
		}
		float sc[R], mx = m;
#pragma unroll
		for (int u = 0; u < R; u++) {
			float a = 0;
#pragma unroll
			for (int c = 0; c < U; c++) {
				const __nv_bfloat162 *k2 = (const __nv_bfloat162 *)&kv[u][c];
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float2 f = __bfloat1622float2(k2[e]);
					a += q[c * 8 + 2 * e] * f.x + q[c * 8 + 2 * e + 1] * f.y;
				}
			}
#pragma unroll
			for (int x = 1; x < G; x *= 2)
				a += __shfl_xor_sync(0xffffffffu, a, x);
			sc[u] = b + u * P + r < n ? a : -INFINITY;
			mx = fmaxf(mx, sc[u]);
		}
		if (mx == -INFINITY)
			continue; // no position of this thread yet (the loop is the block's)
		float f = __expf(m - mx);
		l *= f;
#pragma unroll
		for (int i = 0; i < PASS_DIMS; i++)
			acc[i] *= f;
#pragma unroll
		for (int u = 0; u < R; u++) {
			if (b + u * P + r >= n)
				continue; // its registers hold no row (0 times a NaN's bits is NaN)
			float p = __expf(sc[u] - mx);
			l += p;
#pragma unroll
			for (int c = 0; c < U; c++) {
				const __nv_bfloat162 *v2 = (const __nv_bfloat162 *)&vv[u][c];
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float2 f2 = __bfloat1622float2(v2[e]);
					acc[c * 8 + 2 * e] += p * f2.x;
					acc[c * 8 + 2 * e + 1] += p * f2.y;
				}
			}
		}
		m = mx;
	}
	// the block's maximum; every thread's sums rescaled to it
	float M = warp_max(m);
	if (lane == 0)
		sm.red[w] = M;
	__syncthreads();
	M = sm.red[0];
#pragma unroll
	for (int k = 1; k < ATTN_WARPS; k++)
		M = fmaxf(M, sm.red[k]);
	float f = m == -INFINITY ? 0.0f : __expf(m - M);
	l *= f;
#pragma unroll
	for (int i = 0; i < PASS_DIMS; i++)
		acc[i] *= f;
	// the warp's sums over its positions (l is the same on a position's G
	// lanes), then the four warps'
#pragma unroll
	for (int x = WARP / 2; x >= G; x /= 2)
		l += __shfl_xor_sync(0xffffffffu, l, x);
	butterfly<WARP / 2, PASS_DIMS / 2, G>(acc, lane);
#pragma unroll
	for (int e = 0; e < G / 2; e++)
		sm.part[w][g * PASS_DIMS + ((lane & ~(G - 1)) >> 1) + e] = acc[e];
	if (lane == 0)
		sm.lsum[w] = l;
	__syncthreads();
	for (int d = t; d < D; d += ATTN_THREADS) {
		float s = 0, L = 0;
#pragma unroll
		for (int k = 0; k < ATTN_WARPS; k++)
			s += sm.part[k][d], L += sm.lsum[k];
		o[d] = to_bf16(s / L);
	}
}

// Steps of at least this many blocks (tokens x heads) take attn_pass;
// fewer take attn_row's three passes (measured on the H200 at D = 32: 64
// sequences x 16 heads faster in one pass, 8 x 16 slower).
enum { PASS_MIN_BLOCKS = 512 };

// Passes loaded at a time: 2 (128 positions at D = 32; 92 registers a
// thread against 122 with 4: on the H100, 64 sequences of `ts` took
// 0.1490 ms a token with 2, 0.1537-0.1546 with 4); LMPIPE_ATTN_PASSES = 1
// or 4 for the others.
static int pass_rows()
{
	static int r = 0;
	if (!r) {
		const char *v = getenv("LMPIPE_ATTN_PASSES");
		r = v && (atoi(v) == 1 || atoi(v) == 4) ? atoi(v) : 2;
	}
	return r;
}

// The same for head dimensions of 32, 64 and 128, in one pass (attn_pass).
template <int D, int R>
__global__ void __launch_bounds__(ATTN_THREADS) attn_kernel_d(bf16 *o, const bf16 *q, const bf16 *kc,
							      const bf16 *vc, const int32_t *pos,
							      const int32_t *slot, decode_shape s,
							      float scale)
{
	pdl_begin();
	__shared__ pass_smem<D> sm;
	int i = blockIdx.x / s.H, h = blockIdx.x % s.H;
	int kvh = h / (s.H / s.Hkv);
	const bf16 *qi = q + ((size_t)i * s.H + h) * D;
	attn_pass<D, R>(
		o + ((size_t)i * s.H + h) * D, kc + cache_at(s, slot[i], kvh, 0),
		vc + cache_at(s, slot[i], kvh, 0), pos[i] + 1, sm,
		[&] {
			for (int d = threadIdx.x; d < D; d += ATTN_THREADS)
				sm.qs[d] = ld(qi + d) * scale;
			__syncthreads();
		},
		false);
}

// decode_qkv and attn_kernel_d in one (decode.h's attn_decode_qkv): the
// query's pairs rotated and rounded to bf16 (what q would hold), then
// scaled into shared memory, the key/value head's rotated key and value
// stored at the token's position (by every query head of the group: the
// same bytes), a barrier, so that the block's own stores are seen by its
// reads, then the attention.
template <int D, int R>
__global__ void __launch_bounds__(ATTN_THREADS) attn_qkv_kernel_d(bf16 *o, bf16 *kc, bf16 *vc,
								  const bf16 *qkv, const float *cs,
								  const int32_t *pos,
								  const int32_t *slot,
								  decode_shape s, float scale)
{
	pdl_begin();
	__shared__ pass_smem<D> sm;
	constexpr int HALF = D / 2;
	int i = blockIdx.x / s.H, h = blockIdx.x % s.H, heads = s.H + 2 * s.Hkv;
	int kvh = h / (s.H / s.Hkv), p = pos[i];
	const bf16 *r = qkv + (size_t)i * heads * D;
	size_t at = cache_at(s, slot[i], kvh, p);
	attn_pass<D, R>(
		o + ((size_t)i * s.H + h) * D, kc + cache_at(s, slot[i], kvh, 0),
		vc + cache_at(s, slot[i], kvh, 0), p + 1, sm,
		[&] {
			store_qkv<D>(r, cs, p, h, kvh, s, kc + at, vc + at, [&](int d, bf16 q0, bf16 q1) {
				sm.qs[d] = __bfloat162float(q0) * scale;
				sm.qs[d + HALF] = __bfloat162float(q1) * scale;
			});
			__syncthreads();
		},
		true);
}

__global__ void gather_kernel(float *dst, const float *src, const int32_t *idx, int n, int C,
			      int vec)
{
	pdl_begin();
	int c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
	for (int j = blockIdx.y; j < n; j += gridDim.y) {
		const float *s = src + (size_t)idx[j] * C;
		float *d = dst + (size_t)j * C;
		if (vec) {
			if (c < C)
				*(float4 *)(d + c) = *(const float4 *)(s + c);
		} else {
			for (int e = c; e < c + 4 && e < C; e++)
				d[e] = s[e];
		}
	}
}

__global__ void scatter_kernel(float *dst, const bf16 *src, const int32_t *idx, int n, int V,
			       int vec)
{
	pdl_begin();
	int c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
	for (int j = blockIdx.y; j < n; j += gridDim.y) {
		const bf16 *s = src + (size_t)j * V;
		float *d = dst + (size_t)idx[j] * V;
		if (vec) {
			if (c < V) {
				uint2 raw = *(const uint2 *)(s + c);
				float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&raw.x);
				float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&raw.y);
				*(float4 *)(d + c) = make_float4(a.x, a.y, b.x, b.y);
			}
		} else {
			for (int e = c; e < c + 4 && e < V; e++)
				d[e] = ld(s + e);
		}
	}
}

// The grid of a row move: rows of len values, 4 a thread; whether the
// 16-byte path applies.
static dim3 rows_grid(int rows, int len)
{
	return dim3((unsigned)(((size_t)len + 4 * BLOCK - 1) / (4 * BLOCK)),
		    (unsigned)(rows < 65535 ? rows : 65535));
}

static int rows_vec(const void *a, const void *b, int len)
{
	return len % 4 == 0 && (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0;
}

}  // namespace

extern "C" int decode_qkv_cuda(uint16_t *q, uint16_t *kc, uint16_t *vc, const uint16_t *qkv,
			       const float *cs, const int32_t *pos, const int32_t *slot,
			       decode_shape s, void *stream)
{
	size_t n = (size_t)s.N * (s.H + 2 * s.Hkv) * (s.D / 2);
	if (!n)
		return 0;
	return launch_pdl(qkv_kernel, grid_for(n), BLOCK, 0, stream, (bf16 *)q, (bf16 *)kc, (bf16 *)vc,
			  (const bf16 *)qkv, cs, pos, slot, s);
}

extern "C" int attn_decode_cache_cuda(uint16_t *o, const uint16_t *q, const uint16_t *kc,
				      const uint16_t *vc, const int32_t *pos, const int32_t *slot,
				      decode_shape s, float scale, void *stream)
{
	if (s.N <= 0)
		return 0;
	if (s.D % 2 || s.Hkv < 1 || s.H % s.Hkv)
		return -1;
	if ((s.D == 32 || s.D == 64 || s.D == 128) && s.N * s.H < PASS_MIN_BLOCKS) {
		size_t sm = (size_t)s.n_ctx * sizeof(float);
		auto k = s.D == 32 ? attn_rows_kernel<32> : s.D == 64 ? attn_rows_kernel<64> : attn_rows_kernel<128>;
		if (sm > 32 * 1024 &&
		    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess)
			return -1;
		return launch_pdl(k, s.N * s.H, ATTN_THREADS, sm, stream, (bf16 *)o, (const bf16 *)q,
				  (const bf16 *)kc, (const bf16 *)vc, pos, slot, s, scale);
	}
	if (s.D == 32 || s.D == 64 || s.D == 128) {
		int R = pass_rows();
		auto k = s.D == 32   ? (R == 4 ? attn_kernel_d<32, 4> : R == 2 ? attn_kernel_d<32, 2> : attn_kernel_d<32, 1>)
			 : s.D == 64 ? (R == 4 ? attn_kernel_d<64, 4> : R == 2 ? attn_kernel_d<64, 2> : attn_kernel_d<64, 1>)
				     : (R == 4 ? attn_kernel_d<128, 4> : R == 2 ? attn_kernel_d<128, 2> : attn_kernel_d<128, 1>);
		return launch_pdl(k, s.N * s.H, ATTN_THREADS, 0, stream, (bf16 *)o, (const bf16 *)q,
				  (const bf16 *)kc, (const bf16 *)vc, pos, slot, s, scale);
	}
	int groups = s.D <= ATTN_THREADS && ATTN_THREADS % s.D == 0 ? ATTN_THREADS / s.D : 1;
	size_t smem = ((size_t)s.D + s.n_ctx + (size_t)groups * s.D) * sizeof(float);
	if (smem > 48 * 1024 &&
	    cudaFuncSetAttribute(attn_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
		    cudaSuccess)
		return -1;
	return launch_pdl(attn_kernel, s.N * s.H, ATTN_THREADS, smem, stream, (bf16 *)o,
			  (const bf16 *)q, (const bf16 *)kc, (const bf16 *)vc, pos, slot, s, scale);
}

extern "C" int attn_decode_qkv_cuda(uint16_t *o, uint16_t *kc, uint16_t *vc, const uint16_t *qkv,
				    const float *cs, const int32_t *pos, const int32_t *slot,
				    decode_shape s, float scale, void *stream)
{
	if (s.N <= 0)
		return 0;
	if (s.Hkv < 1 || s.H % s.Hkv || !(s.D == 32 || s.D == 64 || s.D == 128))
		return -1;
	if (s.N * s.H < PASS_MIN_BLOCKS) {
		size_t sm = (size_t)s.n_ctx * sizeof(float);
		auto k = s.D == 32   ? attn_qkv_rows_kernel<32>
			 : s.D == 64 ? attn_qkv_rows_kernel<64>
				     : attn_qkv_rows_kernel<128>;
		if (sm > 32 * 1024 &&
		    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess) {
			cudaGetLastError(); // declined: the two ops (less static memory) may still fit
			return 1;
		}
		return launch_pdl(k, s.N * s.H, ATTN_THREADS, sm, stream, (bf16 *)o, (bf16 *)kc, (bf16 *)vc,
				  (const bf16 *)qkv, cs, pos, slot, s, scale);
	}
	int R = pass_rows();
	auto k = s.D == 32   ? (R == 4 ? attn_qkv_kernel_d<32, 4> : R == 2 ? attn_qkv_kernel_d<32, 2> : attn_qkv_kernel_d<32, 1>)
		 : s.D == 64 ? (R == 4 ? attn_qkv_kernel_d<64, 4> : R == 2 ? attn_qkv_kernel_d<64, 2> : attn_qkv_kernel_d<64, 1>)
			     : (R == 4 ? attn_qkv_kernel_d<128, 4> : R == 2 ? attn_qkv_kernel_d<128, 2> : attn_qkv_kernel_d<128, 1>);
	return launch_pdl(k, s.N * s.H, ATTN_THREADS, 0, stream, (bf16 *)o, (bf16 *)kc, (bf16 *)vc,
			  (const bf16 *)qkv, cs, pos, slot, s, scale);
}

extern "C" int rows_gather_cuda(float *dst, const float *src, const int32_t *idx, int n, int C,
				void *stream)
{
	if (n <= 0)
		return 0;
	return launch_pdl(gather_kernel, rows_grid(n, C), BLOCK, 0, stream, dst, src, idx, n, C,
			  rows_vec(dst, src, C));
}

extern "C" int rows_scatter_cuda(float *dst, const uint16_t *src, const int32_t *idx, int n, int V,
				 void *stream)
{
	if (n <= 0)
		return 0;
	return launch_pdl(scatter_kernel, rows_grid(n, V), BLOCK, 0, stream, dst, (const bf16 *)src, idx,
			  n, V, rows_vec(dst, src, V));
}
