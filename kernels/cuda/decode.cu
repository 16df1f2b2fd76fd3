// decode.cu: the generation step's cache ops on bf16 (see kernels/decode.h):
// the q/k/v split with RoPE and the cache store in one pass, attention of
// each new token over its sequence's cache (one block per token and head;
// head dimensions 32, 64 and 128 have an unrolled kernel of their own),
// and the row moves around the output head.  All launched with
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

// The same for head dimensions of 32, 64 and 128 (decode_dev.cuh's
// attn_row: a key row read whole, the weighted sum of values unrolled over
// positions).
template <int D>
__global__ void __launch_bounds__(ATTN_THREADS) attn_kernel_d(bf16 *o, const bf16 *q, const bf16 *kc,
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

// decode_qkv and attn_kernel_d in one (decode.h's attn_decode_qkv): the
// query's pairs rotated into shared memory as bf16 (what q would hold),
// the key/value head's rotated key and value stored at the token's position
// (by every query head of the group: the same bytes), a barrier, so that
// the block's own stores are seen by its reads, then the attention.
template <int D>
__global__ void __launch_bounds__(ATTN_THREADS) attn_qkv_kernel_d(bf16 *o, bf16 *kc, bf16 *vc,
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
	// items [0, HALF): the query's pairs; [HALF, D): the key's; [D, 2 D):
	// the value's elements
	for (int t = threadIdx.x; t < 2 * D; t += ATTN_THREADS) {
		if (t < D) {
			int d = t % HALF;
			const bf16 *src = r + (size_t)(t < HALF ? h : s.H + kvh) * D;
			float c = cs[((size_t)p * HALF + d) * 2], sn = cs[((size_t)p * HALF + d) * 2 + 1];
			bf16 *dst = t < HALF ? qr : kc + at;
			rope_pair(dst + d, dst + d + HALF, ld(src + d), ld(src + d + HALF), c, sn);
		} else {
			vc[at + t - D] = r[(size_t)(s.H + s.Hkv + kvh) * D + t - D];
		}
	}
	__syncthreads();
	attn_row<D>(o + ((size_t)i * s.H + h) * D, qr, kc + cache_at(s, slot[i], kvh, 0),
		    vc + cache_at(s, slot[i], kvh, 0), p + 1, scale, sm, sc, threadIdx.x, 0);
}

__global__ void gather_kernel(float *dst, const float *src, const int32_t *idx, int n, int C)
{
	pdl_begin();
	size_t total = (size_t)n * C;
	for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < total;
	     w += (size_t)gridDim.x * blockDim.x)
		dst[w] = src[(size_t)idx[w / C] * C + w % C];
}

__global__ void scatter_kernel(float *dst, const bf16 *src, const int32_t *idx, int n, int V)
{
	pdl_begin();
	size_t total = (size_t)n * V;
	for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < total;
	     w += (size_t)gridDim.x * blockDim.x)
		dst[(size_t)idx[w / V] * V + w % V] = ld(src + w);
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
	if (s.D == 32 || s.D == 64 || s.D == 128) {
		size_t sm = (size_t)s.n_ctx * sizeof(float);
		auto k = s.D == 32 ? attn_kernel_d<32> : s.D == 64 ? attn_kernel_d<64> : attn_kernel_d<128>;
		if (sm > 32 * 1024 &&
		    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess)
			return -1;
		return launch_pdl(k, s.N * s.H, ATTN_THREADS, sm, stream, (bf16 *)o, (const bf16 *)q,
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
	size_t sm = (size_t)s.n_ctx * sizeof(float);
	auto k = s.D == 32   ? attn_qkv_kernel_d<32>
		 : s.D == 64 ? attn_qkv_kernel_d<64>
			     : attn_qkv_kernel_d<128>;
	if (sm > 32 * 1024 &&
	    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess) {
		cudaGetLastError(); // declined: the two ops (less static memory) may still fit
		return 1;
	}
	return launch_pdl(k, s.N * s.H, ATTN_THREADS, sm, stream, (bf16 *)o, (bf16 *)kc, (bf16 *)vc,
			  (const bf16 *)qkv, cs, pos, slot, s, scale);
}

extern "C" int rows_gather_cuda(float *dst, const float *src, const int32_t *idx, int n, int C,
				void *stream)
{
	if (n <= 0)
		return 0;
	return launch_pdl(gather_kernel, grid_for((size_t)n * C), BLOCK, 0, stream, dst, src, idx, n, C);
}

extern "C" int rows_scatter_cuda(float *dst, const uint16_t *src, const int32_t *idx, int n, int V,
				 void *stream)
{
	if (n <= 0)
		return 0;
	return launch_pdl(scatter_kernel, grid_for((size_t)n * V), BLOCK, 0, stream, dst,
			  (const bf16 *)src, idx, n, V);
}
